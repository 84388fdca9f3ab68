"""Conformance: bad input gets a clear error, and the program still works afterwards. Wrong buffer count, var count,
dtype, size, device; vars out of bounds; dk.run misuse; unknown ids; bad hand-written source."""

from __future__ import annotations

import numpy as np
import pytest

from devicekit import kernels
from devicekit.ir.dtypes import dtypes

from .conformance import gather_kernel

pytestmark = pytest.mark.devicekit_conformance

N = 100


@pytest.fixture
def fma(dk_device):
    """(program, buffers a b c out, expected) for out = a * b + c over N float32 values."""
    import devicekit as dk
    program = dk_device.compile(kernels.elementwise("a * b + c", name="dk_conf_errors"))
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(N).astype(np.float32) for _ in range(3)]
    bufs = [dk.Buffer(dk_device, N, dtypes.float32).copyin(x) for x in arrays]
    out = dk.Buffer(dk_device, N, dtypes.float32)
    return program, [*bufs, out], arrays[0] * arrays[1] + arrays[2]


def _still_works(program, bufs, want):
    program.execute(bufs, [N], wait=True)
    np.testing.assert_allclose(bufs[-1].numpy(), want, rtol=1e-5, atol=1e-6)


def test_wrong_buffer_count(fma):
    program, bufs, want = fma
    with pytest.raises(TypeError, match="buffers"):
        program.execute(bufs[:-1], [N])
    _still_works(program, bufs, want)


def test_wrong_var_count(fma):
    program, bufs, want = fma
    with pytest.raises(TypeError, match="var"):
        program.execute(bufs, [])
    with pytest.raises(TypeError, match="var"):
        program.execute(bufs, [N, N])
    _still_works(program, bufs, want)


def test_var_out_of_bounds(fma):
    program, bufs, want = fma
    lo = program.spec.vars[0].lo
    with pytest.raises(ValueError, match="outside"):
        program.execute(bufs, [lo - 1])
    _still_works(program, bufs, want)


def test_buffer_too_small(dk_device, fma):
    import devicekit as dk
    program, bufs, want = fma
    small = dk.Buffer(dk_device, N - 1, dtypes.float32)
    with pytest.raises(ValueError, match="'out'"):
        program.execute([*bufs[:3], small], [N])
    with pytest.raises(ValueError):
        program.execute(bufs, [N + 1])
    _still_works(program, bufs, want)


def test_wrong_dtype(dk_device, fma):
    import devicekit as dk
    program, bufs, want = fma
    wrong = dk.Buffer(dk_device, N, dtypes.float64)
    with pytest.raises(TypeError, match="'b'"):
        program.execute([bufs[0], wrong, *bufs[2:]], [N])
    _still_works(program, bufs, want)


def test_not_a_buffer_or_another_device(dk_spec, fma):
    import devicekit as dk
    program, bufs, want = fma
    with pytest.raises(TypeError, match="Buffer"):
        program.execute([np.zeros(N, np.float32), *bufs[1:]], [N])
    other = "PYTHON" if dk_spec.kind != "PYTHON" else None
    if other is not None:
        foreign = dk.Buffer(other, N, dtypes.float32)
        with pytest.raises(ValueError, match="runs on"):
            program.execute([foreign, *bufs[1:]], [N])
    _still_works(program, bufs, want)


def test_run_misuse(dk_device):
    import devicekit as dk
    kernel = kernels.elementwise("a * b + c", name="dk_conf_errors")
    x = np.ones(N, np.float32)
    with pytest.raises(TypeError, match="missing"):
        dk.run(kernel, device=dk_device, a=x, b=x, c=x)
    with pytest.raises(TypeError, match="unexpected"):
        dk.run(kernel, device=dk_device, a=x, b=x, c=x, n=N, bogus=1)
    with pytest.raises(TypeError):
        dk.run(kernel, device=dk_device, a=x.astype(np.float64), b=x, c=x, n=N)
    out = dk.run(kernel, device=dk_device, a=x, b=x, c=x, n=N)["out"]
    np.testing.assert_array_equal(out, np.full(N, 2, np.float32))


def test_unknown_id_names_the_existing_ones(dk_spec, dk_info):
    import devicekit as dk
    with pytest.raises(dk.DeviceKitError) as e:
        dk.device(f"{dk_spec.kind}:999")
    assert dk_spec.kind in str(e.value)
    if not dk_info.available:
        with pytest.raises(dk.DeviceUnavailableError) as e:
            dk.device(dk_spec)
        assert dk_info.reason.split(";")[0][:40] in str(e.value)


def test_bad_source_is_a_compile_error(dk_device):
    import devicekit as dk
    if not any(callable(getattr(r, "parse_source", None)) for r, _ in dk_device.compilers):
        with pytest.raises(dk.DeviceKitError, match="parse_source"):
            dk_device.program_from_source("kernel", "k")
        pytest.skip(f"{dk_device.spec} reads no hand-written source (no renderer with parse_source)")
    with pytest.raises(dk.CompileError) as e:
        dk_device.program_from_source("this is @@ not a kernel ;", "k")
    assert str(e.value).strip(), "a compile error explains itself"


# a preprocessor bomb: 2**40 tokens if expanded; any C-family reader must give up within its time limit
MACRO_BOMB = ("#define A0 x\n" + "".join(f"#define A{i} A{i - 1} A{i - 1}\n" for i in range(1, 41))
              + "int dk_bomb = sizeof(A40);\n")


def test_pathological_source_is_stopped_in_time(dk_target, monkeypatch):
    """Hand-written source that would expand without end (a macro bomb) must not hang the process: the reader gives
    up with a CompileError; when it is the time limit, the error names it and DEVICEKIT_PARSE_TIMEOUT."""
    import time

    import devicekit as dk
    parsers = [r for r, _ in dk_target.compilers if callable(getattr(r, "parse_source", None))]
    if not parsers:
        pytest.skip(f"{dk_target.spec} reads no hand-written source (no renderer with parse_source)")
    monkeypatch.setenv("DEVICEKIT_PARSE_TIMEOUT", "1")  # any bound shows it: each second more is a second per kit run
    t0 = time.monotonic()
    with pytest.raises(dk.CompileError) as e:
        parsers[0].parse_source(MACRO_BOMB, "k")
    assert time.monotonic() - t0 < 60, "the reader was not stopped"
    if "took longer" in str(e.value):
        assert "DEVICEKIT_PARSE_TIMEOUT" in str(e.value)


def _gather_kernel():
    return gather_kernel()


@pytest.mark.parametrize("bad", [10**9, -1, 16])
def test_out_of_bounds_gather_raises_index_error(dk_device, bad):
    """A data-dependent index cannot be proven in bounds: the core guards it (docs/ir.md) and the launch raises
    IndexError naming the kernel, the param and the index, on every device; nothing outside x is read."""
    import devicekit as dk
    x = np.arange(16, dtype=np.float32)
    idx = np.array([3, 1, bad, 15, 0], dtype=np.int64)
    with pytest.raises(IndexError, match=rf"kernel dk_conf_gather: access to x\[{bad}\] is out of bounds"):
        dk.run(_gather_kernel(), dk_device, x=x, idx=idx, n=5, m=16)
    idx[2] = 2
    np.testing.assert_array_equal(dk.run(_gather_kernel(), dk_device, x=x, idx=idx, n=5, m=16)["out"], x[idx])
