"""Conformance: one checker, many doors. A Program made by each of the three ways a user makes one, `dev.compile(k)`,
the seed's step by step `dev.runtime(dev.compiler.compile(dev.renderer.render(k)))`, and `dev.program_from_source`
(where the device reads one of the kit's hand-written sources), accepts the same good launches with the same results
and refuses the same bad ones with the same error type, before and after its launch memo has seen them; and a
`dk.Plan` whose Buffers are plan arguments checks each new set of Buffers (dtype, size, freed) before replaying it.

Only the signature's rules are compared here (buffer count, dtypes, sizes, types of values, aliasing, freed and
read-only Buffers): var bounds are a kernel's own (a hand-written `long long n` has int64's), so they are not."""

from __future__ import annotations

import numpy as np
import pytest

from devicekit import kernels
from devicekit.errors import DeviceKitError, FreedBufferError, ReadOnlyBufferError
from devicekit.ir.dtypes import dtypes

pytestmark = pytest.mark.devicekit_conformance

N = 64
_SIZES = {"a": "n", "b": "n", "c": "n", "out": "n"}
# the kit's hand-written out = a * b + c, one per language a plugin may read; the first the device reads is used
_SOURCES = {
    "C": (("void door_fma(const float *a, const float *b, const float *c, float *out, long long n) {\n"
          "  for (long long i = 0; i < n; i++) out[i] = a[i] * b[i] + c[i];\n}\n"), {}),
    "OPENCL": (("__kernel void door_fma(__global const float *a, __global const float *b, __global const float *c,\n"
               "                      __global float *out, long n) {\n"
               "  long i = get_global_id(0);\n  if (i < n) out[i] = a[i] * b[i] + c[i];\n}\n"),
               {"global_size": ("n",), "local_size": (1,)}),
    "CUDA": (('extern "C" __global__ void door_fma(const float *a, const float *b, const float *c, float *out,\n'
             "                                    long long n) {\n"
             "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
             "  if (i < n) out[i] = a[i] * b[i] + c[i];\n}\n"), {"global_size": ("n",), "local_size": (1,)}),
}


def _from_source(dev):
    kind = dev.spec.kind
    order = sorted(_SOURCES, key=lambda lang: lang != kind)
    for lang in order:
        src, opts = _SOURCES[lang]
        try:
            return dev.program_from_source(src, "door_fma", sizes=_SIZES, **opts)
        except (DeviceKitError, TypeError, ValueError, NotImplementedError):
            continue
    return None


def door_program(dk_device, how: str, name: str):
    """The Program of out = a * b + c made through one door: `dev.compile`, the seed's
    `runtime(compiler.compile(renderer.render(k)))`, or `program_from_source` (skipped where none is read)."""
    k = kernels.elementwise("a * b + c", name=name)
    if how == "compile":
        return dk_device.compile(k)
    if how == "seed":
        return dk_device.runtime(dk_device.compiler.compile(dk_device.renderer.render(k)))
    prog = _from_source(dk_device)
    if prog is None:
        pytest.skip(f"{dk_device.spec} reads none of the kit's hand-written sources ({', '.join(_SOURCES)})")
    return prog


@pytest.fixture(params=["compile", "seed", "source"])
def door(request, dk_device):
    """(door name, Program of out = a * b + c made through it)."""
    return request.param, door_program(dk_device, request.param, "dk_conf_doors")


def _bufs(dev, n=N):
    import devicekit as dk
    rng = np.random.default_rng(11)
    arrays = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
    return [dk.Buffer(dev, n, dtypes.float32).copyin(x) for x in arrays] + [dk.Buffer(dev, n, dtypes.float32)], \
        arrays[0] * arrays[1] + arrays[2]


def _right(prog, bufs, want, vals=(N,)):
    bufs[-1].copyin(np.zeros(bufs[-1].size, np.float32))
    prog.execute(bufs, list(vals), wait=True)
    np.testing.assert_allclose(bufs[-1].numpy()[:len(want)], want, rtol=1e-5, atol=1e-6)


def test_every_door_accepts_the_same_good_launches(door, dk_device):
    import devicekit as dk
    _, prog = door
    bufs, want = _bufs(dk_device)
    for _ in range(3):  # the first launch, then the launch memo's repeats
        _right(prog, bufs, want)
    other, want2 = _bufs(dk_device)
    other[0].copyin(np.full(N, 2, np.float32))
    want2 = 2 * np.asarray(other[1].numpy()) + other[2].numpy()
    for _ in range(2):  # alternating sets of Buffers
        _right(prog, other, want2)
        _right(prog, bufs, want)
    _right(prog, tuple(bufs), want, vals=(np.int64(N),))  # a tuple of Buffers, a numpy int
    bufs[-1].copyin(np.zeros(N, np.float32))
    prog(a=bufs[0], b=bufs[1], c=bufs[2], out=bufs[3], n=N, wait=True)  # by name
    np.testing.assert_allclose(bufs[3].numpy(), want, rtol=1e-5, atol=1e-6)
    got = dk.run(prog, a=bufs[0].numpy(), b=bufs[1].numpy(), c=bufs[2].numpy(), n=N)["out"]
    np.testing.assert_allclose(got.reshape(-1), want, rtol=1e-5, atol=1e-6)
    if dk_device.allocator.supports("offset"):  # disjoint views of one allocation
        base = dk.Buffer(dk_device, 2 * N, dtypes.float32).copyin(np.zeros(2 * N, np.float32))
        views = [base.view(N), base.view(N, offset=N)]
        prog.execute([bufs[0], bufs[1], views[0], views[1]], [N], wait=True)
        np.testing.assert_allclose(views[1].numpy(), bufs[0].numpy() * bufs[1].numpy(), rtol=1e-5, atol=1e-6)


