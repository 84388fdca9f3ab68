"""Zero-copy interop on host devices: Buffer.from_numpy / from_dlpack wrap an array's memory, np.from_dlpack(buf)
reads a Buffer's memory, both without a copy; lifetimes are safe; what cannot be wrapped is refused by name."""

from __future__ import annotations

import gc

import devicekit as dk
import numpy as np
import pytest
from devicekit import kernels


@pytest.mark.parametrize("spec", ["CPU", "PYTHON"])
def test_wrapped_array_is_the_buffer(spec):
    a, b = np.arange(256, dtype=np.float32), np.full(256, 2, np.float32)
    out = np.zeros(256, np.float32)
    ba, bb, bo = dk.from_numpy(a, spec), dk.Buffer.from_numpy(b, spec), dk.from_numpy(out, spec)
    prog = dk.device(spec).compile(kernels.elementwise("a * b + 1.0", name="wrap_fma"))
    prog(a=ba, b=bb, out=bo, n=256, wait=True)
    np.testing.assert_array_equal(out, a * 2 + 1)  # the kernel wrote the caller's array
    a[:] = 1  # and the Buffer sees the caller's writes
    prog(a=ba, b=bb, out=bo, n=256, wait=True)
    np.testing.assert_array_equal(out, np.full(256, 3, np.float32))
    view = ba.numpy()
    del a  # the Buffer keeps the caller's array alive
    gc.collect()
    np.testing.assert_array_equal(ba.numpy(), view)


def test_dlpack_export_shares_memory_and_keeps_the_buffer_alive():
    dev = dk.device("CPU")
    buf = dk.Buffer(dev, 1000, "float32").copyin(np.arange(1000, dtype=np.float32))
    arr = np.from_dlpack(buf)
    assert arr.shape == (1000,) and arr.dtype == np.float32
    np.testing.assert_array_equal(arr, np.arange(1000))
    arr[0] = 42  # writes through to the Buffer
    assert buf.numpy()[0] == 42
    del buf
    gc.collect()
    fresh = [dk.Buffer(dev, 1000, "float32").copyin(np.full(1000, -1, np.float32)) for _ in range(4)]
    assert arr[0] == 42 and arr[1] == 1, "the exported memory was reused by another Buffer"  # still its own
    assert all(f.numpy()[0] == -1 for f in fresh)
    vec = dk.Buffer(dev, 8, dk.dtypes.float32.vec(4)).copyin(np.arange(32, dtype=np.float32))
    assert np.from_dlpack(vec).shape == (8, 4)
    again = dk.Buffer.from_dlpack(np.arange(6, dtype=np.int64), dev)
    np.testing.assert_array_equal(again.numpy(), np.arange(6))


def test_what_cannot_be_wrapped_is_refused_with_the_reason():
    a = np.zeros(64, np.float32)
    cases = [(a[::2], r"not C-contiguous \(shape \(32,\), strides \(8,\) bytes\).*np.ascontiguousarray"),
             (np.zeros(65, np.uint8)[1:].view(np.float32), "not aligned to 4 bytes"),
             (np.zeros(0, np.float32), "the array is empty"), (a.astype(np.float64), None)]
    for arr, why in cases[:3]:
        with pytest.raises(ValueError, match=f"Buffer.from_numpy: .*{why}.*; pass copy=True"):
            dk.from_numpy(arr, "CPU")
        if arr.size:
            np.testing.assert_array_equal(dk.from_numpy(arr, "CPU", copy=True).numpy(), arr)  # copy works
    with pytest.raises(ValueError, match="the array is float64, a bfloat16 Buffer stores uint16"):
        dk.from_numpy(np.zeros(4), "CPU", dtype="bfloat16")
    bits = dk.from_numpy(np.array([0x3F80, 0x4000], np.uint16), "CPU", dtype="bfloat16")  # bfloat16 as its bits
    np.testing.assert_array_equal(bits.numpy(), [1.0, 2.0])
    with pytest.raises(ValueError, match="6 scalars is not a whole number of"):
        dk.from_numpy(np.zeros(6, np.float32), "CPU", dtype=dk.dtypes.float32.vec(4))


def test_a_device_whose_memory_is_not_host_memory_refuses():
    rows = [d for d in dk.devices() if d.kind == "OPENCL" and d.available]
    if not rows:
        pytest.skip("needs a device whose allocator does not wrap host memory (OPENCL)")
    with pytest.raises(ValueError, match="OPENCL's memory is not host memory"):
        dk.from_numpy(np.zeros(4, np.float32), "OPENCL")
    buf = dk.Buffer("OPENCL", 4, "float32").copyin(np.zeros(4, np.float32))
    with pytest.raises(BufferError, match="OPENCL: only host memory is exported through DLPack"):
        np.from_dlpack(buf)


# ---- issue 31.7: read-only memory (a read-only array, jax's DLPack export) for the params a kernel only reads


class _ReadOnlyExport:
    """A DLPack exporter of read-only host memory, as jax's CPU arrays are (np.from_dlpack gives a read-only array)."""

    def __init__(self, arr):
        self._a = arr
        self._a.flags.writeable = False

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_read_only_buffers_are_read_and_never_written():
    """A read-only array or DLPack export wraps as a read-only Buffer without a copy: a kernel reads it; a writable
    param, copyin and the exported array refuse to write it, each naming it."""
    from devicekit import kernels
    from devicekit.errors import ReadOnlyBufferError
    dev = dk.device("CPU")
    src = np.arange(16, dtype=np.float32)
    ro = dk.from_dlpack(_ReadOnlyExport(src), dev)
    assert ro.readonly and "read-only" in repr(ro)
    assert np.from_dlpack(ro).ctypes.data == src.ctypes.data  # no copy
    inc = dev.compile(kernels.elementwise("a + 1.0", inputs=("a",), name="ro_inc"))
    out = dk.Buffer(dev, 16, "float32")
    for launch in (lambda: inc.execute([ro, out], [16]), lambda: inc(a=ro, out=out, n=16),
                   lambda: dk.Plan(dev).add(inc, a=ro, out=out, n=16).run()):
        out.copyin(np.zeros(16, np.float32))
        launch()
        np.testing.assert_array_equal(out.numpy(), src + 1)
    frozen = np.frombuffer(bytes(64), np.float32)
    for write in (lambda: inc.execute([out, ro], [16]), lambda: inc.execute([out, dk.from_numpy(frozen, dev)], [16]),
                  lambda: dk.run(inc, a=out, out=ro, n=16), lambda: dk.Plan(dev).add(inc, a=out, out=ro, n=16)):
        with pytest.raises(ReadOnlyBufferError, match=r"param 'out' is writable and <Buffer CPU .*float32\[16\] read-only"):
            write()
    with pytest.raises(ReadOnlyBufferError, match="read-only"):
        ro.copyin(np.zeros(16, np.float32))
    with pytest.raises(ValueError, match="read-only"):
        np.from_dlpack(ro)[0] = 1
    assert ro.view(4, offset=2).readonly
    np.testing.assert_array_equal(src, np.arange(16, dtype=np.float32))


def test_strided_dlpack_input_is_refused_with_the_copy_it_needs():
    base = np.arange(32, dtype=np.float32)
    with pytest.raises(ValueError, match=r"^Buffer.from_dlpack: the array is not C-contiguous .*np.ascontiguousarray"
                                         r"\(arr\).*copy=True"):
        dk.from_dlpack(base[::2], "CPU")
    np.testing.assert_array_equal(dk.from_dlpack(base[::2], "CPU", copy=True).numpy(), base[::2])
