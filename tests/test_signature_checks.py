"""The launch checker (devicekit.signature): the fast check a Program compiles from its spec. For each launch below,
what the fast check decides (the Buffers' handles: proved right; None: the full check decides) and what `execute`
does (runs, or raises the full check's error and runs nothing). A launch the fast check accepts is never one the full
check refuses; an ordinary good launch is accepted by the fast check (its documented subset), so a check that
declines everything, or accepts too much, fails here (the mutation run of issue 38, docs/testing.md)."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit.errors import FreedBufferError, ReadOnlyBufferError
from devicekit.ir.dtypes import dtypes, largest_float
from devicekit.memory import Buffer
from devicekit.render.program_spec import ParamSpec, VarSpec
from devicekit.signature import Signature, debugging, fast_bounds
from dkfix_toy.toylang import ToyKernel, var

N = var("n", 1, 1000)
SAXPY = ToyKernel("sig_saxpy",
                  (ParamSpec("x", dtypes.float32, N, False), ParamSpec("y", dtypes.float32, N, False),
                   ParamSpec("out", dtypes.float32, N, True)),
                  (VarSpec("n", 1, 1000),),
                  "out[:n] = x[:n] * np.float32(2) + y[:n]\n")


@pytest.fixture
def dev(registry):
    return dk.device("TOY")


def bufs(dev, n=8, dt=dtypes.float32):
    x = Buffer(dev, n, dt).copyin(np.arange(n).astype(dt.np))
    y = Buffer(dev, n, dt).copyin(np.ones(n, dt.np))
    return x, y, Buffer(dev, n, dt).copyin(np.full(n, -7, dt.np))


def fast(prog, buffers, vals):
    return prog._signature().fast(buffers, vals, prog.device or prog._signature().home)


def accepted(prog, buffers, vals):
    """The fast check proves the launch right: it returns each Buffer's own handle, in param order."""
    h = fast(prog, buffers, vals)
    assert h is not None, "the fast check declined a launch it documents as its own"
    assert len(h) == len(buffers) and all(a is b._handle for a, b in zip(h, buffers))


def refused(prog, buffers, vals, exc, match, out):
    """The fast check declines, the full check raises `exc`, and the kernel did not run (`out` kept its bytes)."""
    before = None if out is None or not out.is_allocated else out.numpy().copy()
    assert fast(prog, buffers, vals) is None
    prog._forget_launches()
    with pytest.raises(exc, match=match):
        prog.execute(buffers, vals)
    if out is not None:
        if before is None:
            assert not out.is_allocated
        else:
            np.testing.assert_array_equal(out.numpy(), before)


def test_a_good_launch_is_proved_by_the_fast_check_and_runs(dev):
    prog = dev.compile(SAXPY)
    x, y, out = bufs(dev)
    accepted(prog, [x, y, out], [8])
    accepted(prog, (x, y, out), (8,))  # tuples as well as lists
    accepted(prog, [x, y, out], [1])
    prog.execute([x, y, out], [8], wait=True)
    np.testing.assert_array_equal(out.numpy(), np.arange(8) * 2 + 1)
    big = bufs(dev, 1000)
    accepted(prog, list(big), [1000])  # the var's upper bound, exactly


def test_wrong_buffer_count_and_containers(dev):
    prog = dev.compile(SAXPY)
    x, y, out = bufs(dev)
    refused(prog, [x, y], [8], TypeError, r"expected 3 buffers \(x, y, out\), got 2", out)
    refused(prog, [x, y, out, out], [8], TypeError, "expected 3 buffers", out)
    refused(prog, {0: x}, [8], TypeError, "buffers must be a list", out)
    refused(prog, [x, y, out], 8, TypeError, "vals must be a list", out)
    refused(prog, [x, y, out], [], TypeError, "int vars", out)
    refused(prog, [x, y, out], [8, 8], (TypeError, ValueError), None, out)


