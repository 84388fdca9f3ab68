"""Conformance: memory order (docs/ir.md). Kernels that load what they store, keep loaded values across later stores
and carry values through memory from one `loop` iteration to the next match the PYTHON reference with every pair;
they compile where the device cannot run; a writable param sharing memory with another is refused at launch."""

from __future__ import annotations

import numpy as np
import pytest

from devicekit import ir
from devicekit.ir import dtypes

from .conformance import check_against_reference, dtype_pool
from .fuzz_memory import memory_kernel

pytestmark = pytest.mark.devicekit_conformance

SEEDS = range(8)  # tests/reliability and the fuzzer run thousands; the kit checks the class on any device


@pytest.mark.parametrize("seed", SEEDS)
def test_memory_order_compiles(dk_compiles, seed):
    for (renderer, compiler), pair in zip(dk_compiles.compilers, dk_compiles.pair_names):
        rk = memory_kernel(seed, dtype_pool(renderer))
        assert compiler.compile(renderer.render(rk.kernel)).lib, f"pair {pair}: no bytes"


@pytest.mark.parametrize("seed", SEEDS)
def test_memory_order_matches_reference(dk_device, seed):
    for (renderer, _), pair in zip(dk_device.compilers, dk_device.pair_names):
        rk = memory_kernel(seed, dtype_pool(renderer))
        check_against_reference(rk.kernel, rk.inputs, dk_device, f"memory-order seed {seed} [{pair}]", pair)


def test_a_writable_param_sharing_memory_is_refused(dk_device):
    import devicekit as dk
    k = ir.KernelBuilder("dk_conformance_alias")
    x = k.param("x", dtypes.float32, 8)
    out = k.param("out", dtypes.float32, 8, writable=True)
    i = k.range(8, "global")
    out[i] = x[i] + 1.0
    prog = dk_device.compile(k.build())
    b = dk.Buffer(dk_device, 8, dtypes.float32).copyin(np.arange(8, dtype=np.float32))
    with pytest.raises(ValueError, match="'x' and 'out'"):
        prog.execute([b, b], [], wait=True)
