"""A lone reduction (`o[0] = x[r].sum(r)`: no global range to split) runs as two stages across the thread pool
(devicekit_cpu/split_reduce.py): the split shows in the spec, the results equal the PYTHON reference's at every size
(0, 1, below the thread count, odd, past the threading threshold, a var or a constant extent), and the bits do not
depend on how many threads ran the pieces."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes

BIG = 3_000_017  # past the threading threshold on any thread count: 64 pieces, odd


def lone(op: str = "sum", dt=dtypes.float32, n: int | None = None, glob: bool = False, epilogue: bool = False,
         name: str = "lone") -> ir.Kernel:
    """`o[0] = op(x[r] for r < n)`, written the obvious way; `glob`: stored through a global range of 1,
    `epilogue`: the result scaled and offset by a load before its store."""
    k = ir.KernelBuilder(f"{name}_{op}_{dt.name}_{n}_{glob}_{epilogue}")
    size = k.var("n", 0) if n is None else n
    x = k.param("x", dt, size)
    o = k.param("o", dt, 2, writable=True)
    r = k.range(size, "reduce")
    val = getattr(x[r], op)(r)
    if epilogue:
        val = val * 2 + o[1]
    if glob:
        g = k.range(1, "global")
        o[g] = val
    else:
        o[0] = val
    return k.build()


def data(dt, n: int, op: str, seed: int = 0) -> np.ndarray:
    """Small integers (a float sum of them is exact in any order below 2**24), ones and twos for products."""
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 3, n) if op == "prod" else rng.integers(-8, 9, n)
    return x.astype(dt.np)


def run(kernel, device, x, n, threads: int | None = None):
    """The kernel's `o` on `device`; `threads` sets the CPU program's thread count (the pool path on any host)."""
    args = {"x": x, "o": np.array([0, 3], x.dtype)}
    if any(v.name == "n" for v in kernel.vars):
        args["n"] = n
    if threads is not None:
        prog = dk.device("CPU").compile(kernel)
        prog.threads = threads
    return dk.run(kernel, device, **args)["o"]


@pytest.mark.parametrize("glob", [False, True])
def test_a_lone_reduction_is_split_in_two_stages(cpu, glob):
    spec = cpu.renderer.render(lone(glob=glob))
    assert spec.core_split is not None  # the pieces are the split range (none before: nothing to split)
    assert any("split reduce range" in o for o in spec.get_meta("opts", ()))
    assert "%core.scratch" in spec.src and spec.get_meta("reduce_scratch") >= 64 * 64
    assert "llvm.loop.vectorize.width" in spec.src  # the piece loop at one full vector register


def test_a_reduction_per_lane_is_not_split(cpu):
    k = ir.KernelBuilder("rows")
    m, n = k.var("m", 1), k.var("n", 1)
    x = k.param("x", dtypes.float32, m * n)
    o = k.param("o", dtypes.float32, m, writable=True)
    i, r = k.range(m, "global"), k.range(n, "reduce")
    o[i] = x[i * n + r].sum(r)
    spec = cpu.renderer.render(k.build())
    assert "%core.scratch" not in spec.src and spec.get_meta("reduce_parts") is None


CASES = [("sum", dtypes.float32), ("max", dtypes.float32), ("sum", dtypes.int32), ("max", dtypes.int32),
         ("prod", dtypes.int32), ("sum", dtypes.float64), ("sum", dtypes.float16), ("max", dtypes.int8),
         ("sum", dtypes.int64), ("max", dtypes.uint16)]


@pytest.mark.parametrize(("op", "dt"), CASES, ids=[f"{o}-{d.name}" for o, d in CASES])
@pytest.mark.parametrize("n", [0, 1, 3, 65_537, BIG])
def test_split_results_equal_the_reference(op, dt, n):
    if dt == dtypes.float16 and n > 1000:  # the sum of float16 integers stays exact below 2048
        n = 1000
    x = data(dt, n, op)
    kern = lone(op, dt)
    want = run(kern, "PYTHON", x, n)
    np.testing.assert_array_equal(run(kern, "CPU", x, n, threads=3), want)
    np.testing.assert_array_equal(run(kern, "CPU", x, n, threads=1), want)


@pytest.mark.parametrize("n", [1, 1000, 65_537, BIG])
@pytest.mark.parametrize("glob", [False, True])
def test_a_constant_extent_and_an_epilogue(n, glob):
    """A constant extent (the pieces are a constant: the one-thread direct call passes the scratch slot too) and a
    result used in more arithmetic before its store, with a load of the output itself."""
    x = data(dtypes.int32, n, "sum", seed=n)
    kern = lone("sum", dtypes.int32, n=n, glob=glob, epilogue=True)
    want = run(kern, "PYTHON", x, n)
    for _ in range(3):  # the launch cache's direct call after the first launch
        np.testing.assert_array_equal(run(kern, "CPU", x, n, threads=2), want)


def test_the_bits_do_not_depend_on_the_thread_count():
    x = np.random.default_rng(1).standard_normal(BIG).astype(np.float32)
    kern = lone("sum", dtypes.float32)
    got = {t: run(kern, "CPU", x, BIG, threads=t)[0] for t in (1, 2, 3, 5, 64)}
    assert len({v.tobytes() for v in got.values()}) == 1, got
    want = x.astype(np.float64).sum()
    assert abs(float(got[1]) - want) <= 1e-4 * max(1.0, abs(want)) + 1e-3 * np.sqrt(BIG)


def test_a_plan_replays_a_split_reduction():
    """dk.Plan repeats a one-thread launch natively (its record carries the scratch slot, 0) and a threaded one
    through the program."""
    dev = dk.device("CPU")
    small, big = data(dtypes.int32, 100, "sum"), data(dtypes.int32, BIG, "sum")
    kern = lone("sum", dtypes.int32)
    prog = dev.compile(kern)
    prog.threads = 2
    bs, bb = dk.Buffer(dev, 100, dtypes.int32).copyin(small), dk.Buffer(dev, BIG, dtypes.int32).copyin(big)
    o1, o2 = dk.Buffer(dev, 2, dtypes.int32), dk.Buffer(dev, 2, dtypes.int32)
    plan = dk.Plan(dev).add(prog, x=bs, o=o1, n=100).add(prog, x=bb, o=o2, n=BIG)
    for _ in range(3):
        plan.run(wait=True)
    assert o1.numpy()[0] == small.sum() and o2.numpy()[0] == big.sum()


def test_the_c_pair_keeps_its_order(single_pair):
    """The C pair does not reassociate floats: its lone reduction stays one call in order."""
    spec = single_pair("c").renderer.render(lone())
    assert spec.core_split is None and spec.get_meta("reduce_parts") is None


def test_the_fuzzer_makes_lone_reductions_the_split_takes(cpu):
    """The differential fuzzer's `lone` profile (one seed in 96 of `mixed`) reaches this rewrite, its kernels print
    as regressions that rebuild them, and a short campaign of them matches the reference on both pairs (a piece's
    bounds off by one: 4 findings in 60 kernels)."""
    from devicekit import settings
    from devicekit.testing.fuzz import fuzz
    from devicekit.testing.fuzzgen import make_case
    from devicekit.testing.shrink import PRELUDE, to_python
    split = 0
    # a printed lone kernel carries its inputs as literals (~120,000 numbers each: 0.2 s to print and exec), so the
    # reprint is checked on every fourth seed, every seed with DEVICEKIT_SLOW=1 (40: 9 s)
    every = 1 if settings.get("DEVICEKIT_SLOW") else 4
    for seed in range(40):
        case = make_case(seed, "lone")
        split += cpu.renderer.render(case.kernel).get_meta("reduce_parts") is not None
        if seed % every:
            continue
        ns: dict = {}
        exec(PRELUDE + to_python(case.kernel, case.inputs), ns)  # noqa: S102 - the printed source is ours
        assert ns["build"]()[0].key == case.kernel.key, seed
    assert split >= 30, split
    assert make_case(31, "mixed").kernel.name == "lone31"
    rep = fuzz(12, seed=360000, kind="CPU", pairs=["llvm", "c"], profile="lone", jobs=1)
    assert rep.checks == {"CPU/llvm": 12, "CPU/c": 12} and not rep.findings, rep.findings
