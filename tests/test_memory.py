import gc

import numpy as np
import pytest
from devicekit.ir.dtypes import dtypes
from devicekit.memory import Buffer, BufferOptions, HostAllocator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@pytest.fixture
def toy(registry):
    return registry.device("TOY")


def test_lazy_allocation_and_roundtrip(toy):
    b = Buffer(toy, 10, dtypes.float32)
    assert not b.is_allocated and b.nbytes == 40
    x = np.arange(10, dtype=np.float32)
    b.copyin(x)
    assert b.is_allocated
    y = b.numpy()
    np.testing.assert_array_equal(y, x)
    y[0] = 99  # a safe copy: the buffer is unchanged
    assert b.numpy()[0] == 0
    assert b.handle.ctypes.data % 64 == 0


def test_device_by_spec_string(registry):
    b = Buffer("toy:1", 3, "int32")
    assert str(b.device.spec) == "TOY:1" and b.dtype == dtypes.int32
    assert "TOY:1" in repr(b) and "int32" in repr(b) and "unallocated" in repr(b)


@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint16, dtypes.int64, dtypes.float16, dtypes.float64, dtypes.bool])
def test_roundtrip_dtypes(toy, dt):
    x = (np.arange(7) % 2).astype(dt.np) if dt == dtypes.bool else np.arange(7).astype(dt.np)
    np.testing.assert_array_equal(Buffer(toy, 7, dt).copyin(x).numpy(), x)


def test_bfloat16_values_and_bits(toy):
    b = Buffer(toy, 3, dtypes.bfloat16)
    b.copyin(np.array([1.0, -2.5, 3.0], np.float32))
    out = b.numpy()
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [1.0, -2.5, 3.0])
    np.testing.assert_array_equal(b.copyout(), np.array([0x3F80, 0xC020, 0x4040], np.uint16))
    b.copyin(np.array([0x4000, 0, 0xBF80], np.uint16))  # raw bits
    np.testing.assert_array_equal(b.numpy(), [2.0, 0.0, -1.0])
    with pytest.raises(TypeError, match="bfloat16"):
        b.copyin(np.zeros(3, np.float64))


def test_vector_dtype_counts_lanes(toy):
    b = Buffer(toy, 2, dtypes.float32.vec(4))
    assert b.nbytes == 32
    b.copyin(np.arange(8, dtype=np.float32))
    assert b.numpy().shape == (2, 4)


def test_size_and_dtype_errors(toy):
    b = Buffer(toy, 4, dtypes.float32)
    with pytest.raises(ValueError, match="size mismatch"):
        b.copyin(np.zeros(5, np.float32))
    with pytest.raises(TypeError, match="dtype mismatch"):
        b.copyin(np.zeros(4, np.float64))
    with pytest.raises(TypeError, match="buffer-protocol"):
        b.copyin(object())
    with pytest.raises(ValueError, match="non-negative"):
        Buffer(toy, -1, dtypes.float32)
    with pytest.raises(ValueError, match="bytes"):
        b.copyout(bytearray(3))


def test_buffer_protocol_objects(toy):
    b = Buffer(toy, 4, dtypes.uint8).copyin(b"\x01\x02\x03\x04")
    dest = bytearray(4)
    b.copyout(dest)
    assert dest == b"\x01\x02\x03\x04"
    f = Buffer(toy, 2, dtypes.float32).copyin(memoryview(np.array([1.5, 2.5], np.float32)))
    np.testing.assert_array_equal(f.numpy(), [1.5, 2.5])


def test_views_share_memory_and_are_bounds_checked(toy):
    base = Buffer(toy, 8, dtypes.float32).copyin(np.arange(8, dtype=np.float32))
    v = base.view(3, offset=2)
    np.testing.assert_array_equal(v.numpy(), [2, 3, 4])
    v.copyin(np.array([-1, -2, -3], np.float32))
    np.testing.assert_array_equal(base.numpy(), [0, 1, -1, -2, -3, 5, 6, 7])
    vv = v.view(1, offset=2)  # a view of a view: offsets add up
    assert vv.numpy()[0] == -3 and vv.base is base
    as_int = base.view(2, dtypes.int32, offset=0)
    assert as_int.numpy()[0] == 0 and as_int.numpy()[1] == np.float32(1).view(np.int32)
    with pytest.raises(ValueError, match="does not fit"):
        base.view(4, offset=5)
    with pytest.raises(ValueError, match="aligned"):
        Buffer(toy, 8, dtypes.uint8).view(1, dtypes.int32, offset=1)


