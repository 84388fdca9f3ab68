"""fork while other threads compile (multiprocessing's default start method on Linux is fork): every child gets a
working CPU device on both pairs. On main, 12 of 20 such children hung forever on the LLVM JIT lock. Everything runs
in a subprocess; each child and the pool are bounded by timeouts, and a child that does not finish is killed and
counted as hung."""

from __future__ import annotations

import json
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")

SETUP = textwrap.dedent("""
    import json, os, sys, threading, time, traceback
    import numpy as np
    import devicekit as dk
    from devicekit import ir
    from devicekit.compile.cache import CompileCache
    from devicekit.ir import dtypes

    def kernel(tag, j):
        k = ir.KernelBuilder(f"fk_{tag}_{j}")
        n = k.var("n", 1, 1 << 24)
        x = k.param("x", dtypes.float32, n)
        o = k.param("out", dtypes.float32, n, writable=True)
        i = k.range(n, "global")
        o[i] = x[i] * float(j % 97 + 2) + float(j)
        return k.build()

    def check(tag, j, pname, n):
        \"\"\"Compile a kernel never seen before on pair `pname` and run it on n elements (n = 1 << 18 is split over
        the thread pool); True when the result is right.\"\"\"
        cpu = dk.device("CPU")
        prog = cpu.compile(kernel(tag, j), pair=pname)
        xs = np.arange(n, dtype=np.float32) % 1000
        x = dk.Buffer(cpu, n, "float32").copyin(xs)
        o = dk.Buffer(cpu, n, "float32")
        prog.execute([x, o], [n], wait=True)
        return bool(np.array_equal(o.numpy(), xs * np.float32(j % 97 + 2) + np.float32(j)))

    cache = CompileCache(ROOT)  # a disk cache shared by the threads: its lock and files are busy at fork time
    stop = threading.Event()
    counts = {"llvm": 0, "c": 0}

    def compile_loop(pname, tag):
        r, c = dk.device("CPU").pair(pname)
        c = type(c)()
        c.cache = cache
        j = 0
        while not stop.is_set():
            c.compile(r.render(kernel(tag, j)))
            counts[pname] += 1
            j += 1

    threads = [threading.Thread(target=compile_loop, args=(p, f"{p}{t}"), daemon=True)
               for p, t in (("llvm", 0), ("llvm", 1), ("c", 0))]
    for t in threads:
        t.start()
    while counts["llvm"] < 2 or counts["c"] < 1:  # every compiler is busy before the first fork
        time.sleep(0.01)
""")

FORKS = textwrap.dedent("""
    pids = []
    for f in range(20):
        time.sleep(0.03)
        pid = os.fork()
        if pid == 0:
            try:
                ok = check(f"child{f}", f, "llvm", 1 << 18) and check(f"child{f}", f, "c", 1 << 18)
                os._exit(0 if ok else 1)
            except BaseException:
                traceback.print_exc()
                os._exit(2)
        pids.append(pid)
    exits, deadline = [], time.monotonic() + CHILD_TIMEOUT
    try:
        for pid in pids:
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    exits.append(os.waitstatus_to_exitcode(status))
                    break
                if time.monotonic() > deadline:
                    exits.append("hung")
                    break
                time.sleep(0.02)
    finally:
        for pid in pids:  # no child outlives the test, hung or not
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
    stop.set()
    for t in threads:  # no compile in flight at exit (atexit would remove its temp dir under it)
        t.join(timeout=60)
    print(json.dumps({"exits": exits, "counts": counts}))
""")

POOL = textwrap.dedent("""
    import multiprocessing

    def work(i):
        return check(f"pool{i}", i, ("llvm", "c")[i % 2], 1 << 18)

    pool = multiprocessing.get_context("fork").Pool(4)  # forked while the threads compile
    try:
        res = pool.map_async(work, range(8)).get(timeout=CHILD_TIMEOUT)
    except multiprocessing.TimeoutError:
        res = "hung"
        pool.terminate()
    else:
        pool.close()
    pool.join()
    stop.set()
    for t in threads:  # no compile in flight at exit (atexit would remove its temp dir under it)
        t.join(timeout=60)
    print(json.dumps({"results": res, "counts": counts}))
""")


def _run(isolated, root, child_timeout: float, part: str) -> dict:
    code = f"ROOT = {str(root)!r}\nCHILD_TIMEOUT = {child_timeout}\n" + SETUP + part
    try:
        rc, out = isolated.run(code, timeout=240)
    except Exception as e:  # noqa: BLE001 - subprocess.TimeoutExpired: the whole script hung
        pytest.fail(f"the fork script did not finish: {e}")
    assert rc == 0, f"{isolated.describe(rc)}\n{out[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


