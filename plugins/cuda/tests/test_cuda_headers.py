"""Hand-written CUDA and its own headers (issues: the compile cache keyed a .cu by its text alone, so a cubin stayed
byte-identical after its header's KERNEL_RADIUS changed and the file compiled "OK" from the warm cache in a folder
without the header; the signature reader did not read the file's own headers, nor DEVICEKIT_CUDA_FLAGS' -I).
NVRTC runs here without a GPU: the cubins are compared byte for byte."""

from __future__ import annotations

import devicekit as dk
import pytest
from devicekit.errors import CompileError

SRC = '#include "common.h"\n__global__ void k(real *x) { x[threadIdx.x] = KERNEL_RADIUS; }\n'


@pytest.fixture
def cuda():
    try:
        return dk.target("CUDA")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no CUDA target (NVRTC) here: {e}")


def _header(path, radius, real="float"):
    path.write_text(f"#define KERNEL_RADIUS {radius}\ntypedef {real} real;\n")


def test_an_edited_header_gives_new_bytes_and_a_removed_one_an_error(cuda, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _header(tmp_path / "common.h", 8)
    first = cuda.program_from_source(SRC, "k")
    again = cuda.program_from_source(SRC, "k")
    assert again.from_cache and again.lib == first.lib
    _header(tmp_path / "common.h", 4)
    changed = cuda.program_from_source(SRC, "k")
    assert not changed.from_cache and changed.lib != first.lib  # the old key gave the radius-8 cubin
    (tmp_path / "common.h").unlink()
    with pytest.raises(CompileError, match="common.h"):
        cuda.program_from_source(SRC, "k")


def test_a_header_that_only_the_body_uses_is_tracked_too(cuda, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.h").write_text("#define R 1\n")
    src = '#include "r.h"\n__global__ void k(float *x) { x[0] = R; }\n'
    first = cuda.program_from_source(src, "k").lib
    (tmp_path / "r.h").write_text("#define R 2\n")
    assert cuda.program_from_source(src, "k").lib != first
    (tmp_path / "r.h").unlink()
    with pytest.raises(CompileError, match="r.h"):  # NVRTC's own error, not the warm cache
        cuda.program_from_source(src, "k")


def test_the_same_file_alone_in_an_empty_folder_does_not_compile_from_the_cache(cuda, tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _header(tmp_path / "a" / "common.h", 8)
    monkeypatch.chdir(tmp_path / "a")
    cuda.program_from_source(SRC, "k")
    monkeypatch.chdir(tmp_path / "b")
    with pytest.raises(CompileError, match="common.h"):
        cuda.program_from_source(SRC, "k")


def test_the_reader_sees_the_files_own_headers_and_the_compilers_include_path(cuda, tmp_path, monkeypatch):
    """A signature type from the file's own header: found in the working dir, through include_dirs=, or through
    DEVICEKIT_CUDA_FLAGS' -I, as NVRTC finds it (the reader refused it before NVRTC ran)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "common").mkdir()
    _header(tmp_path / "common" / "common.h", 2, real="double")
    src = SRC.replace('"common.h"', "<common.h>")
    with pytest.raises(CompileError):
        cuda.program_from_source(src, "k")
    got = cuda.program_from_source(src, "k", include_dirs=["common"])
    assert got.spec.params[0].dtype.name == "float64"
    monkeypatch.setenv("DEVICEKIT_CUDA_FLAGS", "-I common")
    assert cuda.program_from_source(src, "k").spec.params[0].dtype.name == "float64"


def test_defines_reach_reader_compiler_and_key(cuda, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = ("#ifdef USE_DOUBLE\ntypedef double real;\n#else\ntypedef float real;\n#endif\n"
           "__global__ void k(real *x) { x[0] = SCALE; }\n")
    a = cuda.program_from_source(src, "k", defines={"USE_DOUBLE": None, "SCALE": 3})
    b = cuda.program_from_source(src, "k", defines={"SCALE": 3})
    c = cuda.program_from_source(src, "k", defines={"SCALE": 5})
    assert a.spec.params[0].dtype.name == "float64" and b.spec.params[0].dtype.name == "float32"
    assert len({a.lib, b.lib, c.lib}) == 3
