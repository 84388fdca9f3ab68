"""The compile cache's key and entry format (compile/cache.py, docs/reliability.md): the bytes an entry file holds,
byte by byte, and that every damaged, truncated, forged or misplaced entry is refused with CorruptEntry (or KeyError:
another key's entry), never loaded and never a struct/index error. Pins what the mutation run of issue 38 changes."""

from __future__ import annotations

import hashlib
import hmac
import json
import struct

import pytest
from devicekit.compile.cache import FORMAT_VERSION, MAGIC, SUFFIX, CacheKey, CorruptEntry, decode_entry, encode_entry

SECRET = bytes(range(32))
KEY = CacheKey("CPU", "clang-17 -O2 arch=x86-64-v3", "ab" * 32)


def test_the_key_text_and_filename():
    assert FORMAT_VERSION == 2 and MAGIC == b"DKCACHE\x00" and SUFFIX == ".dkc"
    assert KEY.text() == json.dumps([2, "CPU", "clang-17 -O2 arch=x86-64-v3", "ab" * 32], separators=(",", ":"))
    assert KEY.text() == '[2,"CPU","clang-17 -O2 arch=x86-64-v3","' + "ab" * 32 + '"]'
    assert KEY.filename() == hashlib.sha256(KEY.text().encode()).hexdigest() + ".dkc"
    others = [CacheKey("CUDA", KEY.compiler, KEY.src_sha256), CacheKey("CPU", "clang-18", KEY.src_sha256),
              CacheKey("CPU", KEY.compiler, "cd" * 32), CacheKey("CPU", "", KEY.src_sha256 + KEY.compiler)]
    assert len({k.filename() for k in [KEY, *others]}) == 5


def test_the_entry_bytes():
    payload = b"\x7fELF compiled bytes"
    data = encode_entry(KEY, payload, SECRET)
    k = KEY.text().encode()
    head = b"DKCACHE\x00" + struct.pack("<HI", 2, len(k)) + k
    tail = struct.pack("<Q", len(payload))
    mac = hmac.new(SECRET, head + tail + payload, hashlib.sha256).digest()
    assert data == head + mac + tail + payload
    assert decode_entry(data, KEY, SECRET) == payload
    assert decode_entry(encode_entry(KEY, b"", SECRET), KEY, SECRET) == b""


def test_every_flipped_byte_is_refused():
    data = encode_entry(KEY, b"payload!", SECRET)
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x01
        with pytest.raises(CorruptEntry):
            decode_entry(bytes(bad), KEY, SECRET)


def test_every_truncation_and_an_extra_byte_are_refused():
    data = encode_entry(KEY, b"payload!", SECRET)
    for n in range(len(data)):
        with pytest.raises(CorruptEntry):
            decode_entry(data[:n], KEY, SECRET)
    with pytest.raises(CorruptEntry, match="payload is 9 bytes, header says 8"):
        decode_entry(data + b"x", KEY, SECRET)


def test_the_refusals_say_what_is_wrong():
    data = encode_entry(KEY, b"payload!", SECRET)
    with pytest.raises(CorruptEntry, match="^bad magic$"):
        decode_entry(b"DKCACHE\x01" + data[8:], KEY, SECRET)
    with pytest.raises(CorruptEntry, match="^bad magic$"):
        decode_entry(b"", KEY, SECRET)
    for n in (8, 13):  # the magic, then less than version + key length
        with pytest.raises(CorruptEntry, match="^truncated header$"):
            decode_entry(data[:n], KEY, SECRET)
    with pytest.raises(CorruptEntry, match="^truncated header$"):  # the key, MAC and length cut
        decode_entry(data[:14 + len(KEY.text()) + 32 + 7], KEY, SECRET)
    v1 = data[:8] + struct.pack("<H", 1) + data[10:]
    with pytest.raises(CorruptEntry, match="format version 1, expected 2"):
        decode_entry(v1, KEY, SECRET)
    with pytest.raises(CorruptEntry, match="MAC mismatch: damaged, or not written by this user's devicekit"):
        decode_entry(data, KEY, b"\x00" * 32)  # another user's secret
    with pytest.raises(CorruptEntry, match="MAC mismatch"):
        decode_entry(data[:-1] + b"?", KEY, SECRET)
    # exactly the bytes the header needs, nothing missing: a MAC check, not a truncation
    exact = encode_entry(KEY, b"", SECRET)
    assert decode_entry(exact, KEY, SECRET) == b""
    with pytest.raises(CorruptEntry, match="^truncated header$"):
        decode_entry(exact[:-1], KEY, SECRET)


def test_an_entry_of_another_key_is_a_key_error():
    other = CacheKey("CPU", KEY.compiler, "cd" * 32)
    with pytest.raises(KeyError, match="cdcd"):
        decode_entry(encode_entry(other, b"lib", SECRET), KEY, SECRET)


def test_a_key_that_is_not_utf8_is_a_key_error():
    """An authenticated entry whose stored key is not UTF-8 (a future or foreign writer holding the secret): still
    the KeyError of another key, its bytes shown with replacement characters, not a UnicodeDecodeError."""
    payload, k = b"lib", b'[2,"CPU",\xff]'
    head = MAGIC + struct.pack("<HI", FORMAT_VERSION, len(k)) + k
    tail = struct.pack("<Q", len(payload))
    data = head + hmac.new(SECRET, head + tail + payload, hashlib.sha256).digest() + tail + payload
    with pytest.raises(KeyError, match="\ufffd"):
        decode_entry(data, KEY, SECRET)


def test_a_forged_entry_without_the_secret_is_refused():
    """Version 1's plain sha256 (anyone could recompute it) in place of the MAC: refused under version 2."""
    payload = b"planted"
    k = KEY.text().encode()
    head = MAGIC + struct.pack("<HI", FORMAT_VERSION, len(k)) + k
    tail = struct.pack("<Q", len(payload))
    forged = head + hashlib.sha256(head + tail + payload).digest() + tail + payload
    with pytest.raises(CorruptEntry, match="MAC mismatch"):
        decode_entry(forged, KEY, SECRET)
