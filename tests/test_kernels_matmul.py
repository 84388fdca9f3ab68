"""kernels.matmul as a user calls it (issue 36): without `device=` the tiles are those of the default device (its
Target's register file), not a fixed 8 x 8; the rules come from the register file the renderer reports."""

import dataclasses

import devicekit as dk
import numpy as np
import pytest
from devicekit import kernels
from devicekit.ir import dtypes
from devicekit.ir.ops import Ops
from devicekit.render.renderer import Capabilities

CPU_LIKE = Capabilities(dtypes=frozenset(dtypes.all()), ops=frozenset(), core_split=True)


def _tile(k) -> tuple[int, int]:
    """(rows, lanes) of a rows-layout matmul: stores into c per tile and the width of b's row vector."""
    lanes = max((u.dtype.count for u in k.uops() if u.op is Ops.VECTORIZE), default=1)
    return len([s for s in k.sink.src if s.op is Ops.STORE and s.src[0].src[0].op is Ops.PARAM]) // lanes, lanes


@pytest.mark.parametrize("kind", ["CPU", "PYTHON"])
def test_no_device_means_the_default_devices_tiles(monkeypatch, kind):
    """`matmul(M, N, K)`, `mlp_layer` and `softmax()` without a device build what they build for the default
    device's Target (DEVICEKIT_DEVICE here): on an AVX-512 host 16 x 16 (the rows tile that ran 1024^3 2.0x faster
    on a Rocket Lake Xeon than the 8 x 8 every call without `device=` got before)."""
    if kind == "CPU":
        pytest.importorskip("devicekit_cpu")
    monkeypatch.setenv("DEVICEKIT_DEVICE", kind)
    target = dk.target(kind)
    assert kernels.matmul(64, 64, 8).key == kernels.matmul(64, 64, 8, device=target).key
    assert kernels.mlp_layer(32, 48, 8).key == kernels.mlp_layer(32, 48, 8, device=target).key
    assert kernels.softmax().key == kernels.softmax(device=target).key
    regs = target.renderer.capabilities.vector_register_bytes
    want = {2048: (16, 16), 512: (8, 8), 0: (8, 8)}.get(regs)
    if want is not None:
        assert _tile(kernels.matmul(64, 64, 8)) == want


def test_no_usable_default_device_builds_the_portable_tiles(monkeypatch):
    """A default device that cannot be resolved does not stop a kernel from being built: 8 x 8, as for a device
    whose register file is unknown."""
    monkeypatch.setenv("DEVICEKIT_DEVICE", "NOSUCHKIND")
    assert _tile(kernels.matmul(64, 64, 8)) == (8, 8)


@pytest.mark.parametrize("regs, dtype, tile", [(2048, dtypes.float32, (16, 16)), (2048, dtypes.float64, (16, 8)),
                                               (512, dtypes.float32, (8, 8)), (512, dtypes.float64, (8, 4)),
                                               (256, dtypes.float32, (8, 4)), (0, dtypes.float64, (8, 4))])
def test_rows_tile_is_the_register_files_rule(regs, dtype, tile):
    """Lanes: a sixteenth of the register file up to one 64-byte vector (float64 on AVX-512: 8 lanes, one zmm, not
    16 in two); rows: accumulators filling half the file. No vendor names in the rule."""
    dev = dataclasses.replace(CPU_LIKE, vector_register_bytes=regs)
    assert _tile(kernels.matmul(64, 64, 8, dtype, device=dev)) == tile
    assert _tile(kernels.matmul(64, 64, 8, dtype, device=dev, tm=2, tn=4)) == (2, 4)  # explicit tiles are kept


