"""Running a compiler process (cc, clang, ptxas, xcrun ...): the one helper every plugin that spawns one uses.

Why one helper: a compiler driver forks its real compiler (`clang -cc1`, `cc1`, `as`, `ld`), so killing the driver
alone on a timeout leaves those running on, orphaned; and a compiler given a huge function can grow until the
kernel's OOM killer takes it, reported as a bare exit code. Here each compiler starts in its own session (so its
own process group), the whole group is killed on a timeout or an interrupt (and after it exits, so nothing it left
behind runs on), and its address space is bounded (RLIMIT_AS, set by `ulimit -v` in a `/bin/sh` that then execs
the compiler: no Python code runs between fork and exec, so this is safe with threads). Limits:
DEVICEKIT_COMPILER_MEMORY and DEVICEKIT_COMPILER_TIMEOUT. A failure that looks like the memory limit was hit says so.

Temp dirs (`compiler_tmpdir`) live under one root, `<tempdir>/devicekit-<uid>/`, named with the owner's pid
namespace and pid; a dir whose owner is dead (same namespace, no such pid) is removed the next time a compiler
tmpdir is made, so a kill -9 run leaves nothing behind for long.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import CompileError

__all__ = ["CompilerFailed", "compiler_tmpdir", "failure_message", "run_compiler", "temp_root"]

_OOM = re.compile(r"out of memory|MemoryError|cannot allocate memory|virtual memory exhausted|memory exhausted|bad_alloc|"
                  r"failed to map segment|mmap.*failed|insufficient memory|unable to allocate", re.IGNORECASE)
_SH = "/bin/sh"


class CompilerFailed(CompileError):
    """A compiler process was stopped by devicekit's limits (timeout) or could not be started."""


def _setting(name: str) -> Any:
    from .. import settings
    return settings.get(name)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _resolve(exe: str) -> str:
    path = exe if os.sep in exe else shutil.which(exe)
    if path is None or not os.access(path, os.X_OK) or os.path.isdir(path):
        raise FileNotFoundError(f"no executable {exe!r}" + ("" if os.sep in exe else " on PATH"))
    return path


def run_compiler(argv: Sequence[str], *, input: str | bytes | None = None, cwd: str | None = None,
                 what: str | None = None, text: bool = True, timeout: float | None = None,
                 memory: int | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `argv` as a compiler: its own process group, killed whole on timeout, interrupt or exit; its address
    space bounded by `memory` bytes (default DEVICEKIT_COMPILER_MEMORY, 0: none). Returns the CompletedProcess
    (`p.memory_limit` is the limit it ran under). Raises CompilerFailed when it cannot start or runs past
    `timeout` seconds (default DEVICEKIT_COMPILER_TIMEOUT, 0: none)."""
    argv = [str(a) for a in argv]
    what = what or os.path.basename(argv[0])
    timeout = _setting("DEVICEKIT_COMPILER_TIMEOUT") if timeout is None else timeout
    memory = _setting("DEVICEKIT_COMPILER_MEMORY") if memory is None else memory
    try:
        exe = _resolve(argv[0])
    except FileNotFoundError as e:
        raise CompilerFailed(f"could not run {what}: {e}") from None
    cmd = [exe, *argv[1:]]
    if memory and os.path.exists(_SH):
        kib = max(1, memory // 1024)
        cmd = [_SH, "-c", 'ulimit -v "$0" 2>/dev/null; exec "$@"', str(kib), *cmd]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env, text=text,
                                start_new_session=True)
    except OSError as e:
        raise CompilerFailed(f"could not run {what}: {e}") from None
    try:
        out, err = proc.communicate(input, timeout=timeout or None)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.communicate()
        raise CompilerFailed(f"{what} ran past its time limit DEVICEKIT_COMPILER_TIMEOUT={timeout:g} s: it and every "
                             "process it started were killed") from None
    except BaseException:  # KeyboardInterrupt, a broken pipe: nothing of the compile runs on
        _kill_group(proc.pid)
        proc.wait()
        raise
    _kill_group(proc.pid)  # anything the compiler left running in its group
    p = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    p.memory_limit = memory  # type: ignore[attr-defined]
    return p


def _shown(limit: int) -> str:
    for shift, unit in ((30, "G"), (20, "M"), (10, "K")):
        if limit % (1 << shift) == 0:
            return f"{limit >> shift}{unit}"
    return str(limit)


def failure_message(p: subprocess.CompletedProcess, what: str) -> str:
    """Why the compiler `what` failed when its memory limit is the likely cause (its stderr says it could not get
    memory, or it died by a signal / a crash exit with a limit set); "" otherwise (the caller words the rejection)."""
    limit = getattr(p, "memory_limit", 0)
    err = p.stderr if isinstance(p.stderr, str) else (p.stderr or b"").decode(errors="replace")
    if not limit or p.returncode == 0:
        return ""
    said = _OOM.search(err or "") is not None
    if not said and p.returncode not in (-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGABRT, 254, 134, 137, 139):
        return ""
    how = f"killed by signal {-p.returncode}" if p.returncode < 0 else f"exit {p.returncode}"
    return (f"{what} ran out of its memory limit DEVICEKIT_COMPILER_MEMORY={_shown(limit)} ({how}"
            f"{'' if said else ', or it crashed'}); raise the limit (0: none) if this source really needs more")


# ---------------------------------------------------------------- temp dirs
def _pidns() -> str:
    try:
        return re.sub(r"\D", "", os.readlink("/proc/self/ns/pid")) or "0"
    except OSError:
        return "0"


def temp_root() -> str:
    """`<tempdir>/devicekit-<uid>`: private (0700, this user's, not a symlink); created when missing. A path that
    fails those checks is not used: the system temp dir is, directly."""
    base = tempfile.gettempdir()
    root = os.path.join(base, f"devicekit-{os.getuid()}")
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return base
    try:
        st = os.lstat(root)
    except OSError:
        return base
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
        return base
    return root


_NAME = re.compile(r"^(?P<prefix>devicekit_\w*?_)(?P<ns>\d+)-(?P<pid>\d+)-[0-9a-f]+$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(root: str | None = None) -> int:
    """Remove compiler temp dirs under `root` whose owner (a pid of this pid namespace) is dead; how many."""
    root = root or temp_root()
    ns, n = _pidns(), 0
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    for name in names:
        m = _NAME.match(name)
        if m is None or m.group("ns") != ns or _alive(int(m.group("pid"))):
            continue
        path = os.path.join(root, name)
        with contextlib.suppress(OSError):
            if stat.S_ISDIR(os.lstat(path).st_mode):
                shutil.rmtree(path, ignore_errors=True)
                n += 1
    return n


@contextlib.contextmanager
def compiler_tmpdir(prefix: str = "devicekit_cc_") -> Iterator[str]:
    """A fresh private temp dir under `temp_root()`, removed when the block ends (only by the process that made it:
    a forked child never removes its parent's); stale ones of dead processes are removed first."""
    root = temp_root()
    if root != tempfile.gettempdir():
        remove_stale(root)
    owner = os.getpid()
    d = os.path.join(root, f"{prefix}{_pidns()}-{owner}-{secrets.token_hex(4)}")
    os.mkdir(d, 0o700)
    try:
        yield d
    finally:
        if os.getpid() == owner:
            shutil.rmtree(d, ignore_errors=True)
