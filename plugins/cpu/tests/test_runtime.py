"""Runtime: threads, argument checks, the compile cache, launch cost, loading without leftovers."""

from __future__ import annotations

import os
import tempfile
import time

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes

PAIRS = ("llvm", "c")


def _heavy(name="heavy"):
    """Per-row sums of squares: enough work per outer iteration to use every thread."""
    k = ir.KernelBuilder(name)
    m, n = k.var("m", lo=1, hi=1 << 20), k.var("n", lo=1, hi=1 << 20)
    a = k.param("a", dtypes.float32, size=m * n)
    o = k.param("o", dtypes.float32, size=m, writable=True)
    i, r = k.range(m, kind="global"), k.range(n, kind="reduce")
    o[i] = (a[i * n + r] * a[i * n + r]).sum(r) + i.cast(dtypes.float32)
    return k.build()


@pytest.mark.parametrize("pair", PAIRS)
def test_threads_match_single_thread(pair, cpu):
    from devicekit_cpu.runtime import CPUProgram
    m, n = 513, 3000  # ~6M estimated operations: past PARALLEL_MIN_WORK (2^21)
    a = np.random.default_rng(1).standard_normal(m * n).astype(np.float32)
    r, c = cpu.pair(pair)
    compiled = c.compile(r.render(_heavy()))
    outs = {}
    for threads in (1, 2, 3, 8):
        prog = CPUProgram(compiled, cpu, threads=threads)
        assert prog.chunks(m, (m, n)) == min(threads, m)
        ab, ob = dk.Buffer(cpu, m * n, dtypes.float32).copyin(a), dk.Buffer(cpu, m, dtypes.float32)
        prog.execute([ab, ob], [m, n])
        outs[threads] = ob.numpy()
    for t in (2, 3, 8):
        np.testing.assert_array_equal(outs[t], outs[1])
    np.testing.assert_allclose(outs[1], (a.reshape(m, n) ** 2).sum(1) + np.arange(m), rtol=1e-4)


def test_small_launch_stays_on_one_thread(cpu):
    from devicekit_cpu.runtime import CPUProgram
    r, c = cpu.pair("llvm")
    prog = CPUProgram(c.compile(r.render(_heavy())), cpu, threads=8)
    assert prog.chunks(4, (4, 10)) == 1
    assert prog.chunks(1000, (1000, 1000)) == 8