@pytest.mark.parametrize("M, N, K", [(64, 64, 64), (48, 40, 33), (20, 36, 7), (1, 17, 5)])
def test_default_matmul_matches_numpy(M, N, K):
    """The default kernel (the default device's tiles, shrunk to divide M and N) is a @ b on the default device,
    and the PYTHON reference's own default on it (the CPU's packed form runs there in test_packed_rows_match_numpy,
    at a size the reference's local arrays allow: 64^3 took it 6 minutes)."""
    rng = np.random.default_rng(M * N + K)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    for dev in (None, "PYTHON"):
        on = None if dev is None else dk.target(dev)
        out = dk.run(kernels.matmul(M, N, K, device=on), device=dev, a=a.reshape(-1), b=b.reshape(-1))["c"]
        np.testing.assert_allclose(out.reshape(M, N), a @ b, rtol=1e-4, atol=1e-4)
        out = dk.run(kernels.mlp_layer(M, N, K, device=on), device=dev, a=a.reshape(-1), b=b.reshape(-1),
                     bias=bias)["c"]
        np.testing.assert_allclose(out.reshape(M, N), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)


def test_library_kernels_are_the_same_on_every_machine(monkeypatch):
    """all_kernels() is what conformance suites compare across devices: built for a device of unknown registers,
    never for this process's default device (an AVX-512 CPU would make its matmul 12 x 10)."""
    names = ("matmul", "mlp_layer", "softmax", "matmul_panels", "mlp_layer_panels")
    keys = {}
    for kind in ("CPU", "PYTHON"):
        monkeypatch.setenv("DEVICEKIT_DEVICE", kind)
        keys[kind] = [kernels.all_kernels()[n]().key for n in names]
    assert keys["CPU"] == keys["PYTHON"]
    assert _tile(kernels.all_kernels()["matmul"]()) == (8, 5)  # 24 x 20: 8 rows, lanes shrunk from 8 to divide 20


@pytest.mark.parametrize("regs, dtype, M, N, tile", [(2048, dtypes.float32, 64, 64, (6, 4)),  # 4 panels: wide
                                                     (2048, dtypes.float32, 64, 32, (8, 2)),  # 2 panels
                                                     (2048, dtypes.float64, 64, 64, (4, 2)),
                                                     (2048, dtypes.float32, 64, 48, (16, 1)),  # 3 panels: odd
                                                     (2048, dtypes.float32, 4, 64, (4, 2)),  # M under a wide tile
                                                     (512, dtypes.float32, 64, 64, (4, 1)), (0, dtypes.float32, 64, 64, (4, 1))])
def test_panels_tile_spans_two_panels_where_the_registers_allow(regs, dtype, M, N, tile):
    """Several accumulators per row (issue 36 item 3): where half the register file holds 8+ accumulators, a
    default panels tile is rows x 2 panels (two b vectors a k step, 2 x rows multiply-adds: 1024^3 float32 on one
    Rocket Lake thread 12.7-14.3 ms CPU time against 15.8-17.1 for 16 x 1); where three quarters of it hold 24
    (AVX-512, float32) and the panels come in fours, 6 rows x 4 panels (`_wide_tile`); an odd panel count or an
    explicit tm keeps one panel. Each k step loads one contiguous vector per panel."""
    from devicekit.ir.linearize import lower
    dev = dataclasses.replace(CPU_LIKE, vector_register_bytes=regs)
    mm = kernels.matmul(M, N, 8, dtype, b_layout="panels", device=dev)
    lk = lower(mm, dataclasses.replace(dev, ops=frozenset(Ops)))
    loads = [u for u in lk.uops if u.op is Ops.LOAD and u.dtype.count == 16]
    assert len(loads) == tile[1]
    assert len(mm.sink.src) == tile[0] * tile[1] * 16
    assert len(kernels.matmul(M, N, 8, dtype, b_layout="panels", device=dev, tm=2).sink.src) == 2 * 16


@pytest.mark.parametrize("M, N, K, tile", [(16, 64, 8, (6, 4)), (24, 60, 7, (6, 4)), (8, 20, 5, (8, 2)),
                                           (40, 96, 17, (8, 2)), (13, 64, 9, (6, 4)), (100, 128, 33, (6, 4))])
