"""Scheduling: a lowered kernel graph becomes the flat op list of docs/linear-form.md (ir/linearize.py lowers).

Every node goes in the shallowest loop that holds all the ranges it depends on (loop-invariant code is hoisted: a
row max in softmax is computed once per row), each REDUCE becomes an accumulator + loop, and a load from a buffer the
kernel writes, or anything after a barrier, never leaves the block where it is used. The walk is iterative (an
explicit stack): an expression is as deep as the user built it.
"""

from __future__ import annotations

import itertools
from typing import Any

from . import semantics
from .bounds import is_record
from .dtypes import dtypes
from .ops import Ops
from .order import is_ordered_load, stmt_index
from .passes import decompose
from .rewrite import substitute, substitute_memo
from .uop import KernelError, UOp, make_alu, memo_order

# "block": the optimizer's K blocks (ir/kblock.py), a sequential loop outside every other one (the CPU's split of
# the row tiles included), so each block of b is reused by all of a chunk's rows; never written by a user
KIND_RANK = {"block": -1, "global": 0, "local": 1, "loop": 2, "reduce": 3, "unroll": 4}


# ---- scheduling --------------------------------------------------------------------------------------------------------

class _Block:
    __slots__ = ("items", "kind", "open", "orig", "rng")

    def __init__(self, rng: UOp | None, orig: Any, kind: str = "loop"):
        self.rng, self.orig, self.items, self.open, self.kind = rng, orig, [], None, kind

    def insert(self, x: Any) -> None:
        if self.open is None:
            self.items.append(x)
        else:
            self.items.insert(len(self.items) - 1, x)


_GUARD = "guard"
_NO_RANGES: frozenset = frozenset()
_INT64_MIN = -(2**63)


