"""Memory order (docs/ir.md): a load reads where it was built, a `loop` range runs its iterations in order, races
between lanes are refused, and every device (the reference, both CPU pairs) agrees. Each case was wrong on some
device before the rules were written down (issue 11, items 1 and 2, and what the memory fuzzer found next)."""

from __future__ import annotations

import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.ir.uop import KernelError


def _devices():
    import devicekit as dk
    from devicekit.targets import Device
    cpu = dk.device("CPU")
    out = {"PYTHON": "PYTHON"}
    for pair in cpu.pair_names:
        r, c = cpu.pair(pair)
        out[f"CPU/{pair}"] = Device(cpu.spec, cpu.allocator, r, c, cpu.runtime)
    return out


DEVICES = _devices()


def _on_every_device(kernel, want: dict, **inputs):
    import devicekit as dk
    for label, dev in DEVICES.items():
        got = dk.run(kernel, device=dev, **{k: v.copy() if hasattr(v, "copy") else v for k, v in inputs.items()})
        for name, w in want.items():
            np.testing.assert_array_equal(got[name], w, err_msg=f"{name} on {label}")


def test_a_loaded_value_is_what_was_loaded_where_it_was_built():
    """`a = x[0]; x[0] = a + 1; x[1] = a`: PYTHON gave [11, 11], the CPU pairs [11, 10]."""
    k = ir.KernelBuilder("load_store_use")
    x = k.param("x", dtypes.float32, 4, writable=True)
    a = x[0]
    x[0] = a + 1.0
    x[1] = a
    _on_every_device(k.build(), {"x": [11, 10, 0, 0]}, x=np.array([10, 0, 0, 0], np.float32))


def test_a_load_is_read_before_a_later_store_it_does_not_feed():
    k = ir.KernelBuilder("load_then_overwrite")
    x = k.param("x", dtypes.int32, 2, writable=True)
    a = x[0]
    x[0] = 5
    x[1] = a
    _on_every_device(k.build(), {"x": [5, 10]}, x=np.array([10, 0], np.int32))


def test_a_load_built_before_a_loop_statement_is_read_in_every_iteration():
    k = ir.KernelBuilder("before_loop")
    x = k.param("x", dtypes.int32, 4, writable=True)
    j = k.range(4, "loop")
    a = x[0]
    x[j] = a + 1
    _on_every_device(k.build(), {"x": [11, 12, 12, 12]}, x=np.array([10, 0, 0, 0], np.int32))


def test_a_loop_range_runs_in_order_a_running_sum_through_memory():
    """y[i, j] = y[i, j - 1] + x[i, j] with j a loop range: PYTHON returned all ones, the CPU the running sum."""
    n = 6
    k = ir.KernelBuilder("prefix_sum")
    x = k.param("x", dtypes.float32, n * n)
    y = k.param("y", dtypes.float32, n * n, writable=True)
    i, j = k.range(n, "global"), k.range(n, "loop")
    y[i * n + j] = y.load(i * n + j - 1, gate=j > 0, default=0.0) + x[i * n + j]
    want = np.tile(np.arange(1, n + 1, dtype=np.float32), n)
    _on_every_device(k.build(), {"y": want}, x=np.ones(n * n, np.float32))


def test_an_accumulation_into_one_element_over_a_loop():
    k = ir.KernelBuilder("acc_in_memory")
    x = k.param("x", dtypes.int64, 5)
    y = k.param("y", dtypes.int64, 1, writable=True)
    j = k.range(5, "loop")
    y[0] = y[0] + x[j]
    _on_every_device(k.build(), {"y": [15]}, x=np.arange(1, 6), y=np.zeros(1, np.int64))


def test_a_statement_never_runs_inside_a_loop_it_does_not_use():
    """The scheduler nested the second loop inside the first (every range of the kernel in one order), so a
    statement of the second ran once per iteration of the first: z came back 4, not 1, on both CPU pairs."""
    k = ir.KernelBuilder("two_loops")
    y = k.param("y", dtypes.int32, 4, writable=True)
    z = k.param("z", dtypes.int32, 4, writable=True)
    j = k.range(4, "loop")
    y[j] = j.cast(dtypes.int32)
    j2 = k.range(4, "loop")
    z[j2] = z[j2] + 1
    _on_every_device(k.build(), {"y": [0, 1, 2, 3], "z": [1, 1, 1, 1]}, y=np.zeros(4, np.int32),
                     z=np.zeros(4, np.int32))