def test_two_panel_tiles_match_numpy(M, N, K, tile):
    """pack_b + the two- and four-panel tiles (ragged N in the last panel, and a wide tile's rows past M: 16, 13
    and 100 rows are not a multiple of 6) is relu(a @ b + bias), on the CPU device and the PYTHON reference."""
    dev = dataclasses.replace(CPU_LIKE, vector_register_bytes=2048)
    rng = np.random.default_rng(M + N + K)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    mm = kernels.mlp_layer(M, N, K, b_layout="panels", device=dev)
    assert len(mm.sink.src) == tile[0] * tile[1] * 16  # rows x panels x 16 lanes
    for run_on in ("CPU", "PYTHON"):
        if run_on == "CPU":
            pytest.importorskip("devicekit_cpu")
        bp = dk.run(kernels.pack_b(K, N), device=run_on, b=b.reshape(-1))["bp"]
        out = dk.run(mm, device=run_on, a=a.reshape(-1), bp=bp, bias=bias)["c"]
        np.testing.assert_allclose(out.reshape(M, N), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("regs, N, accs, rows", [(2048, 64, 16, 8), (2048, 48, 16, 8), (512, 64, 8, 4),
                                                 (0, 64, 8, 8)])
def test_rows_tile_spans_two_column_blocks_where_the_registers_allow(regs, N, accs, rows):
    """The rows layout's default tile likewise: 8 rows x 2 blocks of 16 lanes on 2 KB of registers (1024^3 on one
    Rocket Lake thread: 31.6-33.3 ms CPU time against 16 x 16's 38), an odd block count (48 / 16) rounded up by the
    packed form (a block of zeros, not stored), one block of 8 where the register file is unknown (8 x 8)."""
    dev = None if regs == 0 else dataclasses.replace(CPU_LIKE, vector_register_bytes=regs)
    mm = kernels.matmul(64, N, 8, device=dev if dev is not None else kernels._ANY_DEVICE)
    assert len([u for u in mm.uops() if u.op is Ops.REDUCE]) == accs
    a_rows = {u for u in mm.uops() if u.op is Ops.LOAD and u.src[0].src[0].arg[1] == "a"}
    assert len(a_rows) == rows


def test_explicit_tiles_do_not_resolve_the_default_device(monkeypatch):
    """tm and tn given: the kernel is the user's tile whatever the default device is, and building it does not
    probe the registry for one (a first call would load every plugin for nothing)."""
    def refuse(device):
        raise AssertionError("the default device was resolved")
    from devicekit import kernels_target
    monkeypatch.setattr(kernels_target, "_default_target", refuse)
    assert _tile(kernels.matmul(64, 64, 8, tm=4, tn=8)) == (4, 8)
    with pytest.raises(AssertionError, match="the default device was resolved"):
        kernels.matmul(64, 64, 8, tm=4)


def _packed_form(k) -> bool:
    return any(u.op is Ops.DEFINE_LOCAL for u in k.uops())


@pytest.mark.parametrize("regs, dtype", [(2048, dtypes.float32), (512, dtypes.float32), (2048, dtypes.float64)])
def test_default_rows_packs_b_and_shares_one_k_loop(regs, dtype):
    """On a CPU-like device (no local ranges, a known register file) the rows default copies each column block of
    b into a local array as panels, and every accumulator of the tile shares ONE k loop over it (the scheduler
    groups reductions of a local array no later statement stores: without that, one k loop per accumulator, 3x
    slower). 1024^3 float32 on one Rocket Lake thread: 12.6 ms CPU time against 31 for the rows as they are."""
    from devicekit.ir.linearize import lower
    dev = dataclasses.replace(CPU_LIKE, vector_register_bytes=regs)
    mm = kernels.matmul(64, 64, 64, dtype, device=dev)
    assert _packed_form(mm)
    lk = lower(mm, dataclasses.replace(dev, ops=frozenset(Ops)))
    loops = [u for u in lk.uops if u.op is Ops.RANGE and u.arg[1] == "reduce"]
    accs = [u for u in lk.uops if u.op is Ops.DEFINE_ACC and u.dtype.scalar() == dtype]
    assert len(loops) == 1
    assert len(accs) == len([u for u in mm.uops() if u.op is Ops.REDUCE]) >= 8


@pytest.mark.parametrize("why, kwargs", [("an explicit tile", {"tm": 4}), ("one row tile", {"M": 8}), ("one column tile", {"N": 20}),
                                         ("a GPU-like device", {"has_local": True}),
                                         ("an unknown register file", {"regs": 0})])
def test_rows_keep_b_as_it_is_where_packing_does_not_apply(why, kwargs):
    """The pack is the default only where it is the default's own choice on a one-thread-per-instance device, with
    enough row tiles to reuse each packed block."""
    kw = dict(kwargs)
    dev = dataclasses.replace(CPU_LIKE, vector_register_bytes=kw.pop("regs", 2048), has_local=kw.pop("has_local", False))
    assert not _packed_form(kernels.matmul(kw.pop("M", 64), kw.pop("N", 64), 64, device=dev, **kw)), why


@pytest.mark.parametrize("M, N, K, pack_bytes", [(16, 40, 3, None), (64, 64, 64, None), (32, 37, 19, None),
                                                 (48, 100, 33, None), (40, 48, 7, None), (32, 64, 61, 4096)])
def test_packed_rows_match_numpy(monkeypatch, M, N, K, pack_bytes):
    """The packed default is a @ b and relu(a @ b + bias) on the CPU device (and, at the smallest size, on the
    PYTHON reference, slow with local arrays): ragged N (the pack's zeros past N, gated stores), one or two column
    tiles a block; K rows of a tile over PACK_BYTES (made small here) leave b as it is."""
    from devicekit import kernels_matmul
    if pack_bytes is not None:
        monkeypatch.setattr(kernels_matmul, "PACK_BYTES", pack_bytes)
    dev = dataclasses.replace(CPU_LIKE, vector_register_bytes=2048)
    rng = np.random.default_rng(M * N + K)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    mm, mlp = kernels.matmul(M, N, K, device=dev), kernels.mlp_layer(M, N, K, device=dev)
    assert _packed_form(mm) == _packed_form(mlp) == (pack_bytes is None)
    for run_on in ("CPU", "PYTHON") if M * N * K < 2000 else ("CPU",):
        if run_on == "CPU":
            pytest.importorskip("devicekit_cpu")
        out = dk.run(mm, device=run_on, a=a.reshape(-1), b=b.reshape(-1))["c"]
        np.testing.assert_allclose(out.reshape(M, N), a @ b, rtol=1e-4, atol=1e-4)
        out = dk.run(mlp, device=run_on, a=a.reshape(-1), b=b.reshape(-1), bias=bias)["c"]
        np.testing.assert_allclose(out.reshape(M, N), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("s", [1000, 1024])
def test_default_matmul_at_large_sizes_matches_numpy(s):
    """`kernels.matmul(s, s, s)` as a user calls it, on the default device, at a ragged and a power-of-two size."""
    rng = np.random.default_rng(s)
    a, b = rng.standard_normal((s, s)).astype(np.float32), rng.standard_normal((s, s)).astype(np.float32)
    out = dk.run(kernels.matmul(s, s, s), a=a.reshape(-1), b=b.reshape(-1))["c"]
    np.testing.assert_allclose(out.reshape(s, s), a @ b, rtol=1e-3, atol=1e-3 * s ** 0.5)


@pytest.mark.parametrize("kind", ["OPENCL", "WEBGPU"])
def test_packed_rows_built_for_a_cpu_are_right_on_a_gpu(kind):
    """A kernel built for a CPU (the default device of a user who then runs it elsewhere) on a GPU: its workgroup
    is one thread (the threads of a larger one packed their column tiles into one local array: wrong results on
    OPENCL and WEBGPU), its local array within shared_max at this size."""
    rows = [d for d in dk.devices() if d.kind == kind]
    if not rows or not rows[0].available:
        pytest.skip(f"no {kind} device here")
    dev = dataclasses.replace(CPU_LIKE, vector_register_bytes=2048)
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)
    mm = kernels.matmul(64, 64, 64, device=dev)
    assert _packed_form(mm)
    out = dk.run(mm, device=kind, a=a.reshape(-1), b=b.reshape(-1))["c"]
    np.testing.assert_allclose(out.reshape(64, 64), a @ b, rtol=1e-4, atol=1e-4)


def test_a_k_too_long_for_the_pack_is_the_naive_kernel_the_optimizer_packs(monkeypatch):
    """Where `_packed`'s block of b (all of K) would not fit its local array, a renderer that packs tiles
    (`Capabilities.pack_tiles`, the llvm pair) gets the naive gemm with the same params, which the core's optimizer
    packs per K block (ir/pack.py); without pack_tiles the rows stay as they are (the test above)."""
    from devicekit import kernels_matmul
    monkeypatch.setattr(kernels_matmul, "PACK_BYTES", 4096)
    dev = dataclasses.replace(CPU_LIKE, vector_register_bytes=2048, pack_tiles=True)
    M, N, K = 40, 70, 61
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    mm, mlp = kernels.matmul(M, N, K, device=dev), kernels.mlp_layer(M, N, K, device=dev)
    for k in (mm, mlp):
        assert not _packed_form(k) and not any(u.dtype.count > 1 for u in k.uops())  # as a user writes it
    pytest.importorskip("devicekit_cpu")
    cpu = dk.device("CPU")
    assert cpu.compile(mm, pair="llvm").compiled.spec.get_meta("opts")[0].startswith("packed b panels")
    out = dk.run(mm, device="CPU", a=a.reshape(-1), b=b.reshape(-1))["c"]
    np.testing.assert_allclose(out.reshape(M, N), a @ b, rtol=1e-4, atol=1e-4)
    out = dk.run(mlp, device="CPU", a=a.reshape(-1), b=b.reshape(-1), bias=bias)["c"]
    np.testing.assert_allclose(out.reshape(M, N), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)


def test_a_panels_matmul_of_one_column_tile_splits_its_rows():
    """The first global range is what the CPU runtime splits across threads: with one panel tile (N <= 16: an MLP's
    10-wide output layer) the row tiles come first, else the layer ran on one thread (256 x 10 x 512 on two Rocket
    Lake threads: 26-27 us against 18-19 split); with several, the panel tiles stay outermost."""
    import devicekit as dk
    from devicekit.ir.ops import Ops
    cpu = dk.device("CPU")

    def global_extents(kern):  # in declaration order (a range's arg: its id, its kind)
        return [u.src[0].arg for u in sorted((u for u in kern.uops() if u.op is Ops.RANGE and u.arg[1] == "global"),
                                             key=lambda u: u.arg[0])]

    one = global_extents(kernels.matmul(256, 10, 512, b_layout="panels", device=cpu))
    assert one[0] > 1 and one[1] == 1, one
    many = global_extents(kernels.matmul(256, 64, 512, b_layout="panels", tm=8, tn=16, device=cpu))
    assert many[:2] == [4, 32], many


@pytest.mark.parametrize("seed", range(8))
def test_default_panels_tiles_match_numpy_on_random_shapes(seed):
    """The default panels tile of an AVX-512 register file (6 x 4 where the panels come in fours, else 8 x 2 or 16 x
    1) at random M, N, K, bias and relu or not: rows past M and columns past N are computed and never stored."""
    pytest.importorskip("devicekit_cpu")
    rng = np.random.default_rng(4600 + seed)
    M, N, K = (int(x) for x in rng.integers(1, 90, 3))
    dev = dataclasses.replace(CPU_LIKE, vector_register_bytes=2048)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    relu = bool(seed % 2)
    kern = kernels.mlp_layer(M, N, K, b_layout="panels", device=dev) if relu else \
        kernels.matmul(M, N, K, bias=True, b_layout="panels", device=dev)
    bp = dk.run(kernels.pack_b(K, N), device="CPU", b=b.reshape(-1))["bp"]
    c = np.full(M * N, np.nan, np.float32)  # what a tile must not store to stays NaN: none is left
    out = dk.run(kern, device="CPU", a=a.reshape(-1), bp=bp, bias=bias, c=c)["c"].reshape(M, N)
    want = a @ b + bias
    np.testing.assert_allclose(out, np.maximum(want, 0) if relu else want, rtol=1e-4, atol=1e-4)
