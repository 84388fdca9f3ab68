"""Compilers that outlive their limits (issue: the c pair's timeout killed the clang driver only, `clang -cc1` ran
on orphaned; an out-of-memory compile said "exit 254"; every killed compile left a temp dir forever). Every compiler
process goes through devicekit.compile.subproc: own process group killed whole, RLIMIT_AS from
DEVICEKIT_COMPILER_MEMORY and said so when hit, temp dirs under one root with dead owners' ones removed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
from devicekit.compile import subproc
from devicekit.errors import CompileError, SettingError


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead; only /proc can tell
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def test_a_timeout_kills_the_whole_process_group(tmp_path):
    """A 'driver' that starts a child and waits: on timeout the child dies too (the old subprocess.run killed the
    driver only)."""
    pidfile = tmp_path / "child.pid"
    script = f"sleep 300 & echo $! > {pidfile}; wait"
    with pytest.raises(CompileError, match="DEVICEKIT_COMPILER_TIMEOUT=1 s"):
        subproc.run_compiler(["/bin/sh", "-c", script], timeout=1)
    child = int(pidfile.read_text())
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child), "the compiler's child outlived the timeout"


def test_a_child_left_running_after_the_compiler_exits_is_killed(tmp_path):
    pidfile = tmp_path / "child.pid"
    p = subproc.run_compiler(["/bin/sh", "-c", f"sleep 300 >/dev/null 2>&1 & echo $! > {pidfile}"], timeout=30)
    assert p.returncode == 0
    child = int(pidfile.read_text())
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child)


def test_the_memory_limit_applies_and_is_named(monkeypatch):
    monkeypatch.setenv("DEVICEKIT_COMPILER_MEMORY", "64M")
    code = "x = bytearray(256 << 20); print(len(x))"
    p = subproc.run_compiler([sys.executable, "-c", code], timeout=60)
    assert p.returncode != 0 and "MemoryError" in p.stderr
    assert "ran out of its memory limit DEVICEKIT_COMPILER_MEMORY=64M" in subproc.failure_message(p, "python")
    monkeypatch.setenv("DEVICEKIT_COMPILER_MEMORY", "0")  # no limit
    assert subproc.run_compiler([sys.executable, "-c", code], timeout=60).returncode == 0


@pytest.mark.parametrize("bad", ["-1", "lots", "1e30"])
def test_hostile_limits_are_setting_errors(monkeypatch, bad):
    monkeypatch.setenv("DEVICEKIT_COMPILER_MEMORY", bad)
    with pytest.raises(SettingError, match="DEVICEKIT_COMPILER_MEMORY"):
        subproc.run_compiler(["/bin/true"])


def test_a_c_compile_over_its_memory_limit_says_so(monkeypatch):
    """The real c pair with a C source whose compile needs more than the limit: the message names the setting."""
    from devicekit_cpu.cc_compiler import CCompiler
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no gcc/cc here")
    body = "".join(f"x[{i}]=x[{i + 1}]*{i}.5f+x[{(i * 7) % 4000}];" for i in range(4000))
    monkeypatch.setenv("DEVICEKIT_COMPILER_MEMORY", "40M")
    with pytest.raises(CompileError, match="ran out of its memory limit DEVICEKIT_COMPILER_MEMORY=40M"):
        CCompiler(cc).compile_src(f"void k(float *x) {{ {body} }}\n")


def test_a_missing_compiler_is_a_compile_error():
    with pytest.raises(CompileError, match="could not run"):
        subproc.run_compiler(["devicekit-no-such-compiler-here"])


def test_temp_dirs_live_under_one_root_and_dead_owners_ones_are_removed():
    root = subproc.temp_root()
    assert os.path.basename(root) == f"devicekit-{os.getuid()}"
    dead = subprocess.Popen(["/bin/true"])
    dead.wait()
    ns = subproc._pidns()
    stale = os.path.join(root, f"devicekit_cc_{ns}-{dead.pid}-deadbeef")
    os.makedirs(os.path.join(stale, "inner"))
    live = os.path.join(root, f"devicekit_cc_{ns}-{os.getpid()}-feedbeef")  # ours: alive, kept
    os.makedirs(live, exist_ok=True)
    try:
        with subproc.compiler_tmpdir() as d:
            assert os.path.dirname(d) == root and os.path.isdir(d)
            assert not os.path.exists(stale)
            assert os.path.isdir(live)
        assert not os.path.exists(d)
    finally:
        shutil.rmtree(live, ignore_errors=True)
        shutil.rmtree(stale, ignore_errors=True)


def test_the_c_pair_compiles_in_the_devicekit_temp_root(monkeypatch):
    from devicekit_cpu import cc_compiler
    seen = []
    real = subproc.compiler_tmpdir

    def spy(prefix="devicekit_cc_"):
        cm = real(prefix)
        seen.append(prefix)
        return cm
    monkeypatch.setattr(subproc, "compiler_tmpdir", spy)
    cc_compiler.CCompiler().compile_src("void k(float *x) { x[0] = 1; }\n")
    assert seen == ["devicekit_cc_"]


# processes that are not compilers, each with why it may be spawned directly
NOT_COMPILERS = {
    "core/devicekit/render/parse_worker.py": "the signature reader's Python helper (its own time limit)",
    "core/devicekit/cli/isolate.py": "a Python child probing one plugin in isolation",
    "core/devicekit/inspect_kernel.py": "objdump, a disassembler run on request",
    "core/devicekit/compile/subproc.py": "the helper itself",
    "plugins/metal/devicekit_metal/env.py": "xcode-select -p / xcrun -find: tool lookups with a timeout",
}


def test_every_compiler_process_goes_through_the_one_helper():
    """A machine check for the class: no plugin or core module spawns a process with subprocess directly, but the
    listed non-compilers; a compiler added later must use compile.subproc.run_compiler."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    files = [*root.glob("core/devicekit/**/*.py"), *root.glob("plugins/*/devicekit_*/**/*.py")]
    spawn = re.compile(r"subprocess\.(run|Popen|call|check_call|check_output)\(|os\.(system|popen|spawn\w*)\(")
    found = []
    for f in files:
        rel = f.relative_to(root).as_posix()
        if rel in NOT_COMPILERS or "/testing/" in rel:
            continue
        found += [f"{rel}:{i}" for i, line in enumerate(f.read_text().splitlines(), 1) if spawn.search(line)]
    assert not found, "spawn compilers through devicekit.compile.subproc.run_compiler:\n" + "\n".join(found)
