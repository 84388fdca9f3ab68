"""devicekit.kernels on the PYTHON device against numpy, and the linear form of each stays small."""

import devicekit as dk
import numpy as np
import pytest
from devicekit import kernels
from devicekit.ir import dtypes
from devicekit.ir.linearize import lower
from devicekit.ir.ops import ALU, Ops
from devicekit.render.renderer import Capabilities

RNG = np.random.default_rng(0)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def run(k, **kw):
    return dk.run(k, device="PYTHON", **kw)


def test_elementwise_string_and_callable():
    a, b, c = f32(100), f32(100), f32(100)
    np.testing.assert_allclose(run(kernels.elementwise("a * b + c"), a=a, b=b, c=c, n=100)["out"], a * b + c, rtol=1e-6)
    k = kernels.elementwise(lambda x, y: x - y * 2.0)
    np.testing.assert_allclose(run(k, x=a, y=b, n=100)["out"], a - b * 2, rtol=1e-6)


@pytest.mark.parametrize("op, ref", [("sum", np.sum), ("max", np.max), ("prod", np.prod)])
@pytest.mark.parametrize("axis", [0, 1])
def test_reduce(op, ref, axis):
    x = (f32(13, 37) * 0.5 + (1 if op == "prod" else 0)).astype(np.float32)
    out = run(kernels.reduce(op, axis=axis), x=x.reshape(-1), m=13, n=37)["out"]
    np.testing.assert_allclose(out, ref(x, axis=axis), rtol=1e-4, atol=1e-5)


def test_softmax_rows():
    x = f32(9, 70) * 4
    out = run(kernels.softmax(), x=x.reshape(-1), m=9, n=70)["out"].reshape(9, 70)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_transpose():
    x = f32(5, 7)
    out = run(kernels.transpose(), x=x.reshape(-1), m=5, n=7)["out"].reshape(7, 5)
    np.testing.assert_array_equal(out, x.T)


@pytest.mark.parametrize("M, N, K, tm, tn", [(16, 16, 8, 4, 4), (6, 10, 5, 4, 4), (8, 16, 3, 2, 8)])
def test_matmul_tiles(M, N, K, tm, tn):
    a, b = f32(M, K), f32(K, N)
    out = run(kernels.matmul(M, N, K, tm=tm, tn=tn), a=a.reshape(-1), b=b.reshape(-1))["c"].reshape(M, N)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("M, N, K, tm, tn", [(8, 32, 5, None, None), (6, 20, 7, 4, 16), (5, 5, 3, 2, 4), (4, 3, 2, 4, 8)])