def test_vars_out_of_bounds_or_of_another_type(dev):
    prog = dev.compile(SAXPY)
    x, y, out = bufs(dev)
    refused(prog, [x, y, out], [0], ValueError, r"n=0 is outside its declared range \[1, 1000\]", out)
    big = bufs(dev, 1001)
    refused(prog, list(big), [1001], ValueError, r"n=1001 is outside its declared range", big[2])
    refused(prog, [x, y, out], [True], TypeError, "var n must be an int, got bool", out)
    refused(prog, [x, y, out], [8.0], TypeError, "var n must be an int, got float", out)
    # a numpy int is a right value, but the fast check leaves its conversion to the full check
    assert fast(prog, [x, y, out], [np.int64(8)]) is None
    prog.execute([x, y, out], [np.int64(8)], wait=True)
    np.testing.assert_array_equal(out.numpy(), np.arange(8) * 2 + 1)


def test_wrong_dtype_short_buffer_and_another_device(dev):
    prog = dev.compile(SAXPY)
    x, y, out = bufs(dev)
    refused(prog, [x, y, Buffer(dev, 8, dtypes.int32)], [8], TypeError,
            r"'out' is dtypes.float32, the buffer is dtypes.int32", out)
    refused(prog, [Buffer(dev, 8, dtypes.float64), y, out], [8], TypeError, "'x' is dtypes.float32", out)
    refused(prog, [x, y, out], [9], ValueError, r"'x' needs 9 elements .* has 8", out)
    short = Buffer(dev, 7, dtypes.float32).copyin(np.zeros(7, np.float32))
    refused(prog, [x, y, short], [8], ValueError, r"'out' needs 8 elements .* has 7", short)
    refused(prog, [x, short, out], [8], ValueError, r"'y' needs 8 elements .* has 7", out)
    # a dtype equal but not the same object is the fast check's too (`is not D or != D`)
    eq = Buffer(dev, 8, dtypes.from_name("float32")).copyin(np.zeros(8, np.float32))
    accepted(prog, [x, y, eq], [8])
    other = Buffer(dk.device("TOY:1"), 8, dtypes.float32).copyin(np.zeros(8, np.float32))
    refused(prog, [x, other, out], [8], ValueError, r"'y' is a buffer on TOY:1, the program runs on TOY", out)
    refused(prog, [x, y, np.zeros(8, np.float32)], [8], TypeError, "'out' must be a devicekit Buffer", None)


def test_freed_buffers_are_refused_and_unallocated_ones_are_allocated(dev):
    prog = dev.compile(SAXPY)
    x, y, out = bufs(dev)
    y.free()
    refused(prog, [x, y, out], [8], FreedBufferError, "'y' is .*it was freed", out)
    x2, y2, _ = bufs(dev)
    fresh = Buffer(dev, 8, dtypes.float32)
    assert not fresh.is_allocated
    h = fast(prog, [x2, y2, fresh], [8])  # allocated by the fast check: its handle, not None
    assert h is not None and fresh.is_allocated and h[2] is fresh._handle
    dead = Buffer(dev, 8, dtypes.float32)
    dead.free()
    refused(prog, [x2, y2, dead], [8], FreedBufferError, "'out' is .*it was freed", None)


def test_a_read_only_buffer_for_a_writable_param(dev):
    prog = dev.compile(SAXPY)
    x, y, out = bufs(dev)
    a = np.zeros(8, np.float32)
    a.flags.writeable = False
    ro = dk.from_numpy(a, dev)
    assert ro.readonly
    refused(prog, [x, y, ro], [8], ReadOnlyBufferError, "'out' is writable", ro)
    accepted(prog, [ro, y, out], [8])  # a read-only buffer for a read-only param


