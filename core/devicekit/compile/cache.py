"""The compile cache: compiled bytes in memory and on disk, keyed by (base device key, compiler identity, sha256 of
the source). The disk holds code this process will execute, so it is guarded against other local users and against
broken or planted files (threat model: docs/reliability.md).

Directory: DEVICEKIT_CACHE_DIR, else $XDG_CACHE_HOME/devicekit, else ~/.cache/devicekit; entries in `<dir>/compile/`.
The directory is pinned on first use (safedir.py: opened once without following symlinks, every ancestor checked
like OpenSSH's StrictModes, missing directories created 0700 whatever the umask); every entry is then opened
relative to that descriptor. A directory that fails the checks is refused with one CacheWarning and the cache runs in
memory only. DEVICEKIT_CACHE=0 turns the disk cache off; DEVICEKIT_CACHE_MAX_BYTES caps its size (default 1 GiB;
least recently used entries, by mtime touched on each hit, are evicted).

Files: `<dir>/hmac.key` (32 random bytes, 0600: the per-user secret that authenticates entries) and one file per
entry, named by the sha256 of the key:

    MAGIC (8 bytes) | format version (u16) | key length (u32) | key (utf-8) | HMAC-SHA256 (32 bytes)
    | payload length (u64) | payload

The MAC covers every other byte of the file, under the secret. An entry is read only when it is a regular file of
this user, not group/world-writable and at most `entry_limit` bytes (checked with lstat before opening and fstat
after, opened O_NOFOLLOW|O_NONBLOCK: a symlink, FIFO or device is never opened for reading); an entry that fails any
check, or its MAC, is removed and recompiled (DEVICEKIT_DEBUG>=1 says so). Writes go to `.tmp-*` files renamed into
place; temp files older than STALE_TMP_SECONDS (left by a killed writer) are removed when the cache opens and by
`clear()`, and counted by `info()`.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import secrets
import stat
import struct
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import settings
from ..debug import dprint, warn_once
from . import safedir

MAGIC = b"DKCACHE\x00"
FORMAT_VERSION = 2  # 2: HMAC-SHA256 under the per-user secret (1 was a plain sha256 anyone could recompute)
SUFFIX = ".dkc"
TMP_PREFIX = ".tmp-"
KEY_FILE = "hmac.key"
SECRET_BYTES = 32
DEFAULT_MAX_BYTES = 1 << 30
DEFAULT_MEMORY_MAX_BYTES = 256 << 20
MAX_ENTRY_BYTES = 256 << 20  # no compiled kernel is near this; a bigger file is not an entry of ours
STALE_TMP_SECONDS = 600.0  # a writer renames its temp file within milliseconds; 10 minutes means it was killed
_HEAD = struct.Struct("<HI")
_LEN = struct.Struct("<Q")
_MAC_LEN = 32


class CacheWarning(RuntimeWarning):
    """The disk cache is not used (refused directory) or could not be written (full disk, permissions)."""


@dataclass(frozen=True)
class CacheKey:
    device: str  # base device key ("CPU", "CUDA"): shared by CUDA:0 and CUDA:1
    compiler: str  # Compiler.identity(): name, version, flags, arch
    src_sha256: str

    def text(self) -> str:
        return json.dumps([FORMAT_VERSION, self.device, self.compiler, self.src_sha256], separators=(",", ":"))

    def filename(self) -> str:
        return hashlib.sha256(self.text().encode()).hexdigest() + SUFFIX


class CorruptEntry(Exception):
    pass


def _mac(secret: bytes, head: bytes, tail: bytes, payload: bytes) -> bytes:
    m = hmac.new(secret, head, hashlib.sha256)
    m.update(tail)
    m.update(payload)
    return m.digest()


def encode_entry(key: CacheKey, payload: bytes, secret: bytes) -> bytes:
    """The bytes of an entry file for `payload` under `key`, authenticated with `secret`."""
    k = key.text().encode()
    head = MAGIC + _HEAD.pack(FORMAT_VERSION, len(k)) + k
    tail = _LEN.pack(len(payload))
    return b"".join((head, _mac(secret, head, tail, payload), tail, payload))


def decode_entry(data: bytes, key: CacheKey, secret: bytes) -> bytes:
    """The payload of an entry file, or CorruptEntry (bad magic/version/length/MAC) / KeyError (another key)."""
    if data[:len(MAGIC)] != MAGIC:
        raise CorruptEntry("bad magic")
    pos = len(MAGIC)
    if len(data) < pos + _HEAD.size:
        raise CorruptEntry("truncated header")
    version, klen = _HEAD.unpack_from(data, pos)
    if version != FORMAT_VERSION:
        raise CorruptEntry(f"format version {version}, expected {FORMAT_VERSION}")
    pos += _HEAD.size
    if len(data) < pos + klen + _MAC_LEN + _LEN.size:
        raise CorruptEntry("truncated header")
    head = data[:pos + klen]
    stored_key = data[pos:pos + klen]
    pos += klen
    mac = data[pos:pos + _MAC_LEN]
    tail = data[pos + _MAC_LEN:pos + _MAC_LEN + _LEN.size]
    (plen,) = _LEN.unpack(tail)
    payload = data[pos + _MAC_LEN + _LEN.size:]
    if len(payload) != plen:
        raise CorruptEntry(f"payload is {len(payload)} bytes, header says {plen}")
    if not hmac.compare_digest(_mac(secret, head, tail, payload), mac):
        raise CorruptEntry("MAC mismatch: damaged, or not written by this user's devicekit")
    if stored_key != key.text().encode():
        raise KeyError(stored_key.decode(errors="replace"))
    return payload


def default_cache_dir() -> Path:
    if d := settings.get("DEVICEKIT_CACHE_DIR"):
        return Path(d).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "devicekit"


# ---------------------------------------------------------------- file helpers (everything relative to a dir fd)
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


def _read_file(dfd: int, name: str, limit: int) -> tuple[bytes | None, str | None]:
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


def _write_file(dfd: int, name: str, data: bytes) -> None:
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
            _unlink(dfd, tmp)


def _unlink(dfd: int, name: str) -> bool:
    try:
        os.unlink(name, dir_fd=dfd)
        return True
    except OSError:  # gone already, or a directory (never removed recursively)
        return False


def _listdir(dfd: int) -> list[str]:
    """Names in the pinned directory (through a fresh descriptor: the pinned one's offset may be shared after fork)."""
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0), dir_fd=dfd)
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def _tmp_files(dfd: int) -> list[tuple[str, float]]:
    """(name, age in seconds) of every temp file in the directory."""
    out, now = [], time.time()
    for name in _listdir(dfd):
        if name.startswith(TMP_PREFIX):
            try:
                out.append((name, now - os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mtime))
            except OSError:
                pass
    return out


