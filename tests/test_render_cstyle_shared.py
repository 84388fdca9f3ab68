"""Mechanisms the C-style base (devicekit.render.cstyle and its walk, cstyle_walk) holds once for every C-like
language, which OpenCL and Metal each wrote for themselves before (issue 35: a renderer implements only its
language): bool kept in memory as another type (`bool_memory`: OpenCL C allows no bool in memory) and the buffer
limit (`max_buffers`, counted by `buffer_slots`: one KernelError for CUDA, Metal, OpenCL and WGSL). No device needed; the
bool test runs the rendered C through the system's C compiler."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from devicekit import ir
from devicekit.ir.dtypes import dtypes
from devicekit.ir.uop import KernelError
from devicekit.render.cstyle import CStyleRenderer
from devicekit.testing.conformance import wide_kernel
from devicekit_cuda.renderer import CUDARenderer
from devicekit_metal.renderer import MetalRenderer
from devicekit_opencl.renderer import OpenCLRenderer


class PlainC(CStyleRenderer):
    """The base as a C99 renderer: bool is C's _Bool, in memory too."""

    device = "TESTC"
    type_map = {**CStyleRenderer.type_map, "bool": "_Bool"}

    def render_preamble(self, used):
        return "#include <math.h>"


class ByteBoolC(PlainC):
    """The same with bool kept as bytes in memory, as OpenCL C needs."""

    bool_memory = "unsigned char"


def bool_copy():
    k = ir.KernelBuilder("bool_copy")
    a = k.param("a", dtypes.bool, size=4)
    o = k.param("o", dtypes.bool, size=4, writable=True)
    i = k.range(4)
    o[i] = a[i]
    return k.build()


def test_bool_memory_types_buffers_and_locals_and_normalizes_loads():
    src = ByteBoolC().render(bool_copy()).src
    assert "const unsigned char *restrict dku_a" in src and "unsigned char *restrict dku_o" in src
    assert "(dku_a[ridx0]!=0)" in src and "dku_o[ridx0] = (unsigned char)(" in src
    assert ByteBoolC().render_local("s", dtypes.bool, 8) == "unsigned char s[8];"
    plain = PlainC().render(bool_copy()).src  # the default: bool is the language's own type, everywhere
    assert "_Bool *restrict dku_o" in plain and "!=0" not in plain and "unsigned char" not in plain
    assert PlainC().render_local("s", dtypes.bool, 8) == "_Bool s[8];"
    assert ByteBoolC().mem_type(dtypes.int32) == "int" and ByteBoolC().mem_type(dtypes.bool) == "unsigned char"


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_bool_memory_reads_any_nonzero_byte_as_true(tmp_path):
    """Bytes 0, 1, 2, 255 read as bools and stored: exactly 0 or 1 come out (a bool buffer may hold any byte, e.g.
    written by the host as uint8). Typed _Bool, a byte 2 is undefined behaviour, and cc -O2 copies it as is."""
    src = ByteBoolC().render(bool_copy()).src
    main = ("#include <stdio.h>\nint main(void) {\n  unsigned char a[4] = {0, 1, 2, 255}, o[4] = {9, 9, 9, 9};\n"
            "  dku_bool_copy(a, o);\n  printf(\"%d %d %d %d\\n\", o[0], o[1], o[2], o[3]);\n  return 0;\n}\n")
    (tmp_path / "k.c").write_text(src + main)
    subprocess.run(["cc", "-O2", "-w", "-o", str(tmp_path / "k"), str(tmp_path / "k.c")], check=True)
    out = subprocess.run([str(tmp_path / "k")], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["0", "1", "1", "1"]


@pytest.mark.parametrize("renderer", [CUDARenderer(), MetalRenderer(), OpenCLRenderer()], ids=lambda r: r.device)
def test_past_max_buffers_is_one_kernel_error(renderer):
    limit = renderer.max_buffers
    renderer.render(wide_kernel(limit))  # the limit itself renders
    with pytest.raises(KernelError) as e:
        renderer.render(wide_kernel(limit + 1))
    assert str(e.value) == (f"kernel 'wide' needs {limit + 1} buffer slots; {renderer.device} allows at most "
                            f"{limit} (max_buffers)")


def test_metal_counts_its_vars_in_the_buffer_table():
    """Metal binds int vars and scalars through the same 31 slots as buffers (its `buffer_slots`)."""
    MetalRenderer().render(wide_kernel(29, 2))
    with pytest.raises(KernelError, match="needs 32 buffer slots; METAL allows at most 31"):
        MetalRenderer().render(wide_kernel(30, 2))


def gather(extra: int):
    """x gathered through uint32 indices (the index check's flag buffer: WGSL's dk_fit_u) plus `extra` inputs."""
    k = ir.KernelBuilder("gather")
    o = k.param("o", dtypes.float32, size=4, writable=True)
    x = k.param("x", dtypes.float32, size=4)
    idx = k.param("idx", dtypes.uint32, size=4)
    more = [k.param(f"m{j}", dtypes.float32, size=4) for j in range(extra)]
    i = k.range(4, kind="global")
    v = x[idx[i].cast(dtypes.int64)]
    for m in more:
        v = v + m[i]
    o[i] = v
    return k.build()


def test_wgsl_counts_the_index_checks_flag_buffer():
    """WGSL's storage buffers: the params (here 8 with the bounds-check record) and the flag buffer of its 64-bit
    index check, when the kernel widens 32-bit data to an index."""
    from devicekit_webgpu.renderer import WGSLRenderer
    assert "dk_fit_u" in WGSLRenderer().render(gather(3)).src  # 7 params + the flag: 8, the limit
    with pytest.raises(KernelError, match="needs 9 buffer slots; WEBGPU allows at most 8"):
        WGSLRenderer().render(gather(4))
