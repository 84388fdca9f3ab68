"""Conformance: the rules the first GPU-style plugins broke while their results stayed right.

- Every id is its own device: a Program of KIND:1 runs on KIND:1 with KIND:1's buffers, and a buffer of one id
  given to a Program of another is refused with a ValueError naming both (needs two ids: OpenCL with
  POCL_DEVICES="pthread pthread", ACME with its default two).
- Signed integer arithmetic wraps (docs/ir.md): `x < x + 1` is False at the type's maximum on every C-like target,
  where signed overflow is undefined and compilers fold the comparison to True unless the renderer makes it wrap.
- Keywords, qualifiers and type names of the target languages (`local`, `global`, `half`, `kernel`, ...) work as
  kernel, param, var and local-array names (`names.TARGET_KEYWORD_CASES`, all of them, not a sample).
"""

from __future__ import annotations

import numpy as np
import pytest

from .conformance import check_against_reference
from .names import TARGET_KEYWORD_CASES, hostile_kernel

pytestmark = pytest.mark.devicekit_conformance

INT_TYPES = ("int8", "int16", "int32", "int64")


def _two_ids(dk_spec, dk_info):
    import devicekit as dk
    from devicekit.spec import DeviceSpec
    ids = [d.spec for d in dk.devices() if d.kind == dk_spec.kind and d.available]
    if len(ids) < 2:
        pytest.skip(f"{dk_spec.kind} has {len(ids)} id(s) here; the wrong-device checks need two "
                    "(OpenCL on PoCL: POCL_DEVICES='pthread pthread')")
    return dk.device(DeviceSpec(dk_spec.kind, 0)), dk.device(DeviceSpec(dk_spec.kind, 1))


def _kernel():
    from devicekit import kernels
    return kernels.elementwise("a * b + 1.0", name="dk_conf_ids")


def test_each_id_runs_its_own_programs_on_its_own_buffers(dk_device, dk_spec, dk_info):
    import devicekit as dk
    d0, d1 = _two_ids(dk_spec, dk_info)
    kernel = _kernel()
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(100).astype(np.float32), rng.standard_normal(100).astype(np.float32)
    want = a * b + np.float32(1.0)
    for dev in (d1, d0, d1):
        prog = dev.compile(kernel)
        assert prog.device is dev and prog.device.spec == dev.spec, f"the Program of {dev.spec} is on {prog.device}"
        bufs = [dk.Buffer(dev, 100, dk.dtypes.float32).copyin(x) for x in (a, b, np.zeros(100, np.float32))]
        assert all(buf.device.spec == dev.spec for buf in bufs)
        prog.execute(bufs, [100])
        np.testing.assert_allclose(bufs[2].numpy(), want, rtol=1e-5, err_msg=f"{dev.spec}")


def test_a_buffer_of_another_id_is_refused(dk_device, dk_spec, dk_info):
    import devicekit as dk
    d0, d1 = _two_ids(dk_spec, dk_info)
    kernel = _kernel()
    for prog_dev, buf_dev in ((d0, d1), (d1, d0)):
        prog = prog_dev.compile(kernel)
        bufs = [dk.Buffer(prog_dev, 10, dk.dtypes.float32).copyin(np.ones(10, np.float32)) for _ in range(3)]
        bufs[1] = dk.Buffer(buf_dev, 10, dk.dtypes.float32).copyin(np.ones(10, np.float32))
        with pytest.raises(ValueError, match=rf"param 'b' is a buffer on {buf_dev.spec}.*runs on {prog_dev.spec}"):
            prog.execute(bufs, [10])
        bufs[1] = dk.Buffer(prog_dev, 10, dk.dtypes.float32).copyin(np.ones(10, np.float32))
        prog.execute(bufs, [10])  # still works afterwards
        np.testing.assert_array_equal(bufs[2].numpy(), np.full(10, 2, np.float32))


def _overflow_kernel(dt_name: str):
    from devicekit import ir
    from devicekit.ir.dtypes import dtypes
    dt = getattr(dtypes, dt_name)
    k = ir.KernelBuilder(f"dk_conf_wrap_{dt_name}")
    n = k.var("n", 1, 64)
    x = k.param("x", dt, n)
    lt = k.param("lt", dtypes.bool, n, writable=True)
    s = k.param("s", dt, n, writable=True)
    i = k.range(n, "global")
    v = x[i]
    lt[i] = v < v + 1
    s[i] = (v + 1) * 3 - v
    return k.build()


@pytest.mark.parametrize("dt_name", INT_TYPES)
def test_signed_overflow_wraps(dk_device, dt_name):
    from devicekit.ir.dtypes import dtypes
    if not any(getattr(dtypes, dt_name) in r.supported_dtypes for r, _ in dk_device.compilers):
        pytest.skip(f"{dk_device.spec} does not support {dt_name} (refused by name: not in its renderer's "
                    "supported_dtypes)")
    info = np.iinfo(dt_name)
    x = np.array([info.max, info.max - 1, info.min, -1, 0, 1], dtype=dt_name)
    kernel = _overflow_kernel(dt_name)
    inputs = {"x": x, "n": len(x), "lt": np.zeros(len(x), bool), "s": np.zeros(len(x), dt_name)}
    for pair in dk_device.pair_names:
        got = check_against_reference(kernel, inputs, dk_device, f"x < x + 1 on {dt_name} [{pair}]", pair)
        assert not got["lt"][0], f"[{pair}] {dt_name}: MAX < MAX + 1 must be False (the addition wraps)"


@pytest.mark.parametrize(("kname", "args"), TARGET_KEYWORD_CASES, ids=[k for k, _ in TARGET_KEYWORD_CASES])
def test_target_language_keywords_as_names(dk_device, kname, args):
    caps = dk_device.compilers[0][0].capabilities
    kernel, inputs = hostile_kernel(list(args), kname, local=bool(caps.has_local and caps.gpu_indexing))
    for pair in dk_device.pair_names:
        check_against_reference(kernel, inputs, dk_device, f"{kname}{args} [{pair}]", pair)
