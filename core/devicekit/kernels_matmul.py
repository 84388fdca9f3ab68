"""The library's matmul kernels: `matmul` (register tiles, optional b panels), `pack_b` (b as panels) and
`mlp_layer` (matmul + bias + relu). Re-exported by devicekit.kernels, where users find them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import ir
from . import kernels_target as _target
from .ir import dtypes
from .ir.dtypes import DType
from .ir.uop import UOp
from .kernels_target import _capabilities, _check_dims, _pick_tile, _register_lanes, tile_rows


def _default_target(device: Any) -> Any:
    """kernels_target._default_target, looked up at each call (tests replace it there)."""
    return _target._default_target(device)


def _panel_width(tn: int) -> int:
    if not isinstance(tn, int) or not 1 <= tn <= 16:
        raise ValueError(f"the panel width tn must be an int in 1..16 (one vector of lanes), got {tn!r}")
    return tn


def pack_b(K: int, N: int, dtype: DType = dtypes.float32, tn: int = 16, name: str = "pack_b") -> ir.Kernel:
    """bp = b (K x N, row-major) in panels for `matmul(..., b_layout="panels", tn=tn)`: ceil(N / tn) panels of
    K x tn, panel p holding columns p*tn .. p*tn+tn-1 with each k's tn values contiguous (zeros past column N).
    A k step of the matmul then reads one contiguous vector instead of a row N floats from the last, which on a CPU
    maps every k to the same cache set (N*4 bytes apart) once N is a large power of two. Pack a weight once and
    reuse it, as BLAS libraries do; the pack of a 1024 x 1024 float32 b is a copy (~2% of the matmul)."""
    _check_dims("pack_b", K=K, N=N)
    tn = _panel_width(tn)
    panels = -(-N // tn)
    k = ir.KernelBuilder(name)
    b = k.param("b", dtype, K * N)
    bp = k.param("bp", dtype, panels * K * tn, writable=True)
    j, r, y = k.range(panels, "global"), k.range(K, "loop"), k.range(tn, "loop")
    col = j * tn + y
    bp[(j * K + r) * tn + y] = b[r * N + col] if N % tn == 0 else b.load(r * N + col, gate=col < N, default=0, unchecked=True)
    return k.build()


# column blocks (panels) of a default tile where the accumulators allow: a k step loads 2 b vectors for 2 x rows
# multiply-adds (1024^3 f32 on one Rocket Lake thread, CPU time: panels 8 x 2 12.6-13.6 ms against 16 x 1's
# 15.9-18.0, OpenBLAS 13.7-15.0; rows 8 x 2 x 16 31.6-33.3 against 16 x 16's 38)
PANELS_PER_TILE = 2
PANEL_GROUP_BYTES = 256 << 10  # b panels a thread keeps in its L2 while every row tile passes
WIDE_PANELS = 4  # panels of a wide tile (`_wide_tile`)


def _wide_tile(accs_half: int, nj: int, M: int) -> tuple[int, int] | None:
    """(rows, panels) of a default panels tile whose accumulators fill three quarters of the vector registers, BLIS's
    share on AVX-512 (24 of 32 zmm): WIDE_PANELS panels of 6 rows where half the file holds 16 panel accumulators
    (AVX-512's 32 x 64 bytes, Intel's and Zen's alike), so a k step loads 4 b vectors and 6 a values for 24
    multiply-adds where the 8 x 2 tile loaded 2 and 8 for 16. Rows need not divide M (the last tile reads row M - 1
    again and stores nothing past M). On two Rocket Lake threads, alternating in one process (quiet): the MLP's
    256 x 784 -> 512 layer 0.63-0.66 ms against the 8 x 2 tile's 0.68-0.71, 1024^3 7.17-7.27 against 7.39-7.82.
    None (the half-file rule) where the file holds fewer (AVX2: unmeasured there), the panels do not come in fours,
    or M is shorter than a tile."""
    three_quarters = accs_half * 3 // 2
    if three_quarters < 6 * WIDE_PANELS or nj % WIDE_PANELS or M < three_quarters // WIDE_PANELS:
        return None
    return three_quarters // WIDE_PANELS, WIDE_PANELS


def _panel_group(nj: int, panel_bytes: int) -> int:
    """Panels walked as one group, outermost: ~PANEL_GROUP_BYTES of b, at most 8, dividing `nj`, and leaving at least
    8 groups to split across threads (1: no groups, row tiles outermost). A group stays in a thread's L2 while every
    row tile of a passes (a is read nj / group times instead of nj), and after pack_b (split the same way) each
    thread reads the panels it packed: 1024^3 float32 on a Rocket Lake Xeon, pack + matmul 0.64-0.69x OpenBLAS
    without groups, 0.72-0.81x with 4 or 8."""
    return _pick_tile(nj, max(1, min(8, PANEL_GROUP_BYTES // max(1, panel_bytes), nj // 8)))


def _panel_rows(device: Any, tn: int, itemsize: int) -> int:
    """Rows of a panels tile whose accumulators (rows x tn lanes) fill half the device's vector registers: 4 x 16
    float32 on AVX2 (8 of its 16 ymm registers), 16 x 16 on AVX-512 (16 of 32 zmm); at least 4. 4 without a
    device, or when it does not say (`Capabilities.vector_register_bytes` 0)."""
    caps = _capabilities(device)
    return tile_rows(0 if caps is None else caps.vector_register_bytes, tn * itemsize)


PACK_BYTES = 256 << 10  # the b block a packed rows tile copies into its local array: half of a 512 KiB L2


def _packs(device: Any) -> bool:
    """Whether the rows layout packs b inside the kernel (`_packed`) on `device`: a CPU-like device, whose program
    instances run one on a thread (no local ranges nor GPU indices: a local array is that thread's), with a known
    register file."""
    caps = _capabilities(device)
    return caps is not None and caps.vector_register_bytes > 0 and not caps.has_local and not caps.gpu_indexing


def _packed(M: int, N: int, K: int, dtype: DType, acc_t: DType, device: Any, epilogue: Callable[[UOp, UOp], UOp] | None,
            bias: bool, name: str) -> ir.Kernel | None:
    """The rows layout's default on a CPU-like device: each column tile (`group` tiles of rows x pp panels) copies
    its block of b into a local array as panels (each k's lanes contiguous, the pack_b layout), then every row tile
    of a runs against it from L1/L2. b's rows, N * itemsize apart, mapped every k to the same cache sets and a new
    page at power-of-two N; a packed block is contiguous and b is copied once (1024^3 float32 on one Rocket Lake
    thread, CPU time: 12.6 ms against 31 for the unpacked rows, pack_b + panels 11.5, OpenBLAS 11.7). The block
    holds up to PACK_BYTES (two column tiles where they fit, a row tile of a then serves both: 12.6 ms against 13.9
    for one). None where packing does not apply: one row tile (b is read once anyway), one column tile, or K x
    tile width over PACK_BYTES (4096 float32 rows of 32 lanes) where the renderer does not pack tiles itself (there:
    `_naive`, which the optimizer packs per K block)."""
    tn = _register_lanes(device, acc_t.itemsize)
    nj = -(-N // tn)
    accs_fit = _panel_rows(device, tn, acc_t.itemsize)
    # two panels a tile where the registers allow, an odd panel count rounded up (a panel of zeros: 1000 columns
    # are 32 tiles of 32 lanes, 2.4% computed and not stored)
    pp = PANELS_PER_TILE if accs_fit >= 4 * PANELS_PER_TILE and nj >= PANELS_PER_TILE else 1
    tm = _pick_tile(M, accs_fit // pp)
    tiles, w, isz = -(-nj // pp), tn * pp, acc_t.itemsize
    if M // tm < 2 or tiles < 2:  # one row tile reads b once; one column tile (N <= 32 lanes) would run on one
        return None  # thread, where b as it is splits its rows across them
    group = 2 if tiles % 2 == 0 and tiles >= 4 else 1  # 2 column tiles a block: a row tile of a reused twice
    if K * w * group * isz > PACK_BYTES:
        group = 1
    if K * w * isz > PACK_BYTES:  # all of K does not fit: the core's optimizer packs per K block (ir/pack.py)
        return _naive(M, N, K, dtype, epilogue, bias, name) if acc_t == dtype and _capabilities(device).pack_tiles \
            else None
    f = (lambda v: v.cast(acc_t)) if acc_t != dtype else (lambda v: v)
    k = ir.KernelBuilder(name)
    a = k.param("a", dtype, M * K)
    b = k.param("b", dtype, K * N)
    bias_p = k.param("bias", dtype, N) if bias else None
    c = k.param("c", dtype, M * N, writable=True)
    bt = k.local("b_tile", acc_t, group * K * w)
    # a workgroup of one: a GPU running a kernel built for a CPU shares a local array between the threads of a
    # workgroup, each packing its own column tile into it (wrong results on OPENCL and WEBGPU without this)
    jo = k.range(tiles // group, "global") + k.range(1, "local")
    ragged = tiles * w != N
    g, rr = k.range(group, "loop"), k.range(K, "loop")
    for y in range(w):  # the pack: zeros past column N
        col = (jo * group + g) * w + y
        v = b.load(rr * N + col, gate=col < N, default=0, unchecked=True) if ragged else b[rr * N + col]
        bt[(g * K + rr) * w + y] = f(v)
    k.barrier()
    i = k.range(M // tm, "loop")
    gc = k.range(group, "loop") if group > 1 else 0
    r = k.range(K, "reduce")
    brows = [ir.vectorize(*[bt[(gc * K + r) * w + q * tn + y] for y in range(tn)]) for q in range(pp)]
    accs = [[(ir.vectorize(*[f(a[(i * tm + x) * K + r])] * tn) * br).sum(r) for br in brows] for x in range(tm)]
    for x in range(tm):
        for q in range(pp):
            for y in range(tn):
                col = (jo * group + gc) * w + q * tn + y
                keep = (col < N) if ragged else None
                at = (i * tm + x) * N + col
                v = accs[x][q].gep(y)
                if bias_p is not None:
                    v = v + f(bias_p[col] if keep is None else bias_p.load(col, gate=keep, default=0, unchecked=True))
                if epilogue is not None:
                    v = epilogue(v, col)
                c.store(at, v.cast(dtype) if acc_t != dtype else v, gate=keep, unchecked=keep is not None)
    return k.build()


def _naive(M: int, N: int, K: int, dtype: DType, epilogue: Callable[[UOp, UOp], UOp] | None, bias: bool,
           name: str) -> ir.Kernel:
    """The rows layout as a naive gemm (same params) for the core's optimizer, where `_packed`'s block of b (all of K)
    would not fit its local array: the optimizer packs b per K block (ir/pack.py). 256x512x4096 float32 on one Rocket
    Lake thread: 18.3 ms unpacked rows, 7.1 ms packed by the optimizer (numpy 7.1-7.3)."""
    k = ir.KernelBuilder(name)
    a, b = k.param("a", dtype, M * K), k.param("b", dtype, K * N)
    bias_p = k.param("bias", dtype, N) if bias else None
    c = k.param("c", dtype, M * N, writable=True)
    i, j, r = k.range(M, "global"), k.range(N, "global"), k.range(K, "reduce")
    v = (a[i * K + r] * b[r * N + j]).sum(r)
    if bias_p is not None:
        v = v + bias_p[j]
    c[i * N + j] = epilogue(v, j) if epilogue is not None else v
    return k.build()


def matmul(M: int, N: int, K: int, dtype: DType = dtypes.float32, tm: int | None = None, tn: int | None = None,
           epilogue: Callable[[UOp, UOp], UOp] | None = None, bias: bool = False, name: str = "matmul",
           b_layout: str = "rows", device: Any = None) -> ir.Kernel:
    """c (M x N) = a (M x K) @ b (K x N), row-major. Each program instance computes a tm x tn tile: tm accumulators
    of tn lanes (tn <= 16) that share one k loop, so each k step loads tn contiguous values of b once and tm values
    of a, and does tm vector multiply-adds. `epilogue(value, column)` rewrites each output (bias, relu).

    `device` is the Device, Target or Capabilities the kernel will run on; None: the default device's Target
    (DEVICEKIT_DEVICE, else the kind of highest priority), so `matmul(1024, 1024, 1024)` as a user calls it gets
    the tiles of the machine it most likely runs on (1024^3 on one Rocket Lake Xeon thread: 32-33 ms CPU time
    against the 89-97 of the 8 x 8 it got before).
    Default tiles come from its register file (`Capabilities.vector_register_bytes`), never from a vendor: tn is
    `_register_lanes` (16 float32 on AVX-512, 8 on AVX2 and without one) and the accumulators fill half the file
    (`_panel_rows`: 16 on AVX-512, 8 on AVX2; 8 x 8 without one); where that is 8 or more and the column blocks
    pair up, a tile spans PANELS_PER_TILE column blocks (8 rows x 2 x 16 lanes on AVX-512: two b vectors a k step).
    An explicit tm or tn is kept (one column block).
    `b_layout="rows"` (default): param `b` is b itself. On a CPU-like device with default tiles the kernel packs
    b's column blocks into a local array itself (`_packed`: the speed of pack_b + panels with no second kernel,
    1024^3 float32 31 -> 13 ms on one Rocket Lake thread, level with OpenBLAS); where all of K would not fit that
    array, the naive gemm (`_naive`), which the core's optimizer packs per K block on a renderer that packs tiles;
    elsewhere tiles shrink to divide M and N.
    `b_layout="panels"` (default tn 16): param `bp` is `pack_b(K, N, tn=tn)`'s output, so each k step reads one
    contiguous vector; N need not divide by tn (the last panel's extra columns are computed and not stored), the
    fastest form (a weight packed once). Its default tm fills half the vector registers (4 without a device: AVX2's
    rule); where three quarters of them hold 24 accumulators (AVX-512, float32) and the panels come in fours, the
    tile is 6 rows x 4 panels (`_wide_tile`), whose rows need not divide M. On a 2-core EPYC this ran a 1024^3
    float32 matmul 2.3x faster than the rows layout (bench/run.py has the figures). With enough panels they are
    walked in groups (`_panel_group`), the group outermost. Otherwise tm shrinks to divide M."""
    _check_dims("matmul", M=M, N=N, K=K)
    if b_layout not in ("rows", "panels"):
        raise ValueError(f"matmul b_layout must be 'rows' or 'panels', got {b_layout!r}")
    panels = b_layout == "panels"
    if tm is None or tn is None:  # explicit tiles need no device (nor the registry's probe of the default one)
        device = _default_target(device)
    acc_t = dtypes.float32 if dtype in (dtypes.float16, dtypes.bfloat16) else dtype
    known = bool(getattr(_capabilities(device), "vector_register_bytes", 0))
    auto = tm is None and tn is None
    if panels:
        tn = _panel_width(16 if tn is None else tn)
    else:  # rows: one register of lanes by rows filling half the file; 8 x 8 where the file is unknown
        tn = _pick_tile(N, min(_register_lanes(device, acc_t.itemsize) if tn is None else tn, 16))
    nj = -(-N // tn)
    pp = 1  # column blocks a tile spans: PANELS_PER_TILE where half the register file holds 8+ accumulators
    wide = None
    if tm is None:
        accs_fit = _panel_rows(device, tn, acc_t.itemsize)
        if panels and auto and known and (wide := _wide_tile(accs_fit, nj, M)) is not None:
            tm, pp = wide
        else:
            if auto and (panels or known) and accs_fit >= 4 * PANELS_PER_TILE and nj % PANELS_PER_TILE == 0:
                pp = PANELS_PER_TILE
            tm = accs_fit // pp if panels or known else 8
    if wide is None:
        tm = _pick_tile(M, tm)
    tiles_i = -(-M // tm)  # a wide tile's rows need not divide M: the last tile's extra rows read row M - 1
    if not panels and auto and _packs(device) and (kern := _packed(M, N, K, dtype, acc_t, device, epilogue, bias,
                                                                    name)) is not None:
        return kern
    k = ir.KernelBuilder(name)
    a = k.param("a", dtype, M * K)
    b = k.param("bp", dtype, nj * K * tn) if panels else k.param("b", dtype, K * N)
    bias_p = k.param("bias", dtype, N) if bias else None
    c = k.param("c", dtype, M * N, writable=True)
    tiles_j = nj // pp
    group = _panel_group(tiles_j, K * tn * pp * dtype.itemsize) if panels else 1
    if group > 1:  # panel groups outermost (split across threads), then row tiles, then the group's panels
        jb, i, jj = k.range(tiles_j // group, "global"), k.range(tiles_i, "global"), k.range(group, "global")
        jt = jb * group + jj
    elif panels and tiles_j > 1:  # each panel tile outermost, every row tile of a past it while it sits in L2
        # (row tiles outermost streamed all of bp once per row tile: 2048^3 one thread 147-165 ms, 0.60x OpenBLAS)
        jt = k.range(tiles_j, "global")
        i = k.range(tiles_i, "global")
    else:  # rows first, and with one panel tile (an MLP's 10-wide layer) so too: the first range is what a CPU
        # splits across threads (256 x 10 x 512 on two Rocket Lake threads: 26-27 us on one, 18-19 split)
        i, jt = k.range(tiles_i, "global"), k.range(tiles_j, "global")
    r = k.range(K, "reduce")
    f = (lambda v: v.cast(acc_t)) if acc_t != dtype else (lambda v: v)
    js = [jt * pp + q for q in range(pp)] if pp > 1 else [jt]  # the tile's panels (rows: its column block)
    brows = []
    for j in js:
        bv = [f(b[(j * K + r) * tn + y] if panels else b[r * N + j * tn + y]) for y in range(tn)]
        brows.append(ir.vectorize(*bv) if tn > 1 else bv[0])
    ragged_rows = tiles_i * tm != M
    accs = []
    for x in range(tm):
        if ragged_rows:  # rows past M read row M - 1 (r < K: in a), computed and never stored
            ax = f(a.load(ir.minimum(i * tm + x, M - 1) * K + r, unchecked=True))
        else:
            ax = f(a[(i * tm + x) * K + r])
        av = ir.vectorize(*([ax] * tn)) if tn > 1 else ax
        accs.append([(av * brow).sum(r) for brow in brows])
    # only with panels: the last panel's columns past N are computed, never stored; the gate col < N is the bounds
    # check of those stores (r < K, col < N: in b, bias and c), so they need no run-time one; so the gate row < M
    ragged = N % tn != 0
    for x in range(tm):
        row_ok = (i * tm + x < M) if ragged_rows else None
        for q, j in enumerate(js):
            for y in range(tn):
                v = accs[x][q].gep(y) if tn > 1 else accs[x][q]
                col = j * tn + y
                keep = (col < N) if ragged else None
                if bias_p is not None:
                    v = v + f(bias_p[col] if keep is None else bias_p.load(col, gate=keep, default=0, unchecked=True))
                if epilogue is not None:
                    v = epilogue(v, col)
                gate = keep if row_ok is None else row_ok if keep is None else row_ok & keep
                c.store((i * tm + x) * N + col, v.cast(dtype) if acc_t != dtype else v, gate=gate,
                        unchecked=gate is not None)
    return k.build()


def mlp_layer(M: int, N: int, K: int, dtype: DType = dtypes.float32, tm: int | None = None, tn: int | None = None,
              name: str = "mlp_layer", b_layout: str = "rows", device: Any = None) -> ir.Kernel:
    """relu(x @ w + bias): one fused kernel; params a (x, M x K), b (w, K x N; `bp`, w packed by `pack_b`, with
    b_layout="panels"), bias (N), c (out, M x N). Tiles and the default device as `matmul`'s."""
    return matmul(M, N, K, dtype, tm, tn, epilogue=lambda v, col: ir.maximum(v, 0.0), bias=True, name=name,
                  b_layout=b_layout, device=device)