def test_aliasing_of_a_writable_buffer(dev):
    prog = dev.compile(SAXPY)
    x, y, out = bufs(dev)
    refused(prog, [x, out, out], [8], ValueError, "params 'y' and 'out' are the same buffer", out)
    refused(prog, [out, y, out], [8], ValueError, "params 'x' and 'out' are the same buffer", out)
    # two read-only params may share: the fast check leaves any shared Buffer to the full check, which runs it
    assert fast(prog, [x, x, out], [8]) is None
    prog.execute([x, x, out], [8], wait=True)
    np.testing.assert_array_equal(out.numpy(), np.arange(8) * 3)


COPY = ToyKernel("sig_copy", (ParamSpec("src", dtypes.float32, N, False), ParamSpec("dst", dtypes.float32, N, True)),
                 (VarSpec("n", 1, 100),), "dst[:n] = src[:n] + 1\n")


def test_aliasing_with_two_buffers(dev):
    """Two params: the smallest launch the fast check's aliasing test covers (same Buffer, overlapping views)."""
    prog = dev.compile(COPY)
    a = Buffer(dev, 8, dtypes.float32).copyin(np.zeros(8, np.float32))
    refused(prog, [a, a], [8], ValueError, "params 'src' and 'dst' are the same buffer", a)
    base = Buffer(dev, 16, dtypes.float32).copyin(np.zeros(16, np.float32))
    with pytest.raises(ValueError, match="params 'src' and 'dst' are overlapping memory"):
        fast(prog, [base.view(8, offset=0), base.view(8, offset=4)], [8])
    accepted(prog, [base.view(8, offset=0), base.view(8, offset=8)], [8])
    prog.execute([base.view(8, offset=0), base.view(8, offset=8)], [8], wait=True)
    np.testing.assert_array_equal(base.numpy()[8:], np.ones(8))


def test_views_with_offsets(dev):
    prog = dev.compile(SAXPY)
    x, y, _ = bufs(dev)
    base = Buffer(dev, 16, dtypes.float32).copyin(np.zeros(16, np.float32))
    lo, hi = base.view(8, offset=0), base.view(8, offset=8)
    accepted(prog, [x, y, hi], [8])  # a view: the exact byte-range check, no overlap
    accepted(prog, [lo, y, hi], [8])  # two views of one allocation, disjoint
    prog.execute([lo, y, hi], [8], wait=True)
    np.testing.assert_array_equal(base.numpy()[8:], np.ones(8))
    mid = base.view(8, offset=4)
    before = base.numpy().copy()
    with pytest.raises(ValueError, match="params 'x' and 'out' are overlapping memory"):
        fast(prog, [lo, y, mid], [8])  # the fast check runs the byte-range check itself
    prog._forget_launches()
    with pytest.raises(ValueError, match="overlapping memory"):
        prog.execute([lo, y, mid], [8])
    np.testing.assert_array_equal(base.numpy(), before)
    with pytest.raises(ValueError, match="params 'x' and 'out' are the same buffer"):
        fast(prog, [hi, y, base.view(8, offset=8)], [8])
    refused(prog, [x, y, base.view(4, offset=12)], [8], ValueError, r"'out' needs 8 elements .* has 4", None)


def test_repeated_launches_after_a_change(dev):
    prog = dev.compile(SAXPY)
    x, y, out = bufs(dev)
    prog.execute([x, y, out], [8], wait=True)
    prog.execute([x, y, out], [8], wait=True)  # the repeat memo
    for vals, exc in (([9], ValueError), ([0], ValueError), ([True], TypeError), ([8.0], TypeError)):
        out.copyin(np.full(8, -7, np.float32))
        with pytest.raises(exc):
            prog.execute([x, y, out], vals)
        np.testing.assert_array_equal(out.numpy(), np.full(8, -7, np.float32))
        prog.execute([x, y, out], [8], wait=True)
    x.free()
    out.copyin(np.full(8, -7, np.float32))
    with pytest.raises(FreedBufferError):
        prog.execute([x, y, out], [8])
    np.testing.assert_array_equal(out.numpy(), np.full(8, -7, np.float32))


