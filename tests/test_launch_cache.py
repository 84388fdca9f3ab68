"""The launch cache (Program.execute, devicekit.signature): a launch whose Buffers and values were accepted together
runs again without a check, found by each Buffer's token (`Buffer._key`: never reused, 0 once freed). Each test
below makes the entry first (two launches: the second binds the CPU's native record), then changes what the cache
must not miss: a freed Buffer or base, a Buffer whose id or allocation is another's old one, another device, a
float value equal to the cached one, a container that is not a list. A cache keyed by id(), by the allocator's
handle, or not told of a free() launches these; the full check refuses them with its own words."""

from __future__ import annotations

import gc
import weakref

import devicekit as dk
import numpy as np
import pytest
from devicekit import kernels
from devicekit.errors import FreedBufferError
from devicekit.ir.dtypes import dtypes
from devicekit.memory import Buffer

N = 16


@pytest.fixture(scope="module")
def cpu():
    return dk.device("CPU")


@pytest.fixture(scope="module")
def fma(cpu):
    prog = cpu.compile(kernels.elementwise("a * b + c", name="cache_fma"))
    prog.upgrade()  # the final build: its repeats bind the native record (a quick build's go through _launch)
    from devicekit_cpu.replay import replayer
    replayer()  # built now: a process's first repeats launch through _launch while it builds elsewhere
    return prog


def _set(dev, n=N, dt=dtypes.float32):
    return [Buffer(dev, n, dt).copyin(np.full(n, x, dt.np)) for x in (2, 3, 1, 0)]


def _cached(prog, bufs, vals=(N,)):
    """Launch twice (the second is a cache hit) and check the entry is there: what the next launch would run."""
    prog.execute(bufs, list(vals), wait=True)
    prog.execute(bufs, list(vals), wait=True)
    assert prog._entry(bufs, list(vals)) is not None, "an accepted launch was not cached"


def test_a_cached_launch_runs_again_with_each_sets_own_buffers(fma, cpu):
    a, b = _set(cpu), _set(cpu)
    b[0].copyin(np.full(N, 5, np.float32))
    for _ in range(3):
        for s in (a, b):
            s[3].copyin(np.zeros(N, np.float32))
            fma.execute(s, [N], wait=True)
    assert fma._entry(a, [N]) is not fma._entry(b, [N])
    assert fma._entry(a, [N])[0] is not None, "the repeats did not run the bound native record"
    np.testing.assert_array_equal(a[3].numpy(), np.full(N, 7, np.float32))
    np.testing.assert_array_equal(b[3].numpy(), np.full(N, 16, np.float32))


def test_a_freed_buffer_is_refused_after_its_launch_was_cached(fma, cpu):
    a = _set(cpu)
    _cached(fma, a)
    a[0].free()
    with pytest.raises(FreedBufferError, match="param 'a' is .* it was freed"):
        fma.execute(a, [N])


def test_a_view_whose_base_was_freed_is_refused(fma, cpu):
    base = Buffer(cpu, 2 * N, dtypes.float32).copyin(np.ones(2 * N, np.float32))
    a = _set(cpu)
    a[0] = base.view(N, offset=N)
    _cached(fma, a)
    base.free()
    with pytest.raises(FreedBufferError, match="param 'a' is .* it was freed"):
        fma.execute(a, [N])


def test_a_new_buffer_on_a_freed_ones_allocation_is_checked_for_itself(fma, cpu):
    """The allocator hands a freed allocation (the same handle) to the next Buffer of its byte count: an int32
    Buffer of 16 elements gets the float32 one's memory. A cache keyed by handles would launch it as float32."""
    a = _set(cpu)
    _cached(fma, a)
    h = a[0].handle
    a[0].free()
    other = Buffer(cpu, N, dtypes.int32)
    assert other.handle is h, "the allocator did not reuse the freed allocation (the case this test needs)"
    with pytest.raises(TypeError, match="param 'a' is dtypes.float32, the buffer is dtypes.int32"):
        fma.execute([other, *a[1:]], [N])


