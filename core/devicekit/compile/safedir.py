"""Open a private directory so that no other local user can change what is read from it afterwards.

The directory is pinned: opened once, component by component from `/`, with `O_DIRECTORY | O_NOFOLLOW`, and every
later access goes through its file descriptor (`openat` and friends), so renaming or replacing the path afterwards
changes nothing for this process. Every directory on the way is checked the way OpenSSH's StrictModes checks the
path to `authorized_keys`: owned by root or by this user, and not group/world-writable. One deliberate difference:
a sticky world-writable directory (`/tmp`, mode 1777) is accepted as an *ancestor*, because the sticky bit stops
other users from renaming or removing what this user created in it (OpenSSH refuses it; `/tmp` caches are common and
pytest's tmp_path lives there). The directory itself must be this user's and not group/world-writable, sticky or
not. Missing directories are created 0700 whatever the umask (fchmod after mkdir).

Reads no environment variables and no files besides the directories it opens.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["UnsafeDirectory", "open_private_child", "open_private_dir", "unsupported"]

_NEEDED = ("open", "stat", "mkdir", "unlink", "rename", "link")


class UnsafeDirectory(Exception):
    """The directory cannot be used safely; str() says which path and why."""


def unsupported() -> str | None:
    """None when this platform can pin directories (openat, O_NOFOLLOW, O_DIRECTORY), else why not."""
    if not (hasattr(os, "O_NOFOLLOW") and hasattr(os, "O_DIRECTORY") and hasattr(os, "getuid")):
        return "this platform has no O_NOFOLLOW/O_DIRECTORY/getuid (the cache directory cannot be pinned)"
    missing = [n for n in _NEEDED if getattr(os, n) not in os.supports_dir_fd]
    if missing:
        return f"this platform has no dir_fd support for {', '.join(missing)} (the cache directory cannot be pinned)"
    return None


def _dir_flags() -> int:
    return os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _mode(st: os.stat_result) -> str:
    return f"{stat.S_IMODE(st.st_mode):04o}"


def ancestor_problem(st: os.stat_result, where: str, uid: int) -> str | None:
    """Why a directory above the private one is unsafe (None: safe): another user could swap what is below it."""
    if st.st_uid not in (0, uid):
        return (f"{where} is owned by uid {st.st_uid}, neither root nor this user (uid {uid}): that user could replace "
                "the directories below it")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return (f"{where} is group- or world-writable without the sticky bit (mode {_mode(st)}): other users could "
                "replace the directories below it")
    return None


def own_problem(st: os.stat_result, where: str, uid: int) -> str | None:
    """Why the private directory itself is unsafe (None: safe)."""
    if not stat.S_ISDIR(st.st_mode):
        return f"{where} is not a directory"
    if st.st_uid != uid:
        return f"{where} is owned by uid {st.st_uid}, not by this user (uid {uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{where} is group- or world-writable (mode {_mode(st)}); use chmod 700"
    return None


def _open_child(parent: int, name: str, where: str, create: bool) -> int:
    """`name` inside the directory `parent`, opened without following a symlink; created 0700 when missing."""
    created = False
    for _ in range(2):
        try:
            fd = os.open(name, _dir_flags(), dir_fd=parent)
            break
        except FileNotFoundError:
            if not create:
                raise UnsafeDirectory(f"{where} does not exist") from None
            try:
                os.mkdir(name, 0o700, dir_fd=parent)
                created = True
            except FileExistsError:
                pass  # another process made it: open it and check it like any other
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise UnsafeDirectory(f"{where} is a symlink or not a directory (it changed while being opened, or "
                                      "it is not a directory)") from None
            raise UnsafeDirectory(f"cannot open {where}: {e.strerror}") from None
    else:
        raise UnsafeDirectory(f"{where} keeps disappearing")
    if created:
        try:
            os.fchmod(fd, 0o700)  # mkdir's mode went through the umask
        except OSError:
            os.close(fd)
            raise
    return fd


def open_private_dir(path: str | os.PathLike) -> int:
    """A file descriptor of the directory `path` (created 0700 with its missing parents), pinned and checked.

    Symlinks in `path` are resolved first (realpath); the resolved directories are then walked from `/` without
    following any link, so a swap during the walk fails instead of leading elsewhere. Raises UnsafeDirectory.
    """
    real = os.path.realpath(os.path.abspath(os.fspath(path)))
    parts = [p for p in real.split(os.sep) if p]
    uid = os.getuid()
    fd = os.open(os.sep, _dir_flags())
    where = os.sep
    try:
        st = os.fstat(fd)
        problem = own_problem(st, where, uid) if not parts else ancestor_problem(st, where, uid)
        for i, name in enumerate(parts):
            if problem is not None:
                break
            where = os.path.join(where, name)
            child = _open_child(fd, name, where, create=True)
            os.close(fd)
            fd = child
            st = os.fstat(fd)
            last = i == len(parts) - 1
            problem = own_problem(st, where, uid) if last else ancestor_problem(st, where, uid)
        if problem is not None:
            raise UnsafeDirectory(problem)
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_private_child(parent: int, name: str, where: str) -> int:
    """The private directory `name` inside the pinned directory `parent` (created 0700), checked like the parent."""
    fd = _open_child(parent, name, where, create=True)
    try:
        if (problem := own_problem(os.fstat(fd), where, os.getuid())) is not None:
            raise UnsafeDirectory(problem)
        return fd
    except BaseException:
        os.close(fd)
        raise