REL = ToyKernel("sig_rel",
                (ParamSpec("a", dtypes.int32, N, True),),
                (VarSpec("n", 1, 100), VarSpec("k", 0, 99, lo_rel=0, hi_rel=N - 1),
                 VarSpec("m", 1, 100, lo_rel=var("k", 0, 99) + 1, hi_rel=N),
                 VarSpec("lo_only", 1, 100, lo_rel=N), VarSpec("hi_only", 0, 100, hi_rel=N)),
                "a[k:m] = 1\n")


def test_related_vars(dev):
    prog = dev.compile(REL)
    a = Buffer(dev, 100, dtypes.int32).copyin(np.zeros(100, np.int32))
    accepted(prog, [a], [10, 9, 10, 10, 10])
    accepted(prog, [a], [10, 0, 1, 100, 0])  # a var with one related bound keeps its other, declared one
    prog.execute([a], [10, 2, 5, 10, 0], wait=True)
    assert a.numpy()[:10].tolist() == [0, 0, 1, 1, 1, 0, 0, 0, 0, 0]
    refused(prog, [a], [10, 10, 10, 10, 0], ValueError, "k", a)  # k > n - 1
    refused(prog, [a], [10, 3, 3, 10, 0], ValueError, "m", a)  # m < k + 1
    refused(prog, [a], [10, 3, 11, 10, 0], ValueError, "m", a)  # m > n
    refused(prog, [a], [10, 3, 4, 9, 0], ValueError, "lo_only", a)  # lo_only < n
    refused(prog, [a], [10, 3, 4, 10, 11], ValueError, "hi_only", a)  # hi_only > n


SIZES = ToyKernel("sig_sizes",
                  (ParamSpec("a", dtypes.float32, N * 2, False), ParamSpec("b", dtypes.float32, 4, False),
                   ParamSpec("c", dtypes.float32, N * 2, True)),
                  (VarSpec("n", 1, 100),),
                  "c[:2 * n] = a[:2 * n] + b[0]\n")


def test_fixed_and_computed_sizes(dev):
    prog = dev.compile(SIZES)
    a = Buffer(dev, 8, dtypes.float32).copyin(np.ones(8, np.float32))
    b = Buffer(dev, 4, dtypes.float32).copyin(np.ones(4, np.float32))
    c = Buffer(dev, 8, dtypes.float32).copyin(np.zeros(8, np.float32))
    accepted(prog, [a, b, c], [4])
    refused(prog, [a, b, c], [5], ValueError, r"'a' needs 10 elements", c)
    b3 = Buffer(dev, 3, dtypes.float32).copyin(np.ones(3, np.float32))
    refused(prog, [a, b3, c], [4], ValueError, r"'b' needs 4 elements", c)
    c7 = Buffer(dev, 7, dtypes.float32).copyin(np.zeros(7, np.float32))
    refused(prog, [a, b, c7], [4], ValueError, r"'c' needs 8 elements", c7)


MANY = ToyKernel("sig_many",
                 tuple(ParamSpec(f"p{i}", dtypes.float32, N, i == 6) for i in range(7)),
                 (VarSpec("n", 1, 100),),
                 "p6[:n] = p0[:n] + p5[:n]\n")


def test_aliasing_with_more_than_six_buffers(dev):
    prog = dev.compile(MANY)
    bs = [Buffer(dev, 4, dtypes.float32).copyin(np.ones(4, np.float32)) for _ in range(7)]
    accepted(prog, bs, [4])
    refused(prog, [*bs[:6], bs[0]], [4], ValueError, "params 'p0' and 'p6' are the same buffer", bs[6])
    assert fast(prog, [bs[0], *bs[:5], bs[6]], [4]) is None  # read-only sharing: the full check decides (accepts)
    prog.execute([bs[0], *bs[:5], bs[6]], [4], wait=True)


