"""The runtime side (context, allocator, program, launch geometry, timing) against a fake pycuda whose kernels run
through the host emulation. The cubins are real (NVRTC + nvJitLink); only the driver is simulated."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cuda_fake_pycuda as fake
import cuda_kernels as ck
import devicekit as dk
from cuda_host_emu import CXX, host_compile_many
from devicekit.ir.dtypes import dtypes
from devicekit.memory import BufferOptions
from devicekit.spec import DeviceSpec
from devicekit.targets import Device
from devicekit_cuda import context, plugin, toolchain

pytestmark = pytest.mark.skipif(CXX is None or toolchain.nvrtc()[0] is None,
                                reason="needs a host C++ compiler and NVRTC")

KERNELS = [*ck.structure_kernels(), *ck.local_kernels(), *ck.library_kernels(), *ck.float_kernels()[:4],
           *ck.int_kernels()[:4]]
_hosts: dict = {}


@pytest.fixture
def cuda(monkeypatch):
    """A CUDA:0 Device built from the plugin's own factories, on the fake driver."""
    fake.install(monkeypatch)
    monkeypatch.setattr(context, "_contexts", {})
    if not _hosts:
        _hosts.update(host_compile_many([k for _, k, _ in KERNELS]))
    monkeypatch.setattr(fake, "KERNELS", _hosts)
    monkeypatch.setenv("DEVICEKIT_CUDA_ARCH", "sm_90")

    def make(index=0):
        spec = DeviceSpec("CUDA", index)
        return Device(spec, *plugin.DEVICEKIT_BACKEND.pieces(spec, "nvrtc"))
    return make


def _check(dev, kernel, inputs):
    from devicekit.testing.random_kernels import assert_matches
    want = dk.run(kernel, device="PYTHON", **inputs)
    got = dk.run(kernel, device=dev, **inputs)
    dts = {p.name: p.dtype for p in kernel.params}
    for name, arr in want.items():
        assert_matches(np.asarray(got[name]).reshape(-1), np.asarray(arr).reshape(-1), dts[name], name)


@pytest.mark.parametrize("kernel,inputs", [pytest.param(k, i, id=n) for n, k, i in KERNELS])
def test_dk_run_on_fake_driver(cuda, kernel, inputs):
    _check(cuda(), kernel, inputs)


def test_launch_packs_pointers_vars_and_geometry(cuda):
    dev = cuda()
    _, kern, inputs = ck.structure_kernels()[0]  # transpose: params a, o; vars m, n
    _check(dev, kern, inputs)
    launch = [c for c in fake.calls if c[0] == "launch"][-1]
    _, name, grid, block, args, shared = launch
    assert shared == 0  # generated kernels declare their shared memory statically
    assert name == "dku_transpose2d"  # the entry symbol (spec.entry)
    assert grid == (1, 53, 1) and block == (256, 1, 1)
    assert args[2:] == (37, 53) and all(a > 0 for a in args[:2])


def test_views_pass_offset_pointers(cuda):
    dev = cuda()
    _, kern, _ = ck.structure_kernels()[3]  # const1: x, o of 1 int32
    x = dk.Buffer(dev, 10, dtypes.int32).copyin(np.arange(10, dtype=np.int32))
    o = dk.Buffer(dev, 10, dtypes.int32).copyin(np.zeros(10, np.int32))
    prog = dev.compile(kern)
    prog.execute([x.view(1, dtypes.int32, 7), o.view(1, dtypes.int32, 4)], [])
    np.testing.assert_array_equal(o.numpy(), [0, 0, 0, 0, 21, 0, 0, 0, 0, 0])


def test_timed_launch_and_sync(cuda):
    dev = cuda()
    _, kern, inputs = ck.float_kernels()[0]
    prog = dev.compile(kern)
    n = inputs["n"]
    bufs = [dk.Buffer(dev, n, dtypes.float32).copyin(inputs["x0"]), dk.Buffer(dev, n, dtypes.float32).copyin(inputs["x1"]),
            dk.Buffer(dev, n, dtypes.float32)]
    t = prog.execute(bufs, [n], wait=True)
    assert isinstance(t, float) and t >= 0
    handle = prog.execute(bufs, [n])  # not waited: a Launch handle; wait() synchronizes the device
    assert not handle.done and ("sync",) not in fake.calls[-1:]
    assert handle.wait() >= 0 and handle.done
    assert ("sync",) in fake.calls


