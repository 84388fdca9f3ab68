"""Hand-written C and what its compile reads besides the source (issue: the compile cache ignored headers):
every header is in the cache entry's dependency manifest by content, so an edited header gives the new answer, a
removed one the compiler's error (never a warm-cache hit); include_dirs= and defines= reach the reader, the compiler
and the key alike; a `static` entry is taken as written."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit.errors import CompileError

SRC = '#include "scale.h"\nvoid k(int n, float *x) { for (int i = 0; i < n; i++) x[i] = SCALE; }\n'


@pytest.fixture
def cpu():
    return dk.device("CPU")


def _run(dev, src=SRC, entry="k", **opts):
    prog = dev.program_from_source(src, entry, **opts)
    return dk.run(prog, x=np.zeros(4, np.float32), n=4)["x"].tolist()


def test_an_edited_header_gives_the_new_answer_and_a_removed_one_the_compilers_error(cpu, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scale.h").write_text("#define SCALE 2\n")
    assert _run(cpu) == [2.0] * 4
    assert _run(cpu) == [2.0] * 4  # a hit: the manifest holds
    (tmp_path / "scale.h").write_text("#define SCALE 3\n")
    assert _run(cpu) == [3.0] * 4  # the old code served 2 from the cache
    (tmp_path / "scale.h").unlink()
    with pytest.raises(CompileError, match="scale.h"):
        _run(cpu)


def test_a_header_reached_through_another_header_is_tracked_too(cpu, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scale.h").write_text('#include "inner.h"\n#define SCALE (INNER + 1)\n')
    (tmp_path / "inner.h").write_text("#define INNER 1\n")
    assert _run(cpu) == [2.0] * 4
    (tmp_path / "inner.h").write_text("#define INNER 5\n")
    assert _run(cpu) == [6.0] * 4


def test_the_same_source_in_a_folder_without_its_header_does_not_compile_from_the_cache(cpu, tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "scale.h").write_text("#define SCALE 4\n")
    monkeypatch.chdir(tmp_path / "a")
    assert _run(cpu) == [4.0] * 4
    monkeypatch.chdir(tmp_path / "b")  # the same bytes copied alone into an empty folder
    with pytest.raises(CompileError, match="scale.h"):
        _run(cpu)


def test_include_dirs_and_defines_reach_reader_compiler_and_key(cpu, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inc1").mkdir()
    (tmp_path / "inc2").mkdir()
    (tmp_path / "inc1" / "scale.h").write_text("typedef float real;\n#define SCALE 10\n")
    (tmp_path / "inc2" / "scale.h").write_text("typedef float real;\n#define SCALE 20\n")
    src = '#include <scale.h>\nvoid k(int n, real *x) { for (int i = 0; i < n; i++) x[i] = SCALE + EXTRA; }\n'
    assert _run(cpu, src, include_dirs=["inc1"], defines={"EXTRA": 1}) == [11.0] * 4
    assert _run(cpu, src, include_dirs=["inc2", "inc1"], defines=["EXTRA=2"]) == [22.0] * 4  # order kept
    assert _run(cpu, src, include_dirs=[tmp_path / "inc1"], defines={"EXTRA": 3}) == [13.0] * 4
    with pytest.raises(CompileError):  # the reader needs the dir for `real`: no silent default
        _run(cpu, src, defines={"EXTRA": 1})
    with pytest.raises(CompileError, match="not a directory"):
        _run(cpu, src, include_dirs=["nowhere"])
    with pytest.raises(CompileError, match="not a macro name"):
        _run(cpu, src, include_dirs=["inc1"], defines={"1BAD": 1})


def test_a_static_entry_is_taken_as_written(cpu):
    src = ("static float twice(float v) { return 2 * v; }\n"
           "static void kernel_scale(int n, float x[n]) { for (int i = 0; i < n; i++) x[i] = twice(i); }\n")
    prog = cpu.program_from_source(src, "kernel_scale")
    assert dk.run(prog, x=np.zeros(4, np.float32), n=4)["x"].tolist() == [0.0, 2.0, 4.0, 6.0]


def test_an_include_of_a_file_that_is_not_c_gives_the_compilers_error(cpu, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.csv").write_text('name,value\n1,2\n"quoted {",3\n')
    with pytest.raises(CompileError) as e:
        cpu.program_from_source('#include "data.csv"\nvoid k(float *x) { x[0] = 1; }\n', "k")
    assert "no function definition" not in str(e.value)  # what the old reader said
    assert "rejected the C source" in str(e.value) and "data.csv:1" in str(e.value)


def test_a_surrogate_escaped_source_is_a_clear_compile_error(cpu):
    src = b"void k(float *x) { x[0] = 1; } // caf\xe9\n".decode("utf-8", errors="surrogateescape")
    with pytest.raises(CompileError, match="line 1, column 38 is a lone surrogate"):
        cpu.program_from_source(src, "k")
