"""The compile cache's dependency manifest (compile/deps.py): what a hit of a hand-written source must still find
unchanged, and the header search setup in its key."""

from __future__ import annotations

import os

import pytest
from devicekit.compile import deps
from devicekit.compile.cache import CompileCache
from devicekit.compile.compiler import Compiler
from devicekit.errors import CompileError


def test_make_deps_output_is_parsed_with_escapes_and_continuations():
    text = ("/tmp/x/kernel.so: /usr/include/stdc-predef.h scale.h \\\n /usr/include/math.h my\\ dir/a.h \\\n"
            " cost$$.h\n\nscale.h:\n")
    assert deps.parse_make_deps(text) == ["/usr/include/stdc-predef.h", "scale.h", "/usr/include/math.h",
                                          "my dir/a.h", "cost$.h"]


def test_a_manifest_holds_until_a_file_changes_or_goes(tmp_path):
    h = tmp_path / "a.h"
    h.write_text("1")
    rec = deps.record(["a.h", str(h), "missing.h"], str(tmp_path))
    assert [p for p, _ in rec] == [str(h)]  # made absolute, once; an unreadable one is not recorded
    got = deps.unpack(deps.pack(rec, b"BYTES"))
    assert got == (rec, b"BYTES") and deps.stale(got[0]) is None
    h.write_text("2")
    assert "changed" in deps.stale(rec)
    h.unlink()
    assert "gone" in deps.stale(rec)
    assert deps.unpack(b"\x7fELF...") is None  # a payload of the old format is no manifest: a miss


def test_the_context_pins_relative_dirs_and_checks_its_parts(tmp_path):
    (tmp_path / "inc").mkdir()
    ctx = deps.make_context(["inc", str(tmp_path)], {"N": 4, "FLAG": None, "ON": True}, cwd=str(tmp_path))
    assert ctx.include_dirs == (str(tmp_path / "inc"), str(tmp_path))
    assert ctx.defines == ("N=4", "FLAG", "ON=1")
    assert ctx.cc_args() == [f"-I{tmp_path / 'inc'}", f"-I{tmp_path}", "-DN=4", "-DFLAG", "-DON=1"]
    assert deps.make_context(None, ["A=1", "B"], cwd=str(tmp_path)).defines == ("A=1", "B")
    for bad in ({"include_dirs": ["nope"]}, {"defines": {"A B": 1}}, {"defines": "A=1"}, {"include_dirs": [""]}):
        with pytest.raises(CompileError):
            deps.make_context(bad.get("include_dirs"), bad.get("defines"), cwd=str(tmp_path))


class _Counting(Compiler):
    """A compiler whose bytes are the source plus the header's text: it reads the header like a real one."""
    name = "counting"

    def __init__(self, header):
        self.header, self.builds = header, 0
        self.cache = None

    def compile_src(self, src):
        self.builds += 1
        return src.encode()

    def compile_tracked(self, src, ctx):
        self.builds += 1
        return src.encode() + open(self.header, "rb").read(), [str(self.header)]


def _spec(src, ctx=None):
    from devicekit.render.program_spec import ProgramSpec
    meta = (("source_ctx", ctx),) if ctx is not None else ()
    return ProgramSpec(name="k", src=src, device="CPU", lang="c", params=(), meta=meta)


def test_a_tracked_entry_is_rebuilt_when_its_header_changes_and_generated_keys_are_unchanged(tmp_path):
    h = tmp_path / "h.h"
    h.write_text("one")
    c = _Counting(h)
    c.cache = CompileCache(tmp_path / "cache")
    ctx = deps.make_context(cwd=str(tmp_path))
    assert c.compile(_spec("S", ctx)).lib == b"Sone" and c.builds == 1
    assert c.compile(_spec("S", ctx)).from_cache and c.builds == 1
    h.write_text("two")
    assert c.compile(_spec("S", ctx)).lib == b"Stwo" and c.builds == 2
    other = deps.make_context(cwd=os.path.dirname(tmp_path))
    assert c.cache_key(_spec("S", ctx)) != c.cache_key(_spec("S", other))  # the folder is part of the key
    assert c.cache_key(_spec("S")).compiler == "counting"  # generated kernels: the plain identity


def test_a_removed_working_dir_still_compiles_a_source_without_includes(tmp_path, monkeypatch):
    import devicekit as dk
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert deps.make_context().cwd == "/"
    prog = dk.device("CPU").program_from_source("void k(float *x) { x[0] = 1; }\n", "k")
    assert prog is not None
