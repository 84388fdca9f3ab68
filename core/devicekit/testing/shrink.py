"""Shrinking a failing kernel to a minimal one, and printing it as Python that rebuilds it (a regression test).

`shrink(kernel, inputs, fails)` greedily tries smaller candidates and keeps any that still fail: fewer stores, a
subexpression replaced by one of its operands or by a constant, smaller int vars with shorter inputs, inputs
replaced by simple values. Every candidate is a real kernel: it must pass the verifier and the PYTHON reference
must accept it (no out-of-bounds access), so what comes out is as well-formed as what went in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..ir import Kernel, KernelError
from ..ir.dtypes import DType
from ..ir.ops import ALU, Ops
from ..ir.order import build_position, is_ordered_load
from ..ir.rewrite import substitute
from ..ir.uop import UOp, sym_eval

_VALUE_OPS = ALU | {Ops.CAST, Ops.BITCAST, Ops.GEP, Ops.REDUCE, Ops.LOAD, Ops.VECTORIZE}
Fails = Callable[[Kernel, dict], bool]
_STRUCTURAL = {Ops.SINK, Ops.PARAM, Ops.VAR, Ops.RANGE, Ops.INDEX, Ops.STORE, Ops.BARRIER, Ops.DEFINE_LOCAL}


def _rebuild(k: Kernel, sink: UOp) -> Kernel | None:
    """The candidate kernel, or None when the verifier refuses it (a Kernel verifies itself)."""
    try:
        return Kernel(k.name, sink, k.params, k.vars, k.param_uops, k.var_uops)
    except (KernelError, ValueError, TypeError, IndexError):
        return None


def _simple_const(dt: DType) -> list[Any]:
    s = dt.scalar()
    return [False, True] if s.is_bool else ([0.0, 1.0] if s.is_float else [0, 1])


def _const(dt: DType, v: Any) -> UOp:
    c = UOp.const(dt.scalar(), v)
    return c if dt.count == 1 else UOp(Ops.VECTORIZE, dt, (c,) * dt.count)


def _written_indexing(nodes: list[UOp]) -> set[UOp]:
    """The indexes (index and gate expressions) of accesses to params the kernel writes, which the shrinker keeps:
    simplified, they can let two lanes touch one element (`row + j` shrunk to `j`), a race the verifier cannot
    always prove, and the 'finding' would be undefined behaviour."""
    written = {u.src[0].src[0] for u in nodes if u.op is Ops.STORE}
    kept: set[UOp] = set()
    for u in nodes:
        if u.op is Ops.INDEX and (u.src[0] in written or u.arg == "unchecked"):  # unchecked: its gate is its guard
            kept.add(u)
            for s in u.src[1:]:
                kept.update(s.toposort())
    return kept


def _expr_candidates(k: Kernel) -> list[Kernel]:
    """Kernels with one value node replaced by something smaller, biggest subtrees first."""
    out = []
    sink = k.sink
    if len(sink.src) > 1 and all(s.op is Ops.STORE for s in sink.src):
        for j in range(len(sink.src)):
            out.append(sink.replace(src=sink.src[:j] + sink.src[j + 1:]))
    order = list(reversed(sink.toposort()))
    kept = _written_indexing(order)
    for u in order:  # drop a load's gate (and its default)
        if u.op is Ops.LOAD and len(u.src[0].src) == 3 and u.src[0] not in kept:
            out.append(substitute(sink, {u: u.replace(src=(u.src[0].replace(src=u.src[0].src[:2]),))}))
    nodes = [u for u in order if u.op not in _STRUCTURAL and u.dtype.name != "void" and u not in kept]
    for u in nodes:
        reps: list[UOp] = [s for s in u.src if s.dtype == u.dtype and s.op not in _STRUCTURAL]
        if u.op in _VALUE_OPS or (u.op is Ops.CONST and u.arg not in _simple_const(u.dtype)):
            reps += [_const(u.dtype, v) for v in _simple_const(u.dtype)]
        for rep in reps:
            if rep is not u:
                out.append(substitute(sink, {u: rep}))
    return [nk for s in out if (nk := _rebuild(k, s)) is not None]


def _resize(k: Kernel, inputs: dict, var: str, value: int, tail: bool) -> dict | None:
    vals = {v.name: (value if v.name == var else inputs[v.name]) for v in k.vars}
    new = dict(inputs, **{var: value})
    for p in k.params:
        if p.name in inputs:
            need = sym_eval(p.size, vals)
            arr = np.asarray(inputs[p.name])
            if need > arr.size:
                return None
            new[p.name] = arr[arr.size - need:] if tail else arr[:need]
    return new


def _input_candidates(k: Kernel, inputs: dict) -> list[dict]:
    out = []
    for v in k.vars:
        cur = inputs[v.name]
        if v.scalar is not None:  # a k.scalar: 0, else 1, of its kind (no cycles: 0 is where it ends)
            zero, one = _simple_const(v.scalar)
            out += [dict(inputs, **{v.name: x}) for x in ((zero,) if cur == one else (zero, one)) if cur != zero]
            continue
        for value in sorted({v.lo, max(v.lo, 0), 1, cur // 2, cur - 1} - {cur}, key=abs):
            if v.lo <= value <= v.hi and abs(value) < abs(cur):  # strictly smaller: no cycles
                for tail in (False, True):
                    if (c := _resize(k, inputs, v.name, value, tail)) is not None:
                        out.append(c)
    for p in k.params:  # simpler input values: all zeros / ones
        if p.name in inputs:
            arr = np.asarray(inputs[p.name])
            for fill in (0, 1):
                if arr.size and not (arr == arr.flat[0]).all():  # already uniform: nothing simpler
                    out.append(dict(inputs, **{p.name: np.full_like(arr, fill)}))
    return out


def _size(k: Kernel, inputs: dict) -> tuple[int, int]:
    return len(k.sink.toposort()), sum(np.asarray(v).size for v in inputs.values())


def shrink(kernel: Kernel, inputs: dict, fails: Fails, budget: int = 400) -> tuple[Kernel, dict, int]:
    """The smallest (kernel, inputs) found that still `fails`; also the number of candidates tried."""
    tried = 0
    progress = True
    while progress and tried < budget:
        progress = False
        for cand in _expr_candidates(kernel):
            if tried >= budget:
                break
            if _size(cand, inputs) >= _size(kernel, inputs):
                continue
            tried += 1
            if fails(cand, inputs):
                kernel, progress = cand, True
                break
        if progress:
            continue
        for cand_in in _input_candidates(kernel, inputs):
            if tried >= budget:
                break
            tried += 1
            if fails(kernel, cand_in):
                inputs, progress = cand_in, True
                break
    return kernel, inputs, tried


# ------------------------------------------------------------------ printing
def _lit(v: Any) -> str:
    if isinstance(v, float) and not np.isfinite(v):
        return f"float({str(v)!r})"
    return repr(v)


def _array_src(a: np.ndarray) -> str:
    vals = ", ".join(_lit(x) for x in a.tolist())
    return f"np.array([{vals}], dtype=np.{a.dtype.name})"


def _dt(d: DType) -> str:
    return f"dtypes.{d.scalar().name}" + (f".vec({d.count})" if d.count > 1 else "")


def to_python(kernel: Kernel, inputs: dict, fn: str = "build") -> str:
    """Source of a function `fn()` returning (kernel, inputs) that rebuilds `kernel` with the public IR API."""
    names: dict[UOp, str] = {}
    index: dict[UOp, tuple[str, str, str | None]] = {}
    lines = [f"def {fn}():", f"    k = ir.KernelBuilder({kernel.name!r})"]

    def size_src(u: UOp) -> str:
        u = u.src[0] if u.op is Ops.CAST else u
        if u.op is Ops.CONST:
            return repr(u.arg)
        if u.op is Ops.VAR:
            return u.arg[0]
        if u.op is Ops.MAX:
            return f"ir.maximum({size_src(u.src[0])}, {size_src(u.src[1])})"
        sym = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%"}[u.op]
        return f"({size_src(u.src[0])} {sym} {size_src(u.src[1])})"

    specs = {v.name: v for v in kernel.vars}
    for v in kernel.var_uops:
        if v.op is Ops.SCALAR:
            names[v] = f"s_{v.arg}"
            lines.append(f"    s_{v.arg} = k.scalar({v.arg!r}, {_dt(v.dtype)})")
            continue
        names[v] = v.arg[0]
        spec = specs.get(v.arg[0])
        lo, hi = v.arg[1], v.arg[2]
        if spec is not None and spec.related:  # bounds that name earlier vars
            lo = lo if spec.lo_rel is None else size_src(spec.lo_rel)
            hi = hi if spec.hi_rel is None else size_src(spec.hi_rel)
        lines.append(f"    {v.arg[0]} = k.var({v.arg[0]!r}, {lo}, {hi})")

    def ref(u: UOp) -> str:
        if u.op is Ops.CONST:
            return f"UOp.const({_dt(u.dtype)}, {_lit(u.arg)})"
        return names[u]

    shapes = kernel.shapes or (None,) * len(kernel.param_uops)
    for p, shape in zip(kernel.param_uops, shapes):
        _, name, w = p.arg
        names[p] = f"p_{name}"
        # a shaped param keeps its shape: its size is the unfolded product of the dims, which `shape=` rebuilds
        size = size_src(p.src[0]) if shape is None else \
            f"shape=({', '.join(repr(d) if isinstance(d, int) else size_src(d) for d in shape)},)"
        lines.append(f"    p_{name} = k.param({name!r}, {_dt(p.dtype)}, {size}" + (", writable=True)" if w else ")"))
    count = 0
    done: set[UOp] = set(names)

    def emit(u: UOp) -> None:  # post-order: operands first; each node once
        nonlocal count
        if u in done or u.op is Ops.CONST or u.op is Ops.SINK:
            return
        done.add(u)
        for x in u.src:
            emit(x)
        count += 1
        nm, s = f"v{count}", u.src
        if u.op is Ops.DEFINE_LOCAL:  # local memory: k.local(name, dtype, size)
            names[u] = f"l_{u.arg[0]}"
            lines.append(f"    l_{u.arg[0]} = k.local({u.arg[0]!r}, {_dt(u.dtype)}, {u.arg[1]!r})")
            return
        if u.op is Ops.BARRIER:  # its sources are the stores before it, emitted first: the barrier follows them
            lines.append("    k.barrier()")
            return
        if u.op is Ops.RANGE:
            expr = f"k.range({', '.join(ref(x) if x.op is not Ops.CONST else repr(x.arg) for x in s)}, {u.arg[1]!r})"
        elif u.op is Ops.INDEX:
            index[u] = (ref(s[0]), ref(s[1]), ref(s[2]) if len(s) == 3 else None)
            return
        elif u.op is Ops.LOAD:
            buf, idx, gate = index[s[0]]
            unc = ", unchecked=True" if s[0].arg == "unchecked" else ""
            expr = f"{buf}[{idx}]" if gate is None and not unc else \
                f"{buf}.load({idx}{'' if gate is None else f', gate={gate}, default={ref(s[1])}'}{unc})"
        elif u.op is Ops.STORE:
            buf, idx, gate = index[s[0]]
            unc = ", unchecked=True" if s[0].arg == "unchecked" else ""
            lines.append(f"    {buf}.store({idx}, {ref(s[1])}{'' if gate is None else f', gate={gate}'}{unc})")
            return
        elif u.op is Ops.REDUCE:
            op = {Ops.ADD: "sum", Ops.MAX: "max", Ops.MUL: "prod"}[u.arg]
            expr = f"{ref(s[0])}.{op}({', '.join(ref(x) for x in s[1:])})"
        elif u.op in (Ops.CAST, Ops.BITCAST):
            expr = f"{ref(s[0])}.{u.op.name.lower()}({_dt(u.dtype)})"
        elif u.op is Ops.GEP:
            expr = f"{ref(s[0])}.gep({u.arg})"
        elif u.op is Ops.VECTORIZE:
            expr = f"ir.vectorize({', '.join(ref(x) for x in s)})"
        elif u.op in ALU:
            expr = f"make_alu(Ops.{u.op.name}, ({', '.join(ref(x) for x in s)},))"
        else:
            raise NotImplementedError(f"to_python: {u.op.name} is not printed")
        names[u] = nm
        lines.append(f"    {nm} = {expr}")

    # the builder numbers ranges in creation order (their loop order) and reads a load of a written param where it
    # is built: ranges go first, in their order, and each such load right before the statement it was built before
    nodes = kernel.sink.toposort()
    next_id = 0
    for r in sorted((u for u in nodes if u.op is Ops.RANGE), key=lambda r: r.arg[0]):
        lines += [f"    k.range(1)  # range {i} is unused: keeps the numbering" for i in range(next_id, r.arg[0])]
        next_id = r.arg[0] + 1
        emit(r)
    stmts = kernel.sink.src
    ordered = sorted((u for u in nodes if is_ordered_load(u)), key=lambda u: u.arg[2])
    for n, st in enumerate(stmts):
        for u in ordered:
            if build_position(stmts, u.arg[2]) == n:
                emit(u)
        emit(st)
    lines.append("    inputs = {")
    for key, val in inputs.items():
        lines.append(f"        {key!r}: {_lit(val) if isinstance(val, (int, float)) else _array_src(np.asarray(val))},")
    lines.append("    }")
    lines.append("    return k.build(), inputs")
    return "\n".join(lines)


PRELUDE = ("import numpy as np\nfrom devicekit import ir\nfrom devicekit.ir import dtypes\n"
           "from devicekit.ir.ops import Ops\nfrom devicekit.ir.uop import UOp, make_alu\n")


def shrink_finding(finding: Any, profile: str = "mixed", kind: str = "CPU", budget: int = 400,
                   pool: tuple | None = None) -> str:
    """Shrink a fuzz finding (same kind of failure on the same target) and return the regression source (`pool`: the
    dtypes of a `--fit` campaign, its Report.pool)."""
    from .fuzz import Runner
    from .fuzzgen import make_case

    pair = finding.target.split("/", 1)[1]
    runner = Runner(kind, [pair])
    case = make_case(finding.seed, profile, pool)
    label = finding.target

    def fails(k: Kernel, inputs: dict) -> bool:
        try:
            want = runner.reference(type(case)(k, inputs, case.seed))
        except Exception:  # noqa: BLE001 - not a well-defined candidate
            return False
        bad = runner.check_one(label, k, inputs, want)
        return bad is not None and bad[0] == finding.kind

    k, inputs, tried = shrink(case.kernel, case.inputs, fails, budget)
    bad = runner.check_one(label, k, inputs, runner.reference(type(case)(k, inputs, case.seed)))
    return (f"# {finding.target} {finding.kind} (seed {finding.seed}, {tried} candidates tried): "
            f"{(bad[1] if bad else 'no longer fails').splitlines()[0][:200]}\n" + to_python(k, inputs))