def test_zero_option(toy):
    b = Buffer(toy, 5, dtypes.int32, BufferOptions(zero=True))
    np.testing.assert_array_equal(b.numpy(), np.zeros(5, np.int32))


def test_lru_reuses_freed_handles_and_zeroes_on_reuse():
    a = HostAllocator("HOST", max_cached_bytes=1 << 20)
    h = a.alloc(64)
    a.copyin(h, memoryview(bytes(range(64))))
    a.free(h, 64)
    assert a.cached_bytes == 64
    h2 = a.alloc(64)
    assert h2 is h and a.stats["hits"] == 1
    assert bytes(h2[:4]) == b"\x00\x01\x02\x03"  # reused as is
    a.free(h2, 64)
    h3 = a.alloc(64, BufferOptions(zero=True))
    assert h3 is not h  # options are part of the key: a zero buffer is a different slot
    a.free(h3, 64, BufferOptions(zero=True))
    a.copyin(h3, memoryview(b"\xff" * 64))
    h4 = a.alloc(64, BufferOptions(zero=True))
    assert h4 is h3 and not h4.any()  # zeroed again on reuse


def test_lru_is_bounded_and_nolru_frees():
    a = HostAllocator("HOST", max_cached_bytes=100)
    hs = [a.alloc(40) for _ in range(3)]
    for h in hs:
        a.free(h, 40)
    assert a.cached_bytes == 80 and a.stats["evicted"] == 1
    assert a.live_bytes == 80
    h = a.alloc(10, BufferOptions(nolru=True))
    a.free(h, 10, BufferOptions(nolru=True))
    assert a.live_bytes == 80


def test_out_of_memory_flushes_cache_then_names_device_and_size():
    a = HostAllocator("TOY:1", capacity=100, max_cached_bytes=1000)
    h = a.alloc(80)
    a.free(h, 80)  # cached, still counted against capacity
    h2 = a.alloc(50)  # fails, flushes the cache, retries
    assert a.stats["flushes"] == 1 and h2.nbytes == 50
    with pytest.raises(MemoryError, match=r"TOY:1.*1000 bytes"):
        a.alloc(1000)


def test_buffer_frees_to_allocator_on_gc(toy):
    alloc = toy.allocator
    before = alloc.cached_bytes
    b = Buffer(toy, 16, dtypes.float32).allocate()
    del b
    gc.collect()
    assert alloc.cached_bytes == before + 64


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["int8", "uint8", "int16", "uint32", "int64", "float16", "float32", "float64"]),
       st.integers(0, 300), st.integers(0, 2**32 - 1))
def test_roundtrip_property(registry, name, size, seed):
    dt = dtypes.from_name(name)
    x = np.random.default_rng(seed).integers(-100, 100, size).astype(dt.np)
    b = Buffer("TOY", size, dt).copyin(x)
    np.testing.assert_array_equal(b.numpy(), x)
    if size >= 2:
        np.testing.assert_array_equal(b.view(size - 1, offset=1).numpy(), x[1:])


# ---- issue 30.3: a Buffer's size, dtype and device are fixed; launches check the allocation's own bytes

_OVERRUN = r'''
import sys
import numpy as np
import devicekit as dk
from devicekit import kernels
dev = dk.device("CPU")
prog = dev.compile(kernels.elementwise("a + 1.0", inputs=("a",), name="overrun_inc"))
a, out = dk.Buffer(dev, 16, "float32"), dk.Buffer(dev, 16, "float32")
for b in (a, out):
    try:
        b.size = 1 << 20
    except AttributeError as e:
        assert "Buffer.size is read-only" in str(e), e
    else:
        print("assigned size")
    b.__dict__["_size"] = 1 << 20  # even a tampered private count is not what a launch trusts
outcomes = []
for launch in (lambda: prog.execute([a, out], [1 << 20]), lambda: dk.Plan(dev).add(prog, a=a, out=out, n=1 << 20).run(),
               lambda: dk.run(prog, a=a, out=out, n=1 << 20)):
    try:
        launch()
        outcomes.append("ran")
    except ValueError as e:
        outcomes.append("refused" if "needs 1048576 elements" in str(e) else str(e))
print(outcomes)
sys.exit(0 if outcomes == ["refused"] * 3 else 3)
'''


