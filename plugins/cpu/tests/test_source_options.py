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