def test_twenty_forks_during_concurrent_compiles_on_both_pairs(tmp_path, isolated):
    rep = _run(isolated, tmp_path / "dk", 90, FORKS)
    assert rep["exits"] == [0] * 20, f"children: {rep['exits']} (0 ok, 1 wrong result, 2 error, hung)"
    assert rep["counts"]["llvm"] >= 2 and rep["counts"]["c"] >= 1


def test_multiprocessing_pool_with_fork_uses_the_cpu_device(tmp_path, isolated):
    rep = _run(isolated, tmp_path / "dk", 120, POOL)
    assert rep["results"] == [True] * 8


HELD = textwrap.dedent("""
    import json, os, sys, threading, time
    import numpy as np
    import devicekit as dk
    from devicekit import kernels
    from devicekit.compile.cache import default_cache
    from devicekit.registry import get_registry
    which = sys.argv[1]
    cpu = dk.device("CPU")
    cpu.compile(kernels.elementwise("a + b"), pair="llvm")  # the process has used everything once
    lock = {"registry": lambda: get_registry()._lock, "compile cache": lambda: default_cache()._lock,
            "device program memo": lambda: cpu._lock, "allocator LRU": lambda: cpu.allocator._lru_lock}[which]()
    held, release = threading.Event(), threading.Event()

    def holder():
        with lock:  # another thread is inside this lock when the process forks
            held.set()
            release.wait()

    threading.Thread(target=holder, daemon=True).start()
    held.wait()
    pid = os.fork()
    if pid == 0:
        xs = np.arange(64, dtype=np.float32)
        listed = [str(d.spec) for d in dk.devices()]  # the registry's lock
        ok = all(np.array_equal(dk.run(kernels.elementwise("a * b + c"), device=dev, a=xs, b=xs, c=xs, n=64)["out"],
                                xs * xs + xs) for dev in ("CPU", "PYTHON"))  # PYTHON: a device built in the child
        os._exit(0 if ok and "CPU" in listed else 1)
    deadline, status = time.monotonic() + 60, None
    while time.monotonic() < deadline:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(st)
            break
        time.sleep(0.02)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        status = "hung"
    release.set()
    print(json.dumps({"child": status}))
""")


@pytest.mark.parametrize("which", ["registry", "compile cache", "device program memo", "allocator LRU"])
def test_child_works_when_another_thread_held_a_lock_at_fork(isolated, which):
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", HELD, which], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == {"child": 0}


NORMAL_EXIT = textwrap.dedent("""
    import json, os, sys, threading, time
    import devicekit as dk
    from devicekit import kernels
    from devicekit.compile.cache import CompileCache
    from devicekit_cpu.cc_compiler import CCompiler
    slow_cc, slow_flag = sys.argv[1], sys.argv[2]  # the real C compiler behind a wrapper that sleeps once the flag
    r = dk.device("CPU").pair("c")[0]               # file exists: the compile is surely in flight at the fork
    c = CCompiler(cc=slow_cc)
    c.cache = CompileCache(disk=False)
    c.compile(r.render(kernels.elementwise("a + b")))  # the compiler's probes (8 runs of it) and a compile, at full speed
    open(slow_flag, "w").close()
    result = {}

    def compile_in_thread():
        try:
            result["lib"] = len(c.compile(r.render(kernels.elementwise("a - b"))).lib)
        except Exception as e:
            result["error"] = f"{type(e).__name__}: {e}"[:300]

    t = threading.Thread(target=compile_in_thread)
    t.start()
    time.sleep(0.5)
    pid = os.fork()
    if pid == 0:
        sys.exit(0)  # a normal exit: atexit handlers and finalizers run in the child
    os.waitpid(pid, 0)
    t.join(timeout=120)
    print(json.dumps(result))
""")


def test_child_exiting_normally_does_not_remove_the_parents_compile_dir(tmp_path):
    """A forked child that exits normally ran the finalizers of the TemporaryDirectory a parent thread was compiling
    in, and deleted it under the running C compiler."""
    import shutil
    import subprocess
    import sys
    cc = shutil.which("clang") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    wrapper = tmp_path / "slow-cc"
    flag = tmp_path / "slow"  # the wrapper sleeps only for the compile in flight at the fork, not for the probes
    wrapper.write_text(f"#!/bin/sh\nif [ -e '{flag}' ]; then sleep 1.5; fi\nexec {cc} \"$@\"\n")
    wrapper.chmod(0o755)
    p = subprocess.run([sys.executable, "-c", NORMAL_EXIT, str(wrapper), str(flag)], capture_output=True, text=True,
                       timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    assert "error" not in rep and rep["lib"] > 0, rep
