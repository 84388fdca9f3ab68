"""The compile cache: compiled bytes in memory and on disk, keyed by (base device key, compiler identity, sha256 of
the source). The disk holds code this process will execute, so it is guarded against other local users and against
broken or planted files (threat model: docs/reliability.md).

Directory: DEVICEKIT_CACHE_DIR, else the platform's user cache directory (platformdirs: $XDG_CACHE_HOME/devicekit or
~/.cache/devicekit on Linux, ~/Library/Caches/devicekit on macOS); entries in `<dir>/compile/`.
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

This module holds the key, the entry format and its MAC (the part scripts/mutation.py targets); the store is
cache_store.py (`CompileCache`, `default_cache`, `cache_info`, `cache_clear`, re-exported here lazily: it imports this
module) and the file handling cache_files.py.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os  # noqa: F401 - `devicekit.compile.cache.os` is how a test stalls a writer's rename
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import settings

if TYPE_CHECKING:
    from .cache_store import CompileCache, cache_clear, cache_info, default_cache, reset_default_cache

__all__ = ["CacheKey", "CacheWarning", "CompileCache", "CorruptEntry", "cache_clear", "cache_info", "decode_entry",
           "default_cache", "default_cache_dir", "encode_entry", "reset_default_cache"]

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
    """DEVICEKIT_CACHE_DIR, else the platform's per-user cache directory (platformdirs): $XDG_CACHE_HOME/devicekit or
    ~/.cache/devicekit on Linux, ~/Library/Caches/devicekit on macOS (where Metal lives), %LOCALAPPDATA% on Windows."""
    if d := settings.get("DEVICEKIT_CACHE_DIR"):
        return Path(d).expanduser()
    import platformdirs  # imported here: only a cache with no directory given needs it

    return Path(platformdirs.user_cache_dir("devicekit", appauthor=False))


_STORE_NAMES = frozenset({"CompileCache", "default_cache", "reset_default_cache", "cache_info", "cache_clear"})


def __getattr__(name: str) -> Any:
    """The store's names, imported on first use (cache_store imports this module: the circle is lazy)."""
    if name in _STORE_NAMES:
        from . import cache_store
        return getattr(cache_store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
