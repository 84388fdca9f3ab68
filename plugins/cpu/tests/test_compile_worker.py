"""The compile worker (devicekit_cpu/compile_worker.py): the upgrade thread's final builds are made in a child
process, with the same bytes a build in process makes; a worker that dies, hangs or runs another LLVM is killed,
reaped and replaced by a build in process (a logged reason, never a hang); a forked child never uses its parent's
worker; Ctrl-C in the parent leaves neither an orphan nor a zombie. Real llvmlite, real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import devicekit as dk
import numpy as np
import pytest
from devicekit import kernels
from devicekit.compile.cache import CompileCache
from devicekit.targets import Device
from devicekit_cpu import compile_worker, llvm_jit, replay
from devicekit_cpu.llvm_compiler import LLVMCompiler
from devicekit_cpu.runtime import TIER_LAUNCHES

pytestmark = pytest.mark.skipif(not hasattr(os, "posix_spawn"), reason="the worker needs posix_spawn")


@pytest.fixture
def fresh(monkeypatch):
    """A worker of this test's own: none running at the start, failures counted from zero, killed at the end."""
    monkeypatch.setattr(compile_worker, "_EXITING", [])
    monkeypatch.setattr(compile_worker, "_FAILS", [])
    monkeypatch.setattr(compile_worker, "_WORKER", [])
    yield
    compile_worker.shutdown()


def _device(tmp_path, disk=False):
    cpu = dk.device("CPU")
    comp = LLVMCompiler()
    comp.cache = CompileCache(tmp_path / "cache", disk=disk)
    return Device("CPU", cpu.allocator, cpu.pair("llvm")[0], comp, cpu.runtime), comp


def _swap(dev, expr, name):
    """A new program run to its tier limit, then waited for: (program, buffers, expected output)."""
    prog = dev.compile(kernels.elementwise(expr, name=name))
    assert prog.tier == "quick"
    n = 300
    bufs = [dk.Buffer(dev, n, "float32").copyin(np.full(n, x, np.float32)) for x in (2.0, 3.0, 4.0)]
    bufs.append(dk.Buffer(dev, n, "float32"))
    for _ in range(TIER_LAUNCHES):
        prog.execute(bufs, [n], wait=True)
    prog.upgrade()  # waits for the upgrade thread's build
    prog.execute(bufs, [n], wait=True)
    return prog, bufs


