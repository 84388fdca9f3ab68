"""Device.program_from_source passes sizes= and split= through to the C pair's signature reader."""

import devicekit as dk
import numpy as np
import pytest
from devicekit.ir import dtypes

SRC = """
void scale(float *out, const float *x, long long n) {
    for (long long i = 0; i < n; i++) out[i] = 3.0f * x[i];
}
"""


def test_sizes_given_through_the_device_are_checked_at_launch():
    dev = dk.device("CPU")
    prog = dev.program_from_source(SRC, "scale", sizes={"out": "n", "x": "n"})
    x = dk.Buffer(dev, 8, dtypes.float32).copyin(np.arange(8, dtype=np.float32))
    out = dk.Buffer(dev, 8, dtypes.float32)
    prog.execute([out, x], [8])
    np.testing.assert_array_equal(out.numpy(), 3 * np.arange(8, dtype=np.float32))
    with pytest.raises(ValueError, match="needs 9 elements"):
        prog.execute([out, x], [9])


def test_target_compiles_without_loading_and_returns_bytes_and_signature():
    """dk.target(KIND).program_from_source: the compiled bytes (a shared object here) and the signature, no Program."""
    compiled = dk.target("CPU").program_from_source(SRC, "scale", sizes={"out": "n", "x": "n"})
    assert compiled.lib[:4] == b"\x7fELF" and compiled.compiler_id.startswith("cc")
    assert [(p.name, p.writable) for p in compiled.spec.params] == [("out", True), ("x", False)]
    assert compiled.spec.buffer_sizes({"n": 5}) == [5, 5]
    prog = dk.device("CPU").runtime(compiled)  # the same bytes load on the device later
    out = dk.run(prog, device="CPU", x=np.ones(4, np.float32), n=4)["out"]
    np.testing.assert_array_equal(out, np.full(4, 3.0, np.float32))


def test_run_needs_an_array_for_an_output_of_unknown_size():
    prog = dk.device("CPU").program_from_source(SRC, "scale")  # no sizes=: unchecked
    with pytest.raises(TypeError, match=r"pass an array for param 'out': its size is not known .*sizes="):
        dk.run(prog, x=np.ones(4, np.float32), n=4)
    out = dk.run(prog, x=np.ones(4, np.float32), out=np.zeros(4, np.float32), n=4)["out"]
    np.testing.assert_array_equal(out, np.full(4, 3.0, np.float32))