def test_packed_b_panels_match_numpy_with_ragged_columns(M, N, K, tm, tn):
    """pack_b then b_layout="panels" is a @ b, also when tn does not divide N (the last panel's padding columns are
    computed and not stored: a store past column N would land in the next row, which c passed as 7s would show) and
    when tm must shrink to divide M."""
    a, b = f32(M, K), f32(K, N)
    pack = kernels.pack_b(K, N, **({} if tn is None else {"tn": tn}))
    bp = run(pack, b=b.reshape(-1))["bp"]
    width = 16 if tn is None else tn
    assert bp.size == -(-N // width) * K * width
    panel0 = bp[:K * width].reshape(K, width)
    np.testing.assert_array_equal(panel0[:, :min(width, N)], b[:, :width])
    if N % width:  # zeros past the last column
        assert not bp.reshape(-1, K, width)[-1][:, N % width:].any()
    mm = kernels.matmul(M, N, K, tm=tm, tn=tn, b_layout="panels")
    c0 = np.full(M * N, 7.0, np.float32)
    out = run(mm, a=a.reshape(-1), bp=bp, c=c0)["c"].reshape(M, N)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
    bias = f32(N)
    out = run(kernels.mlp_layer(M, N, K, tm=tm, tn=tn, b_layout="panels"), a=a.reshape(-1), bp=bp, bias=bias)["c"]
    np.testing.assert_allclose(out.reshape(M, N), np.maximum(a @ b + bias, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call, msg", [
    (lambda: kernels.matmul(4, 4, 4, b_layout="cols"), "b_layout must be 'rows' or 'panels', got 'cols'"),
    (lambda: kernels.matmul(4, 4, 4, tn=17, b_layout="panels"), "panel width tn must be an int in 1..16"),
    (lambda: kernels.pack_b(4, 4, tn=0), "panel width tn must be an int in 1..16"),
    (lambda: kernels.pack_b(0, 4), "pack_b K must be a positive int, got 0"),
    (lambda: kernels.matmul(4, 4.0, 4), "matmul N must be a positive int, got 4.0"),
])
def test_matmul_and_pack_b_name_a_bad_argument(call, msg):
    with pytest.raises(ValueError, match=msg.replace(".", r"\.").replace("(", r"\(")):
        call()


def test_panels_read_b_as_contiguous_vectors():
    """The point of the layout: one k step of a panels matmul is one 16-lane load (rows with tn=16: also 16 lanes, but
    N floats apart from the last k's; what differs is the index, so check it strides by tn)."""
    from devicekit.ir.ops import Ops
    lk = lower(kernels.matmul(64, 64, 64, b_layout="panels", device=CPU), CPU)  # 2 panels a tile: test_kernels_matmul
    vec_loads = [u for u in lk.uops if u.op is Ops.LOAD and u.dtype.count == 16]
    assert len(vec_loads) == 1, lk


def test_mlp_layer_is_relu_of_affine():
    x, w, bias = f32(8, 6), f32(6, 12), f32(12)
    out = run(kernels.mlp_layer(8, 12, 6), a=x.reshape(-1), b=w.reshape(-1), bias=bias)["c"].reshape(8, 12)
    np.testing.assert_allclose(out, np.maximum(x @ w + bias, 0), rtol=1e-5, atol=1e-5)


def test_every_library_kernel_has_example_inputs_and_runs():
    for name, make in kernels.all_kernels().items():
        out = run(make(), **kernels.example_inputs(name))
        assert out and all(np.isfinite(v.astype(np.float64)).all() for v in out.values()), name


# op counts of the linear form for a CPU-like and a GPU-like renderer: a change that blows these up is a regression
CPU = Capabilities(dtypes=frozenset(dtypes.all()), ops=ALU, core_split=True)
GPU = Capabilities(dtypes=frozenset(dtypes.all()), ops=ALU, gpu_indexing=True, has_local=True, local_max=(1024, 1024, 64))
BUDGET = {"elementwise_fma": 30, "elementwise_math": 40, "elementwise_int": 60, "reduce_sum": 110, "reduce_max": 110,
          "reduce_sum_axis0": 170, "softmax": 380, "transpose": 30, "matmul": 330, "mlp_layer": 480,
          "pack_b": 60, "matmul_panels": 680, "mlp_layer_panels": 540}  # panels: ragged N, gated scalar stores


@pytest.mark.parametrize("name", sorted(BUDGET))
@pytest.mark.parametrize("caps", [CPU, GPU], ids=["cpu", "gpu"])
def test_linear_form_stays_small(name, caps):
    lk = lower(kernels.all_kernels()[name](), caps)
    assert len(lk.uops) <= BUDGET[name], f"{name}: {len(lk.uops)} ops\n{lk}"
    assert len(lk.uops) >= 8


def test_contiguous_lanes_become_vector_loads_and_stores_only_when_aligned():
    from devicekit.ir.ops import Ops
    lk = lower(kernels.matmul(64, 64, 64, device=GPU), GPU)
    vec_loads = [u for u in lk.uops if u.op is Ops.LOAD and u.dtype.count == 8]
    vec_stores = [u for u in lk.uops if u.op is Ops.STORE and u.src[1].dtype.count == 8]
    assert len(vec_loads) == 1 and len(vec_stores) == 8  # one row of b per k step; the tile goes out by rows
    # row sums index i*n + r*8 + c: n is a var, so alignment is unknown: scalar loads unless unaligned is allowed
    lk = lower(kernels.reduce("sum"), GPU)
    assert not [u for u in lk.uops if u.op is Ops.LOAD and u.dtype.count > 1]
    import dataclasses
    lk = lower(kernels.reduce("sum", device=CPU), dataclasses.replace(CPU, unaligned_vectors=True))  # 8 lanes
    assert [u for u in lk.uops if u.op is Ops.LOAD and u.dtype.count == 8]


@pytest.mark.parametrize("regs, dtype, rows", [(2048, dtypes.float32, 16), (512, dtypes.float32, 4),
                                               (2048, dtypes.float64, 8), (0, dtypes.float32, 4),
                                               (256, dtypes.float32, 4)])  # None: test_kernels_matmul.py
def test_panels_tile_rows_fill_half_the_device_vector_registers(regs, dtype, rows):
    """The default panels tile is rows x 16 lanes with rows x 16 accumulators in half the device's vector register
    file (AVX-512's 32 x 64 bytes: 16 rows; AVX2's 16 x 32: 4, as without a device). A 4-row tile on AVX-512 ran a
    1024^3 matmul at 0.35x OpenBLAS, 16 rows at 0.74x (bench/matmul_layouts.py)."""
    import dataclasses
    dev = None if regs is None else dataclasses.replace(CPU, vector_register_bytes=regs)
    mm = kernels.matmul(64, 48, 8, dtype, b_layout="panels", device=dev)
    assert len(mm.sink.src) == rows * 16  # one store per output of a tile
    assert len(kernels.matmul(64, 48, 8, dtype, b_layout="panels", device=dev, tm=2).sink.src) == 2 * 16
    assert len(kernels.matmul(12, 48, 8, dtype, b_layout="panels", device=dev).sink.src) % 16 == 0  # tm divides M


@pytest.mark.parametrize("regs, tile", [(2048, (16, 16)), (512, (8, 8)), (0, (8, 8))])  # None: the default device
def test_rows_tiles_follow_the_device_vector_registers(regs, tile):
    """The rows layout's default tile: 8 x 8, or 16 rows x 16 lanes where the device has AVX-512's 2 KB of vector
    registers (1.9x faster at 1024^3 on a Rocket Lake Xeon); softmax's lanes likewise 16 there, else 8."""
    import dataclasses
    dev = None if regs is None else dataclasses.replace(CPU, vector_register_bytes=regs)
    mm = kernels.matmul(64, 64, 8, device=dev)
    # one store per output of a tile (into c: a CPU-like device's default also stores b's packed tile, a local)
    assert len([st for st in mm.sink.src if st.src[0].src[0].op is Ops.PARAM]) == tile[0] * tile[1]
    widths = {u.dtype.count for u in kernels.softmax(device=dev).uops() if u.op is Ops.VECTORIZE}
    assert max(widths) == (16 if regs == 2048 else 8)
    # the values at 32 x 64: the same tile, two row tiles, more than one column tile (b packed in a local array, as at
    # 64 x 64), a quarter of 64 x 64's time on the PYTHON interpreter (4.8 + 11.9 s there on a loaded machine)
    small = kernels.matmul(32, 64, 8, device=dev)
    assert len([st for st in small.sink.src if st.src[0].src[0].op is Ops.PARAM]) == tile[0] * tile[1]
    assert {u.op for u in small.uops()} == {u.op for u in mm.uops()}
    x = np.random.default_rng(0).standard_normal(32 * 8).astype(np.float32)
    y = np.random.default_rng(1).standard_normal(8 * 64).astype(np.float32)
    np.testing.assert_allclose(run(small, a=x, b=y)["c"].reshape(32, 64), x.reshape(32, 8) @ y.reshape(8, 64),
                               rtol=1e-5, atol=1e-5)


def test_panels_device_must_be_a_device():
    with pytest.raises(TypeError, match=r"device= takes a Device or Target .* got str"):
        kernels.matmul(16, 16, 16, b_layout="panels", device="CPU")
