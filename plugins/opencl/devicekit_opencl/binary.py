"""The OPENCL plugin's compiled bytes: the driver's program binary inside a small self-describing record.

An OpenCL driver is not written for damaged input: PoCL ends the process (SIGSEGV) in clBuildProgram when it is given
a third of its own program binary, and the core hands the runtime bytes it did not just compile (a CompiledSpec built
by hand or unpickled, a copied cache file). So the compiler wraps what clGetProgramInfo(CL_PROGRAM_BINARIES) returned
in a record the runtime checks before the driver sees a byte:

    magic "DKCLBIN1" | u32 key length | u64 payload length | 32-byte sha256 of key + payload | key | payload

`key` names the device the binary was built for (platform, its version, device, OpenCL version, driver version:
`device_key`), so another device's or driver's binary is refused by name too. A record that is short, long, of
another format, or whose digest does not match is a MalformedBinaryError naming the program and what was wrong.
This catches damage (a cut-short file, a flipped bit, another plugin's bytes), not a hostile author: a record with a
correct digest around a crafted payload still reaches the driver (the cache's MAC is the defence there).
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

from devicekit.errors import CompileError

__all__ = ["MAGIC", "MalformedBinaryError", "device_key", "unwrap", "wrap"]

MAGIC = b"DKCLBIN1"
_HEAD = struct.Struct("<8sIQ32s")  # magic, key length, payload length, sha256(key + payload)
MAX_KEY = 4096


class MalformedBinaryError(CompileError, RuntimeError):
    """Bytes the OPENCL runtime refuses to hand its driver: truncated, damaged, not a devicekit-opencl record, or
    built for another device or driver."""


def device_key(dev: Any) -> str:
    """What a program binary is specific to: the platform and its version, the device, its OpenCL version and the
    driver version (a pyopencl.Device)."""
    return (f"{dev.platform.name.strip()}|{dev.platform.version.strip()}|{dev.name.strip()}|{dev.version.strip()}|"
            f"driver {dev.driver_version.strip()}")


def wrap(payload: bytes, key: str) -> bytes:
    """The record of `payload` (the driver's binary) built for the device named by `key`."""
    k = key.encode()
    return _HEAD.pack(MAGIC, len(k), len(payload), hashlib.sha256(k + payload).digest()) + k + payload


def unwrap(lib: bytes, key: str, name: str) -> bytes:
    """The driver's binary inside `lib`, after checking the record (program `name` is for the message); raises
    MalformedBinaryError naming the first problem."""
    lib = bytes(lib)

    def bad(why: str) -> MalformedBinaryError:
        return MalformedBinaryError(f"OPENCL: refused the compiled bytes of {name!r}: {why}; they were not handed to "
                                    f"the driver (compile the kernel again)")
    if len(lib) < _HEAD.size:
        what = "empty" if not lib else f"{len(lib)} bytes"
        if not MAGIC.startswith(lib[:8]):
            what += ", not a devicekit-opencl record"
        raise bad(f"{what}, shorter than the {_HEAD.size}-byte record header")
    magic, klen, plen, digest = _HEAD.unpack_from(lib)
    if magic != MAGIC:
        raise bad(f"not a devicekit-opencl program record (starts {lib[:8]!r}, expected {MAGIC!r}): another device's "
                  f"or plugin's bytes, or a bare driver binary")
    if klen > MAX_KEY:
        raise bad(f"the record's device key is {klen} bytes long (at most {MAX_KEY}): a damaged header")
    want = _HEAD.size + klen + plen
    if len(lib) != want:
        raise bad(f"{len(lib)} bytes, the record says {want} ({'truncated' if len(lib) < want else 'trailing bytes'})")
    body = lib[_HEAD.size:]
    if hashlib.sha256(body).digest() != digest:
        raise bad("the sha256 of the record's contents does not match the one written at compile time (damaged bytes)")
    got = body[:klen].decode("utf-8", "replace")
    if got != key:
        raise bad(f"built for another device or driver ({got}), this is {key}")
    return body[klen:]
