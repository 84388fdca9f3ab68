"""Streaming stores of an inner loop (devicekit_cpu/stream.py, nested case): a 2-D kernel whose split range holds one
inner loop writing one output at unit stride gets cache-line `!nontemporal` stores in that inner loop, with the
fence once after the split range; the same rules as the flat case keep ordinary stores where the output is also read
(at another element) or stored elsewhere, or the inner index is not unit-stride. Every streamed program is checked
bit for bit against the ordinary one at shapes whose rows start at every alignment (a low threshold makes small
launches take the streaming path; a few seconds in all)."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes


def _program(cpu, kern, threshold: int):
    from devicekit_cpu.llvm_renderer import LLVMRenderer
    from devicekit_cpu.runtime import CPUProgram
    r = LLVMRenderer()
    r.stream_threshold = threshold
    _, c = cpu.pair("llvm")
    return CPUProgram(c.compile(r.render(kern)), cpu)


def _grid(body: str, dt=dtypes.float32):
    """An m x n grid kernel: `body` names what it does with out (a: input, out: output, both m x n)."""
    k = ir.KernelBuilder(f"g_{body}")
    m, n = k.var("m", 3, 1 << 12), k.var("n", 3, 1 << 12)
    a = k.param("a", dt, shape=(m, n))
    out = k.param("out", dt, shape=(m, n), writable=True)
    if body == "copy":
        i, j = k.range(m, "global"), k.range(n, "global")
        out[i, j] = a[i, j]
    elif body == "jacobi":
        i, j = k.range(m - 2, "global") + 1, k.range(n - 2, "global") + 1
        out[i, j] = (a[i, j] + a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1]) * 0.2
    elif body == "accumulate":  # out read at the stored element: allowed (the flat rule's)
        i, j = k.range(m, "global"), k.range(n, "global")
        out[i, j] = out[i, j] + a[i, j] * 2.0
    elif body == "row_recurrence":  # out also read at another element: a vector of it would read stale values
        i, j = k.range(m, "global"), k.range(n - 1, "global") + 1
        out[i, j] = a[i, j] + out[i, j - 1]
    elif body == "reads_row_start":  # out also read at another element, in the outer loop
        i, j = k.range(m, "global"), k.range(n - 1, "global") + 1
        out[i, j] = a[i, j] * out[i, 0]
    elif body == "stores_border":  # out also stored outside the inner loop
        i = k.range(m, "global")
        out[i, 0] = a[i, 0]
        j = k.range(n - 1, "global") + 1
        out[i, j] = a[i, j] * 3.0
    elif body == "stores_corner":  # out also stored outside the split range
        out[0, 0] = a[0, 0] * 0.5
        i, j = k.range(m - 1, "global") + 1, k.range(n, "global")
        out[i, j] = a[i, j]
    elif body == "column_stride":  # out written down a column in the inner loop: not unit-stride
        i, j = k.range(n, "global"), k.range(m, "global")
        out[j, i] = a[j, i]
    elif body == "index_as_data":  # the inner index used as a value: no vector of it
        i, j = k.range(m, "global"), k.range(n, "global")
        out[i, j] = a[i, j] + j.cast(dt)
    return k.build(optimize=False)


def _run(cpu, prog, a: np.ndarray, out0: np.ndarray, shift: int) -> np.ndarray:
    """`prog` on a copy of out0 placed `shift` elements into a bigger buffer (rows start at other alignments)."""
    m, n = a.shape
    dt = dtypes.float32 if a.dtype == np.float32 else dtypes.float64
    src = dk.Buffer(cpu, a.size, dt).copyin(a.reshape(-1))
    base = dk.Buffer(cpu, a.size + shift, dt)
    out = base.view(a.size, dt, shift) if shift else base
    out.copyin(out0.reshape(-1))
    prog.execute([src, out], [m, n], wait=True)
    return out.numpy().reshape(m, n)


@pytest.mark.parametrize("body", ["copy", "jacobi", "accumulate"])
def test_inner_loop_streams_with_the_ordinary_bits(cpu, body):
    plain, streamed = _program(cpu, _grid(body), 0), _program(cpu, _grid(body), 64)
    src = streamed.spec.src
    assert "!nontemporal" not in plain.spec.src and "!nontemporal" in src
    assert src.count("fence seq_cst") == 1  # once per chunk, after the split range: not once per row
    assert src.index("fence seq_cst") > src.index("\nexit0:")
    rng = np.random.default_rng(36)
    for m, n in ((3, 3), (40, 5), (17, 20), (4, 17), (5, 33), (7, 34), (3, 35), (9, 67), (33, 100), (6, 1027)):
        for shift in (0, 1, 3):
            a = rng.standard_normal((m, n)).astype(np.float32)
            out0 = rng.standard_normal((m, n)).astype(np.float32)
            want, got = (_run(cpu, p, a, out0, shift) for p in (plain, streamed))
            np.testing.assert_array_equal(got, want, err_msg=f"{body} {m}x{n} shift={shift}")
            if body == "copy":
                np.testing.assert_array_equal(got, a)


def test_float64_grid_streams_with_the_ordinary_bits(cpu):
    kern = _grid("jacobi", dtypes.float64)
    plain, streamed = _program(cpu, kern, 0), _program(cpu, kern, 64)
    assert "store <8 x double>" in streamed.spec.src and "!nontemporal" in streamed.spec.src
    rng = np.random.default_rng(37)
    for m, n in ((3, 16), (5, 17), (4, 40), (11, 129)):
        a, out0 = rng.standard_normal((m, n)), rng.standard_normal((m, n))
        for shift in (0, 1):
            np.testing.assert_array_equal(_run(cpu, streamed, a, out0, shift), _run(cpu, plain, a, out0, shift))


def test_the_chunk_counts_all_its_rows(cpu):
    """The threshold compares the chunk's output (rows x row length): a grid whose rows are each below it streams."""
    src = _program(cpu, _grid("copy"), 1 << 16).spec.src  # 64 KiB: 16384 float32, more than any row here
    assert "!nontemporal" in src and "icmp sge i64" in src and " mul i64 " in src
    a = np.arange(64 * 1000, dtype=np.float32).reshape(64, 1000)  # 256 KB in rows of 4 KB
    np.testing.assert_array_equal(_run(cpu, _program(cpu, _grid("copy"), 1 << 16), a, np.zeros_like(a), 1), a)