def _remove_stale_tmp(dfd: int) -> int:
    return sum(_unlink(dfd, name) for name, age in _tmp_files(dfd) if age > STALE_TMP_SECONDS)


def _load_secret(rfd: int) -> bytes:
    """The per-user MAC secret in the pinned root: read, or created 0600 (atomically: written to a temp file, then
    hard-linked into place, so a concurrent process never reads half a key). A key file that is not a private regular
    file of this user with exactly SECRET_BYTES bytes is replaced (every entry then fails its MAC and is rebuilt)."""
    for _ in range(3):
        data, why = _read_file(rfd, KEY_FILE, SECRET_BYTES)
        if data is not None and len(data) == SECRET_BYTES:
            st = os.stat(KEY_FILE, dir_fd=rfd, follow_symlinks=False)
            if not stat.S_IMODE(st.st_mode) & 0o077:
                return data
            why = f"readable by others (mode {stat.S_IMODE(st.st_mode):04o})"
        elif data is not None:
            why = f"{len(data)} bytes, not {SECRET_BYTES}"
        if why is not None:
            dprint(1, f"cache: the key file {KEY_FILE} is {why}: replaced (existing entries will be rebuilt)")
            _unlink(rfd, KEY_FILE)
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
            _unlink(rfd, tmp)
    raise OSError(f"cannot set up the key file {KEY_FILE}")


# ---------------------------------------------------------------- the cache
_caches: weakref.WeakSet[CompileCache] = weakref.WeakSet()


