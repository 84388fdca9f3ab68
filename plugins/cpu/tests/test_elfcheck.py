"""elfcheck: damaged compiled bytes are refused with an error naming the program, before the JIT or dlopen sees them.

Every damaged case here is refused by the check, so it is safe to run in process; the subprocess versions (what
the loader would do without the check) are tests/reliability/test_malformed.py::test_bad_compiled_bytes_*.
"""

from __future__ import annotations

import glob
import struct
import sys

import pytest
from devicekit.compile.compiler import CompiledSpec
from devicekit.errors import CompileError
from devicekit.testing.random_kernels import random_kernel

PAIRS = ("llvm", "c")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF hosts (Linux) only")


@pytest.fixture(scope="module")
def built(cpu):
    """pair -> a CompiledSpec of a small random kernel."""
    out = {}
    for pair in PAIRS:
        r, c = cpu.pair(pair)
        out[pair] = c.compile(r.render(random_kernel(1).kernel))
    return out


def _damage(lib: bytes, mode: str) -> bytes:
    b = bytearray(lib)
    if mode == "truncated":
        return lib[: len(lib) // 2]
    if mode == "empty":
        return b""
    if mode == "garbage":
        return bytes((i * 37 + 11) % 256 for i in range(len(lib)))
    if mode == "elf-header-then-garbage":
        return lib[:64] + bytes((i * 91 + 7) % 256 for i in range(len(lib) - 64))
    if mode == "bytes-flipped":
        for i in range(64, len(b), 97):
            b[i] ^= 0xFF
        return bytes(b)
    if mode == "wrong-class":
        b[4] = 1
    elif mode == "wrong-endian":
        b[5] = 2
    elif mode == "wrong-machine":
        b[18:20] = struct.pack("<H", 183 if b[18:20] == struct.pack("<H", 62) else 62)
    elif mode == "section-table-past-end":
        b[0x28:0x30] = struct.pack("<Q", len(lib) - 8)
    elif mode == "bad-shstrndx":
        b[0x3E:0x40] = struct.pack("<H", 0xFFF0)
    elif mode == "program-headers-past-end":
        b[0x20:0x28] = struct.pack("<Q", len(lib) - 8)
    else:
        raise ValueError(mode)
    return bytes(b)


COMMON = ["truncated", "empty", "garbage", "elf-header-then-garbage", "bytes-flipped", "wrong-class", "wrong-endian",
          "wrong-machine", "section-table-past-end", "bad-shstrndx"]


@pytest.mark.parametrize(("pair", "mode"), [(p, m) for p in PAIRS for m in COMMON]
                         + [("c", "program-headers-past-end")])  # an object file has no program headers
def test_damaged_bytes_raise_naming_the_program(pair, mode, built, cpu):
    from devicekit_cpu.elfcheck import MalformedObjectError
    comp = built[pair]
    bad = _damage(comp.lib, mode)
    with pytest.raises(MalformedObjectError) as e:
        cpu.runtime(CompiledSpec(comp.spec, bad, comp.compiler_id))
    assert isinstance(e.value, CompileError) and isinstance(e.value, RuntimeError)
    assert repr(comp.spec.name) in str(e.value) and "not a loadable ELF" in str(e.value)


@pytest.mark.parametrize("pair", PAIRS)
def test_good_bytes_pass_and_run(pair, built, cpu):
    from devicekit_cpu.elfcheck import check
    comp = built[pair]
    check(comp.lib, comp.spec.name, shared=pair == "c")
    assert cpu.runtime(comp) is not None


def test_dynamic_segment_out_of_bounds_is_refused(built):
    """PT_DYNAMIC's file range past the end: the loader would read the dynamic tags from beyond the file."""
    from devicekit_cpu.elfcheck import MalformedObjectError, check
    b = bytearray(built["c"].lib)
    phoff, phnum = struct.unpack_from("<Q", b, 0x20)[0], struct.unpack_from("<H", b, 0x38)[0]
    for i in range(phnum):
        if struct.unpack_from("<I", b, phoff + 56 * i)[0] == 2:  # PT_DYNAMIC
            struct.pack_into("<Q", b, phoff + 56 * i + 8, len(b) - 16)
            break
    else:
        pytest.fail("no PT_DYNAMIC in the shared object")
    with pytest.raises(MalformedObjectError, match="outside the .*-byte file|dynamic"):
        check(bytes(b), "k", shared=True)


def test_the_wrong_kind_is_refused(built):
    """An object file where a shared object is expected and the other way round."""
    from devicekit_cpu.elfcheck import MalformedObjectError, check
    with pytest.raises(MalformedObjectError, match="ELF type"):
        check(built["llvm"].lib, "k", shared=True)
    with pytest.raises(MalformedObjectError, match="ELF type"):
        check(built["c"].lib, "k", shared=False)


def test_system_libraries_pass():
    """No false alarms on real shared objects and object files of this host (a sample, to stay fast)."""
    from devicekit_cpu.elfcheck import check
    seen = 0
    for pattern in ("/lib/*-linux-gnu/libm.so.6", "/lib/*-linux-gnu/libc.so.6", "/lib/*-linux-gnu/libz.so.1",
                    "/usr/lib/gcc/*-linux-gnu/*/crtbeginS.o", "/usr/lib/*-linux-gnu/crti.o"):
        for path in glob.glob(pattern)[:1]:
            with open(path, "rb") as f:
                b = f.read()
            if b[:4] == b"\x7fELF" and b[16] in (1, 3):
                check(b, path, shared=b[16] == 3)
                seen += 1
    if not seen:
        pytest.skip("no system libraries found at the usual paths")