def _bad_launches(dk_device, bufs):
    """(what, launch, expected error type) of launches every door refuses."""
    import devicekit as dk
    a, b, c, out = bufs
    small = dk.Buffer(dk_device, N - 1, dtypes.float32)
    wide = dk.Buffer(dk_device, N, dtypes.float64)
    tampered = dk.Buffer(dk_device, 4, dtypes.float32)
    tampered.__dict__["_size"] = 1 << 20  # a tampered private count: launches check the allocation's bytes
    freed = dk.Buffer(dk_device, N, dtypes.float32)
    freed.free()
    cases = [
        ("a buffer missing", lambda p: p.execute([a, b, c], [N]), TypeError),
        ("a var missing", lambda p: p.execute([a, b, c, out], []), TypeError),
        ("a float for an int var", lambda p: p.execute([a, b, c, out], [float(N)]), TypeError),
        ("a float64 buffer", lambda p: p.execute([a, b, wide, out], [N]), TypeError),
        ("a buffer too small", lambda p: p.execute([a, b, c, small], [N]), ValueError),
        ("a tampered size", lambda p: p.execute([a, b, c, tampered], [1 << 20]), ValueError),
        ("a numpy array", lambda p: p.execute([a, b, np.zeros(N, np.float32), out], [N]), TypeError),
        ("the output aliasing an input", lambda p: p.execute([a, b, c, a], [N]), ValueError),
        ("a freed Buffer", lambda p: p.execute([a, b, c, freed], [N]), FreedBufferError),
        ("buffers not a list", lambda p: p.execute(iter([a, b, c, out]), [N]), TypeError),
    ]
    if dk_device.allocator.supports("offset"):
        base = dk.Buffer(dk_device, 2 * N, dtypes.float32)
        cases.append(("overlapping views", lambda p: p.execute([a, b, base.view(N), base.view(N, offset=N // 2)],
                                                               [N]), ValueError))
    if dk_device.allocator.supports("from_host"):
        frozen = np.zeros(N, np.float32)
        frozen.flags.writeable = False
        ro = dk.from_numpy(frozen, dk_device)
        cases.append(("a read-only output", lambda p: p.execute([a, b, c, ro], [N]), ReadOnlyBufferError))
    return cases


def test_every_door_refuses_the_same_bad_launches(door, dk_device):
    name, prog = door
    bufs, want = _bufs(dk_device)
    for what, launch, error in _bad_launches(dk_device, bufs):
        for memo in (False, True):  # cold, and right after a good launch the memo holds
            if memo:
                _right(prog, bufs, want)
            with pytest.raises(error) as e:
                launch(prog)
            assert type(e.value) is error or isinstance(e.value, error), f"{name}: {what}: {e.value!r}"
    _right(prog, bufs, want)  # still works


def test_a_rebound_plan_checks_its_buffers(dk_device):
    import devicekit as dk
    prog = dk_device.compile(kernels.elementwise("a * b + c", name="dk_conf_doors_plan"))
    bufs, want = _bufs(dk_device)
    plan = dk.Plan(dk_device).add(prog, a=bufs[0], b=bufs[1], c="c", out="out", n=N)
    for _ in range(2):
        bufs[3].copyin(np.zeros(N, np.float32))
        plan.run(c=bufs[2], out=bufs[3], wait=True)
        np.testing.assert_allclose(bufs[3].numpy(), want, rtol=1e-5, atol=1e-6)
    freed = dk.Buffer(dk_device, N, dtypes.float32)
    freed.free()
    for c, out, error in ((dk.Buffer(dk_device, N, dtypes.float64), bufs[3], TypeError),
                          (bufs[2], dk.Buffer(dk_device, N - 1, dtypes.float32), ValueError),
                          (bufs[2], bufs[0], ValueError), (freed, bufs[3], FreedBufferError),
                          (np.zeros(N, np.float32), bufs[3], TypeError)):
        with pytest.raises(error):
            plan.run(c=c, out=out)
    other = dk.Buffer(dk_device, N, dtypes.float32)
    plan.run(c=bufs[2], out=other, wait=True)
    np.testing.assert_allclose(other.numpy(), want, rtol=1e-5, atol=1e-6)
    other.free()
    with pytest.raises(FreedBufferError):
        plan.run(c=bufs[2], out=other)  # a set checked before the free is checked again
