"""The compile cache's file handling: every read, write and listing relative to the pinned directory's descriptor,
never following a symlink, never blocking on a FIFO, never trusting a file that is not a private regular file of this
user; writes are atomic (a 0600 temp file renamed into place); and the per-user MAC secret. The threat model is in
docs/reliability.md; the entry format and the key are in cache.py, the store that uses these in cache_store.py."""

from __future__ import annotations

import errno
import os
import secrets
import stat
import time

from ..debug import dprint
from .cache import KEY_FILE, SECRET_BYTES, STALE_TMP_SECONDS, SUFFIX, TMP_PREFIX

_READ_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
               | getattr(os, "O_NOCTTY", 0))
_CREATE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))


def _file_problem(st: os.stat_result, limit: int) -> str | None:
    """Why a directory entry must not be read as a cache file (None: it may be)."""
    if stat.S_ISLNK(st.st_mode):
        return "a symlink"
    if not stat.S_ISREG(st.st_mode):
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        return kind
    if st.st_uid != os.getuid():
        return f"owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"group- or world-writable (mode {stat.S_IMODE(st.st_mode):04o})"
    if st.st_size > limit:
        return f"{st.st_size} bytes, over the {limit}-byte cap for one entry"
    return None


def read_file(dfd: int, name: str, limit: int) -> tuple[bytes | None, str | None]:
    """(contents, None), (None, why it was refused), or (None, None) when there is no such file. Never follows a
    symlink, never blocks on a FIFO, never reads more than `limit` bytes."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None, None
    if (why := _file_problem(st, limit)) is not None:
        return None, why
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dfd)
    except FileNotFoundError:
        return None, None
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK, errno.ENXIO):
            return None, "replaced by a symlink or special file while being opened"
        raise
    try:
        fst = os.fstat(fd)
        if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
            return None, "replaced by another file while being opened"
        if (why := _file_problem(fst, limit)) is not None:
            return None, why
        chunks, left = [], fst.st_size + 1  # one byte more: a file that grows while read is not taken
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        if len(data) != fst.st_size:
            return None, f"changed size while being read ({fst.st_size} -> {len(data)}+ bytes)"
        try:
            os.utime(fd)  # LRU: a hit makes the entry young again
        except OSError:
            pass
        return data, None
    finally:
        os.close(fd)


def write_file(dfd: int, name: str, data: bytes) -> None:
    """Write `name` atomically: a fresh 0600 temp file in the same directory, renamed over `name`."""
    tmp = f"{TMP_PREFIX}{os.getpid()}-{secrets.token_hex(6)}{SUFFIX}"
    fd = os.open(tmp, _CREATE_FLAGS, 0o600, dir_fd=dfd)
    try:
        try:
            os.fchmod(fd, 0o600)  # the umask applied to the open mode; a 0000 entry would be unreadable later
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        tmp = ""
    finally:
        if tmp:
            unlink(dfd, tmp)


def unlink(dfd: int, name: str) -> bool:
    try:
        os.unlink(name, dir_fd=dfd)
        return True
    except OSError:  # gone already, or a directory (never removed recursively)
        return False


def listdir(dfd: int) -> list[str]:
    """Names in the pinned directory (through a fresh descriptor: the pinned one's offset may be shared after fork)."""
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0), dir_fd=dfd)
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def tmp_files(dfd: int) -> list[tuple[str, float]]:
    """(name, age in seconds) of every temp file in the directory."""
    out, now = [], time.time()
    for name in listdir(dfd):
        if name.startswith(TMP_PREFIX):
            try:
                out.append((name, now - os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mtime))
            except OSError:
                pass
    return out


def remove_stale_tmp(dfd: int) -> int:
    return sum(unlink(dfd, name) for name, age in tmp_files(dfd) if age > STALE_TMP_SECONDS)


def load_secret(rfd: int) -> bytes:
    """The per-user MAC secret in the pinned root: read, or created 0600 (atomically: written to a temp file, then
    hard-linked into place, so a concurrent process never reads half a key). A key file that is not a private regular
    file of this user with exactly SECRET_BYTES bytes is replaced (every entry then fails its MAC and is rebuilt)."""
    for _ in range(3):
        data, why = read_file(rfd, KEY_FILE, SECRET_BYTES)
        if data is not None and len(data) == SECRET_BYTES:
            st = os.stat(KEY_FILE, dir_fd=rfd, follow_symlinks=False)
            if not stat.S_IMODE(st.st_mode) & 0o077:
                return data
            why = f"readable by others (mode {stat.S_IMODE(st.st_mode):04o})"
        elif data is not None:
            why = f"{len(data)} bytes, not {SECRET_BYTES}"
        if why is not None:
            dprint(1, f"cache: the key file {KEY_FILE} is {why}: replaced (existing entries will be rebuilt)")
            unlink(rfd, KEY_FILE)
        tmp = f"{TMP_PREFIX}key-{os.getpid()}-{secrets.token_hex(6)}"
        fd = os.open(tmp, _CREATE_FLAGS, 0o600, dir_fd=rfd)
        try:
            try:
                os.fchmod(fd, 0o600)
                new = secrets.token_bytes(SECRET_BYTES)
                os.write(fd, new)
            finally:
                os.close(fd)
            try:
                os.link(tmp, KEY_FILE, src_dir_fd=rfd, dst_dir_fd=rfd)
                return new
            except FileExistsError:
                continue  # another process won the race: read its key
        finally:
            unlink(rfd, tmp)
    raise OSError(f"cannot set up the key file {KEY_FILE}")