@pytest.mark.parametrize("body", ["row_recurrence", "reads_row_start", "stores_border", "stores_corner",
                                  "column_stride", "index_as_data"])
def test_inner_loops_that_do_not_qualify_keep_ordinary_stores(cpu, body):
    prog = _program(cpu, _grid(body), 64)
    assert "!nontemporal" not in prog.spec.src
    if body == "row_recurrence":  # what streaming it would break: each element adds the one just written
        a = np.ones((4, 40), np.float32)
        out = _run(cpu, prog, a, np.zeros_like(a), 0)
        np.testing.assert_array_equal(out[:, 1:], np.broadcast_to(np.arange(1, 40, dtype=np.float32), (4, 39)))


def test_a_three_level_nest_streams_its_innermost_loop(cpu):
    k = ir.KernelBuilder("g_cube")
    p, m, n = k.var("p", 1, 64), k.var("m", 1, 64), k.var("n", 1, 1 << 12)
    a = k.param("a", dtypes.float32, shape=(p, m, n))
    out = k.param("out", dtypes.float32, shape=(p, m, n), writable=True)
    i, j, c = k.range(p, "global"), k.range(m, "global"), k.range(n, "global")
    out[i, j, c] = a[i, j, c] * 2.0 + 1.0
    kern = k.build(optimize=False)
    plain, streamed = _program(cpu, kern, 0), _program(cpu, kern, 64)
    assert "!nontemporal" in streamed.spec.src and streamed.spec.src.count("fence seq_cst") == 1
    rng = np.random.default_rng(38)
    for shape in ((2, 3, 5), (3, 2, 40), (2, 5, 67)):
        a_ = rng.standard_normal(shape).astype(np.float32)
        got = []
        for prog in (plain, streamed):
            src = dk.Buffer(cpu, a_.size, dtypes.float32).copyin(a_.reshape(-1))
            base = dk.Buffer(cpu, a_.size + 1, dtypes.float32)
            dst = base.view(a_.size, dtypes.float32, 1)
            prog.execute([src, dst], list(shape), wait=True)
            got.append(dst.numpy().reshape(shape))
        np.testing.assert_array_equal(got[1], got[0])
        np.testing.assert_array_equal(got[0], a_ * np.float32(2) + np.float32(1))