def _gone(pid: int) -> bool:
    """No process `pid` at all: not running, not a zombie (a reaped child leaves no /proc entry)."""
    return not os.path.exists(f"/proc/{pid}") if os.path.isdir("/proc") else _not_ours(pid)


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def _not_ours(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_upgrade_threads_build_is_made_by_the_worker_with_the_same_bytes(tmp_path, fresh):
    dev, comp = _device(tmp_path)
    before = compile_worker.served + (not replay.ready())  # the process's first upgrade builds dk_replay too
    prog, bufs = _swap(dev, "a * b + c * 0.75", "worker_swap")
    assert prog.tier == "final" and compile_worker.served == before + 1 and compile_worker.worker_pid()
    assert (bufs[3].numpy() == np.float32(2 * 3 + 4 * 0.75)).all()
    # the worker's bytes are the bytes a build in process makes (same llvmlite, target machine and pipeline)
    assert prog.compiled.lib == comp.compile_src(prog.compiled.spec.src)
    for k in (kernels.elementwise("a / (b + 1.5) - c", name="worker_div"), kernels.reduce("max", name="worker_max")):
        src = dev.renderer.render(k).src
        assert compile_worker.build(comp.opt, comp.cpu, comp.features, src) == comp.compile_src(src)
    assert compile_worker.reason() is None


_FIRST_UPGRADE = textwrap.dedent("""
    import tempfile
    import devicekit as dk, numpy as np
    from devicekit import kernels
    from devicekit.compile.cache import CompileCache
    from devicekit.targets import Device
    from devicekit_cpu import compile_worker, llvm_jit, replay
    from devicekit_cpu.llvm_compiler import LLVMCompiler
    from devicekit_cpu.runtime import TIER_LAUNCHES
    cpu = dk.device("CPU")
    comp = LLVMCompiler()
    comp.cache = CompileCache(tempfile.mkdtemp(), disk=False)
    dev = Device("CPU", cpu.allocator, cpu.pair("llvm")[0], comp, cpu.runtime)
    prog = dev.compile(kernels.elementwise("a * b + c * 6.25", name="worker_replay"))
    bufs = [dk.Buffer(dev, 64, "float32") for _ in range(4)]
    assert prog.tier == "quick" and not replay.ready()
    for _ in range(TIER_LAUNCHES):
        prog.execute(bufs, [64], wait=True)
    prog.upgrade()
    same = compile_worker.build(2, *llvm_jit.host()[1:], replay.replay_ir(), passes=0) == llvm_jit.emit_object(replay.replay_ir(), 2)
    print(prog.tier, replay.ready(), compile_worker.served, same, compile_worker.reason())
""")


def test_the_first_upgrade_of_a_process_has_the_worker_build_dk_replay_too():
    """The upgrade thread's first final build also builds the replay's dk_replay (once per process): in the worker,
    or it holds llvm_jit.LOCK ~20 ms against the launching thread's quick builds. Same bytes as in process."""
    out = subprocess.run([sys.executable, "-c", _FIRST_UPGRADE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["final", "True", "3", "True", "None"]  # dk_replay, the final build, the check


def test_the_workers_final_build_goes_to_the_disk_cache(tmp_path, fresh):
    """The parent stores what the worker built, under the final identity: a new device on the same cache directory
    (a new process's view) starts that kernel on its final build, with those bytes."""
    dev, comp = _device(tmp_path, disk=True)
    served = compile_worker.served + (not replay.ready())
    prog, _ = _swap(dev, "a * b + c * 5.25", "worker_disk")
    assert prog.tier == "final" and compile_worker.served == served + 1
    again, _ = _device(tmp_path, disk=True)
    fresh_prog = again.compile(kernels.elementwise("a * b + c * 5.25", name="worker_disk"))
    assert fresh_prog.tier == "final" and fresh_prog.compiled.from_cache
    assert fresh_prog.compiled.lib == prog.compiled.lib


def test_a_dead_worker_is_reaped_and_the_build_runs_in_process(tmp_path, fresh):
    dev, comp = _device(tmp_path)
    _swap(dev, "a * b + c * 1.25", "worker_first")
    pid = compile_worker.worker_pid()
    os.kill(pid, signal.SIGKILL)
    served = compile_worker.served
    prog, bufs = _swap(dev, "a * b + c * 1.75", "worker_after_death")
    assert prog.tier == "final" and compile_worker.served == served  # built in process
    assert (bufs[3].numpy() == np.float32(2 * 3 + 4 * 1.75)).all()
    assert "pipe closed" in compile_worker.reason() and "signal 9" in compile_worker.reason()
    assert _gone(pid)  # reaped: no zombie
    _swap(dev, "a * b + c * 2.25", "worker_restarted")  # the next build starts a new worker
    assert compile_worker.served == served + 1 and compile_worker.worker_pid() not in (None, pid)


def test_a_stuck_worker_is_killed_at_the_timeout(tmp_path, fresh, monkeypatch):
    dev, comp = _device(tmp_path)
    _swap(dev, "a * b + c * 3.25", "worker_warm")
    pid = compile_worker.worker_pid()
    os.kill(pid, signal.SIGSTOP)  # it never answers
    monkeypatch.setattr(compile_worker, "BUILD_TIMEOUT", 0.5)
    t0 = time.monotonic()
    prog, bufs = _swap(dev, "a * b + c * 3.75", "worker_stuck")
    assert time.monotonic() - t0 < 30 and prog.tier == "final"
    assert (bufs[3].numpy() == np.float32(2 * 3 + 4 * 3.75)).all()
    assert "no answer in time" in compile_worker.reason() and _gone(pid)


def test_a_worker_running_another_llvm_is_refused(tmp_path, fresh, monkeypatch):
    monkeypatch.setattr(llvm_jit, "versions", lambda: "llvmlite-0.0 LLVM-0.0.0")  # this process's view only
    dev, comp = _device(tmp_path)
    served = compile_worker.served
    prog, _ = _swap(dev, "a * b + c * 4.25", "worker_versions")
    assert prog.tier == "final" and compile_worker.served == served
    assert "the bytes would differ" in compile_worker.reason() and compile_worker.worker_pid() is None


def test_a_frozen_app_starts_no_worker(tmp_path, fresh, monkeypatch):
    """A frozen app's sys.executable is the app itself: `-c` would start it again. Its builds stay in process."""
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    dev, comp = _device(tmp_path)
    served = compile_worker.served
    prog, _ = _swap(dev, "a * b + c * 7.25", "worker_frozen")
    assert prog.tier == "final" and compile_worker.served == served and compile_worker.worker_pid() is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_worker(fresh):
    comp = LLVMCompiler()
    src = dk.device("CPU").pair("llvm")[0].render(kernels.elementwise("a - b * c", name="worker_fork")).src
    want = comp.compile_src(src)
    assert compile_worker.build(comp.opt, comp.cpu, comp.features, src) == want
    parent_worker = compile_worker.worker_pid()
    parent_fds = (compile_worker._WORKER[0].req, compile_worker._WORKER[0].rep)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm(60)
            os.close(r)
            closed = all(_closed(fd) for fd in parent_fds)  # its copies of the parent's pipes: none left open
            same = compile_worker.build(comp.opt, comp.cpu, comp.features, src) == want
            mine = compile_worker.worker_pid()
            os.write(w, f"{mine}".encode())
            compile_worker.shutdown()
            code = 0 if closed and same and mine not in (None, parent_worker) else 2
        finally:
            os._exit(code)
    os.close(w)
    child_worker = int(os.read(r, 64) or b"0")
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert child_worker and _not_ours(child_worker)
    # the child neither used nor stopped the parent's worker
    assert compile_worker.build(comp.opt, comp.cpu, comp.features, src) == want
    assert compile_worker.worker_pid() == parent_worker and compile_worker.reason() is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_while_the_worker_builds(tmp_path, fresh):
    """Forked while the upgrade thread waits for the worker's answer: the child (no upgrade thread, no worker of its
    own) makes the final build itself; the parent's build arrives once the worker runs again."""
    dev, comp = _device(tmp_path)
    _swap(dev, "a * b + c * 8.25", "worker_fork_warm")
    pid_w = compile_worker.worker_pid()
    prog = dev.compile(kernels.elementwise("a * b + c * 8.75", name="worker_fork_mid"))
    n = 300
    bufs = [dk.Buffer(dev, n, "float32").copyin(np.full(n, x, np.float32)) for x in (2.0, 3.0, 4.0)]
    bufs.append(dk.Buffer(dev, n, "float32"))
    os.kill(pid_w, signal.SIGSTOP)  # the request goes out; no answer comes while it is stopped
    served = compile_worker.served
    try:
        for _ in range(TIER_LAUNCHES):
            prog.execute(bufs, [n], wait=True)
        time.sleep(0.3)
        assert prog.tier == "quick" and not prog._quick.done.is_set()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.alarm(60)
                prog.upgrade()
                prog.execute(bufs, [n], wait=True)
                ok = prog.tier == "final" and (bufs[3].numpy() == np.float32(2 * 3 + 4 * 8.75)).all()
                code = 0 if ok and compile_worker.worker_pid() is None else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    finally:
        os.kill(pid_w, signal.SIGCONT)
    prog.upgrade()
    assert prog.tier == "final" and compile_worker.served == served + 1 and compile_worker.reason() is None
    prog.execute(bufs, [n], wait=True)
    assert (bufs[3].numpy() == np.float32(2 * 3 + 4 * 8.75)).all()


_CTRL_C = textwrap.dedent("""
    import os, signal, sys
    import devicekit as dk, numpy as np
    from devicekit import kernels
    from devicekit_cpu import compile_worker
    from devicekit_cpu.llvm_compiler import LLVMCompiler
    comp = LLVMCompiler()
    src = dk.device("CPU").pair("llvm")[0].render(kernels.elementwise("a * b", name="worker_ctrl_c")).src
    compile_worker.build(comp.opt, comp.cpu, comp.features, src)
    pid = compile_worker.worker_pid()
    os.kill(pid, signal.SIGSTOP)  # it cannot exit by itself: only its parent's shutdown ends it
    print(pid, flush=True)
    while True:
        sum(range(1000))
""")


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_ctrl_c_in_the_parent_leaves_no_orphan_nor_zombie():
    proc = subprocess.Popen([sys.executable, "-c", _CTRL_C], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    worker = 0
    try:
        worker = int(proc.stdout.readline())
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the foreground process group
        proc.wait(60)
        assert proc.returncode in (-signal.SIGINT, 130, 1), proc.returncode  # KeyboardInterrupt
        assert _gone(worker)  # killed and reaped before its parent exited
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if worker and not _gone(worker):
            os.kill(worker, signal.SIGKILL)


_MP_CHILD = textwrap.dedent("""
    import multiprocessing as mp, os, signal

    def child(q):
        import devicekit as dk
        from devicekit import kernels
        from devicekit_cpu import compile_worker
        from devicekit_cpu.llvm_compiler import LLVMCompiler
        comp = LLVMCompiler()
        src = dk.device("CPU").pair("llvm")[0].render(kernels.elementwise("a + b", name="worker_mp")).src
        ok = compile_worker.build(comp.opt, comp.cpu, comp.features, src) is not None
        pid = compile_worker.worker_pid()
        os.kill(pid, signal.SIGSTOP)  # it cannot exit by itself: only the child's shutdown ends it
        q.put((ok, pid))

    if __name__ == "__main__":
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        ok, pid = q.get(timeout=60)
        p.join(60)
        print(ok, p.exitcode, pid)
""")


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_multiprocessing_child_stops_its_worker_at_exit(tmp_path):
    """A multiprocessing child ends with os._exit (no atexit): its worker is stopped by its finalizers instead."""
    script = tmp_path / "mp_child.py"
    script.write_text(_MP_CHILD)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ok, code, pid = out.stdout.split()
    try:
        assert ok == "True" and code == "0"
        assert _gone(int(pid))
    finally:
        if not _gone(int(pid)):
            os.kill(int(pid), signal.SIGKILL)