class Scheduler:
    def __init__(self, sink: UOp, caps: Any, head: list[UOp], guard: UOp | None):
        self.sink, self.caps, self.head, self.guard = sink, caps, head, guard
        self.free: dict[UOp, frozenset] = {}
        self.nodes = sink.toposort()
        self.node_set = set(self.nodes)
        self.reduce_of: dict[UOp, UOp] = {}
        self.reduces = [u for u in self.nodes if u.op is Ops.REDUCE]  # in graph order (`_siblings` scans them)
        for u in self.reduces:
            for r in u.src[1:]:
                self.reduce_of[r] = u
        self._fill_free(self.nodes)
        stmt_ranges: set[UOp] = set()
        for s in sink.src:
            stmt_ranges |= {r for r in self._free(s) if r != _GUARD}
        self.order = sorted(stmt_ranges, key=lambda r: (KIND_RANK[r.arg[1]], r.arg[0]))
        if guard is not None:
            self.order.insert(0, _GUARD)
        self.written = {u.src[0].src[0] for u in self.nodes if u.op is Ops.STORE}
        self.pinned_memo: dict[UOp, bool] = {}
        self._fill_pinned(self.nodes)
        self.local_last: dict[UOp, int] = {}  # local array -> its last store's statement (`_settled`)
        for u in self.nodes:
            if u.op is Ops.STORE and u.src[0].src[0].op is Ops.DEFINE_LOCAL:
                self.local_last[u.src[0].src[0]] = max(self.local_last.get(u.src[0].src[0], -1), stmt_index(u))
        self.cur = -1  # the statement being emitted
        self.last_barrier = max((stmt_index(s) for s in sink.src if s.op is Ops.BARRIER), default=-1)
        self.reduces_at: dict[frozenset, list[UOp]] = {}  # reopened loops -> the reductions over them
        self.below: dict[UOp, set[UOp]] = {}  # a reduction's nodes (`_siblings` asks again for each loop)
        self.decomposed: set[UOp] = set()  # what decompose left as it was (each reduce's update walks its value)
        self.placed: dict[UOp, tuple[_Block, UOp]] = {}
        self.origin: dict[UOp, UOp] = {}  # copied range -> original range
        self.opened: set[UOp] = set()
        self.nest_memo: dict[UOp, tuple] = {}
        self.loopnest_memo: dict[Any, tuple] = {}
        self.acc_ids = itertools.count()
        self.sub: dict[UOp, UOp] = {}  # the statement's reopened loops: original range -> its copy
        self.records: dict[int, tuple] = {}  # bounds-check slot -> (its register, the error param, slot, arg)
        # loads of written params, read at their build point (ir/order.py): statement index -> loads
        self.reads_at: dict[int, list[UOp]] = {}
        for u in self.nodes:
            if is_ordered_load(u):
                self.reads_at.setdefault(u.arg[2], []).append(u)

    # free ranges (and the guard, for anything that depends on a GPU index when there is a guard)
    def _free(self, u: UOp) -> frozenset:
        if (f := self.free.get(u)) is not None:
            return f
        self._fill_free(memo_order(u, self.free))
        return self.free[u]

    def _fill_free(self, order: Any) -> None:
        """The free ranges of each node of `order` (sources first; the graph's own order once, at the start: each
        node's set is a source's own where the others add nothing, so most nodes make no set)."""
        free, guard = self.free, self.guard is not None
        for x in order:
            if not (src := x.src):
                s: frozenset = _NO_RANGES
            else:
                s = free[src[0]]
                for y in src[1:]:
                    if (f := free[y]) is not s and not f <= s:
                        s = s | f
            if x.op is Ops.RANGE:
                s = s | {x}
            elif x.op is Ops.SPECIAL and guard:
                s = s | {_GUARD}
            elif x.op is Ops.REDUCE:  # its ranges' bounds may use outer ranges (triangular), even of a folded value
                s = free[x.src[0]].union(*(free[r] for r in x.src[1:])) - set(x.src[1:])
            free[x] = s

    def _pinned(self, u: UOp) -> bool:
        """Loads from buffers this kernel writes (and what depends on them) stay where they are used."""
        if (p := self.pinned_memo.get(u)) is not None:
            return p
        self._fill_pinned(memo_order(u, self.pinned_memo))
        return self.pinned_memo[u]

    def _fill_pinned(self, order: Any) -> None:
        memo, written = self.pinned_memo, self.written
        for x in order:
            memo[x] = (x.op is Ops.LOAD and x.src[0].src[0] in written) or any(memo[s] for s in x.src)

    def _orig(self, r: Any) -> Any:
        return self.origin.get(r, r)

    def _loopnest(self, r: Any) -> tuple:
        r = self.origin.get(r, r)
        if (n := self.loopnest_memo.get(r)) is not None:  # the loops of an original range never change
            return n
        if r == _GUARD or r in self.order:
            n = tuple(self.order[: self.order.index(r) + 1])
        else:
            red = self.reduce_of.get(r)
            if red is None:
                raise KernelError("range has no enclosing loop (internal scheduling error)", r)
            n = self._nest(red) + (r,)
        self.loopnest_memo[r] = n
        return n

    def _stmt_nest(self, st: UOp) -> tuple:
        """The loops a statement runs in: its own ranges in canonical order (inside the guard when there is one),
        never a loop it does not use (a statement inside another's loop would run once per iteration of it)."""
        rs = {self._orig(r) for r in self._free(st)}
        return tuple(r for r in self.order if r in rs or (r == _GUARD and rs))

    def _nest(self, u: UOp) -> tuple:
        if (n := self.nest_memo.get(u)) is not None:
            return n
        best: tuple = ()
        for r in self._free(u):
            ln = self._loopnest(r)
            if len(ln) > len(best):
                best = ln
        self.nest_memo[u] = best
        return best

    # ---- emission
    def run(self) -> list[UOp]:
        root = _Block(None, None, "root")
        for u in self.head:
            root.insert(u)
            self.placed[u] = (root, u)
        self.stack: list[_Block] = [root]
        if self.guard is not None:
            cond = self._emit(self.guard, [root])
            gb = _Block(UOp(Ops.IF, dtypes.void, (cond,)), _GUARD, "if")
            root.items.append(gb)
            root.open = gb
            self.stack.append(gb)
        prev_nest: tuple = ()
        stmts = self.sink.src
        for n, st in enumerate(stmts):
            if st.op is Ops.BARRIER:
                self._read_before_barrier(st, stmts[n + 1:])
                for key in [x for x in self.reads_at if x <= st.arg]:  # built right before a barrier: read at use
                    del self.reads_at[key]
                nxt = self._stmt_nest(stmts[n + 1]) if n + 1 < len(stmts) else ()
                k = 0
                while k < min(len(prev_nest), len(nxt)) and prev_nest[k] is nxt[k]:
                    k += 1
                self._enter(prev_nest[:k])
                self.stack[-1].insert(UOp(Ops.BARRIER, dtypes.void, (), st.arg))
                prev_nest = prev_nest[:k]
                continue
            self.cur = stmt_index(st)
            self._read_late(st)
            st = self._enter_for(st)
            if is_record(st):
                self._record(st)
                continue
            self._read_ordered(stmt_index(st))
            idx = self._emit(st.src[0], self.stack)
            val = self._emit(st.src[1], self.stack)
            self.stack[-1].insert(UOp(Ops.STORE, dtypes.void, (idx, val), st.arg))
            prev_nest = tuple(self._orig(b.orig) for b in self.stack[1:])
        self._store_records(root)
        out: list[UOp] = []
        _flatten(root, out)
        return out

    def _record(self, st: UOp) -> None:
        """A bounds-check record (ir/bounds.py: `err[slot] = value` where `fail`) becomes a running maximum in a
        register, `acc = max(acc, fail ? value : INT64_MIN)`, stored once at the end of the kernel: a conditional
        store to one address in every iteration kept loops from vectorizing (a masked scatter per vector)."""
        ix, val = st.src
        slot = ix.src[1]
        if slot.arg not in self.records:
            init = self._emit(UOp.const(dtypes.int64, _INT64_MIN), self.stack[:1])
            acc = UOp(Ops.DEFINE_ACC, dtypes.int64, (init,), next(self.acc_ids))
            self.stack[0].insert(acc)
            self.records[slot.arg] = (acc, ix.src[0], slot, st.arg)
        acc = self.records[slot.arg][0]
        upd = make_alu(Ops.MAX, (acc, make_alu(Ops.WHERE, (ix.src[2], val, UOp.const(dtypes.int64, _INT64_MIN)))))
        self.placed[acc] = (self.stack[-1], acc)  # the update reads the register here, inside the loops
        new = self._emit(upd, self.stack)
        self.placed[acc] = (self.stack[0], acc)
        self.stack[-1].insert(UOp(Ops.ASSIGN, dtypes.int64, (acc, new)))

    def _store_records(self, root: _Block) -> None:
        """After every statement, outside every loop: each record that saw a failure is stored."""
        if not self.records:
            return
        self._enter(())
        for acc, err, slot, arg in self.records.values():
            hit = make_alu(Ops.CMPLT, (UOp.const(dtypes.int64, _INT64_MIN), acc))
            at = UOp(Ops.INDEX, dtypes.int64, (err, slot, self._emit(hit, self.stack)))
            root.insert(UOp(Ops.STORE, dtypes.void, (self._emit(at, self.stack), acc), arg))

    def _read_before_barrier(self, barrier: UOp, later: tuple[UOp, ...]) -> None:
        """Local-memory loads built before this barrier but used after it are emitted now: after the barrier other
        threads may overwrite what they read."""
        needed: set[UOp] = set()
        for st in later:
            needed.update(st.toposort())
        for u in self.nodes:
            if (u.op is Ops.LOAD and isinstance(u.arg, tuple) and (u.arg[0] == "epoch" and u.arg[1] < barrier.arg or (
                    is_ordered_load(u) and u.src[0].src[0].op is Ops.DEFINE_LOCAL and u.arg[2] <= barrier.arg))
                    and u in needed and self._visible(u, self.stack) is None):
                self._emit(u, self.stack)

    def _enter_for(self, st: UOp) -> UOp:
        """Open the statement's loops (reopened loops get fresh copies of their ranges) and return it rewritten. A
        bounds-check record (ir/bounds.py) stays in the loops of the statement it checks: closing one of them for it
        would split that statement's loop body from the next statement's (a load read in it would be read again)."""
        target = tuple(self._orig(b.orig) for b in self.stack[1:]) if is_record(st) else self._stmt_nest(st)
        self._enter(target)
        sub = self.sub = self._copies()
        if sub:
            st = substitute(st, sub)
        return st

    def _copies(self) -> dict[UOp, UOp]:
        """The open loops that were reopened: original range -> the copy that runs now."""
        return {self._orig(b.orig): b.rng for b in self.stack[1:]
                if b.kind == "loop" and b.rng is not None and b.rng is not self._orig(b.orig)}

    def _read_late(self, st: UOp) -> None:
        """Loads built before a statement that is gone (merged into a vector store, folded away) are read here,
        in the loops this statement shares with the one before it: entering this statement's other loops first
        would read them once per iteration, after stores they must not see."""
        k = stmt_index(st)
        if is_record(st) or not any(x < k for x in self.reads_at):
            return
        target, k_open = self._stmt_nest(st), 0
        while k_open + 1 < len(self.stack) and k_open < len(target) and \
                self._orig(self.stack[k_open + 1].orig) is target[k_open]:
            k_open += 1
        self._enter(target[:k_open])
        self._read_ordered(k - 1)

    def _read_ordered(self, k: int) -> None:
        """Loads of written params built before statement k are read here, at their build point, inside all of the
        statement's loops (ir/order.py); a load whose index needs a range the statement does not open (a reduce
        range) is read where it is used."""
        opened = {self._orig(b.orig) for b in self.stack[1:]}
        due = [u for key in sorted(x for x in self.reads_at if x <= k) for u in self.reads_at.pop(key)]
        for u in due:
            if all(r in opened for r in self._free(u)):
                self._emit(substitute(u, self.sub) if self.sub else u, self.stack)

    def _enter(self, target: tuple) -> None:
        k = 1
        while k < len(self.stack) and k - 1 < len(target) and self._orig(self.stack[k].orig) is target[k - 1]:
            k += 1
        del self.stack[k:]
        self.stack[-1].open = None
        for r in target[k - 1:]:
            parent = self.stack[-1]
            rng = self._fresh_range(r) if r is not _GUARD else None
            if rng is not None and len(rng.src) == 2:  # bounds over reopened loops read their copies
                sub = self._copies()
                if sub and (nsrc := tuple(substitute(x, sub) for x in rng.src)) != rng.src:
                    moved = rng.replace(src=nsrc)
                    self.origin[moved] = self._orig(rng)
                    self.opened.add(moved)
                    rng = moved
            if rng is not None:
                for s in rng.src:
                    self._emit(s, self.stack)
            b = _Block(rng, r, "loop")
            if rng is not None:
                self.placed[rng] = (b, rng)
            parent.items.append(b)
            parent.open = b
            self.stack.append(b)

    def _fresh_range(self, r: UOp) -> UOp:
        if r not in self.opened:
            self.opened.add(r)
            return r
        c = r.replace(arg=(*r.arg[:2], len([x for x in self.origin if self.origin[x] is r]) + 1))
        self.origin[c] = r
        self.opened.add(c)
        return c

    def _visible(self, u: UOp, stack: list[_Block]) -> UOp | None:
        p = self.placed.get(u)
        if p is not None and p[0] in stack:  # a _Block compares by identity
            return p[1]
        return None

    def _depth_of(self, u: UOp, stack: list[_Block]) -> int:
        try:
            return stack.index(self.placed[u][0])
        except ValueError:
            raise KernelError("internal scheduling error: a source is not visible", u) from None

    def _emit(self, u: UOp, stack: list[_Block]) -> UOp:
        """Place u and what it needs that is not visible yet, sources first, left to right (the order the recursive
        walk had, on an explicit stack: a 100,000-step chain is 100,000 levels deep). A reduction places its own
        loop (`_emit_reduce`); only nested reductions nest calls."""
        placed = self.placed
        if (p := placed.get(u)) is not None and p[0] in stack:  # visible: placed in an open block
            return p[1]
        work: list[tuple[UOp, bool]] = [(u, False)]
        pop, push = work.pop, work.append
        while work:
            x, ready = pop()
            if (p := placed.get(x)) is not None and p[0] in stack:
                continue
            if ready:
                self._place(x, stack)
            elif x.op is Ops.REDUCE:
                self._emit_reduce(x, stack)
            elif x.op is Ops.RANGE:
                raise KernelError("internal scheduling error: range used outside its loop", x)
            else:
                push((x, True))
                work.extend([(s, False) for s in reversed(x.src)])
        v = self._visible(u, stack)
        assert v is not None
        return v

    def _place(self, u: UOp, stack: list[_Block]) -> UOp:
        """u into the shallowest open block that holds its ranges and its (placed) sources."""
        depth = len(stack) - 1 if self._pinned(u) else min(len(self._nest(u)), len(stack) - 1)
        placed = self.placed
        if u.src:
            srcs = []
            for s in u.src:  # each source is placed (emitted first) in one of the open blocks
                p = placed.get(s)
                if p is None or p[0] not in stack:
                    raise KernelError("internal scheduling error: a source is not visible", s)
                srcs.append(p[1])
                if (d := stack.index(p[0])) > depth:
                    depth = d
            src = tuple(srcs)
            nu = u if src == u.src else UOp(u.op, u.dtype, src, u.arg)
        else:
            nu = u
        blk = stack[depth]
        blk.insert(nu)
        placed[u] = (blk, nu)
        if nu is not u:
            placed[nu] = (blk, nu)
        return nu

    def _siblings(self, red: UOp, depth: int, stack: list[_Block]) -> list[UOp]:
        """Other reductions over the same ranges at the same depth, independent of this one: they share its loop
        (a register-tiled matmul keeps several accumulators in one k loop)."""
        cands = self._reduces_here()
        if (red not in self.node_set and red not in cands) or (self._pinned(red) and not self._settled(red)):
            return []
        below = self.below
        if (rd := below.get(red)) is None:
            rd = below[red] = set(red.toposort())
        group, deps = [red], [rd]
        for u in cands:
            if (u is red or u in self.placed or u.src[1:] != red.src[1:] or (self._pinned(u) and not self._settled(u))
                    or (len(stack) - 1 if self._pinned(u) else min(len(self._nest(u)), len(stack) - 1)) != depth
                    or any(r != _GUARD and self._visible(r, stack) is None for r in self._free(u))):
                continue
            if (ud := below.get(u)) is None:
                ud = below[u] = set(u.toposort())
            if any(g in ud for g in group) or any(u in d for d in deps):
                continue
            group.append(u)
            deps.append(ud)
        return group[1:]

    def _settled(self, red: UOp) -> bool:
        """Every buffer `red` reads that the kernel writes is a local array stored only by earlier statements,
        and no barrier follows: from here to the statement that uses it its value cannot change, so it may share a
        sibling's loop (the tile of b a matmul packs into a local array feeds every accumulator of the tile from one
        k loop)."""
        if (nodes := self.below.get(red)) is None:
            nodes = self.below[red] = set(red.toposort())
        return self.last_barrier < self.cur and all(x.op is not Ops.LOAD or x.src[0].src[0] not in self.written
                   or self.local_last.get(x.src[0].src[0], self.cur) < self.cur for x in nodes)

    def _reduces_here(self) -> list[UOp]:
        """The kernel's reductions as the current statement sees them: over the copies of its reopened loops (a
        statement is substituted when its loops are reopened, and so are the later ones: the rows of a K-blocked
        tile then still share one k loop). The graph's own where no loop was reopened."""
        if not self.sub:
            return self.reduces
        key = frozenset(self.sub.items())
        if (got := self.reduces_at.get(key)) is None:
            memo: dict[UOp, UOp] = {}
            got = self.reduces_at[key] = [substitute_memo(u, self.sub, memo) for u in self.reduces]
        return got

    def _emit_reduce(self, red: UOp, stack: list[_Block]) -> UOp:
        depth = len(stack) - 1 if self._pinned(red) else min(len(self._nest(red)), len(stack) - 1)
        group = [red, *self._siblings(red, depth, stack)]
        ranges = list(red.src[1:])
        # a reduce loop emitted before (in a closed block) gets fresh range copies
        sub = {}
        for i, r in enumerate(ranges):
            c = self._fresh_range(r)
            if c is not r:
                sub[r] = c
                self.reduce_of[c] = red
            ranges[i] = c
        at: dict[UOp, UOp] = {}  # one memo for the group: the rows of a tile share their loads of b
        xs = [substitute_memo(g.src[0], sub, at) if sub else g.src[0] for g in group]
        for r in ranges:
            self._emit(r.src[0], stack[: depth + 1])
            self._emit(r.src[1], stack[: depth + 1])
        accs = []
        for g in group:
            init = UOp.const(g.dtype.scalar(), semantics.identity(g.arg, g.dtype))
            if g.dtype.count > 1:
                init = UOp(Ops.VECTORIZE, g.dtype, (init,) * g.dtype.count)
            init = self._emit(init, stack[:1])
            acc = UOp(Ops.DEFINE_ACC, g.dtype, (init,), next(self.acc_ids))
            self.placed[acc] = (stack[depth], acc)
            accs.append(acc)
        blocks = []
        inner = stack[: depth + 1]
        for r in ranges:
            b = _Block(r, r, "reduce")
            self.placed[r] = (b, r)
            blocks.append(b)
            inner = [*inner, b]
        for b_outer, b_inner in itertools.pairwise(blocks):
            b_outer.items.append(b_inner)
        for g, x, acc in zip(group, xs, accs):
            val = self._emit(x, inner)
            comb = decompose(UOp(g.arg, g.dtype, (acc, val)), self.caps.ops, stable=self.decomposed)
            # the update reads the accumulator inside the loop: seen from there, even when the value does not
            # depend on the reduce range ((x * 0).sum(r) folds to a constant), it must not be hoisted out
            self.placed[acc] = (inner[-1], acc)
            cval = self._emit(comb, inner)
            self.placed[acc] = (stack[depth], acc)
            inner[-1].insert(UOp(Ops.ASSIGN, g.dtype, (acc, cval)))
        for acc in accs:
            stack[depth].insert(acc)
        stack[depth].insert(blocks[0])
        for g, acc in zip(group, accs):
            self.placed[g] = (stack[depth], acc)
        return accs[0]


def _flatten(root: _Block, out: list[UOp]) -> None:
    """The block tree as the flat list: each block's op, its items, its END (iterative, like every walk here)."""
    work: list[Any] = list(reversed(root.items))
    while work:
        it = work.pop()
        if isinstance(it, _Block):
            out.append(it.rng)
            work.append(UOp(Ops.ENDIF if it.kind == "if" else Ops.ENDRANGE, dtypes.void, (it.rng,)))
            work.extend(reversed(it.items))
        else:
            out.append(it)