def test_a_new_buffer_at_a_dropped_ones_id_is_checked_for_itself(fma, cpu):
    """A dropped Buffer's id() is usually the next Buffer's: a cache keyed by id() would launch a too-short one."""
    rest = _set(cpu)[1:]
    for _ in range(200):
        x = Buffer(cpu, N, dtypes.float32).copyin(np.ones(N, np.float32))
        _cached(fma, [x, *rest])
        old = id(x)
        del x  # freed at once (refcount): the next object of its size usually takes its place
        short = Buffer(cpu, N // 2, dtypes.float32)
        if id(short) == old:
            break
    else:
        pytest.skip("no Buffer got a dropped one's id in 200 tries")
    with pytest.raises(ValueError, match="param 'a' needs 16 elements .* the buffer has 8"):
        fma.execute([short, *rest], [N])


def test_a_buffer_of_another_device_id_is_refused():
    """The seed path's Program (no Device: its home is where its first Buffers were) on ACME:0, then ACME:1's."""
    d0, d1 = dk.device("ACME"), dk.device("ACME:1")
    k = kernels.elementwise("a * b + c", name="cache_home")
    prog = d0.runtime(d0.compiler.compile(d0.renderer.render(k)))
    a = _set(d0)
    _cached(prog, a)
    far = Buffer(d1, N, dtypes.float32).copyin(np.ones(N, np.float32))
    with pytest.raises(ValueError, match="param 'a' is a buffer on ACME:1, the program runs on ACME"):
        prog.execute([far, *a[1:]], [N])


def test_the_cache_keeps_no_buffer_alive(fma, cpu):
    a = _set(cpu)
    _cached(fma, a)
    gone = weakref.ref(a[0])
    del a
    gc.collect()
    assert gone() is None, "the launch cache kept a Buffer alive"


def test_a_container_that_is_not_a_list_is_refused_after_its_buffers_were_cached(fma, cpu):
    a = _set(cpu)
    _cached(fma, a)
    arr = np.empty(4, dtype=object)
    arr[:] = a
    with pytest.raises(TypeError, match="buffers must be a list of Buffers in param order, got ndarray"):
        fma.execute(arr, [N])
    with pytest.raises(TypeError, match="expected 4 buffers"):
        fma.execute([*a, a[0]], [N])
    with pytest.raises(TypeError, match=r"var n must be an int, got bool True"):
        fma2 = dk.device("CPU").compile(kernels.elementwise("a * b + c", name="cache_fma"))
        fma2.upgrade()
        one = _set(cpu, 1)
        _cached(fma2, one, (1,))
        fma2.execute(one, [True])


def test_a_float_scalar_is_launched_with_its_own_bits(registry):
    """0.0 == -0.0 and both hash alike: a cache (or memo) keyed by equal values ran -0.0 as the cached 0.0."""
    from devicekit.ir.dtypes import largest_float
    from devicekit.render.program_spec import ParamSpec, VarSpec
    from dkfix_toy.toylang import ToyKernel
    big = largest_float(dtypes.float32)
    ks = ToyKernel("cache_scalar", (ParamSpec("o", dtypes.float32, 4, True),),
                   (VarSpec("alpha", -big, big, dtypes.float32, scalar=dtypes.float32),), "o[:] = alpha\n")
    dev = dk.device("TOY")
    prog = dev.compile(ks)
    o = Buffer(dev, 4, dtypes.float32)
    for _ in range(3):
        prog.execute([o], [0.0], wait=True)
    prog.execute([o], [-0.0], wait=True)
    assert np.signbit(o.numpy()).all(), "a launch with -0.0 ran with the cached launch's 0.0"


def test_the_generated_front_runs_hits_and_keeps_the_program_collectable(cpu):
    """From its first launch a Program's `execute` is its signature's generated front (Signature.front): a hit runs
    the bound native record there, with the launch's own Buffers, and the front holds its Program only weakly, so a
    dropped Program is freed by reference counting (a strong reference would make a cycle only the collector frees,
    keeping the loaded code of every evicted Program until then)."""
    prog = cpu.compile(kernels.elementwise("a * b - c", name="cache_front"))
    prog.upgrade()
    from devicekit_cpu.replay import replayer
    replayer()
    s = _set(cpu)
    _cached(prog, s)
    assert "execute" in prog.__dict__, "the front was not installed"
    assert prog._entry(s, [N])[0] is not None
    s[3].copyin(np.zeros(N, np.float32))
    h = prog.execute(s, [N])  # a hit through the front: a Launch handle, the kernel already ran
    assert h.wait() >= 0 and h.done
    np.testing.assert_array_equal(s[3].numpy(), np.full(N, 5, np.float32))
    with pytest.raises(TypeError, match="expected 4 buffers"):  # a miss of every kind still gets the full check
        prog.execute(s[:3], [N])
    ref = weakref.ref(prog)
    cpu._programs.clear()
    gc.disable()
    try:
        del prog
        assert ref() is None, "the front (or something else) keeps the Program alive in a reference cycle"
    finally:
        gc.enable()