def test_copyin_is_staged_and_released_on_sync(cuda):
    dev = cuda()
    alloc = dev.allocator
    h = alloc.alloc(4096)
    alloc.copyin(h, memoryview(np.arange(1024, dtype=np.float32)).cast("B"))
    assert alloc._staging and alloc._staging_bytes == 4096
    out = np.empty(1024, np.float32)
    alloc.copyout(memoryview(out).cast("B"), h)  # waits for the stream first
    np.testing.assert_array_equal(out, np.arange(1024, dtype=np.float32))
    assert not alloc._staging


def test_host_mapped_buffers(cuda):
    dev = cuda()
    alloc = dev.allocator
    opts = BufferOptions(host=True)
    h = alloc.alloc(64, opts)
    alloc.copyin(h, memoryview(bytes(range(64))))
    mv = alloc.as_buffer(h, 64)
    assert bytes(mv) == bytes(range(64))


def test_dlpack_export_needs_a_mapped_buffer(cuda):
    """CUDA maps only host / cpu_access buffers: exporting device memory is a BufferError saying how (it was a bare
    NotImplementedError, found by the conformance kit on an H200); a cpu_access Buffer exports its own memory."""
    import devicekit as dk
    dev = cuda()
    plain = dk.Buffer(dev, 8, dtypes.int32).copyin(np.arange(8, dtype=np.int32))
    with pytest.raises(BufferError, match=r"not mapped to the host .* BufferOptions\(cpu_access=True\)"):
        np.from_dlpack(plain)
    mapped = dk.Buffer(dev, 8, dtypes.int32, BufferOptions(cpu_access=True)).copyin(np.arange(8, dtype=np.int32))
    arr = np.from_dlpack(mapped)
    np.testing.assert_array_equal(arr, np.arange(8))
    arr[2] = -5
    assert mapped.numpy()[2] == -5


def test_too_big_grid_is_refused_before_launch(cuda):
    dev = cuda()
    k = dk.ir.KernelBuilder("wide2d")
    mv, nv = k.var("m", lo=1, hi=4096), k.var("n", lo=1, hi=1 << 20)
    a = k.param("a", dtypes.float32, size=mv * nv)
    o = k.param("o", dtypes.float32, size=mv * nv, writable=True)
    i, j = k.range(mv, kind="global"), k.range(nv, kind="global")
    o[i * nv + j] = a[i * nv + j]
    prog = dev.compile(k.build())
    m, n = 3, 70000  # gidx1 = n > 65535
    bufs = [dk.Buffer(dev, m * n, dtypes.float32), dk.Buffer(dev, m * n, dtypes.float32)]
    with pytest.raises(ValueError, match="exceeds"):
        prog.execute(bufs, [m, n])


def test_each_device_has_its_context(cuda):
    d0, d1 = cuda(0), cuda(1)
    assert d0.allocator.ctx is not d1.allocator.ctx
    assert d0.allocator.ctx.index == 0 and d1.allocator.ctx.index == 1
    _, kern, inputs = ck.structure_kernels()[1]
    _check(d1, kern, inputs)
    assert d0.compile(kern).compiled.lib == d1.compile(kern).compiled.lib


def test_missing_device_index_is_explained(cuda):
    with pytest.raises(RuntimeError, match="CUDA:5 does not exist"):
        cuda(5)


def test_without_pycuda_the_error_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    monkeypatch.setattr(context, "_contexts", {})
    with pytest.raises(RuntimeError, match=r"devicekit-cuda\[runtime\]"):
        context.get(0)


def _scalar_kernel(name, dts):
    """o_<dt>[i] = x_<dt>[i] * s_<dt> + s_<dt> (bool: x ^ s) for each dtype, with a k.scalar s_<dt> of each."""
    from devicekit import ir
    k = ir.KernelBuilder(name)
    n = k.var("n", 1, 64)
    i = k.range(n, "global")
    for dt in dts:
        s = k.scalar(f"s_{dt.name}", dt)
        x, o = k.param(f"x_{dt.name}", dt, n), k.param(f"o_{dt.name}", dt, n, writable=True)
        o[i] = x[i] ^ s if dt.is_bool else x[i] * s + s
    return k.build()