def test_buffer_identity_is_read_only_and_launches_check_the_allocation(tmp_path):
    """`b.size = 1 << 20` then a launch of n = 2^20 wrote 4 MiB past a 64-byte allocation (SIGSEGV): the assignment
    is refused naming the attribute, and execute, a Plan and dk.run check against the allocation's byte count
    (a subprocess: on the old code this kills the interpreter)."""
    import subprocess
    import sys
    script = tmp_path / "overrun.py"
    script.write_text(_OVERRUN)
    r = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-2000:]}"
    assert "assigned" not in r.stdout


def test_assigning_size_dtype_or_device_names_the_attribute():
    import devicekit as dk
    b = dk.Buffer("CPU", 4, "float32")
    for name, value in (("size", 8), ("dtype", dtypes.float64), ("device", None)):
        with pytest.raises(AttributeError, match=f"Buffer.{name} is read-only"):
            setattr(b, name, value)
    assert (b.size, b.dtype, b.nbytes) == (4, dtypes.float32, 16)


# ---- issue 30.4: Buffer.free() and `with`; any later use raises naming the Buffer


def _inc():
    import devicekit as dk
    from devicekit import kernels
    return dk.device("CPU").compile(kernels.elementwise("a + 1.0", inputs=("a",), name="freed_inc"))


def test_a_freed_buffer_refuses_every_use_by_name():
    import devicekit as dk
    from devicekit.errors import FreedBufferError
    dev = dk.device("CPU")
    prog = _inc()
    a = dk.Buffer(dev, 16, "float32").copyin(np.ones(16, np.float32))
    out = dk.Buffer(dev, 16, "float32")
    view = a.view(8, offset=4)
    prog.execute([a, out], [16])
    prog.execute([a, out], [16])  # remembered by the repeat memo
    plan = dk.Plan(dev).add(prog, a=a, out=out, n=16)
    plan.run()
    a.free()
    a.free()  # twice: a no-op
    assert a.freed and view.freed and "freed" in repr(a)
    uses = {"copyin": lambda: a.copyin(np.ones(16, np.float32)), "copyout": a.copyout, "numpy": a.numpy,
            "handle": lambda: a.handle, "view": lambda: a.view(4), "dlpack": lambda: np.from_dlpack(a),
            "execute (repeat)": lambda: prog.execute([a, out], [16]), "execute": lambda: prog.execute([a, out], [8]),
            "plan": plan.run, "new plan": lambda: dk.Plan(dev).add(prog, a=a, out=out, n=16),
            "run": lambda: dk.run(prog, a=a, out=out, n=16), "view numpy": view.numpy,
            "view launch": lambda: prog.execute([view, out], [8]), "with": lambda: a.__enter__()}
    for what, use in uses.items():
        with pytest.raises(FreedBufferError, match="freed") as e:
            use()
        assert "float32[16]" in str(e.value) or "'a'" in str(e.value) or "float32[8]" in str(e.value), what
    np.testing.assert_array_equal(out.numpy(), np.full(16, 2, np.float32))  # the other Buffer is untouched


def test_a_with_block_frees_and_the_memory_is_reused_not_read_back():
    import devicekit as dk
    from devicekit.errors import FreedBufferError
    dev = dk.device("CPU")
    with dk.Buffer(dev, 64, "float32") as b:
        b.copyin(np.arange(64, dtype=np.float32))
        handle = b.handle
    assert b.freed and not b.is_allocated
    c = dk.Buffer(dev, 64, "float32")
    assert c.handle is handle  # the allocator's cache handed the memory to the next Buffer of that size
    c.copyin(np.zeros(64, np.float32))
    with pytest.raises(FreedBufferError):
        b.numpy()  # never the next owner's zeros


def test_freeing_a_view_leaves_its_base_usable():
    import devicekit as dk
    dev = dk.device("CPU")
    a = dk.Buffer(dev, 16, "float32").copyin(np.arange(16, dtype=np.float32))
    v = a.view(4, offset=2)
    v.free()
    np.testing.assert_array_equal(a.numpy(), np.arange(16, dtype=np.float32))
    np.testing.assert_array_equal(a.view(4, offset=2).numpy(), [2, 3, 4, 5])