class CompileCache:
    """Memory + disk cache of compiled bytes. Thread-safe; several processes may share one directory; usable in a
    child after fork (its lock is renewed)."""

    def __init__(self, directory: str | os.PathLike | None = None, max_bytes: int | None = None,
                 disk: bool | None = None, memory_max_bytes: int = DEFAULT_MEMORY_MAX_BYTES):
        self.root = Path(directory).expanduser() if directory is not None else default_cache_dir()
        if not self.root.is_absolute():
            self.root = Path(os.path.abspath(self.root))  # pinned relative to the cwd of now, not of first use
        if max_bytes is None:
            max_bytes = settings.get("DEVICEKIT_CACHE_MAX_BYTES")
        self.max_bytes = max_bytes
        self.entry_limit = min(max_bytes, MAX_ENTRY_BYTES)
        self.memory_max_bytes = memory_max_bytes
        self._disk_wanted = settings.get("DEVICEKIT_CACHE") if disk is None else disk
        self._mem: OrderedDict[CacheKey, bytes] = OrderedDict()
        self._mem_bytes = 0
        self._lock = threading.Lock()
        self._root_fd: int | None = None
        self._dfd: int | None = None  # the pinned entry directory
        self._secret = b""
        self._state: str | None = None  # None: not yet set up
        self._disk_bytes: int | None = None  # running estimate, rescanned before evicting
        self.stats = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "corrupt": 0, "refused": 0, "write_errors": 0,
                      "evicted": 0, "load_failures": 0, "stale_tmp_removed": 0}
        _caches.add(self)

    # ---- directory
    @property
    def directory(self) -> Path:
        return self.root / "compile"

    def _setup(self) -> int | None:
        """The pinned entry directory's descriptor; None (with one warning) when the disk cache can't be used."""
        if self._state is not None:
            return self._dfd
        if not self._disk_wanted:
            self._state = "disabled (DEVICEKIT_CACHE=0)"
            return None
        reason = safedir.unsupported()
        rfd = dfd = None
        if reason is None:
            try:
                rfd = safedir.open_private_dir(self.root)
                dfd = safedir.open_private_child(rfd, "compile", str(self.directory))
                self._secret = _load_secret(rfd)
            except safedir.UnsafeDirectory as e:
                reason = str(e)
            except OSError as e:
                reason = f"cannot set up {self.directory}: {e}"
        if reason is not None:
            for fd in (rfd, dfd):
                if fd is not None:
                    os.close(fd)
            self._state = f"refused: {reason}"
            warn_once(f"cache-refused:{self.root}", f"devicekit: not using the disk compile cache: {reason}; "
                      "compiling without it (memory only). Set DEVICEKIT_CACHE_DIR to a private directory.",
                      CacheWarning)
            return None
        self._root_fd, self._dfd = rfd, dfd
        self._state = "enabled"
        try:
            self.stats["stale_tmp_removed"] += _remove_stale_tmp(dfd) + _remove_stale_tmp(rfd)
        except OSError:
            pass
        return dfd

    def state(self) -> str:
        with self._lock:
            self._setup()
            return self._state or "enabled"

    def mac_key(self) -> bytes:
        """The per-user secret entries are authenticated with (empty when the disk cache is not in use)."""
        with self._lock:
            self._setup()
            return self._secret

    def close(self) -> None:
        """Release the pinned directory (the cache then runs in memory only)."""
        with self._lock:
            for fd in (self._dfd, self._root_fd):
                if fd is not None:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            self._dfd = self._root_fd = None
            self._state = "closed"

    def __del__(self):
        for fd in (getattr(self, "_dfd", None), getattr(self, "_root_fd", None)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass

    # ---- memory layer
    def _mem_put(self, key: CacheKey, lib: bytes, replace: bool = False) -> None:
        if key in self._mem:
            if not replace:
                return
            self._mem_bytes -= len(self._mem.pop(key))
        self._mem[key] = lib
        self._mem_bytes += len(lib)
        while self._mem_bytes > self.memory_max_bytes and len(self._mem) > 1:
            _, old = self._mem.popitem(last=False)
            self._mem_bytes -= len(old)

    # ---- disk layer
    def _path(self, name: str) -> Path:
        return self.directory / name

    def _read(self, dfd: int, key: CacheKey) -> bytes | None:
        name = key.filename()
        try:
            data, why = _read_file(dfd, name, self.entry_limit)
        except OSError as e:
            dprint(1, f"cache: cannot read {self._path(name)}: {e}; recompiling")
            return None
        if why is not None:
            self.stats["refused"] += 1
            removed = _unlink(dfd, name)
            dprint(1, f"cache: entry {self._path(name)} is {why}: not read, {'removed, ' if removed else ''}"
                      "recompiling")
            return None
        if data is None:
            return None
        try:
            return decode_entry(data, key, self._secret)
        except CorruptEntry as e:
            self.stats["corrupt"] += 1
            dprint(1, f"cache: entry {self._path(name)} is corrupt ({e}): deleted, recompiling")
            _unlink(dfd, name)
            return None
        except KeyError as e:
            dprint(1, f"cache: entry {self._path(name)} was written for another key ({e.args[0]}); not used, "
                      "recompiling")
            return None

    def _write(self, dfd: int, key: CacheKey, lib: bytes) -> None:
        data = encode_entry(key, lib, self._secret)
        if len(data) > self.entry_limit:
            dprint(1, f"cache: {len(data)} bytes for {key.filename()} is over the entry cap ({self.entry_limit}); "
                      "kept in memory only")
            return
        try:
            _write_file(dfd, key.filename(), data)
        except OSError as e:
            self.stats["write_errors"] += 1
            warn_once(f"cache-write:{self.directory}", f"devicekit: cannot write the compile cache in "
                      f"{self.directory} ({e}); continuing without storing new entries on disk", CacheWarning)
            return
        if self._disk_bytes is None:
            self._disk_bytes = self._scan(dfd)[1]
        else:
            self._disk_bytes += len(data)
        if self._disk_bytes > self.max_bytes:
            self._evict(dfd)

    @staticmethod
    def _scan(dfd: int) -> tuple[list[tuple[float, int, str]], int]:
        """(mtime, size, name) of every entry file (regular files only; temp files are not entries)."""
        entries = []
        for name in _listdir(dfd):
            if name.startswith(TMP_PREFIX) or not name.endswith(SUFFIX):
                continue
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                entries.append((st.st_mtime, st.st_size, name))
        return entries, sum(e[1] for e in entries)

    def _evict(self, dfd: int) -> None:
        entries, total = self._scan(dfd)
        entries.sort(key=lambda e: e[0])
        for _, size, name in entries:
            if total <= self.max_bytes:
                break
            if _unlink(dfd, name):
                self.stats["evicted"] += 1
                dprint(1, f"cache: evicted {name} ({size} bytes)")
            total -= size
        self._disk_bytes = total

    # ---- API
    def get(self, key: CacheKey) -> bytes | None:
        with self._lock:
            if (lib := self._mem.get(key)) is not None:
                self._mem.move_to_end(key)
                self.stats["memory_hits"] += 1
                return lib
            dfd = self._setup()
            if dfd is not None and (lib := self._read(dfd, key)) is not None:
                self.stats["disk_hits"] += 1
                self._mem_put(key, lib)
                return lib
        return None

    def put(self, key: CacheKey, lib: bytes, replace: bool = False) -> None:
        """Store `lib` under `key` (memory and disk). An existing memory entry is kept unless `replace`."""
        with self._lock:
            self._mem_put(key, lib, replace)
            dfd = self._setup()
            if dfd is not None:
                self._write(dfd, key, lib)

    def discard(self, key: CacheKey, reason: str = "") -> None:
        """Forget `key` in memory and on disk (its bytes failed to load: the next compile rebuilds them)."""
        with self._lock:
            if (lib := self._mem.pop(key, None)) is not None:
                self._mem_bytes -= len(lib)
            if reason:
                self.stats["load_failures"] += 1
            dfd = self._setup()
            if dfd is not None and _unlink(dfd, key.filename()):
                dprint(1, f"cache: entry {self._path(key.filename())} removed{': ' + reason if reason else ''}")

    def get_or_compile(self, key: CacheKey, compile_fn: Callable[[], bytes]) -> bytes:
        """The cached bytes for `key`, or `compile_fn()` stored under it. Compiles outside the lock."""
        if (lib := self.get(key)) is not None:
            return lib
        with self._lock:
            self.stats["misses"] += 1
        lib = compile_fn()
        self.put(key, lib)
        return lib

    def info(self) -> dict:
        with self._lock:
            dfd = self._setup()
            entries, total, tmp = [], 0, []
            if dfd is not None:
                entries, total = self._scan(dfd)
                tmp = _tmp_files(dfd)
            return {"dir": str(self.directory), "state": self._state, "entries": len(entries), "bytes": total,
                    "max_bytes": self.max_bytes, "tmp_files": len(tmp),
                    "stale_tmp_files": sum(age > STALE_TMP_SECONDS for _, age in tmp),
                    "memory_entries": len(self._mem), "memory_bytes": self._mem_bytes, **self.stats}

    def clear(self) -> int:
        """Drop every entry, in memory and on disk, and stale temp files (not a concurrent writer's fresh one).
        Returns the number of disk entries removed."""
        with self._lock:
            self._mem.clear()
            self._mem_bytes = 0
            dfd = self._setup()
            n = 0
            if dfd is not None:
                for name in _listdir(dfd):
                    if name.endswith(SUFFIX) and not name.startswith(TMP_PREFIX):
                        n += _unlink(dfd, name)
                self.stats["stale_tmp_removed"] += _remove_stale_tmp(dfd)
            self._disk_bytes = 0
            return n

    def _after_fork_in_child(self) -> None:
        if self._lock.locked():  # another thread was inside: the memory layer may be half-updated
            self._mem.clear()
            self._mem_bytes = 0
            self._disk_bytes = None
        self._lock = threading.Lock()


_default: CompileCache | None = None
_default_lock = threading.Lock()


def default_cache() -> CompileCache:
    """The process-wide cache, configured from the environment on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = CompileCache()
        return _default


def reset_default_cache() -> None:
    """Forget the process-wide cache (it is rebuilt from the environment on next use)."""
    global _default
    with _default_lock:
        _default = None


def cache_info() -> dict:
    return default_cache().info()


def cache_clear() -> int:
    return default_cache().clear()


def _after_fork_in_child() -> None:
    """A lock held by another thread at fork time is never released in the child: renew every cache's lock."""
    global _default_lock
    _default_lock = threading.Lock()
    for cache in list(_caches):
        cache._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