def test_stores_a_load_reads_between_are_not_merged_into_one_vector_store():
    """Found by the memory fuzzer (seed 210): z[r] and z[r + 1] were stored as one vector at the first store, so a
    load of z[r + 1] built between them saw the second store's value."""
    k = ir.KernelBuilder("no_merge")
    x = k.param("x", dtypes.float64, 4)
    z = k.param("z", dtypes.float64, 4, writable=True)
    out = k.param("out", dtypes.float64, 2, writable=True)
    i = k.range(2, "global")
    z[i * 2 + 1] = x[i * 2] + 1.0
    z[i * 2] = x[i * 2] * 3.0
    between = z[i * 2 + 1]
    z[i * 2 + 1] = x[i * 2] - 7.0
    out[i] = between
    xs = np.array([1, 0, 2, 0], np.float64)
    _on_every_device(k.build(), {"z": [3, -6, 6, -5], "out": [2, 3]}, x=xs, z=np.zeros(4), out=np.zeros(2))


def test_a_provable_race_between_lanes_is_refused_with_both_accesses_named():
    k = ir.KernelBuilder("shift_left")
    x = k.param("x", dtypes.float32, 9, writable=True)
    i = k.range(8, "global")
    x[i] = x[i + 1]
    with pytest.raises(KernelError, match=r"race on x: lane i of global range \d+ loads the element of x that "
                                          r"lane i\+1 stores"):
        k.build()


def test_same_lane_updates_are_not_races():
    k = ir.KernelBuilder("in_place")
    x = k.param("x", dtypes.float32, 8, writable=True)
    i = k.range(8, "global")
    x[i] = x[i] * 2.0
    _on_every_device(k.build(), {"x": np.arange(8, dtype=np.float32) * 2}, x=np.arange(8, dtype=np.float32))


def test_gated_neighbours_are_not_races():
    """A neighbour's element read under a gate (here one no lane passes: the last lane's neighbour is the spare
    element) is the author's guard, not a provable race: it builds and runs. The ungated form is refused above."""
    k = ir.KernelBuilder("gated_neighbour")
    x = k.param("x", dtypes.float32, 9, writable=True)
    i = k.range(8, "global")
    x[i] = x[i] * 2.0 + x.load(i + 1, gate=i >= 8, default=0.0)
    xs = np.arange(9, dtype=np.float32)
    want = np.concatenate([xs[:8] * 2, xs[8:]])
    _on_every_device(k.build(), {"x": want}, x=xs)


def test_a_value_that_would_outlive_its_loop_body_after_a_store_is_refused():
    k = ir.KernelBuilder("outlives")
    x = k.param("x", dtypes.float32, 4, writable=True)
    z = k.param("z", dtypes.float32, 4, writable=True)
    j = k.range(4, "loop")
    v = x[j]
    x[j] = v + 1.0
    z[0] = 1.0  # no loop: j's loop body ends here
    z[j + 0 * j] = v  # a new loop over j: v was read in the first one, and x stored since
    with pytest.raises(KernelError, match="cannot keep its value"):
        k.build()


@pytest.mark.parametrize("seed", [62, 210, 225, 875, 920, 957, 994, 3158, 3536])
def test_memory_fuzz_findings_agree(seed):
    """The first memory-fuzzer campaign's findings (all on both CPU pairs), each a fixed class above."""
    import devicekit as dk
    from devicekit.testing.fuzz_memory import memory_kernel
    from devicekit.testing.random_kernels import assert_matches
    rk = memory_kernel(seed)
    want = dk.run(rk.kernel, device="PYTHON", **rk.inputs)
    for label, dev in DEVICES.items():
        got = dk.run(rk.kernel, device=dev, **rk.inputs)
        for p in rk.kernel.params:
            if p.writable:
                assert_matches(got[p.name], want[p.name], p.dtype, f"{p.name} on {label}")


