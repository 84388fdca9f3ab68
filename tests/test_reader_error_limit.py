"""The signature reader reads a kernel whose file has many errors elsewhere for the reader (a Metal file using what
devicekit-metal's shim of <metal_stdlib> lacks, as ggml-metal.metal does: simd_max, half in a header before
<metal_stdlib>): libclang stopped at its 20-error limit ("fatal error: too many errors emitted"), and every kernel
of the file was refused as "its signature does not parse" with that line as the whole log."""

from __future__ import annotations

import pytest

pytest.importorskip("clang.cindex", reason="the libclang wheel reads hand-written kernels")

HELPERS = "\n".join(f"float helper{i}(float x) {{ return not_in_the_shim_{i}(x); }}" for i in range(30))
SRC = f"""#include <metal_stdlib>
using namespace metal;
{HELPERS}
kernel void kernel_scale(device const float * src0, device float * dst, constant float & scale,
                         uint tpig[[thread_position_in_grid]]) {{
    dst[tpig] = src0[tpig] * scale;
}}
"""


def test_a_clean_signature_is_read_past_thirty_errors_elsewhere():
    from devicekit_metal.renderer import MetalRenderer
    spec = MetalRenderer().parse_source(SRC, "kernel_scale", global_size=(1,), local_size=(32,))
    assert [p.name for p in spec.params] == ["src0", "dst"] and [v.name for v in spec.vars] == ["scale"]


def test_an_error_in_the_signature_is_still_refused():
    from devicekit.errors import CompileError
    from devicekit_metal.renderer import MetalRenderer
    bad = SRC.replace("constant float & scale", "constant not_a_type & scale")
    with pytest.raises(CompileError, match="does not parse"):
        MetalRenderer().parse_source(bad, "kernel_scale")
