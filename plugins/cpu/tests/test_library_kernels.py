"""Every kernel of devicekit.kernels, on both CPU pairs, against the PYTHON reference device."""

from __future__ import annotations

import pytest
from devicekit import kernels

PAIRS = ("llvm", "c")
NAMES = sorted(kernels.all_kernels())


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("name", NAMES)
def test_library_kernel_matches_reference(name, pair, single_pair, python_ref, close):
    import devicekit as dk
    kernel = kernels.all_kernels()[name]()
    named = kernels.example_inputs(name)
    want = python_ref(kernel, **named)
    got = dk.run(kernel, device=single_pair(pair), **named)
    assert set(got) == set(want)
    for k in want:
        close(got[k], want[k], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("pair", PAIRS)
def test_large_matmul_tiles(pair, single_pair, close):
    """A bigger tiled matmul (threads split the tile rows) against numpy."""
    import devicekit as dk
    import numpy as np
    rng = np.random.default_rng(3)
    M, N, K = 64, 48, 40
    a, b = rng.standard_normal(M * K).astype(np.float32), rng.standard_normal(K * N).astype(np.float32)
    got = dk.run(kernels.matmul(M, N, K), device=single_pair(pair), a=a, b=b)["c"]
    close(got, (a.reshape(M, K) @ b.reshape(K, N)).reshape(-1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("seed", range(6))
def test_packed_matmul_random_shapes(pair, seed, single_pair, close):
    """pack_b + matmul(b_layout="panels") at random shapes, tiles and panel widths (ragged N and M included) against
    numpy."""
    import devicekit as dk
    import numpy as np
    rng = np.random.default_rng(100 + seed)
    M, N, K = (int(v) for v in rng.integers(1, 40, 3))
    tm, tn = int(rng.integers(1, 9)), int(rng.choice([1, 3, 4, 8, 16]))
    a, b = rng.standard_normal(M * K).astype(np.float32), rng.standard_normal(K * N).astype(np.float32)
    dev = single_pair(pair)
    bp = dk.run(kernels.pack_b(K, N, tn=tn), device=dev, b=b)["bp"]
    got = dk.run(kernels.matmul(M, N, K, tm=tm, tn=tn, b_layout="panels"), device=dev, a=a, bp=bp)["c"]
    close(got, (a.reshape(M, K) @ b.reshape(K, N)).reshape(-1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pair", PAIRS)
def test_packed_matmul_tiled_for_this_cpu(pair, single_pair, close):
    """The panels tile sized for this CPU's vector registers (16 rows on AVX-512) is still a @ b, ragged N included;
    the renderer says how big the host's register file is."""
    import devicekit as dk
    import numpy as np
    from devicekit_cpu import hostinfo
    dev = single_pair(pair)
    regs = dev.renderer.capabilities.vector_register_bytes
    assert regs == hostinfo.vector_register_bytes()
    if "avx512f" in hostinfo.cpu_flags():
        assert regs == 2048
    elif "avx2" in hostinfo.cpu_flags():
        assert regs == 512
    rng = np.random.default_rng(7)
    M, N, K = 48, 40, 24
    a, b = rng.standard_normal(M * K).astype(np.float32), rng.standard_normal(K * N).astype(np.float32)
    bp = dk.run(kernels.pack_b(K, N), device=dev, b=b)["bp"]
    mm = kernels.matmul(M, N, K, b_layout="panels", device=dev)
    got = dk.run(mm, device=dev, a=a, bp=bp)["c"]
    close(got, (a.reshape(M, K) @ b.reshape(K, N)).reshape(-1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("N, tn, group", [(256, 16, 2), (250, 16, 2), (512, 8, 8), (1024, 16, 8), (64, 16, 1)])
def test_packed_matmul_walks_panels_in_groups(pair, N, tn, group, single_pair, close):
    """Enough panels are walked in groups, outermost (kernels._panel_group: ~256 KB of b, at most 8, leaving 8 groups
    for the threads), ragged N included; a @ b either way."""
    import devicekit as dk
    import numpy as np
    from devicekit.ir.ops import Ops
    M, K = 24, 8
    mm = kernels.matmul(M, N, K, tm=4, tn=tn, b_layout="panels")
    nj = -(-N // tn)
    outer = min((u for u in mm.uops() if u.op is Ops.RANGE and u.arg[1] == "global"), key=lambda u: u.arg[0])
    assert outer.src[0].arg == (nj // group if group > 1 else nj)  # no groups: each panel outermost
    rng = np.random.default_rng(N + tn)
    a, b = rng.standard_normal(M * K).astype(np.float32), rng.standard_normal(K * N).astype(np.float32)
    dev = single_pair(pair)
    bp = dk.run(kernels.pack_b(K, N, tn=tn), device=dev, b=b)["bp"]
    got = dk.run(mm, device=dev, a=a, bp=bp)["c"]
    close(got, (a.reshape(M, K) @ b.reshape(K, N)).reshape(-1), rtol=1e-4, atol=1e-4)
