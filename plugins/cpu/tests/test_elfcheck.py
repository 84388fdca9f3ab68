"""elfcheck: damaged compiled bytes are refused with an error naming the program, before the JIT or dlopen sees them.

Every damaged case here is refused by the check, so it is safe to run in process; the subprocess versions (what
the loader would do without the check) are tests/reliability/test_malformed.py::test_bad_compiled_bytes_*.
"""

from __future__ import annotations

import glob
import struct
import sys

import pytest
from devicekit import settings
from devicekit.compile.compiler import CompiledSpec
from devicekit.errors import CompileError
from devicekit.testing.conformance import probe_kernel

PAIRS = ("llvm", "c")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF hosts (Linux) only")


@pytest.fixture(scope="module")
def built(cpu):
    """pair -> a CompiledSpec of out = a * b + c (every output element nonzero, so a kernel that never ran shows)."""
    out = {}
    for pair in PAIRS:
        r, c = cpu.pair(pair)
        out[pair] = c.compile(r.render(probe_kernel()))
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
    import devicekit as dk
    import numpy as np
    a, b, c = (np.arange(1, 8, dtype=np.float32) * s for s in (1.5, -2.0, 0.25))
    prog = cpu.runtime(comp)  # the checked bytes, loaded and then called: a loaded kernel that never runs fails
    got = dk.run(prog, a=a, b=b, c=c, n=a.size)["out"]
    np.testing.assert_array_equal(got, a * b + c)


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


# ---------------------------------------------------------------- trusted bytes skip the check
# Contract with the compile cache: CompiledSpec gets `trusted: bool = False`, set by the core for bytes its compiler
# just produced or a cache entry whose MAC verified. The runtime reads getattr(compiled, "trusted", False).

def _count_checks(monkeypatch) -> list:
    """Every call of the real elfcheck.check, recorded (the check still runs)."""
    from devicekit_cpu import elfcheck
    calls, real = [], elfcheck.check

    def counting(lib, name, shared):
        calls.append(name)
        return real(lib, name, shared)
    monkeypatch.setattr(elfcheck, "check", counting)
    return calls


def _fresh(cpu, pair: str, seed: int):
    """A CompiledSpec of out = a * <seed>.5 + b, a kernel this process has not loaded yet (loads are memoized by
    content)."""
    from devicekit import kernels
    r, c = cpu.pair(pair)
    return c.compile(r.render(kernels.elementwise(f"a * {seed}.5 + b", name=f"trust_{pair}_{seed}")))


def _runs(cpu, prog, seed: int) -> None:
    import numpy as np
    from devicekit.memory import Buffer
    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    out = Buffer(cpu, 8, "float32")
    prog.execute([Buffer(cpu, 8, "float32").copyin(a), Buffer(cpu, 8, "float32").copyin(b), out], [8], wait=True)
    np.testing.assert_array_equal(out.numpy(), a * np.float32(seed + 0.5) + b)


@pytest.mark.parametrize("pair", PAIRS)
def test_foreign_bytes_are_checked(pair, cpu, monkeypatch):
    comp = _fresh(cpu, pair, 1)
    calls = _count_checks(monkeypatch)
    foreign = CompiledSpec(comp.spec, comp.lib, comp.compiler_id)  # bytes handed in by hand: not trusted
    assert foreign.trusted is False
    _runs(cpu, cpu.runtime(foreign), 1)
    assert calls == [comp.spec.name]


@pytest.mark.parametrize("pair", PAIRS)
def test_trusted_bytes_skip_the_check_and_run(pair, cpu, monkeypatch):
    """Bytes this process's compiler just produced are trusted (CompiledSpec.trusted, set by the core)."""
    comp = _fresh(cpu, pair, 2)
    calls = _count_checks(monkeypatch)
    assert comp.trusted is True
    _runs(cpu, cpu.runtime(comp), 2)
    assert calls == []


def test_only_a_real_true_counts_as_trusted(cpu, monkeypatch):
    import types
    comp = _fresh(cpu, "llvm", 3)
    calls = _count_checks(monkeypatch)
    cpu.runtime(types.SimpleNamespace(spec=comp.spec, lib=comp.lib, compiler_id=comp.compiler_id, trusted="yes"))
    assert calls == [comp.spec.name]


@pytest.mark.parametrize("pair", PAIRS)
def test_random_damage_is_refused_or_passed_never_anything_else(pair, built):
    """Bytes damaged at random (a byte, a bit in the header, a word, several bytes) make check() raise
    MalformedObjectError or pass; no other exception escapes pyelftools. DEVICEKIT_SLOW=1 runs 20x more."""
    import random

    from devicekit_cpu.elfcheck import MalformedObjectError, check
    lib, shared = built[pair].lib, pair == "c"
    rng = random.Random(f"elf-{pair}")
    refused = 0
    for trial in range(150 * (20 if settings.get("DEVICEKIT_SLOW") else 1)):
        b = bytearray(lib)
        if trial % 3 == 0:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif trial % 3 == 1:
            b[rng.randrange(64)] ^= 1 << rng.randrange(8)
        else:
            i = rng.randrange(len(b) - 8)
            b[i:i + 8] = rng.getrandbits(64).to_bytes(8, "little")
        try:
            check(bytes(b), "k", shared)
        except MalformedObjectError as e:
            assert "'k'" in str(e)
            refused += 1
    assert refused > 0
