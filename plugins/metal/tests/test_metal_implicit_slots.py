"""Metal params without [[buffer(i)]] beside params with one (issue 33): Apple's compiler takes the mix and gives a
param without an index the first index no other param names, in declaration order; ggml's kernel_add_row leaves
src0, src1, dst without one beside `constant uint64_t & nb [[buffer(28)]]` and ggml-metal.m binds 0, 1, 2 and 28.
The reader refused the mix ("has no [[buffer(i)]] while others do"). Sources here reproduce that structure."""

from __future__ import annotations

import numpy as np
import pytest
from devicekit.errors import CompileError
from devicekit_metal.hostcheck import HostKernel, cxx, libclang_available
from devicekit_metal.renderer import MetalRenderer

pytestmark = pytest.mark.skipif(libclang_available() is not None, reason=f"{libclang_available()}")

ADD_ROW = """#include <metal_stdlib>
using namespace metal;
kernel void add_row(
        device const float4 * src0,
        device const float4 * src1,
        device       float4 * dst,
        constant   uint64_t & nb [[buffer(28)]],
        uint tpig[[thread_position_in_grid]]) {
    dst[tpig] = src0[tpig] + src1[tpig % nb];
}
"""
# implicit ones skip the indices explicit ones name, wherever those come in the list
GAPS = """#include <metal_stdlib>
using namespace metal;
kernel void gaps(device const float *a, device float *b [[buffer(0)]], constant uint &n, device float *c [[buffer(2)]],
                 device float *d, uint i [[thread_position_in_grid]]) {
    if (i < n) { b[i] = a[i]; c[i] = a[i] * 2; d[i] = a[i] * 3; }
}
"""


def _slots(spec) -> list[tuple[str, str, int | None]]:
    return [(p.name, p.kind, p.slot) for p in spec.get_meta("source_params")]


def test_implicit_indices_beside_an_explicit_one_are_the_first_free():
    spec = MetalRenderer().parse_source(ADD_ROW, "add_row")
    assert _slots(spec) == [("src0", "buffer", 0), ("src1", "buffer", 1), ("dst", "buffer", 2),
                            ("nb", "scalar", 28), ("tpig", "builtin", None)]
    spec = MetalRenderer().parse_source(GAPS, "gaps")
    assert _slots(spec)[:5] == [("a", "buffer", 1), ("b", "buffer", 0), ("n", "scalar", 3), ("c", "buffer", 2),
                                ("d", "buffer", 4)]


def test_two_params_at_one_index_are_still_refused():
    clash = GAPS.replace("device float *c [[buffer(2)]]", "device float *c [[buffer(0)]]")
    with pytest.raises(CompileError, match=r"'c' and 'b' are both \[\[buffer\(0\)\]\]"):
        MetalRenderer().parse_source(clash, "gaps")


@pytest.mark.skipif(cxx() is None, reason="no C++ compiler for the host emulation")
def test_add_row_runs_with_its_buffers_where_they_are_bound(tmp_path):
    spec = MetalRenderer().parse_source(ADD_ROW, "add_row", global_size=(4,), local_size=(4,))
    src0 = np.arange(64, dtype=np.float32)
    src1 = (np.arange(8, dtype=np.float32) + 1) * 100
    dst = np.zeros(64, np.float32)
    HostKernel(spec, MetalRenderer(), workdir=str(tmp_path)).run([src0, src1, dst], [2])  # nb: 2 float4 rows
    np.testing.assert_array_equal(dst, src0 + np.tile(src1, 8))