def test_scalars_and_float_vars_take_the_fast_check_where_it_documents(dev):
    ks = ToyKernel("sig_scalars", (ParamSpec("o", dtypes.float32, 4, True),),
                   (VarSpec("alpha", -largest_float(dtypes.float32), largest_float(dtypes.float32), dtypes.float32,
                            scalar=dtypes.float32),
                    VarSpec("i", -128, 127, dtypes.int8, scalar=dtypes.int8)),
                   "o[:] = alpha + i\n")
    prog = dev.compile(ks)
    o = Buffer(dev, 4, dtypes.float32).copyin(np.zeros(4, np.float32))
    accepted(prog, [o], [1.5, 3])
    accepted(prog, [o], [largest_float(dtypes.float32), -128])
    assert fast(prog, [o], [3, 3]) is None  # an int for a float scalar: converted by the full check
    assert fast(prog, [o], [1.5, 1.0]) is None
    assert fast(prog, [o], [float("inf"), 1]) is None
    assert fast(prog, [o], [1.5, 128]) is None
    refused(prog, [o], [1.5, 128], ValueError, None, o)
    refused(prog, [o], [1e39, 1], (ValueError, OverflowError), None, o)
    prog.execute([o], [1.5, 3], wait=True)
    np.testing.assert_array_equal(o.numpy(), np.full(4, 4.5, np.float32))


def test_fast_bounds_per_kind_of_var():
    assert fast_bounds(VarSpec("n", 1, 1000)) == (1, 1000, int)
    assert fast_bounds(VarSpec("alpha", float("-inf"), float("inf"), dtypes.float32)) == (1, 0, int)
    assert fast_bounds(VarSpec("i", -128, 127, dtypes.int8, scalar=dtypes.int8)) == (-128, 127, int)
    assert fast_bounds(VarSpec("f", 0, 1, dtypes.uint8, scalar=dtypes.bool)) == (1, 0, int)
    b32, b64 = largest_float(dtypes.float32), largest_float(dtypes.float64)
    assert fast_bounds(VarSpec("s", -b32, b32, dtypes.float32, scalar=dtypes.float32)) == (-b32, b32, float)
    assert fast_bounds(VarSpec("d", -b64, b64, dtypes.float64, scalar=dtypes.float64)) == (-b64, b64, float)
    assert fast_bounds(VarSpec("h", -65504, 65504, dtypes.float32, scalar=dtypes.float16)) == (1, 0, int)


def test_the_launch_cache_key_tells_1_from_true_and_1_0(dev):
    """The launch cache's key (Signature.key/lookup): each Buffer's token then the int vals; True and 1.0 equal 1 and
    hash alike, so a key without the type test would find the entry of `[1]` for `[True]` or `[1.0]`. A signature
    with a float scalar keys nothing (0.0 == -0.0), nor does a wrong count of Buffers or vals, or a non-list."""
    prog = dev.compile(ToyKernel("sig_types", (ParamSpec("o", dtypes.float32, 4, True),), (VarSpec("n", 1, 4),),
                                 "o[:n] = 1\n"))
    o = Buffer(dev, 4, dtypes.float32)
    prog.execute([o], [1], wait=True)
    sig = prog._signature()
    assert sig.key([o], [1]) == (o._key, 1) and sig.key((o,), (1,)) == (o._key, 1)
    assert type(sig.lookup([o], [1])) is list  # the entry of the launch above
    for vals in ([True], [1.0], [np.int64(1)], [1, 1], []):
        assert sig.key([o], vals) is None and sig.lookup([o], vals) is None, vals
    assert sig.key([o, o], [1]) is None and sig.key([], [1]) is None and sig.key({0: o}, [1]) is None
    assert sig.key([object()], [1]) is None  # no token: the full check names it
    o.free()
    assert sig.key([o], [1]) == (0, 1) and sig.lookup([o], [1]) == (0, 1)  # a freed Buffer's token: never an entry
    scalar = dev.compile(ToyKernel("sig_scalar_key", (ParamSpec("o", dtypes.float32, 4, True),),
                                   (VarSpec("s", -1e30, 1e30, dtypes.float32, scalar=dtypes.float32),), "o[:] = s\n"))
    assert scalar._signature().key is None and scalar._signature().lookup is None
    assert Signature(dev.compile(ToyKernel("sig_novars", (ParamSpec("o", dtypes.float32, 4, True),), (),
                                           "o[:] = 1\n")).spec).key([o], ()) == (0,)


