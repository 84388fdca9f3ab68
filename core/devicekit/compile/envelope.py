"""A driver's binary inside a small self-describing record, checked before the driver sees a byte.

A GPU driver is not written for damaged input: PoCL ends the process (SIGSEGV) in clBuildProgram when given a third
of its own program binary, and the core hands a runtime bytes it did not just compile (a CompiledSpec built by hand
or unpickled, a copied cache file). A compiler wraps the driver's output, its runtime unwraps it:

    magic (8 bytes) | u32 key length | u64 payload length | 32-byte sha256 of key + payload | key | payload

`key` names what the binary is specific to (platform, device, driver version), so another device's binary is refused
by name. A record that is short, long, of another format, for another key or whose digest does not match is a
MalformedBinaryError naming the program and what was wrong. It catches damage, not a hostile author: a crafted
payload with a correct digest still reaches the driver (the compile cache's MAC is the defence there)."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from ..errors import CompileError

__all__ = ["Envelope", "MalformedBinaryError"]

_HEAD = struct.Struct("<8sIQ32s")  # magic, key length, payload length, sha256(key + payload)
MAX_KEY = 4096


class MalformedBinaryError(CompileError, RuntimeError):
    """Compiled bytes a runtime refuses to hand its driver: truncated, damaged, another format, or for another key."""


@dataclass(frozen=True)
class Envelope:
    """One plugin's record format: `magic` (8 bytes, also part of its compiler identity), `device` and `what` name
    the device kind and the format in messages ("OPENCL", "devicekit-opencl")."""

    magic: bytes
    device: str
    what: str

    def wrap(self, payload: bytes, key: str) -> bytes:
        """The record of `payload` (the driver's binary) built for what `key` names."""
        k = key.encode()
        return _HEAD.pack(self.magic, len(k), len(payload), hashlib.sha256(k + payload).digest()) + k + payload

    def unwrap(self, lib: bytes, key: str, name: str) -> bytes:
        """The driver's binary inside `lib` after checking the record (`name`: the program, for the message)."""
        lib = bytes(lib)

        def bad(why: str) -> MalformedBinaryError:
            return MalformedBinaryError(f"{self.device}: refused the compiled bytes of {name!r}: {why}; they were not "
                                        f"handed to the driver (compile the kernel again)")
        if len(lib) < _HEAD.size:
            what = "empty" if not lib else f"{len(lib)} bytes"
            if not self.magic.startswith(lib[:8]):
                what += f", not a {self.what} record"
            raise bad(f"{what}, shorter than the {_HEAD.size}-byte record header")
        magic, klen, plen, digest = _HEAD.unpack_from(lib)
        if magic != self.magic:
            raise bad(f"not a {self.what} program record (starts {lib[:8]!r}, expected {self.magic!r}): another "
                      f"device's or plugin's bytes, or a bare driver binary")
        if klen > MAX_KEY:
            raise bad(f"the record's device key is {klen} bytes long (at most {MAX_KEY}): a damaged header")
        want = _HEAD.size + klen + plen
        if len(lib) != want:
            raise bad(f"{len(lib)} bytes, the record says {want} "
                      f"({'truncated' if len(lib) < want else 'trailing bytes'})")
        body = lib[_HEAD.size:]
        if hashlib.sha256(body).digest() != digest:
            raise bad("the sha256 of the record's contents does not match the one written at compile time "
                      "(damaged bytes)")
        if (got := body[:klen].decode("utf-8", "replace")) != key:
            raise bad(f"built for another device or driver ({got}), this is {key}")
        return body[klen:]
