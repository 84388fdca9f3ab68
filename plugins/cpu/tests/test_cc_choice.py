"""The c pair's compiler choice (clang first) and its table of known-bad compiler/flag combinations: every compiler
the pair accepts must give right answers, and the identity names what the bytes came from."""

from __future__ import annotations

import os
import shutil

import pytest
from devicekit_cpu import cc_compiler
from devicekit_cpu.cc_compiler import FLAGS, CCInfo, CCompiler, cc_info, find_cc, safe_flags

AVX512 = frozenset({"sse2", "avx2", "avx512f"})
SSE2 = frozenset({"sse2"})
O1 = tuple(f if f != "-O2" else "-O1" for f in FLAGS)


GCC_FIX, CLANG_FIX = "-fno-tree-slp-vectorize", "-mllvm -enable-interleaved-mem-accesses=false"


@pytest.mark.parametrize(("info", "flags", "isa", "fix"), [
    (CCInfo("gcc", (12, 2, 0)), FLAGS, AVX512, GCC_FIX),
    (CCInfo("gcc", (12, 3, 0)), FLAGS, SSE2, GCC_FIX),  # -march=native on another host may still reach AVX2
    (CCInfo("gcc", (12, 2, 0)), O1, AVX512, None),  # -O1 does not run the SLP vectorizer
    (CCInfo("gcc", (13, 2, 0)), FLAGS, AVX512, None),
    (CCInfo("gcc", (11, 4, 0)), FLAGS, AVX512, None),
    (CCInfo("clang", (14, 0, 6)), FLAGS, AVX512, CLANG_FIX),  # fuzz seed 301863
    (CCInfo("clang", (14, 0, 6)), FLAGS, SSE2, None),  # SSE2 code is right
    (CCInfo("clang", (14, 0, 6)), O1, AVX512, None),  # -O1 does not run the loop vectorizer
    (CCInfo("clang", (12, 0, 1)), FLAGS, AVX512, CLANG_FIX),  # clang 12 is not gcc 12, but an older clang
    (CCInfo("clang", (19, 1, 7)), FLAGS, AVX512, None),
    (CCInfo("unknown", ()), FLAGS, AVX512, None),
])
def test_known_bad_combinations_get_their_fix(info, flags, isa, fix):
    out, why = safe_flags(info, flags, isa)
    added = list(out[len(flags):])
    assert added == (fix.split() if fix else []) and len(why) == (1 if fix else 0)
    assert out[:len(flags)] == flags  # the fix is appended; nothing else changes
    assert safe_flags(info, out, isa)[0] == out  # idempotent: a pickled compiler rebuilt from its flags is the same


def test_the_compiler_here_is_named_with_its_version_and_final_flags():
    c = CCompiler()
    info = cc_info(c.cc)
    assert info.family in ("gcc", "clang") and len(info.version) == 3
    assert str(info) in c.identity() and " ".join(c.flags) in c.identity()
    want_fix = info.family == "gcc" and info.version[0] == 12
    assert ("-fno-tree-slp-vectorize" in c.flags) is want_fix, c.identity()
    # the fix is part of the identity, hence of the cache key: bytes made without it are not reused
    assert ("-fno-tree-slp-vectorize" in c.identity()) is want_fix and "-fno-tree-slp-vectorize" not in FLAGS
    assert CCompiler(c.cc, FLAGS).identity() == c.identity()  # explicit flags get the same fix


def _exe(d, name, target):
    p = os.path.join(d, name)
    os.symlink(target, p)
    return p


def test_clang_is_preferred_then_the_newest_versioned_clang(tmp_path, monkeypatch):
    """`clang`, then `clang-N` newest first, then cc/gcc; $CC wins. The links point at the real compiler here: only
    the search order is under test, and cc_info still reads what the compiler really is."""
    real = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if real is None:
        pytest.skip("no C compiler here")
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_cc() is None
    _exe(tmp_path, "gcc", real)
    assert find_cc() == str(tmp_path / "gcc")
    _exe(tmp_path, "clang-9", real)
    _exe(tmp_path, "clang-17", real)
    assert find_cc() == str(tmp_path / "clang-17")  # numerically newest, not the last in string order
    _exe(tmp_path, "clang-17.bak", real)  # not a versioned clang
    _exe(tmp_path, "clang", real)
    assert find_cc() == str(tmp_path / "clang")
    monkeypatch.setenv("CC", "gcc")
    assert find_cc() == str(tmp_path / "gcc")
    assert cc_compiler._clangs_on_path()[:3] == ["clang", str(tmp_path / "clang-17"), str(tmp_path / "clang-9")]