def test_scalars_compile_with_nvrtc_and_pack_as_their_wire_dtype(cuda):
    """k.scalar of every dtype: NVRTC compiles the kernel, the runtime prepares each scalar in its wire dtype's
    format (bool a byte, half/bfloat16 a float: ir.dtypes.scalar_wire) and the result matches the reference."""
    from devicekit.ir.dtypes import from_numpy_values
    values = {"bool": True, "int8": -128, "int16": 32767, "int32": -2**31, "int64": 2**62 + 7, "uint8": 255,
              "uint16": 65535, "uint32": 2**32 - 1, "uint64": 2**64 - 3, "float16": 1.3, "bfloat16": -2.7,
              "float32": 0.1, "float64": 1 / 3}
    groups = [list(dtypes.ints()), [dtypes.bool, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]]
    kernels = [_scalar_kernel(f"scalars{g}", dts) for g, dts in enumerate(groups)]
    _hosts.update(host_compile_many(kernels))
    dev = cuda()
    rng = np.random.default_rng(2)
    for kern, dts in zip(kernels, groups):
        args = {"n": 5}
        for dt in dts:
            x = rng.random(5) < 0.5 if dt.is_bool else (rng.standard_normal(5) * 3).astype(dt.np_compute) \
                if dt.is_float else np.arange(5).astype(dt.np)
            args[f"x_{dt.name}"] = x if dt != dtypes.bfloat16 else from_numpy_values(x, dt)
            args[f"s_{dt.name}"] = values[dt.name]
        _check(dev, kern, args)
        fmt = dev.compile(kern).function.fmt
        wire = {"bool": "B", "float16": "f", "bfloat16": "f"}
        assert fmt == "P" * 2 * len(dts) + "q" + "".join(
            wire.get(d.name) or {"int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
                                 "int64": "q", "uint64": "Q", "float32": "f", "float64": "d"}[d.name] for d in dts)


def _copy_program(dev):
    """const1 (x, o of 1 int32) compiled, with its two buffers."""
    _, kern, _ = ck.structure_kernels()[3]
    x = dk.Buffer(dev, 1, dtypes.int32).copyin(np.array([5], np.int32))
    o = dk.Buffer(dev, 1, dtypes.int32).copyin(np.zeros(1, np.int32))
    return dev.compile(kern), [x, o]


@pytest.mark.parametrize("grid,block,limit", [
    ((-5,), (1,), r"global_size\[0\] = -5 is below 0"),
    ((1,), (0,), r"local_size\[0\] = 0 is below 1"),
    ((1 << 40,), (1,), r"grid \(global_size\)\[0\] = 1099511627776 exceeds .* limit of 2147483647 groups"),
    ((1, 70000), (1,), r"grid \(global_size\)\[1\] = 70000 exceeds .* limit of 65535 groups"),
    ((1,), (1, 1, 128), r"block \(local_size\)\[2\] = 128 exceeds .* limit of 64 work-items"),
    ((1,), (64, 32), r"2048 work-items per group; CUDA:0 \(Fake GPU 0\) runs at most 1024"),
    ((1,), (1.5,), r"local_size\[0\] must be an int, got float"),
    ((1, 1, 1, 1), (1,), "has 4 axes"),
])
def test_launch_sizes_are_checked_before_the_launch(cuda, grid, block, limit):
    """A bad grid or block is one LaunchError naming the limit, and nothing reaches the driver (a block of 0
    threads was a silent no-op, a negative grid went to the driver as it was)."""
    from devicekit.errors import LaunchError
    dev = cuda()
    prog, bufs = _copy_program(dev)
    fake.calls.clear()
    with pytest.raises(LaunchError, match=limit):
        prog.execute(bufs, [], global_size=grid, local_size=block, wait=True)
    assert not [c for c in fake.calls if c[0] == "launch"]
    prog.execute(bufs, [], wait=True)  # the program still works
    assert bufs[1].numpy()[0] == 15  # o = 3 * x


@pytest.mark.parametrize("wait", [True, False], ids=["wait=True", "wait=False+wait()"])
def test_ctrl_c_interrupts_a_kernel_that_never_ends(cuda, wait):
    """The fake's events stay incomplete while its gate is closed, and its cuEventSynchronize/cuStreamSynchronize
    block in native code that no signal interrupts (as the driver's do): a SIGINT must raise KeyboardInterrupt while
    the kernel still runs (the runtime polls the event), not when the hang guard lets the wait return 10 s later."""
    from devicekit import interrupt
    from devicekit.testing.native_gate import check_ctrl_c_interrupts
    dev = cuda()
    prog, bufs = _copy_program(dev)
    check_ctrl_c_interrupts(fake.GATE, (lambda: prog.execute(bufs, [], wait=True)) if wait
                            else (lambda: prog.execute(bufs, []).wait()))
    assert interrupt.wait_pending(5)
    prog.execute(bufs, [], wait=True)
    assert bufs[1].numpy()[0] == 15  # o = 3 * x
