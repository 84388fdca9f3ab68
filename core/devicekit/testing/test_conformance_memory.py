"""Conformance: the allocator, through Buffer. Round trips for every dtype and several sizes, copyout into a given
array, zeroed buffers, views (where the allocator has `offset`), reuse after free, and size/dtype errors."""

from __future__ import annotations

import numpy as np
import pytest

from devicekit.ir.dtypes import dtypes

from .random_kernels import ALL_DTYPES

pytestmark = pytest.mark.devicekit_conformance

SIZES = (0, 1, 7, 64, 1000, 4099)


def _values(dt, n: int, seed: int = 0) -> np.ndarray:
    """n values of dt as copyin takes them (bfloat16: float32 values exactly representable in bfloat16)."""
    rng = np.random.default_rng(seed)
    if dt == dtypes.bool:
        return rng.random(n) < 0.5
    if dt == dtypes.bfloat16:
        return (rng.integers(-256, 256, n) / 4).astype(np.float32)
    if dt.is_float:
        return (rng.standard_normal(n) * 100).astype(dt.np)
    info = np.iinfo(dt.np)
    return rng.integers(info.min, info.max, n, endpoint=True, dtype=dt.np)


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_round_trip_every_dtype(dk_device, dt):
    import devicekit as dk
    for n in SIZES:
        vals = _values(dt, n, seed=n)
        buf = dk.Buffer(dk_device, n, dt).copyin(vals)
        np.testing.assert_array_equal(buf.numpy(), vals, err_msg=f"{dt}[{n}]")


def test_round_trip_vector_dtype(dk_device):
    import devicekit as dk
    vals = np.arange(4 * 33, dtype=np.float32)
    buf = dk.Buffer(dk_device, 33, dtypes.float32.vec(4)).copyin(vals)
    np.testing.assert_array_equal(buf.numpy(), vals.reshape(33, 4))


def test_copyout_into_given_array(dk_device):
    import devicekit as dk
    vals = np.arange(257, dtype=np.int32) * 3
    buf = dk.Buffer(dk_device, 257, dtypes.int32).copyin(vals)
    dest = np.full(257, -1, np.int32)
    assert buf.copyout(dest) is dest
    np.testing.assert_array_equal(dest, vals)
    with pytest.raises(ValueError):
        buf.copyout(np.empty(256, np.int32))


def test_zeroed_buffers_stay_zero_after_reuse(dk_device):
    import devicekit as dk
    from devicekit.memory import BufferOptions
    for _ in range(3):  # an LRU allocator hands the same memory back: it must be zeroed again
        b = dk.Buffer(dk_device, 1024, dtypes.float32, BufferOptions(zero=True))
        np.testing.assert_array_equal(b.numpy(), np.zeros(1024, np.float32))
        b.copyin(np.ones(1024, np.float32))
        del b


def test_many_allocations_and_frees(dk_device):
    import devicekit as dk
    bufs = [dk.Buffer(dk_device, n, dtypes.uint8).copyin(np.full(n, n % 251, np.uint8))
            for n in (1, 100, 4096, 1 << 16) * 8]
    for b in bufs:
        assert b.is_allocated
        assert int(b.numpy()[0]) == b.size % 251
    del bufs
    again = dk.Buffer(dk_device, 4096, dtypes.uint8).copyin(np.arange(4096, dtype=np.uint8))
    np.testing.assert_array_equal(again.numpy(), np.arange(4096, dtype=np.uint8))


def test_views_share_memory(dk_device):
    import devicekit as dk
    if not dk_device.allocator.supports("offset"):
        pytest.skip(f"{dk_device.spec}: its allocator has no offset(): buffer views are not supported")
    base = dk.Buffer(dk_device, 64, dtypes.float32).copyin(np.zeros(64, np.float32))
    view = base.view(16, offset=8)
    view.copyin(np.arange(16, dtype=np.float32) + 1)
    want = np.zeros(64, np.float32)
    want[8:24] = np.arange(16) + 1
    np.testing.assert_array_equal(base.numpy(), want)
    np.testing.assert_array_equal(view.numpy(), np.arange(16, dtype=np.float32) + 1)
    bits = base.view(4, dtypes.uint32, offset=8)  # another dtype over the same bytes
    np.testing.assert_array_equal(bits.numpy(), (np.arange(4, dtype=np.float32) + 1).view(np.uint32))
    nested = view.view(4, offset=4)
    np.testing.assert_array_equal(nested.numpy(), np.arange(4, 8, dtype=np.float32) + 1)
    with pytest.raises(ValueError):
        base.view(16, offset=60)


def test_copyin_checks_size_and_dtype(dk_device):
    import devicekit as dk
    buf = dk.Buffer(dk_device, 10, dtypes.float32)
    with pytest.raises(ValueError, match="size"):
        buf.copyin(np.zeros(11, np.float32))
    with pytest.raises(TypeError, match="dtype"):
        buf.copyin(np.zeros(10, np.float64))


def test_optional_allocator_features(dk_device):
    import devicekit as dk
    alloc = dk_device.allocator
    if alloc.supports("as_buffer"):  # for a buffer allocated with cpu_access (BufferOptions' promise of a mapping)
        b = dk.Buffer(dk_device, 8, dtypes.int32, dk.BufferOptions(cpu_access=True))
        b.copyin(np.arange(8, dtype=np.int32))
        dk_device.synchronize()
        mv = alloc.as_buffer(b.handle, b.nbytes)
        np.testing.assert_array_equal(np.frombuffer(mv, np.int32), np.arange(8))
    if alloc.supports("transfer"):
        a = dk.Buffer(dk_device, 8, dtypes.int32).copyin(np.arange(8, dtype=np.int32) * 7)
        b = dk.Buffer(dk_device, 8, dtypes.int32).copyin(np.zeros(8, np.int32))
        alloc.transfer(b.handle, a.handle, a.nbytes, alloc)
        np.testing.assert_array_equal(b.numpy(), np.arange(8) * 7)
    if not (alloc.supports("as_buffer") or alloc.supports("transfer")):
        pytest.skip(f"{dk_device.spec}: the allocator has neither as_buffer nor transfer (both optional)")
