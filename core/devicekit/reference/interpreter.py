"""The reference interpreter: runs a kernel graph with numpy, vectorized over its ranges. It defines the semantics.

Every range gets an axis; a value is an array broadcastable over the axes of the ranges it depends on plus one
trailing lane axis (1 for scalars). Statements (stores, barriers) run in program order, each for all its lanes at
once, except in a `loop` body that reads what it writes: there the iterations run one after another (ir/order.py
has the rules). A reduction evaluates its expression with the reduced ranges as extra axes, in chunks small enough to bound
memory, and folds the chunks in order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import semantics
from ..ir.analysis import affine, free_ranges
from ..ir.bounds import bounds_error
from ..ir.builder import Kernel
from ..ir.dtypes import DType, bf16_to_f32, dtypes, f32_to_bf16
from ..ir.ops import ALU, Ops
from ..ir.order import block_paths, build_position, is_ordered_load, nest, read_depth
from ..ir.uop import KernelError, UOp, sym_eval

CHUNK_ELEMENTS = 1 << 22  # largest array a reduction chunk may create
MAX_DIMS = 32  # axes numpy handles everywhere (nditer, broadcasting): one per range, plus the lane axis


class Interpreter:
    def __init__(self, kernel: Kernel, storage: list[np.ndarray], var_vals: dict[str, int]):
        self.k, self.vars = kernel, var_vals
        self.nodes = kernel.sink.toposort()
        self.free = free_ranges(self.nodes)
        ranges = sorted((u for u in self.nodes if u.op is Ops.RANGE), key=lambda r: r.arg[0])
        if len(ranges) >= MAX_DIMS:
            raise KernelError(f"kernel {kernel.name} has {len(ranges)} ranges: the PYTHON reference gives each range "
                              f"an array axis and numpy broadcasts {MAX_DIMS}, so it runs at most {MAX_DIMS - 1} (a device "
                              "compiles it)", ranges[MAX_DIMS - 1])
        self.axis = {r: n for n, r in enumerate(ranges)}
        self.ndim = len(ranges) + 1
        self.extent = {r: max(0, sym_eval(r.src[0], var_vals)) for r in ranges}
        self.global_axes = [r for r in ranges if r.arg[1] == "global"]
        # buffers as typed flat arrays over the caller's storage (bfloat16 stays uint16 bits in memory)
        self.bufs: dict[UOp, np.ndarray] = {}
        for p, arr in zip(kernel.param_uops, storage):
            self.bufs[p] = arr.view(p.dtype.np)
        self.locals: dict[UOp, np.ndarray] = {}
        self.pinned: dict[UOp, np.ndarray] = {}  # local loads read at their barrier epoch
        self.reduced = {r for u in self.nodes if u.op is Ops.REDUCE for r in u.src[1:]}

    # ---- helpers
    def _shape1(self) -> list[int]:
        return [1] * self.ndim

    def _range_array(self, r: UOp, lo: int, hi: int) -> np.ndarray:
        shape = self._shape1()
        shape[self.axis[r]] = hi - lo
        return np.arange(lo, hi, dtype=np.int64).reshape(shape)

    def run(self) -> None:
        stmts = self.k.sink.src
        self.paths = block_paths(stmts, self.free)
        self.nests = [nest(self.free[st]) for st in stmts]
        self._affine_memo: dict = {}
        # values that read written params, computed once where the compiled code computes them and reused by later
        # statements of the same loop body (ir/order.py): statement -> [(depth, node)]
        self.reads_at: dict[int, list[tuple[int, UOp]]] = {}
        first_use: dict[UOp, int] = {}
        for n, st in enumerate(stmts):
            for u in st.toposort() if st.op is Ops.STORE else ():
                first_use.setdefault(u, n)
        ordered = {u for u in self.nodes if is_ordered_load(u)}
        self.at_build: set[UOp] = set()  # ordered loads read at their build point (a barrier does not pin them)
        for u in self.nodes:
            if u not in first_use:
                continue
            f = first_use[u]
            if u in ordered:
                k = build_position(stmts, u.arg[2])
                rd = read_depth(u, self.nests[k], self.free[u]) if k < len(stmts) and stmts[k].op is Ops.STORE \
                    else None
                if rd is not None:
                    self.reads_at.setdefault(k, []).append((rd, u))
                    self.at_build.add(u)
                    continue
            elif u.op is not Ops.REDUCE or not any(x in ordered for x in u.toposort()):
                continue
            if self.free[u] <= self.free[stmts[f]]:  # read at its first use (a reduction, or a load in one)
                self.reads_at.setdefault(f, []).append((len(self.paths[f]), u))
        self.opins: dict[UOp, tuple[tuple[int, ...], np.ndarray]] = {}  # node -> (loop body, value)
        self._exec(list(range(len(stmts))), 0, {})

    def _exec(self, idxs: list[int], depth: int, chunk: dict) -> None:
        """Run statements as the loop tree of ir/order.py: a `loop` range whose body reads what it writes runs its
        iterations in order; every other body runs each statement for all its lanes at once (the same result)."""
        n = 0
        while n < len(idxs):
            i = idxs[n]
            self._read_ordered(i, depth, chunk, deeper=len(self.paths[i]) <= depth)
            if len(self.paths[i]) <= depth:
                self._stmt(i, chunk)
                n += 1
                continue
            bid, m = self.paths[i][depth], n + 1
            while m < len(idxs) and len(self.paths[idxs[m]]) > depth and self.paths[idxs[m]][depth] == bid:
                m += 1
            group, r = idxs[n:m], self.nests[i][depth]
            if r.arg[1] == "loop" and self._carried(group, r):
                for j in range(self.extent[r]):
                    self._exec(group, depth + 1, {**chunk, r: (j, j + 1)})
            else:
                self._exec(group, depth + 1, chunk)
            n = m

    def _visible(self, n: int) -> dict[UOp, np.ndarray]:
        """The values read earlier that statement n sees: those of a loop body it is in."""
        p = self.paths[n]
        return {u: v for u, (body, v) in self.opins.items() if p[:len(body)] == body}

    def _read_ordered(self, i: int, depth: int, chunk: dict, deeper: bool) -> None:
        """Read the values due before statement i at this depth (all the rest, at the statement)."""
        for rd, u in self.reads_at.get(i, ()):
            if rd == depth or (deeper and rd > depth):
                self.opins.pop(u, None)
                self.opins[u] = (self.paths[i][:rd], self._eval(u, {"chunk": chunk, "memo": self._visible(i)}))

    def _carried(self, group: list[int], r: UOp) -> bool:
        """Whether a loop body may depend on its earlier iterations: a param it stores is loaded in it (other than
        an in-place update by a lone store of an element only this iteration touches) or stored twice (a local
        array too)."""
        stores: dict[UOp, list[UOp]] = {}
        for i in group:
            st = self.k.sink.src[i]
            if st.op is Ops.STORE:  # a param or a local array (the same memory-order rules)
                stores.setdefault(st.src[0].src[0], []).append(st)
        for i in group:
            st = self.k.sink.src[i]
            if st.op is not Ops.STORE:
                continue
            for u in st.toposort():
                sts = stores.get(u.src[0].src[0]) if u.op is Ops.LOAD else None
                if sts and (len(sts) > 1 or sts[0].src[0] is not u.src[0] or not self._own_element(u.src[0].src[1], r)):
                    return True
        return any(len(v) > 1 for v in stores.values())

    def _own_element(self, idx: UOp, r: UOp) -> bool:
        """The index names a different element in every iteration of r (affine: r, lanes, vars, a constant)."""
        a = affine(idx, self._affine_memo)
        return a is not None and bool(a.get(r)) and all(
            t == 1 or t is r or t.op is Ops.VAR or t.arg[1] in ("global", "local") for t in a)

    def _stmt(self, n: int, chunk: dict) -> None:
        stmts = self.k.sink.src
        st = stmts[n]
        if st.op is Ops.BARRIER:
            self._read_before_barrier(st, stmts[n + 1:], chunk)
            return
        if any(self.extent[r] == 0 for r in self.free[st]):
            return
        self._store(st, {"chunk": chunk, "memo": self._visible(n)})

    def _read_before_barrier(self, barrier: UOp, later: tuple[UOp, ...], chunk: dict) -> None:
        """A local-memory load happens in the barrier epoch it was built in: read it now if a later statement uses it."""
        needed: set[UOp] = set()
        for st in later:
            needed.update(st.toposort())
        for u in self.nodes:
            if u.op is not Ops.LOAD or u.src[0].src[0].op is not Ops.DEFINE_LOCAL or u in self.pinned \
                    or u in self.at_build:
                continue
            epoch = u.src[-1].arg if u.src[-1].op is Ops.BARRIER else -1
            if epoch < barrier.arg and u in needed and not any(r in self.reduced for r in self.free[u]):
                self.pinned[u] = self._eval(u, {"chunk": chunk})

    # ---- evaluation (memo per reduction context: values depending on a chunked range are recomputed per chunk)
    def _eval(self, u: UOp, ctx: dict) -> np.ndarray:
        """u's value in ctx: what it needs first, sources before users, on an explicit stack (a chain as deep as
        the user built it). A reduction evaluates its body in its own context (`_reduce`), a load its address,
        gate and default in this one."""
        if u in self.pinned:
            return self.pinned[u]
        memo = ctx.setdefault("memo", {})
        if u in memo:
            return memo[u]
        work: list[tuple[UOp, bool]] = [(u, False)]
        while work:
            x, ready = work.pop()
            if x in memo:
                continue
            if x in self.pinned:
                memo[x] = self.pinned[x]
            elif ready:
                memo[x] = self._eval1(x, ctx)
            else:
                work.append((x, True))
                work.extend((s, False) for s in reversed(_operands(x)) if s not in memo)
        return memo[u]

    def _eval1(self, u: UOp, ctx: dict) -> np.ndarray:
        op, d = u.op, u.dtype
        if op is Ops.CONST:
            return semantics.const_array(u.arg, d).reshape(self._shape1())
        if op is Ops.VAR:
            return np.asarray(self.vars[u.arg[0]], np.int64).reshape(self._shape1())
        if op is Ops.SCALAR:  # the launch rounded it to its dtype (program_spec.scalar_value)
            return semantics.const_array(self.vars[u.arg], d).reshape(self._shape1())
        if op is Ops.RANGE:
            lo, hi = ctx.get("chunk", {}).get(u, (0, self.extent[u]))
            return self._range_array(u, lo, hi)
        if op is Ops.LOAD:
            return self._load(u, ctx)
        if op is Ops.REDUCE:
            return self._reduce(u, ctx)
        srcs = [self._eval(s, ctx) for s in u.src]
        if op in ALU:
            return semantics.alu(op, self._compute(d), *srcs)
        if op is Ops.CAST:
            return self._cast(srcs[0], u.src[0].dtype, d)
        if op is Ops.BITCAST:
            return semantics.bitcast(srcs[0], u.src[0].dtype, d)
        if op is Ops.VECTORIZE:
            b = np.broadcast_arrays(*srcs)
            return np.concatenate(b, axis=-1)
        if op is Ops.GEP:
            return srcs[0][..., u.arg:u.arg + 1]
        raise NotImplementedError(f"reference interpreter: {op.name}")

    # ---- memory
    def _target(self, buf: UOp) -> np.ndarray:
        if buf.op is Ops.PARAM:
            return self.bufs[buf]
        if buf not in self.locals:
            groups = [self.extent[r] for r in self.global_axes]
            self.locals[buf] = np.zeros((int(np.prod(groups, dtype=np.int64)) if groups else 1, buf.arg[1]), buf.dtype.np)
        return self.locals[buf]

    def _group_index(self, ctx: dict) -> np.ndarray:
        """Flat workgroup id (over the global ranges) for local-memory addressing."""
        g = np.zeros(self._shape1(), np.int64)
        for r in self.global_axes:
            g = g * self.extent[r] + self._eval(r, ctx)
        return g

    def _addresses(self, index: UOp, lanes: int, ctx: dict):
        buf = index.src[0]
        idx = self._eval(index.src[1], ctx)
        gate = self._eval(index.src[2], ctx) if len(index.src) == 3 else None
        if lanes > 1:
            idx = idx + np.arange(lanes, dtype=np.int64)
        mem = self._target(buf)
        size = mem.shape[-1]
        if buf.op is Ops.PARAM:  # the declared size is the contract (the compiled devices check it too)
            size = min(size, sym_eval(buf.src[0], self.vars))
        name = buf.arg[1] if buf.op is Ops.PARAM else buf.arg[0]
        if gate is not None:
            idx, gate = np.broadcast_arrays(idx, gate)
            bad = gate & ((idx < 0) | (idx >= size))
            safe = np.where(gate, idx, 0)
        else:
            bad = (idx < 0) | (idx >= size)
            safe = idx
        if bad.any():
            first = int(np.asarray(idx)[bad].flat[0])
            raise bounds_error(self.k.name, name, first, size, self.vars)
        return buf, mem, safe, gate

    def _load(self, u: UOp, ctx: dict) -> np.ndarray:
        buf, mem, idx, gate = self._addresses(u.src[0], u.dtype.count, ctx)
        if buf.op is Ops.PARAM:
            raw = mem[idx]
        else:
            g, idx2 = np.broadcast_arrays(self._group_index(ctx), idx)
            raw = mem[g, idx2]
        val = bf16_to_f32(raw) if u.dtype.scalar() == dtypes.bfloat16 else raw
        if gate is not None:
            default = self._eval(u.src[1], ctx)
            val = np.where(gate, val, default)
        return val

    def _store(self, st: UOp, ctx: dict) -> None:
        index, value = st.src[0], st.src[1]
        lanes = value.dtype.count
        buf, mem, idx, gate = self._addresses(index, lanes, ctx)
        val = self._eval(value, ctx)
        if buf.dtype.scalar() == dtypes.bfloat16:
            val = f32_to_bf16(val)
        extra = [] if gate is None else [gate.shape]
        if buf.op is not Ops.PARAM:
            extra.append(self._group_index(ctx).shape)
        shape = np.broadcast_shapes(idx.shape, val.shape, *extra)
        idx = np.broadcast_to(idx, shape)
        val = np.broadcast_to(val, shape)
        if gate is not None:
            m = np.broadcast_to(gate, shape)
            idx, val = idx[m], val[m]
        else:
            idx, val = idx.reshape(-1), val.reshape(-1)
        if buf.op is Ops.PARAM:
            mem[idx] = val.astype(mem.dtype, copy=False)
        else:
            g = np.broadcast_to(self._group_index(ctx), shape)
            g = g[np.broadcast_to(gate, shape)] if gate is not None else g.reshape(-1)
            mem[g, idx] = val.astype(mem.dtype, copy=False)

    # ---- reductions
    def _reduce(self, u: UOp, ctx: dict) -> np.ndarray:
        x, ranges = u.src[0], u.src[1:]
        acc_dtype = self._compute(dtypes.float32 if u.dtype.scalar() in (dtypes.float16, dtypes.bfloat16)
                                  else u.dtype.scalar())
        outer = [r for r in self.free[x] if r not in ranges]
        outer_elems = int(np.prod([self._live_extent(r, ctx) for r in outer], dtype=np.int64)) if outer else 1
        inner = int(np.prod([self.extent[r] for r in ranges], dtype=np.int64))
        if inner == 0:  # the identity in every lane: a vector accumulator over an empty range has u.dtype.count
            ident = semantics.const_array(semantics.identity(u.arg, u.dtype), u.dtype)
            return np.full([*self._shape1()[:-1], u.dtype.count], ident, dtype=ident.dtype)
        # chunk the first reduced range; the others are evaluated whole
        r0 = ranges[0]
        rest = inner // self.extent[r0]
        step = max(1, CHUNK_ELEMENTS // max(1, outer_elems * rest * x.dtype.count))
        acc = None
        axes = tuple(self.axis[r] for r in ranges)
        for lo in range(0, self.extent[r0], step):
            hi = min(self.extent[r0], lo + step)
            sub = {"chunk": {**ctx.get("chunk", {}), r0: (lo, hi)},
                   "memo": {k: v for k, v in ctx.get("memo", {}).items() if not (self.free[k] & set(ranges))}}
            val = self._eval(x, sub).astype(acc_dtype.np_compute, copy=False)
            part = self._fold(u.arg, val, axes, acc_dtype)
            acc = part if acc is None else semantics.alu(u.arg, acc_dtype, acc, part)
        assert acc is not None
        if acc_dtype != u.dtype.scalar():
            acc = self._cast(acc, acc_dtype, u.dtype)
        return acc

    # ---- arithmetic (reference/wide.py widens it)
    def _compute(self, dtype: DType) -> DType:
        """The dtype an ALU result of `dtype` is computed and kept in: its own."""
        return dtype

    def _cast(self, x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
        return semantics.cast(x, src, dst)

    def _live_extent(self, r: UOp, ctx: dict) -> int:
        lo, hi = ctx.get("chunk", {}).get(r, (0, self.extent[r]))
        return hi - lo

    @staticmethod
    def _fold(op: Ops, val: np.ndarray, axes: tuple[int, ...], dt: DType) -> np.ndarray:
        with np.errstate(all="ignore"):
            if op is Ops.ADD:
                out = np.sum(val, axis=axes, keepdims=True, dtype=dt.np_compute)
            elif op is Ops.MUL:
                out = np.prod(val, axis=axes, keepdims=True, dtype=dt.np_compute)
            else:
                v = np.where(np.isnan(val), -np.inf, val) if dt.is_float else val
                ident = semantics.const_array(semantics.identity(Ops.MAX, dt), dt)
                out = np.maximum(np.max(v, axis=axes, keepdims=True), ident) if v.size else ident
        return np.asarray(out, dtype=dt.np_compute)


def _operands(u: UOp) -> tuple[UOp, ...]:
    """The values `_eval1(u)` reads in u's own context: a load's index, gate and default; no reduction's body."""
    if u.op is Ops.LOAD:
        ix = u.src[0]
        return (*ix.src[1:], u.src[1]) if len(ix.src) == 3 else ix.src[1:]
    if u.op in (Ops.REDUCE, Ops.RANGE):
        return ()
    return u.src


def run_kernel(kernel: Kernel, storage: list[np.ndarray], var_vals: dict[str, int],
               interpreter: type[Interpreter] = Interpreter) -> Interpreter:
    """Execute `kernel` in place on `storage` (one uint8/typed host array per param, in param order); the
    interpreter that ran it (what it noted on the way: `WideInterpreter.nonfinite`)."""
    from .triangles import rectangular
    interp = interpreter(rectangular(kernel, var_vals), storage, var_vals)
    interp.run()
    return interp


def evaluate(kernel: Kernel, arrays: dict[str, Any], **vars_: int) -> dict[str, np.ndarray]:
    """Convenience for tests: run on copies of numpy arrays by name; returns every param array by name."""
    storage = []
    for p in kernel.params:
        a = np.ascontiguousarray(arrays[p.name]).copy()
        storage.append(a.view(np.uint8).reshape(-1))
    run_kernel(kernel, storage, dict(vars_))
    return {p.name: s.view(p.dtype.np) for p, s in zip(kernel.params, storage)}


__all__ = ["Interpreter", "evaluate", "run_kernel"]
