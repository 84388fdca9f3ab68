"""Local arrays (`k.local`) follow the memory-order rules of writable params (docs/ir.md, "Memory order").

A load of a local array had no build point: two identical loads (or reductions) of it around a store were one
hash-consed node, and a value read before a store was read after it on every device (a sum over a local array
stored twice gave 8064 where program order gives 6048; two identical sums gave 2016 twice where the second is
4032). Now a local load carries its build point like a load of a writable param: it is right on every device, or
refused at build by name, as the same kernel over a writable param is.
"""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.ir.uop import KernelError
from devicekit.testing.devices import device_for

F = dtypes.float32
LABELS = ["PYTHON", "CPU/llvm", "CPU/c", "OPENCL", "WEBGPU"]
XV = np.arange(64, dtype=np.float32)


def _device(label):
    try:
        return device_for(label)
    except Exception as e:  # noqa: BLE001 - the kind is not installed or has no device here
        pytest.skip(f"{label}: {e}")


def _stored_twice(local: bool) -> ir.KernelBuilder:
    """t = x; s1 = sum(t); t = 2x; s2 = sum(t); out = s1 + s2: s1 would be read after the second store."""
    k = ir.KernelBuilder("twice")
    x = k.param("x", F, 64)
    out = k.param("out", F, 1, writable=True)
    t = k.local("t", F, 64) if local else k.param("t", F, 64, writable=True)
    g = k.range(1, "global")
    i = k.range(64, "loop")
    t[i] = x[i]
    r = k.range(64, "reduce")
    s1 = t[r].sum(r)
    i2 = k.range(64, "loop")
    t[i2] = x[i2] * 2.0
    r2 = k.range(64, "reduce")
    s2 = t[r2].sum(r2)
    out[g] = s1 + s2
    return k


@pytest.mark.parametrize("local", [True, False])
def test_a_sum_kept_across_a_store_is_refused_by_name(local):
    with pytest.raises(KernelError, match="a load from t cannot keep its value"):
        _stored_twice(local).build()


def _twin_sums() -> ir.Kernel:
    """Two identical sums over a local array with a store between them: two values, not one."""
    k = ir.KernelBuilder("twin")
    x = k.param("x", F, 64)
    out = k.param("out", F, 2, writable=True)
    t = k.local("t", F, 64)
    i = k.range(64, "loop")
    t[i] = x[i]
    r = k.range(64, "reduce")
    out[0] = t[r].sum(r)
    i2 = k.range(64, "loop")
    t[i2] = x[i2] * 2.0
    out[1] = t[r].sum(r)
    return k.build()


def test_twin_sums_around_a_store_are_two_nodes():
    loads = [u for u in _twin_sums().sink.toposort() if u.op.name == "LOAD" and u.src[0].src[0].op.name ==
             "DEFINE_LOCAL"]
    assert len(loads) == 2 and all(u.arg[0] == "after" for u in loads)


@pytest.mark.parametrize("label", LABELS)
def test_twin_sums_around_a_store_on_every_device(label):
    got = dk.run(_twin_sums(), _device(label), x=XV, out=np.zeros(2, np.float32))["out"]
    assert got.tolist() == [2016.0, 4032.0]


def _kept_value() -> ir.Kernel:
    """A value loaded from a local array, the array stored again, the value used after: the first value."""
    k = ir.KernelBuilder("kept")
    x = k.param("x", F, 8)
    out = k.param("out", F, 8, writable=True)
    t = k.local("t", F, 8)
    i = k.range(8, "loop")
    t[i] = x[i]
    v = t[i]
    t[i] = v * 10.0
    out[i] = v + t[i]
    return k.build()


@pytest.mark.parametrize("label", LABELS)
def test_a_value_loaded_before_a_store_keeps_its_value(label):
    xv = np.arange(8, dtype=np.float32)
    got = dk.run(_kept_value(), _device(label), x=xv, out=np.zeros(8, np.float32))["out"]
    np.testing.assert_array_equal(got, xv * 11)


def _lanes_twin_sums() -> ir.Kernel:
    """The GPU shape: each lane stores one element, a barrier, every lane sums the tile; again with 2x."""
    k = ir.KernelBuilder("lanes")
    x = k.param("x", F, 16)
    o1 = k.param("o1", F, 16, writable=True)
    o2 = k.param("o2", F, 16, writable=True)
    g, lid = k.range(2, "global"), k.range(8, "local")
    t = k.local("t", F, 8)
    t[lid] = x[g * 8 + lid]
    k.barrier()
    r = k.range(8, "reduce")
    o1[g * 8 + lid] = t[r].sum(r)
    k.barrier()
    t[lid] = x[g * 8 + lid] * 2.0
    k.barrier()
    r2 = k.range(8, "reduce")
    o2[g * 8 + lid] = t[r2].sum(r2)
    return k.build()


LANE_LABELS = ["PYTHON", "OPENCL", "WEBGPU"]


@pytest.mark.parametrize("label", ["CPU/llvm", "CPU/c"])
def test_a_barrier_inside_a_cpu_lane_loop_is_refused_by_name(label):
    """CPU runs a `local` range as a loop, where a barrier between two statements of it closes nothing: lane j summed
    the tile before lanes j+1.. stored their elements (garbage on both pairs before; a workgroup of one, as the
    packed matmul uses, still runs)."""
    with pytest.raises(KernelError, match="a barrier between two statements of local range"):
        dk.run(_lanes_twin_sums(), _device(label), x=XV[:16], o1=np.zeros(16, np.float32), o2=np.zeros(16, np.float32))


@pytest.mark.parametrize("label", LANE_LABELS)
def test_lanes_sum_a_tile_stored_twice(label):
    xv = np.arange(16, dtype=np.float32)
    got = dk.run(_lanes_twin_sums(), _device(label), x=xv, o1=np.zeros(16, np.float32), o2=np.zeros(16, np.float32))
    want = np.repeat([xv[:8].sum(), xv[8:].sum()], 8)
    np.testing.assert_array_equal(got["o1"], want)
    np.testing.assert_array_equal(got["o2"], want * 2)


def test_a_sum_built_before_a_barrier_and_kept_across_a_store_is_refused():
    k = ir.KernelBuilder("epoch_sum")
    x = k.param("x", F, 16)
    out = k.param("out", F, 16, writable=True)
    g, lid = k.range(2, "global"), k.range(8, "local")
    t = k.local("t", F, 8)
    t[lid] = x[g * 8 + lid]
    k.barrier()
    r = k.range(8, "reduce")
    s = t[r].sum(r)
    k.barrier()
    t[lid] = 0.0
    k.barrier()
    out[g * 8 + lid] = s
    with pytest.raises(KernelError, match="a load from t cannot keep its value"):
        k.build()
