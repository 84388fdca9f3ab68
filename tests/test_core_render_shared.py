"""Pieces of the render layer every C-like GPU renderer shares (issue 35: one mechanism per idea), tested without a
device: the walk's check of a GPU index's axis (one KernelError for CUDA, OpenCL and Metal, which each checked it
their own way, CUDA with a ValueError) and the readers' "entry not found" error (source_reader.entry_function, used
by the OpenCL and CUDA readers)."""

from __future__ import annotations

import pytest
from devicekit import kernels
from devicekit.errors import CompileError
from devicekit.ir.ops import Ops
from devicekit.ir.uop import KernelError
from devicekit.render.prepare import prepare, with_uops


def _renderers():
    from devicekit_cuda.renderer import CUDARenderer
    from devicekit_metal.renderer import MetalRenderer
    from devicekit_opencl.renderer import OpenCLRenderer
    return [CUDARenderer(), MetalRenderer(), OpenCLRenderer()]


@pytest.mark.parametrize("renderer", _renderers(), ids=lambda r: r.device)
def test_a_fourth_gpu_axis_is_a_kernel_error(renderer):
    lk = prepare(kernels.elementwise("a + b", name="axes"), renderer.capabilities)
    assert "gidx0" in renderer.render_linear(lk, "axes")  # the kernel renders as lowered
    first = next(i for i, u in enumerate(lk.uops) if u.op is Ops.SPECIAL)
    uops = list(lk.uops)
    uops[first] = uops[first].replace(arg=("gidx3", 3))  # a hand-made linear form: the lowering makes at most 3
    with pytest.raises(KernelError, match="GPU launches have 3 axes; gidx3 asks for axis 3"):
        renderer.render_linear(with_uops(lk, uops), "axes")


def test_entry_function_names_what_the_file_defines():
    pytest.importorskip("clang.cindex")
    from devicekit.render import signature as sg
    src = "void helper(int *x) { x[0] = 1; }\nvoid kern(int *x, int n) { x[n] = 2; }\n"
    tu = sg.parse("/dk-test/k.c", src, ["-x", "c", "-nostdinc"], src=src)
    assert sg.entry_function(tu, "kern", "/dk-test/k.c", src).spelling == "kern"
    with pytest.raises(CompileError, match=r"no function definition named 'nope' in the source \(found: helper, kern\)"):
        sg.entry_function(tu, "nope", "/dk-test/k.c", src)
    bad = src + "void broken(int x {\n}\n"  # the missing ')' hides the definition
    tu = sg.parse("/dk-test/k.c", bad, ["-x", "c", "-nostdinc"], src=bad)
    with pytest.raises(CompileError) as e:
        sg.entry_function(tu, "broken", "/dk-test/k.c", bad)
    assert "k.c:3:19: error: expected ')'" in str(e.value)  # the first errors say why
    with pytest.raises(CompileError) as e:
        sg.entry_function(tu, "broken", "/dk-test/k.c", bad, with_errors=False)
    assert "expected ')'" not in str(e.value)
