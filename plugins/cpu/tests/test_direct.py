"""The CPU device's one-thread launch (direct.py): the native call with its arguments spelled out per program.
Each case checks the values against numpy and which path ran: a wrong argument order, a missed split bound or a
launch that should have been threaded shows here."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir, kernels
from devicekit.ir import dtypes
from devicekit_cpu.runtime import INTERRUPTIBLE_MIN_WORK


@pytest.fixture(scope="module")
def cpu():
    return dk.device("CPU")


def _bufs(dev, arrays, out_n):
    return [dk.Buffer(dev, a.size, dtypes.float32).copyin(a) for a in arrays] + [dk.Buffer(dev, out_n, dtypes.float32)]


def test_elementwise_runs_direct_below_the_threading_threshold_only(cpu):
    prog = cpu.compile(kernels.elementwise("a * b - c * 0.5", name="direct_fma"))
    prog.upgrade()
    rng = np.random.default_rng(1)
    assert prog.compiled.spec.get_meta("split_cost") == 7  # a*b - c*0.5: 3 loads, 3 ALU ops, 1 store
    long_below = -(-INTERRUPTIBLE_MIN_WORK // 7)
    assert (prog.may_run_long([long_below - 1]), prog.may_run_long([long_below])) == (False, True)
    for n in (1, 16, 1000, prog._serial_below - 1, prog._serial_below, 3 * prog._serial_below + 7):
        a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
        bufs = _bufs(cpu, (a, b, c), n)
        handles = [x.handle for x in bufs]
        direct = prog._direct(prog, handles, [n])  # True: it ran here, on one thread
        assert direct == (n < prog._serial_below)
        # a launch is handed to the launcher thread (Ctrl-C) from INTERRUPTIBLE_MIN_WORK operations, not from the
        # threading threshold: the handoff costs ~20 us
        assert prog.may_run_long([n]) == (n * 7 >= INTERRUPTIBLE_MIN_WORK)
        if direct:
            np.testing.assert_array_equal(bufs[3].numpy(), a * b - c * np.float32(0.5))
        bufs[3].copyin(np.zeros(n, np.float32))
        prog.execute(bufs, [n], wait=True)
        np.testing.assert_array_equal(bufs[3].numpy(), a * b - c * np.float32(0.5))


def test_an_extent_that_is_an_expression_of_two_vars(cpu):
    k = ir.KernelBuilder("direct_rows")
    m, n = k.var("m", lo=1, hi=1 << 20), k.var("n", lo=1, hi=1 << 20)
    a = k.param("a", dtypes.float32, size=m * n)
    o = k.param("o", dtypes.float32, size=m * n, writable=True)
    i = k.range(m * n, kind="global")
    o[i] = a[i] * 3.0 + 1.0
    prog = cpu.compile(k.build())
    prog.upgrade()
    for mm, nn in ((3, 5), (7, 1), (1, 9)):
        x = np.arange(mm * nn, dtype=np.float32)
        bufs = _bufs(cpu, (x,), mm * nn)
        prog.execute(bufs, [mm, nn], wait=True)
        np.testing.assert_array_equal(bufs[1].numpy(), x * 3 + 1)


def test_a_kernel_without_split_and_a_bounds_checked_one(cpu):
    k = ir.KernelBuilder("direct_gather")
    n = k.var("n", lo=1, hi=1 << 20)
    idx = k.param("idx", dtypes.int32, size=n)
    x = k.param("x", dtypes.float32, size=n)
    o = k.param("o", dtypes.float32, size=n, writable=True)
    i = k.range(n, kind="global")
    o[i] = x[idx[i]]  # not provably in bounds: a checked kernel (a hidden record after the user's buffers)
    prog = cpu.compile(k.build())
    prog.upgrade()
    assert prog.spec.checks is not None and prog._direct is not None
    vals = np.arange(8, dtype=np.float32) * 2
    ib = dk.Buffer(cpu, 8, dtypes.int32).copyin(np.array([7, 6, 5, 4, 3, 2, 1, 0], np.int32))
    xb, ob = dk.Buffer(cpu, 8, dtypes.float32).copyin(vals), dk.Buffer(cpu, 8, dtypes.float32)
    prog.execute([ib, xb, ob], [8], wait=True)
    np.testing.assert_array_equal(ob.numpy(), vals[::-1])
    ib.copyin(np.array([0, 1, 2, 3, 4, 5, 6, 8], np.int32))
    with pytest.raises(IndexError):
        prog.execute([ib, xb, ob], [8], wait=True)


def test_a_small_mlp_step_runs_every_launch_on_the_calling_thread(cpu):
    """A 64-64-10 MLP at batch 100 (examples/mlp_train.py's kernels): each matmul is ~0.1-0.8 MFLOP, ~10 us of one
    thread; waking the pool (~10-30 us) or the Ctrl-C launcher thread (~20 us) cost more than the kernel. Under
    PARALLEL_MIN_WORK = 2^16 five of the step's launches went to the pool."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir, "examples", "mlp_train.py")
    spec = importlib.util.spec_from_file_location("dk_mlp_train_direct", path)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    b, d, h, c = 100, 64, 64, 10
    launches = [(ex.matmul("direct_lin_relu", bias=True, relu=True), [(b, h, d)]),
                (ex.matmul("direct_lin", bias=True), [(b, c, h)]),
                (ex.matmul("direct_grad_w", ta=True), [(h, c, b), (d, h, b)]),
                (ex.matmul("direct_back", tb=True, mask=True), [(b, h, c)]),
                (ex.column_sum("direct_colsum"), [(b, c), (b, h)])]
    for kernel, shapes in launches:
        prog = cpu.compile(kernel)
        for vals in shapes:
            extent = prog._split(list(vals)) if prog._split is not None else 1
            assert prog.chunks(extent, list(vals)) == 1, (prog.name, vals)
            assert not prog.may_run_long(list(vals)), (prog.name, vals)


def test_the_first_repeat_of_a_process_does_not_wait_for_the_replay_build(cpu, monkeypatch):
    """dk_replay (the native record a repeated launch becomes) is compiled once per process, ~20 ms: the repeat that
    needs it first launches through `_launch` while it builds on another thread, and binds it once it is built."""
    import threading

    from devicekit.runtime import _LAUNCH
    from devicekit_cpu import replay
    gate, caller, seen = threading.Event(), threading.get_ident(), []
    real = replay._build

    def gated():
        seen.append("building on the launching thread" if threading.get_ident() == caller else "building")
        assert gate.wait(20), "the replay build waited 20 s at its gate"
        return real()
    prog = cpu.compile(kernels.elementwise("a * b + c * 2.0", name="direct_first_repeat"))
    prog.upgrade()  # (a final build compiles the replay too, on the upgrade thread)
    monkeypatch.setattr(replay, "_FN", [])  # a process that has not built it yet
    monkeypatch.setattr(replay, "_WARMING", 0)
    monkeypatch.setattr(replay, "_build", gated)
    n = 64
    bufs = _bufs(cpu, [np.full(n, x, np.float32) for x in (1.0, 2.0, 3.0)], n)
    for _ in range(5):  # the repeats run while the build is held at its gate
        prog.execute(bufs, [n], wait=True)
    assert seen == ["building"] and prog._entry(bufs, [n])[0] is None and not replay.ready()
    np.testing.assert_array_equal(bufs[3].numpy(), np.full(n, 8.0, np.float32))
    gate.set()
    replay.replayer()  # waits for the build
    bufs[3].copyin(np.zeros(n, np.float32))
    prog.execute(bufs, [n], wait=True)
    assert prog._entry(bufs, [n])[0] not in (None, _LAUNCH)  # bound to the native record now
    np.testing.assert_array_equal(bufs[3].numpy(), np.full(n, 8.0, np.float32))


def test_a_bound_replay_holds_its_records():
    """The core's repeat memo binds a temporary int64 array; the bound call must keep it alive (freed, its memory is
    reused and dk_replay reads a garbage function pointer: a crash seen once in a test run)."""
    import gc
    import weakref

    from devicekit_cpu.replay import replayer, run_records
    replayer()
    rec = np.array([0, 0], dtype=np.int64)
    alive = weakref.ref(rec)
    call = run_records.bind(rec, 0)
    del rec
    gc.collect()
    assert alive() is not None and call is not None
    call()  # n=0: nothing called, the records read in place


def test_the_thread_count_memo_follows_threads_and_stays_bounded(cpu):
    """`chunks` remembers its answer per (threads, extent, vals) (a packed gemm's cost expression costs ~9 us to
    evaluate): a program whose `threads` changes answers for the new count, and the memo is emptied when full."""
    from devicekit_cpu.runtime import CHUNK_MEMO
    prog = cpu.compile(kernels.elementwise("a * b - c * 0.5", name="direct_memo"))
    n = 3 * prog._serial_below + 7
    prog.threads = 4
    assert prog.chunks(n, [n]) == 4
    prog.threads = 2
    assert prog.chunks(n, [n]) == 2
    assert prog.chunks(5, [5]) == 1
    for m in range(n, n + 3 * CHUNK_MEMO):
        prog.chunks(m, [m])
    assert len(prog._chunk_memo) <= CHUNK_MEMO


def test_programs_of_one_signature_share_the_launch_code_and_keep_their_names(cpu):
    """The launch function's text is compiled once per text (direct._compiled: ~70 us of each program's load);
    each program's function still names its own kernel in a traceback, and runs its own native code."""
    from devicekit_cpu import direct
    a, b, c = (np.arange(8, dtype=np.float32) + i for i in range(3))
    progs = [cpu.compile(kernels.elementwise(f"a * b + c * {k}.0", name=f"direct_share_{k}")) for k in (2, 3)]
    before = direct._compiled.cache_info().hits
    fns = [direct.compile_direct(p.spec, 4, 1 << 20, None) for p in progs]
    assert direct._compiled.cache_info().hits >= before + 1  # the second program's text was compiled already
    for k, p, (fn, _) in zip((2, 3), progs, fns):
        assert f"direct_share_{k}" in fn.__code__.co_filename
        bufs = _bufs(cpu, [a, b, c], 8)
        assert fn(p, [x.handle for x in bufs], [8])
        assert np.allclose(bufs[3].numpy(), a * b + c * k)
