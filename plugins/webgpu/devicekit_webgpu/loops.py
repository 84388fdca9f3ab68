"""How many loop iterations one invocation runs, for drivers that cut them short (adapters.Ctx.loop_limit).

The renderer keeps the loop nest of the linear form (`nest`: each RANGE with its start, end and the ranges inside
it); `iterations` counts, for this launch's var values, every iteration of every loop of one invocation, stopping
as soon as the count passes the limit. Rectangular loops multiply; a loop whose inner bounds read its index
(triangular) is walked; a bound that reads a thread index is counted for the first and the last thread (the
larger count), the last one that passes the lane guards around the loop (`if (i < n)`: a 256-wide workgroup for
n = 1 has one thread that runs the loops, i = 0, not i = 255, which refused a triangular loop over 256 x 256). Bounds the evaluator cannot read (an op outside integer arithmetic) count as the limit + 1:
the launch is refused rather than cut short.
"""

from __future__ import annotations

from dataclasses import dataclass

from devicekit.ir.ops import Ops
from devicekit.ir.uop import UOp

_ALU = {Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b,
        Ops.MAX: max, Ops.NEG: lambda a: -a, Ops.CMPLT: lambda a, b: int(a < b),
        Ops.WHERE: lambda c, a, b: a if c else b,
        Ops.IDIV: lambda a, b: 0 if b == 0 else (abs(a) // abs(b)) * (1 if (a >= 0) == (b >= 0) else -1),
        Ops.MOD: lambda a, b: 0 if b == 0 else a - b * ((abs(a) // abs(b)) * (1 if (a >= 0) == (b >= 0) else -1)),
        Ops.CAST: lambda a: a}


class Unreadable(Exception):
    """A loop bound the evaluator cannot compute."""


@dataclass(frozen=True)
class Loop:
    rng: UOp
    start: UOp | None
    end: UOp
    inner: tuple[Loop, ...]
    guards: tuple[tuple[UOp, UOp], ...] = ()  # (a, b) of the `a < b` conditions of the IFs around the loop


def _bounds_of(cond: UOp) -> list[tuple[UOp, UOp]]:
    """The `a < b` parts of an IF's condition (an AND of them, the lane guards)."""
    if cond.op is Ops.CMPLT:
        return [(cond.src[0], cond.src[1])]
    if cond.op is Ops.AND:
        return [p for s in cond.src for p in _bounds_of(s)]
    return []


def nest(uops) -> tuple[Loop, ...]:
    """The loop nest of a linear form, outermost first."""
    stack: list[tuple[UOp, list]] = [(None, [])]  # type: ignore[list-item]
    ifs: list[list[tuple[UOp, UOp]]] = []
    guards: dict[UOp, tuple] = {}
    for u in uops:
        if u.op is Ops.RANGE:
            stack.append((u, []))
            guards[u] = tuple(p for g in ifs for p in g)
        elif u.op is Ops.IF:
            ifs.append(_bounds_of(u.src[0]))
        elif u.op is Ops.ENDIF and ifs:
            ifs.pop()
        elif u.op is Ops.ENDRANGE and len(stack) > 1:
            r, kids = stack.pop()
            stack[-1][1].append(Loop(r, r.src[0] if len(r.src) == 2 else None, r.src[-1], tuple(kids), guards[r]))
    return tuple(stack[0][1])


def _eval(u: UOp, env: dict, memo: dict) -> int:
    if u in memo:
        return memo[u]
    if u.op is Ops.CONST:
        v = int(u.arg)
    elif u.op is Ops.VAR:
        v = int(env[u.arg[0]])
    elif u.op is Ops.RANGE:
        if u not in env:
            raise Unreadable(u)
        v = env[u]
    elif u.op is Ops.SPECIAL:  # a thread index: the first thread's or the last one's (`iterations` takes both)
        v = 0 if env.get("__first__") else max(0, _eval(u.src[0], env, memo) - 1)
    elif u.op in _ALU:
        v = int(_ALU[u.op](*[_eval(s, env, memo) for s in u.src]))
    else:
        raise Unreadable(u)
    if (b := env.get("__guards__", {}).get(u)) is not None:  # a lane past the guard does not run the loop
        v = min(v, _eval(b, env, memo) - 1)
    memo[u] = v
    return v


def _reads(loop: Loop, r: UOp) -> bool:
    """Whether any bound inside `loop` (itself included) reads range r."""
    for x in (loop.start, loop.end):
        if x is not None and r in x.toposort():
            return True
    return any(_reads(k, r) for k in loop.inner)


def iterations(loops: tuple[Loop, ...], var_vals: dict, limit: int) -> int:
    """Loop iterations of one invocation for these var values, or limit + 1 once it is passed (or unreadable)."""
    def count(ls: tuple[Loop, ...], env: dict) -> int:
        total = 0
        for lp in ls:
            memo: dict = {}
            benv = {**env, "__guards__": dict(lp.guards)}
            s = 0 if lp.start is None else _eval(lp.start, benv, memo)
            e = _eval(lp.end, benv, memo)
            if e <= s:
                continue
            if not any(_reads(k, lp.rng) for k in lp.inner):
                total += (e - s) * (1 + count(lp.inner, {**env, lp.rng: s}))
            else:
                for v in range(s, e):
                    total += 1 + count(lp.inner, {**env, lp.rng: v})
                    if total > limit:
                        return total
            if total > limit:
                return total
        return total
    try:
        return min(max(count(loops, {**var_vals, "__first__": f}) for f in (True, False)), limit + 1)
    except Unreadable:
        return limit + 1