def test_the_seed_path_program_checks_its_home(dev):
    prog = dev.runtime(dev.compiler.compile(dev.renderer.render(SAXPY)))
    assert prog.device is None
    x, y, out = bufs(dev)
    assert fast(prog, [x, y, out], [8]) is None  # no home yet: the full check first
    prog.execute([x, y, out], [8], wait=True)
    accepted(prog, [x, y, out], [8])
    refused(prog, [x, y, out], [9], ValueError, "needs 9 elements", out)


@pytest.mark.parametrize("raw", ["both", "no _data", "no encodekey"])
def test_debugging_follows_the_environment(monkeypatch, raw):
    """On CPython's os.environ the raw mapping answers; elsewhere (no `_data` or no `encodekey`) os.environ does."""
    from devicekit import signature
    if raw == "no _data":
        monkeypatch.setattr(signature, "_ENV_DATA", None)
    elif raw == "no encodekey":
        monkeypatch.setattr(signature, "_DEBUG_KEY", None)
    monkeypatch.delenv("DEVICEKIT_DEBUG", raising=False)
    assert debugging() is False
    monkeypatch.setenv("DEVICEKIT_DEBUG", "1")
    assert debugging() is True


def test_the_fast_path_keeps_the_bounds_check_record():
    """A Program with run-time bounds checks (ir/bounds.py): the fast check's launch appends the hidden record too,
    so an out-of-bounds index found by the kernel raises on the fast path as on the full one."""
    from devicekit import ir
    dev = dk.device("CPU")
    k = ir.KernelBuilder("sig_gather")
    n, m = k.var("n", 1, 1 << 10), k.var("m", 1, 1 << 10)
    x, idx = k.param("x", dtypes.float32, m), k.param("idx", dtypes.int64, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[idx[i]] * 2.0
    prog = dev.compile(k.build())
    # a Program memoized by an earlier test (or by a forked mutation run's parent) keeps the signature it built then
    prog.__dict__.pop("_sig", None)
    prog._forget_launches()
    assert prog.spec.checks is not None and prog._signature().checked is True
    xb = Buffer(dev, 4, dtypes.float32).copyin(np.arange(4, dtype=np.float32))
    ib = Buffer(dev, 4, dtypes.int64).copyin(np.array([3, 2, 1, 0], np.int64))
    ob = Buffer(dev, 4, dtypes.float32).copyin(np.zeros(4, np.float32))
    assert fast(prog, [xb, ib, ob], [4, 4]) is not None
    prog.execute([xb, ib, ob], [4, 4], wait=True)
    np.testing.assert_array_equal(ob.numpy(), [6, 4, 2, 0])
    ib.copyin(np.array([0, 1, 9, 0], np.int64))
    with pytest.raises(IndexError, match=r"access to x\[9\] is out of bounds \(size 4\)"):
        prog.execute([xb, ib, ob], [4, 4], wait=True)


def test_launch_dims_follow_the_vars(dev):
    from devicekit.render.program_spec import ProgramSpec
    spec = ProgramSpec(name="d", src="", device="TOY", lang="toy", params=(), vars=(VarSpec("n", 1, 100),),
                       global_size=(N * 2, 1), local_size=(N,))
    assert Signature(spec).dims([5]) == ((10, 1), (5,))
    assert Signature(ProgramSpec(name="e", src="", device="TOY", lang="toy", params=())).dims([]) == (None, None)