def _copy_kernel():
    k = ir.KernelBuilder("copy")
    n = k.var("n", 1, 1 << 20)
    x = k.param("x", dtypes.float32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[i] + 1.0
    return k.build()


def test_the_same_buffer_for_a_writable_param_and_another_is_refused_naming_both():
    import devicekit as dk
    dev = dk.device("CPU")
    prog = dev.compile(_copy_kernel())
    b = dk.Buffer(dev, 16, dtypes.float32).copyin(np.arange(16, dtype=np.float32))
    with pytest.raises(ValueError, match=r"params 'x' and 'out' are the same buffer .*'out' is writable"):
        prog.execute([b, b], [16], wait=True)
    np.testing.assert_array_equal(b.numpy(), np.arange(16, dtype=np.float32))  # nothing ran


def test_overlapping_views_are_refused_and_disjoint_views_run():
    import devicekit as dk
    dev = dk.device("CPU")
    prog = dev.compile(_copy_kernel())
    base = dk.Buffer(dev, 32, dtypes.float32).copyin(np.arange(32, dtype=np.float32))
    with pytest.raises(ValueError, match="overlapping memory"):
        prog.execute([base.view(16, offset=0), base.view(16, offset=8)], [16], wait=True)
    prog.execute([base.view(16, offset=0), base.view(16, offset=16)], [16], wait=True)
    np.testing.assert_array_equal(base.numpy()[16:], np.arange(16, dtype=np.float32) + 1)
    # two read-only uses of one buffer are fine, and a launch that needs fewer elements than overlap is too
    prog.execute([base.view(16, offset=0), base.view(16, offset=8)], [8], wait=True)


def test_a_load_built_before_a_statement_without_its_loop_is_read_at_first_use_and_reused():
    """Mixed-fuzz seed 711: y[i + j] (j a loop range) built before a statement without j, used by two statements
    of j's body, the first storing y[i]: the compiled pairs read it once, the reference read it again."""
    k = ir.KernelBuilder("first_use")
    y = k.param("y", dtypes.float32, 3, writable=True)
    z = k.param("z", dtypes.float32, 3, writable=True)
    i, j = k.range(3, "global"), k.range(1, "loop")
    v = y[i + j]
    z[i] = 1.0
    y[i] = v + 2.0 + 0.0 * j.cast(dtypes.float32)
    y[i] = v + 1.0 + 0.0 * j.cast(dtypes.float32)
    _on_every_device(k.build(), {"y": [11, 21, 31]}, y=np.array([10, 20, 30], np.float32), z=np.zeros(3, np.float32))


def test_a_reduction_over_a_written_param_is_computed_once_where_first_used():
    k = ir.KernelBuilder("reduce_reuse")
    y = k.param("y", dtypes.int32, 4, writable=True)
    z = k.param("z", dtypes.int32, 1, writable=True)
    r = k.range(4, "reduce")
    s = y[r].sum(r)
    y[0] = s
    z[0] = s  # the sum from before the store to y[0]
    _on_every_device(k.build(), {"y": [10, 2, 3, 4], "z": [10]}, y=np.array([1, 2, 3, 4], np.int32),
                     z=np.zeros(1, np.int32))


def test_stores_of_different_loop_bodies_are_not_merged_into_one_vector_store():
    """Memory-fuzz seed 3536: z[r] (in a loop over j, reading z[r + j]) and z[r + 1] (no loop) became one vector
    store inside the loop, so iteration 1 read the value the second statement was to write only after the loop."""
    k = ir.KernelBuilder("no_merge_across_loops")
    z = k.param("z", dtypes.float32, 4, writable=True)
    i, j = k.range(2, "global"), k.range(2, "loop")
    z[i * 2] = z[i * 2 + j] + 0.0 * j.cast(dtypes.float32)
    z[i * 2 + 1] = 7.0
    _on_every_device(k.build(), {"z": [2, 7, 4, 7]}, z=np.array([1, 2, 3, 4], np.float32))