def test_elementwise_split_follows_the_cost_model(cpu):
    """a*b+c: a 4-element launch runs on the calling thread (issue 17: within ~2 us), a 1M one on every thread; the
    crossover is PARALLEL_MIN_WORK estimated ops (extent x split_cost)."""
    from devicekit import kernels
    from devicekit_cpu.runtime import PARALLEL_MIN_WORK, CPUProgram
    r, c = cpu.pair("llvm")
    prog = CPUProgram(c.compile(r.render(kernels.elementwise("a * b + c"))), cpu, threads=4)
    cost = prog.spec.get_meta("split_cost")
    assert isinstance(cost, int) and cost > 0
    assert prog.chunks(4, (4,)) == 1
    assert prog.chunks(PARALLEL_MIN_WORK // cost - 1, (PARALLEL_MIN_WORK // cost - 1,)) == 1
    assert prog.chunks(-(-PARALLEL_MIN_WORK // cost), (-(-PARALLEL_MIN_WORK // cost),)) == 4
    assert prog.chunks(1 << 20, (1 << 20,)) == 4
    bufs = [dk.Buffer(cpu, 4, dtypes.float32).copyin(np.full(4, x, np.float32)) for x in (2.0, 3.0, 1.0, 0.0)]
    from devicekit_cpu.replay import replayer
    replayer()  # built (test_direct.py: a process's first repeats do not wait for it)
    for _ in range(3):  # the repeats go through the replay record made at the first repeat
        prog.execute(bufs, [4])
    from devicekit.runtime import _LAUNCH
    assert prog._entry(bufs, [4])[0] not in (None, _LAUNCH), "a repeated 4-element launch should replay its native call"
    np.testing.assert_array_equal(bufs[3].numpy(), np.full(4, 7.0, np.float32))
    bufs[0].copyin(np.full(4, 5.0, np.float32))
    prog.execute(bufs, [4])
    np.testing.assert_array_equal(bufs[3].numpy(), np.full(4, 16.0, np.float32))


def test_a_packed_gemm_counts_the_loops_around_its_split(cpu):
    """A packed gemm (ir/pack.py) splits its row tiles inside its K block and column-tile loops, and its k loop's
    bounds are over the K block's: the cost model counted one (K block, column tile) and 16 trips of the k loop, so
    the MLP's 256x512x784 layer (~205 MFLOP) stayed on one thread (1.28 ms where two take 0.81). The loops around
    the split multiply it, and a bound over enclosing loops is taken at their start."""
    from devicekit import ir
    from devicekit.ir import dtypes as dt
    from devicekit_cpu.runtime import PARALLEL_MIN_WORK, CPUProgram
    k = ir.KernelBuilder("cost_packed")
    m, n, kk = k.var("m", 1, 4096), k.var("n", 1, 4096), k.var("k", 1, 4096)
    a, b = k.param("a", dt.float32, shape=(m, kk)), k.param("b", dt.float32, shape=(kk, n))
    out = k.param("out", dt.float32, shape=(m, n), writable=True)
    i, j, r = k.range(m, "global"), k.range(n, "global"), k.range(kk, "reduce")
    out[i, j] = (a[i, r] * b[r, j]).sum(r)
    rd, c = cpu.pair("llvm")
    prog = CPUProgram(c.compile(rd.render(k.build())), cpu, threads=2)
    assert prog.spec.get_meta("opts")[0].startswith("packed"), prog.spec.get_meta("opts")
    rows = -(-256 // 8)  # the split's extent: row tiles of 8 (AVX-512) or 4 rows; either way several
    work = rows * prog._cost((256, 512, 784))
    assert work >= 256 * 512 * 784 // 8, work  # the multiply-adds over 16 lanes, at least
    assert prog.chunks(rows, (256, 512, 784)) == 2
    assert PARALLEL_MIN_WORK > 0


def test_env_threads(monkeypatch):
    from devicekit_cpu.hostinfo import num_threads
    monkeypatch.setenv("DEVICEKIT_CPU_THREADS", "3")
    assert num_threads() == 3
    monkeypatch.setenv("DEVICEKIT_CPU_THREADS", "zero")
    with pytest.raises(ValueError, match="DEVICEKIT_CPU_THREADS"):
        num_threads()


@pytest.mark.parametrize("pair", PAIRS)
def test_wrong_arguments_rejected(pair, cpu):
    prog = cpu.compile(_heavy(), pair=pair)
    m, n = 8, 4
    a = dk.Buffer(cpu, m * n, dtypes.float32)
    o = dk.Buffer(cpu, m, dtypes.float32)
    prog.execute([a, o], [m, n])
    with pytest.raises(ValueError, match="needs 32 elements"):
        prog.execute([dk.Buffer(cpu, m * n - 1, dtypes.float32), o], [m, n])
    with pytest.raises(TypeError, match="float32"):
        prog.execute([dk.Buffer(cpu, m * n, dtypes.int32), o], [m, n])
    with pytest.raises(TypeError, match="expected 2 buffers"):
        prog.execute([a], [m, n])
    with pytest.raises(TypeError, match="int vars"):
        prog.execute([a, o], [m])
    with pytest.raises(ValueError, match="outside its declared range"):
        prog.execute([a, o], [0, n])


@pytest.mark.parametrize("pair", PAIRS)
def test_execute_with_non_list_args_gives_the_core_error(pair, cpu):
    """The fast `execute` path once called len(vals) first: `execute(bufs, 5)` said "object of type 'int' has no
    len()". Buffers or vals that are not a list or tuple now get exactly the TypeError of the core's check."""
    from devicekit.runtime import Program
    prog = cpu.compile(_heavy(), pair=pair)
    m, n = 8, 4
    a, o = dk.Buffer(cpu, m * n, dtypes.float32), dk.Buffer(cpu, m, dtypes.float32)
    for bufs, vals in (([a, o], 5), ([a, o], {m: 0, n: 0}), ([a, o], iter([m, n])), ((a, o), "84"),
                       (5, [m, n]), ({a: 0, o: 0}, [m, n])):
        with pytest.raises(TypeError) as core:
            Program.check(prog, bufs, vals)
        with pytest.raises(TypeError) as fast:
            prog.execute(bufs, vals)
        assert str(fast.value) == str(core.value)
        assert "has no len" not in str(fast.value) and ("vals must be a list" in str(fast.value)
                                                        or "buffers must be a list" in str(fast.value))
    prog.execute((a, o), (m, n))  # tuples stay on the fast path


@pytest.mark.parametrize("pair", PAIRS)
def test_second_build_compiles_nothing(pair, cpu, tmp_path):
    """Same kernel again: memory hit; a new process-like cache on the same dir: disk hit. Both compile nothing."""
    from devicekit.compile.cache import CompileCache
    r, c = cpu.pair(pair)
    calls = []

    def counting_compiler():
        compiler = type(c)()
        compiler.cache = CompileCache(str(tmp_path), disk=True)
        real = compiler.compile_src
        compiler.compile_src = lambda src: calls.append(src) or real(src)
        return compiler

    compiler = counting_compiler()
    kernel = _heavy(f"cache_probe_{pair}")
    first = compiler.compile(r.render(kernel))
    assert len(calls) == 1
    second = compiler.compile(r.render(kernel))
    assert len(calls) == 1 and second.lib == first.lib
    third = counting_compiler().compile(r.render(kernel))
    assert len(calls) == 1 and third.lib == first.lib
    prog = cpu.runtime(third)  # bytes from the disk cache load and run
    a, o = dk.Buffer(cpu, 6, dtypes.float32).copyin(np.ones(6, np.float32)), dk.Buffer(cpu, 2, dtypes.float32)
    prog.execute([a, o], [2, 3])
    np.testing.assert_array_equal(o.numpy(), [3.0, 4.0])


def test_identity_names_the_toolchain(cpu):
    ids = {name: cpu.pair(name)[1].identity() for name in cpu.pair_names}
    assert "LLVM-" in ids["llvm"] and "cpu=" in ids["llvm"] and "O3" in ids["llvm"] and "features=" in ids["llvm"]
    assert "-O2" in ids["c"] and "-fno-math-errno" in ids["c"] and "host=" in ids["c"]
    assert "-fwrapv" in ids["c"]  # signed overflow wraps as in the IR (and the flag changes the cache key)


def test_shared_object_leaves_no_files(cpu, tmp_path, monkeypatch):
    """Compiling with cc and loading the .so leave nothing in the temp dir (a private one: other processes)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    prog = cpu.compile(_heavy(f"nofiles_{time.time_ns()}"), pair="c")
    assert prog is not None
    root = f"devicekit-{os.getuid()}"  # compile.subproc's one root for compiler temp dirs: kept, empty
    assert set(os.listdir(tmp_path)) <= {root}
    assert not os.path.exists(tmp_path / root) or os.listdir(tmp_path / root) == []


def _maps() -> int:
    with open("/proc/self/maps", "rb") as f:
        return sum(1 for _ in f)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="counts mappings through Linux's /proc")
def test_shared_objects_are_unmapped_when_dropped(cpu):
    """A dlopened kernel is dlclosed when nothing holds it: a process that builds kernels without end (a fuzz
    campaign, a JIT compiling per shape) must not run into vm.max_map_count (~13,000 kernels used to)."""
    import gc

    from devicekit_cpu.loader import load_shared
    compiled = cpu.pair("c")[1].compile(cpu.pair("c")[0].render(_heavy(f"unmap_{time.time_ns()}")))
    entry = compiled.spec.entry
    keep, _ = load_shared(compiled.lib, entry)  # a library of the same bytes stays loaded throughout
    gc.collect()
    before = _maps()
    for _ in range(300):  # each load is a fresh dlopen (unique path), ~5 mappings
        load_shared(compiled.lib, entry)
    gc.collect()
    assert _maps() - before < 100, f"{_maps() - before} mappings left behind by 300 dropped loads"
    held = [load_shared(compiled.lib, entry) for _ in range(20)]
    assert _maps() - before >= 20  # the count does see loads that are held
    del held, keep


def test_dropped_program_releases_its_library(cpu, monkeypatch):
    """The per-process memo of loaded objects is bounded, and an evicted library is closed once its last Program
    goes (a Program still held keeps working)."""
    import gc
    import weakref

    from devicekit_cpu import memo
    monkeypatch.setattr(memo, "_loaded", memo.LRU(1))
    r, c = cpu.pair("c")
    from devicekit_cpu.runtime import CPUProgram
    progs = [CPUProgram(c.compile(r.render(_heavy(f"evict{j}_{time.time_ns()}"))), cpu) for j in range(2)]
    first, second = weakref.ref(progs[0]._keep), weakref.ref(progs[1]._keep)
    a = np.arange(6, dtype=np.float32)
    ab, ob = dk.Buffer(cpu, 6, dtypes.float32).copyin(a), dk.Buffer(cpu, 2, dtypes.float32)
    progs[0].execute([ab, ob], [2, 3])  # evicted from the memo, still held by its Program: still runs
    np.testing.assert_allclose(ob.numpy(), (a.reshape(2, 3) ** 2).sum(1) + np.arange(2))
    del progs[0]
    gc.collect()
    assert first() is None and second() is not None  # the memo holds the last one loaded, and nothing the first


def test_many_native_launches_each_run(cpu):
    """2,200 launches of a tiny kernel through `_launch` and `execute` each run once (their cost is measured in
    bench/launch.py, not here; the only bound is a hang guard)."""
    k = ir.KernelBuilder("tiny")
    o = k.param("o", dtypes.float32, size=1, writable=True)
    o[0] = o[0] + 1.0
    prog = cpu.compile(k.build())
    buf = dk.Buffer(cpu, 1, dtypes.float32, dk.BufferOptions(zero=True))
    t0 = time.perf_counter()
    for _ in range(2200):
        prog._launch([buf.handle], [], {}, None, None, False)
    prog.execute([buf])
    assert buf.numpy()[0] == 2201.0
    assert time.perf_counter() - t0 < 60, "hang guard: 2,200 tiny launches took over a minute"


def test_concurrent_launches_from_threads(cpu):
    """Several Python threads launching split kernels at once share the pool and all get right answers."""
    from concurrent.futures import ThreadPoolExecutor
    prog = cpu.compile(_heavy("concurrent"))
    m, n = 64, 2048
    rng = np.random.default_rng(5)
    jobs = []
    for t in range(6):
        a = rng.standard_normal(m * n).astype(np.float32)
        jobs.append((a, dk.Buffer(cpu, m * n, dtypes.float32).copyin(a), dk.Buffer(cpu, m, dtypes.float32)))

    def run(job):
        a, ab, ob = job
        for _ in range(5):
            prog.execute([ab, ob], [m, n])
        return ob.numpy(), (a.reshape(m, n) ** 2).sum(1) + np.arange(m)
    with ThreadPoolExecutor(6) as ex:
        for got, want in ex.map(run, jobs):
            np.testing.assert_allclose(got, want, rtol=1e-4)


def test_concurrent_compiles(cpu):
    from concurrent.futures import ThreadPoolExecutor

    from devicekit import kernels
    ks = [kernels.elementwise(f"a * {i}.0 + b", name=f"cc_{i}_{time.time_ns()}") for i in range(8)]
    with ThreadPoolExecutor(4) as ex:
        progs = list(ex.map(lambda k: cpu.compile(k), ks))
    x = dk.Buffer(cpu, 4, dtypes.float32).copyin(np.ones(4, np.float32))
    for i, p in enumerate(progs):
        o = dk.Buffer(cpu, 4, dtypes.float32)
        p.execute([x, x, o], [4])
        assert (o.numpy() == i + 1).all()


def test_launches_with_var_sizes_stay_right_on_the_fast_path(cpu):
    """A kernel whose sizes are expressions of its vars, launched 2,000 times alternating two sets of Buffers: every
    launch runs (the figures are bench/launch.py's; here only a hang guard)."""
    from devicekit import kernels
    prog = cpu.compile(kernels.elementwise("a * b + c"))
    n = 16
    sets = [[dk.Buffer(cpu, n, dtypes.float32).copyin(np.ones(n, np.float32)) for _ in range(4)] for _ in range(2)]
    t0 = time.perf_counter()
    for _ in range(1000):
        for bufs in sets:
            prog.execute(bufs, [n])
    assert time.perf_counter() - t0 < 60, "hang guard: 2,000 launches took over a minute"
    for bufs in sets:
        np.testing.assert_array_equal(bufs[3].numpy(), np.full(n, 2.0, np.float32))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_threads_work_after_fork(cpu):
    """The pool's workers do not survive fork: the child starts its own instead of waiting on dead queues."""
    prog = cpu.compile(_heavy("forked"))
    m, n = 64, 4096
    a = dk.Buffer(cpu, m * n, dtypes.float32).copyin(np.ones(m * n, np.float32))
    o = dk.Buffer(cpu, m, dtypes.float32)
    prog.execute([a, o], [m, n])  # starts the parent's workers
    pid = os.fork()
    if pid == 0:  # child: run a threaded launch, report through the exit code
        try:
            prog.execute([a, o], [m, n])
            os._exit(0 if o.numpy()[1] == n + 1 else 2)
        except BaseException:  # noqa: BLE001
            os._exit(3)
    deadline = time.time() + 60
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung in a threaded launch")


def test_thread_pool_runs_every_chunk_once():
    """Chunks are claimed by whoever starts them first (caller or worker): each runs exactly once, errors come back."""
    import random
    import threading

    from devicekit_cpu.threadpool import ThreadPool
    tp = ThreadPool()
    lock = threading.Lock()
    for trial in range(30):
        counts: dict[int, int] = {}

        def work(i, delay, counts=counts):
            time.sleep(delay)
            with lock:
                counts[i] = counts.get(i, 0) + 1
        n = random.Random(trial).randint(1, 6)
        tp.run(work, [(i, random.Random(trial * 7 + i).random() * 0.002) for i in range(n)])
        assert counts == dict.fromkeys(range(n), 1)

    def boom(i):
        if i == 2:
            raise RuntimeError("chunk 2 failed")
    with pytest.raises(RuntimeError, match="chunk 2"):
        tp.run(boom, [(i,) for i in range(4)])


def test_a_repeated_launch_skips_the_checks_and_a_changed_one_does_not():
    """The fast path remembers the last launch it checked (the same Buffers, equal values of the same types): a
    repeat calls the kernel at once; anything else is checked again, so every refusal still happens."""
    import devicekit as dk
    from devicekit import kernels
    dev = dk.device("CPU")
    prog = dev.compile(kernels.elementwise("a * b + 1.0", name="memo_fma"))
    prog.upgrade()  # the fast path is the final build's: a quick build's launches are counted (test_tiers.py)
    a, b = (dk.Buffer(dev, 16, "float32").copyin(np.full(16, 2, np.float32)) for _ in range(2))
    out = dk.Buffer(dev, 16, "float32")
    prog.execute([a, b, out], [16])
    assert prog._entry([a, b, out], [16]) is not None  # remembered by the core's launch cache
    out.copyin(np.zeros(16, np.float32))
    prog.execute([a, b, out], [16], wait=True)
    np.testing.assert_array_equal(out.numpy(), np.full(16, 5, np.float32))
    with pytest.raises(ValueError, match="needs 17 elements"):
        prog.execute([a, b, out], [17])
    prog.execute([a, b, out], [16])
    with pytest.raises(TypeError):
        prog.execute([a, b, out], [16.0])  # 16.0 == 16, but a float is not an int var's value
    with pytest.raises(TypeError):
        prog.execute([a, b, out], [True])
    with pytest.raises(ValueError, match="needs 16 elements"):
        prog.execute([a, b, dk.Buffer(dev, 8, "float32")], [16])
    with pytest.raises(ValueError, match="share memory|alias|same"):
        prog.execute([a, b, a], [16])  # a written while read
