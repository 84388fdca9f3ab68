"""The compile cache: compiled bytes in memory and on disk, keyed by (base device key, compiler identity, sha256 of
the source).

On disk: one file per entry under `<dir>/compile/`, named by the sha256 of the key. Each file is

    MAGIC (8 bytes) | format version (u16) | key length (u32) | key (utf-8) | sha256(payload) (32 bytes)
    | payload length (u64) | payload

written to a temp file in the same directory and renamed into place (atomic: readers see the old entry or the new
one, never a torn one). On read the magic, version, key and checksum are all checked; an entry that fails is deleted
and recompiled (DEVICEKIT_DEBUG>=1 says so). An entry whose stored key differs from the asked key is never used.

The directory is DEVICEKIT_CACHE_DIR, else $XDG_CACHE_HOME/devicekit, else ~/.cache/devicekit; created 0700. A
directory that is group/world-writable or owned by another user is refused with one warning and the cache runs in
memory only. DEVICEKIT_CACHE=0 turns the disk cache off. DEVICEKIT_CACHE_MAX_BYTES caps the disk size (default
1 GiB); least recently used entries (by mtime, touched on each hit) are evicted.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import settings
from ..debug import dprint, warn_once

MAGIC = b"DKCACHE\x00"
FORMAT_VERSION = 1
SUFFIX = ".dkc"
DEFAULT_MAX_BYTES = 1 << 30
DEFAULT_MEMORY_MAX_BYTES = 256 << 20
_HEAD = struct.Struct("<HI")
_LEN = struct.Struct("<Q")


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


def encode_entry(key: CacheKey, payload: bytes) -> bytes:
    k = key.text().encode()
    return b"".join((MAGIC, _HEAD.pack(FORMAT_VERSION, len(k)), k, hashlib.sha256(payload).digest(),
                     _LEN.pack(len(payload)), payload))


def decode_entry(data: bytes, key: CacheKey) -> bytes:
    """The payload of an entry file, or CorruptEntry (bad magic/version/length/checksum) / KeyError (another key)."""
    if data[:len(MAGIC)] != MAGIC:
        raise CorruptEntry("bad magic")
    pos = len(MAGIC)
    if len(data) < pos + _HEAD.size:
        raise CorruptEntry("truncated header")
    version, klen = _HEAD.unpack_from(data, pos)
    if version != FORMAT_VERSION:
        raise CorruptEntry(f"format version {version}, expected {FORMAT_VERSION}")
    pos += _HEAD.size
    stored_key = data[pos:pos + klen]
    pos += klen
    if len(data) < pos + 32 + _LEN.size:
        raise CorruptEntry("truncated header")
    digest = data[pos:pos + 32]
    (plen,) = _LEN.unpack_from(data, pos + 32)
    pos += 32 + _LEN.size
    payload = data[pos:]
    if len(payload) != plen:
        raise CorruptEntry(f"payload is {len(payload)} bytes, header says {plen}")
    if hashlib.sha256(payload).digest() != digest:
        raise CorruptEntry("checksum mismatch")
    if stored_key != key.text().encode():
        raise KeyError(stored_key.decode(errors="replace"))
    return payload


def default_cache_dir() -> Path:
    if d := settings.get("DEVICEKIT_CACHE_DIR"):
        return Path(d).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "devicekit"


def _check_dir(path: Path) -> str | None:
    """None when `path` is safe to use, else why not."""
    st = path.stat()
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"{path} is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is group- or world-writable (mode {stat.S_IMODE(st.st_mode):04o}); use chmod 700"
    return None


class CompileCache:
    """Memory + disk cache of compiled bytes. Thread-safe; several processes may share one directory."""

    def __init__(self, directory: str | os.PathLike | None = None, max_bytes: int | None = None,
                 disk: bool | None = None, memory_max_bytes: int = DEFAULT_MEMORY_MAX_BYTES):
        self.root = Path(directory).expanduser() if directory is not None else default_cache_dir()
        if max_bytes is None:
            max_bytes = settings.get("DEVICEKIT_CACHE_MAX_BYTES")
        self.max_bytes = max_bytes
        self.memory_max_bytes = memory_max_bytes
        self._disk_wanted = settings.get("DEVICEKIT_CACHE") if disk is None else disk
        self._mem: OrderedDict[CacheKey, bytes] = OrderedDict()
        self._mem_bytes = 0
        self._lock = threading.Lock()
        self._dir: Path | None = None
        self._state: str | None = None  # None: not yet set up
        self._disk_bytes: int | None = None  # running estimate, rescanned before evicting
        self.stats = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "corrupt": 0, "write_errors": 0, "evicted": 0}

    # ---- directory
    @property
    def directory(self) -> Path:
        return self.root / "compile"

    def _setup(self) -> Path | None:
        """The entry directory, creating it 0700; None (with one warning) when the disk cache can't be used."""
        if self._state is not None:
            return self._dir
        if not self._disk_wanted:
            self._state = "disabled (DEVICEKIT_CACHE=0)"
            return None
        d = self.directory
        reason = None
        try:
            for p in (self.root, d):  # check the root before creating anything inside it
                if not p.exists():
                    p.mkdir(mode=0o700, parents=True, exist_ok=True)
                    os.chmod(p, 0o700)
                if (reason := _check_dir(p)) is not None:
                    break
        except OSError as e:
            reason = f"cannot create {d}: {e}"
        if reason is not None:
            self._state = f"refused: {reason}"
            warn_once(f"cache-refused:{self.root}", f"devicekit: not using the disk compile cache: {reason}; "
                      "compiling without it (memory only). Set DEVICEKIT_CACHE_DIR to a private directory.",
                      CacheWarning)
            return None
        self._state = "enabled"
        self._dir = d
        return d

    def state(self) -> str:
        with self._lock:
            self._setup()
            return self._state or "enabled"

    # ---- memory layer
    def _mem_put(self, key: CacheKey, lib: bytes) -> None:
        if key in self._mem:
            return
        self._mem[key] = lib
        self._mem_bytes += len(lib)
        while self._mem_bytes > self.memory_max_bytes and len(self._mem) > 1:
            _, old = self._mem.popitem(last=False)
            self._mem_bytes -= len(old)

    # ---- disk layer
    def _read(self, d: Path, key: CacheKey) -> bytes | None:
        path = d / key.filename()
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            dprint(1, f"cache: cannot read {path}: {e}; recompiling")
            return None
        try:
            lib = decode_entry(data, key)
        except CorruptEntry as e:
            self.stats["corrupt"] += 1
            dprint(1, f"cache: entry {path} is corrupt ({e}): deleted, recompiling")
            try:
                path.unlink()
            except OSError:
                pass
            return None
        except KeyError as e:
            dprint(1, f"cache: entry {path} was written for another key ({e.args[0]}); not used, recompiling")
            return None
        try:
            os.utime(path)  # LRU: a hit makes the entry young again
        except OSError:
            pass
        return lib

    def _write(self, d: Path, key: CacheKey, lib: bytes) -> None:
        data = encode_entry(key, lib)
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=SUFFIX)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, d / key.filename())
            tmp = None
        except OSError as e:
            self.stats["write_errors"] += 1
            warn_once(f"cache-write:{d}", f"devicekit: cannot write the compile cache in {d} ({e}); continuing "
                      "without storing new entries on disk", CacheWarning)
            return
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        if self._disk_bytes is None:
            self._disk_bytes = self._scan(d)[1]
        else:
            self._disk_bytes += len(data)
        if self._disk_bytes > self.max_bytes:
            self._evict(d)

    @staticmethod
    def _scan(d: Path) -> tuple[list[tuple[float, int, Path]], int]:
        entries = []
        for p in d.glob("*" + SUFFIX):
            if p.name.startswith(".tmp-"):
                continue
            try:
                st = p.stat()
            except OSError:
                continue
            entries.append((st.st_mtime, st.st_size, p))
        return entries, sum(e[1] for e in entries)

    def _evict(self, d: Path) -> None:
        entries, total = self._scan(d)
        entries.sort(key=lambda e: e[0])
        for _, size, p in entries:
            if total <= self.max_bytes:
                break
            try:
                p.unlink()
                self.stats["evicted"] += 1
                dprint(1, f"cache: evicted {p.name} ({size} bytes)")
            except OSError:
                pass
            total -= size
        self._disk_bytes = total

    # ---- API
    def get(self, key: CacheKey) -> bytes | None:
        with self._lock:
            if (lib := self._mem.get(key)) is not None:
                self._mem.move_to_end(key)
                self.stats["memory_hits"] += 1
                return lib
            d = self._setup()
            if d is not None and (lib := self._read(d, key)) is not None:
                self.stats["disk_hits"] += 1
                self._mem_put(key, lib)
                return lib
        return None

    def put(self, key: CacheKey, lib: bytes) -> None:
        with self._lock:
            self._mem_put(key, lib)
            d = self._setup()
            if d is not None:
                self._write(d, key, lib)

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
            d = self._setup()
            entries, total = self._scan(d) if d is not None else ([], 0)
            return {"dir": str(self.directory), "state": self._state, "entries": len(entries), "bytes": total,
                    "max_bytes": self.max_bytes, "memory_entries": len(self._mem), "memory_bytes": self._mem_bytes,
                    **self.stats}

    def clear(self) -> int:
        """Drop every entry, in memory and on disk. Returns the number of disk entries removed."""
        with self._lock:
            self._mem.clear()
            self._mem_bytes = 0
            d = self._setup()
            n = 0
            if d is not None:
                for _, _, p in self._scan(d)[0]:  # not .tmp- files: another process may be about to rename one
                    try:
                        p.unlink()
                        n += 1
                    except OSError:
                        pass
            self._disk_bytes = 0
            return n


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
