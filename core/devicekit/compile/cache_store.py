"""The compile cache's store: `CompileCache` (a memory layer over the pinned disk directory, with eviction, stats
and fork safety) and the process-wide cache. The key and entry format are in cache.py, the file handling in
cache_files.py; `devicekit.compile.cache` re-exports everything here, the import path callers use."""

from __future__ import annotations

import os
import stat
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from .. import settings
from ..debug import dprint, warn_once
from . import cache_files as files
from . import safedir
from .cache import (
    DEFAULT_MEMORY_MAX_BYTES,
    MAX_ENTRY_BYTES,
    STALE_TMP_SECONDS,
    SUFFIX,
    TMP_PREFIX,
    CacheKey,
    CacheWarning,
    CorruptEntry,
    decode_entry,
    default_cache_dir,
    encode_entry,
)

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
                self._secret = files.load_secret(rfd)
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
            self.stats["stale_tmp_removed"] += files.remove_stale_tmp(dfd) + files.remove_stale_tmp(rfd)
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

    def __del__(self, _close=os.close):
        # os.close bound at definition: at interpreter shutdown this module's `os` may already be None
        for fd in (getattr(self, "_dfd", None), getattr(self, "_root_fd", None)):
            if fd is not None:
                try:
                    _close(fd)
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
            data, why = files.read_file(dfd, name, self.entry_limit)
        except OSError as e:
            dprint(1, f"cache: cannot read {self._path(name)}: {e}; recompiling")
            return None
        if why is not None:
            self.stats["refused"] += 1
            removed = files.unlink(dfd, name)
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
            files.unlink(dfd, name)
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
            files.write_file(dfd, key.filename(), data)
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
        for name in files.listdir(dfd):
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
            if files.unlink(dfd, name):
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
            if dfd is not None and files.unlink(dfd, key.filename()):
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
                tmp = files.tmp_files(dfd)
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
                for name in files.listdir(dfd):
                    if name.endswith(SUFFIX) and not name.startswith(TMP_PREFIX):
                        n += files.unlink(dfd, name)
                self.stats["stale_tmp_removed"] += files.remove_stale_tmp(dfd)
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
