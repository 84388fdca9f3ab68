"""The llvm pair's loop passes: how the renderer's walk (llvm_renderer._Emitter) emits a loop other than one body per
iteration. Kept apart from the walk so the rendering of single ops and the loop rewrites each have one file.

- accumulator splitting (`split_plan`, `emit_split_loop`): a reduce loop runs N iterations per trip into N partial
  accumulators, combined after the loop, so LLVM can keep N independent chains in flight (DEVICEKIT_CPU_SPLIT);
- streaming stores (`stream_range`, `emit_stream_loop`, planned by stream.py): the innermost loop of the split
  range's nest (the split range itself, or the row loop of a 2-D kernel) writing one large output gets a vector
  loop of cache-line `!nontemporal` stores.

`SETTINGS` names the variables these passes read: the renderer's memo salt is derived from it, so a pass that reads
a new variable cannot render a different text under the same memo key.
"""

from __future__ import annotations

from devicekit.ir.dtypes import DType
from devicekit.ir.ops import ALU, Ops
from devicekit.ir.uop import UOp

from . import settings, stream
from .llvm_types import const_literal, lty, mty

SETTINGS: tuple[str, ...] = ("DEVICEKIT_CPU_SPLIT",)  # the variables the passes read (the memo salt follows them)


def settings_salt() -> str:
    """The current values of SETTINGS, as the renderer's memo salt spells them."""
    return " ".join(str(settings.get(n)) for n in SETTINGS)


class LoopPasses:
    """Mixin of the emitter: needs its `uops`, `ends`, `last_use`, `acc_update`, `accs`, `r`, `metadata`,
    `stream_bytes`, `streams`, `fence_after` and its emit helpers (`ins`, `emit`, `label`, `tmp`, `v`, `open_loop`, `close_loop`, `load`,
    `address`, `splat_like`, `booltype`, `emit_uop`)."""

    # ---- accumulator splitting: a reduce loop runs SPLIT iterations per trip into SPLIT partial accumulators
    SPLIT = 4  # at most; DEVICEKIT_CPU_SPLIT forces a factor (1 turns splitting off)
    ACC_BUDGET = 256  # bytes of partial accumulators to aim for
    _BODY_OK = frozenset({Ops.CONST, Ops.INDEX, Ops.LOAD, Ops.CAST, Ops.BITCAST, Ops.VECTORIZE, Ops.GEP,
                          Ops.ASSIGN}) | ALU

    def split_plan(self, i: int):
        """For the reduce RANGE at position i: (end position, {acc: combining op}, split factor) when its loop only
        loads, computes and updates accumulators with a reassociable op (each once, read nowhere else); else None."""
        u = self.uops[i]
        if u.arg[1] != "reduce" or settings.get("DEVICEKIT_CPU_SPLIT") == 1:
            return None
        q = next((j for j in self.ends.get(u, ()) if j > i), None)  # the first ENDRANGE of u after it
        if q is None:
            return None
        body = self.uops[i + 1:q]
        if not body or len(body) > 256 or any(b.op not in self._BODY_OK for b in body):
            return None
        inside = set(body) | {u}
        accs: dict = {}
        for b in body:
            if b.op is not Ops.ASSIGN:
                continue
            acc, val = b.src
            if acc.op is not Ops.DEFINE_ACC or acc in accs or val not in self.acc_update:
                return None
            if val.op not in (Ops.ADD, Ops.MUL, Ops.MAX) or acc not in val.src or val.src.count(acc) != 1:
                return None
            accs[acc] = val.op
        if not accs:
            return None
        for b in body:  # an accumulator is read only by its update; nothing computed inside is used after
            if b.op is not Ops.ASSIGN and any(s in accs and b.op not in (Ops.ADD, Ops.MUL, Ops.MAX) for s in b.src):
                return None
            if b.op in (Ops.ADD, Ops.MUL, Ops.MAX) and any(s in accs for s in b.src) and b not in self.acc_update:
                return None
        last = self.last_use
        if any(last.get(x, -1) > q for x in inside):  # a value of the loop used after it
            return None
        # keep the partial accumulators in registers: about 256 bytes of them (8 AVX2 registers) in all
        acc_bytes = sum(a.dtype.nbytes for a in accs)
        forced = settings.get("DEVICEKIT_CPU_SPLIT")
        n = forced or max(1, min(self.SPLIT, self.ACC_BUDGET // max(acc_bytes, 1)))
        n = 1 << (n.bit_length() - 1)
        return (q, accs, n) if n > 1 else None

    def identity(self, op: Ops, dt: DType) -> str:
        s = dt.scalar()
        v = 0 if op is Ops.ADD else 1 if op is Ops.MUL else s.min()
        return self.splat_like(const_literal(v, s), dt)

    def combine(self, op: Ops, dt: DType, x: str, y: str) -> str:
        t = lty(dt)
        fm = "reassoc contract " if dt.is_float else ""
        if op is Ops.ADD:
            return self.ins(f"{'fadd ' + fm if dt.is_float else 'add '}{t} {x}, {y}")
        if op is Ops.MUL:
            return self.ins(f"{'fmul ' + fm if dt.is_float else 'mul '}{t} {x}, {y}")
        sig = dt.is_int and not dt.is_unsigned
        c = self.ins(f"fcmp {fm}olt {t} {x}, {y}" if dt.is_float else f"icmp {'s' if sig else 'u'}lt {t} {x}, {y}")
        return self.ins(f"select {fm}{self.booltype(dt)} {c}, {t} {y}, {t} {x}")

    def emit_split_loop(self, u, q: int, accs: dict, n: int) -> None:
        """main loop: SPLIT copies of the body per trip, copy c updating partial accumulator c; then the partials
        are combined into the accumulator, and a remainder loop (the normal walk) finishes the range."""
        i = self.uops.index(u)
        body = self.uops[i + 1:q]
        start = self.v(u.src[0])
        end = self.v(u.src[1])
        main_end = self.ins(f"sub i64 {end}, {n - 1}")
        partials = {}
        for acc, op in accs.items():
            name, dt = self.accs[acc]
            ps = [name] + [f"{name}.p{c}" for c in range(1, n)]
            for pn in ps[1:]:
                self.allocas.append(f"  {pn} = alloca {lty(dt)}")
                self.emit(f"store {lty(dt)} {self.identity(op, dt)}, ptr {pn}")
            partials[acc] = ps
        k = self.open_loop(u, start, end=main_end, tag="m")
        iv = self.r[u]
        for c in range(n):
            self.r[u] = iv if c == 0 else self.ins(f"add nsw i64 {iv}, {c}")
            for acc in accs:
                self.accs[acc] = (partials[acc][c], self.accs[acc][1])
            for b in body:
                self.emit_uop(b)
        self.close_loop(k, n)
        for acc, op in accs.items():
            dt = self.accs[acc][1]
            vals = [self.ins(f"load {lty(dt)}, ptr {pn}") for pn in partials[acc]]
            while len(vals) > 1:
                vals = [self.combine(op, dt, vals[j], vals[j + 1]) for j in range(0, len(vals) - 1, 2)] + \
                       ([vals[-1]] if len(vals) % 2 else [])
            self.accs[acc] = (partials[acc][0], dt)
            self.emit(f"store {lty(dt)} {vals[0]}, ptr {partials[acc][0]}")
        self.open_loop(u, f"%ridx{k}")  # the remainder: the walk continues with the body and the ENDRANGE

    def stream_range(self, i: int, u) -> bool:
        """Whether the streaming pass emitted RANGE u (at position i): the split range plans the nest's streaming
        loop (stream.plan); a split range that is that loop is emitted here, else the inner loop is when the walk
        reaches it."""
        sp = self.streams.pop(u, None)
        if sp is None:
            sp = stream.plan(self.uops, i)
            if sp is None:
                return False
            if sp.loop is not u:
                self.streams[sp.loop] = sp
                return False
        self.emit_stream_loop(sp)
        return True

    def emit_stream_loop(self, sp: stream.Stream) -> None:
        """The streaming loop of a kernel that writes one large output (stream.py): when the chunk's output (the
        loop's extent times the extents of the levels around it) is at least `stream_bytes` and the loop runs at
        least two lines, a scalar peel to the output's next 64-byte boundary, then `lanes`-wide iterations whose one
        store is a cache-line `!nontemporal` store; the ordinary loop (the walk continues with the body and the
        ENDRANGE) runs the rest, or the whole loop when it is small or the output is misaligned. A fence follows the
        split range (streaming stores are weakly ordered): after this loop when it is the split range, else after
        the outer loop's end (once per chunk, not once per row)."""
        u, st, lanes = sp.loop, sp.store, sp.lanes
        i = self.uops.index(u)
        body = self.uops[i + 1:sp.end]
        idx, val = st.src
        dt = val.dtype
        esz = dt.itemsize
        start, end = self.v(u.src[0]), self.v(u.src[1])
        k = self.tmp()[2:]
        ext = total = self.ins(f"sub i64 {end}, {start}")
        for o in sp.outer:  # the chunk's output: this loop's extent times the outer levels' (a negative one is 0)
            d = self.ins(f"sub i64 {self.v(o.src[1])}, {self.v(o.src[0])}")
            d = self.ins(f"select i1 {self.ins(f'icmp sgt i64 {d}, 0')}, i64 {d}, i64 0")
            total = self.ins(f"mul i64 {total}, {d}")
        big = self.ins(f"icmp sge i64 {total}, {max(2 * lanes, self.stream_bytes // esz)}")
        if sp.outer:  # the peel must end inside this loop: two lines of it at least
            big = self.ins(f"and i1 {big}, {self.ins(f'icmp sge i64 {ext}, {2 * lanes}')}")
            self.fence_after[sp.split_end] = True
        self.emit(f"br i1 {big}, label %nt{k}, label %ntsmall{k}")
        self.label(f"nt{k}")
        self.r[u] = start  # the store's index at the first iteration: the unit-stride chain from the range
        for b in body:
            if b in sp.unit and b is not u:
                self.emit_uop(b)
        first = self.ins(f"getelementptr inbounds {mty(dt)}, ptr {self.v(idx.src[0])}, i64 {self.v(idx.src[1])}")
        addr = self.ins(f"ptrtoint ptr {first} to i64")
        whole = self.ins(f"icmp eq i64 {self.ins(f'and i64 {addr}, {esz - 1}')}, 0")  # else never line-aligned
        self.emit(f"br i1 {whole}, label %ntgo{k}, label %ntsmall{k}")
        self.label(f"ntgo{k}")
        gap = self.ins(f"and i64 {self.ins(f'sub i64 0, {addr}')}, {stream.LINE - 1}")
        vstart = self.ins(f"add nsw i64 {start}, {self.ins(f'lshr i64 {gap}, {esz.bit_length() - 1}')}")
        count = self.ins(f"and i64 {self.ins(f'sub i64 {end}, {vstart}')}, {-lanes}")
        vend = self.ins(f"add nsw i64 {vstart}, {count}")
        if not self.metadata:
            self.metadata.append("!0 = !{i32 1}")
        p = self.open_loop(u, start, end=vstart, tag="p")  # the peel: the body as it is, under 64 bytes of output
        for b in body:
            self.emit_uop(b)
        self.close_loop(p, 1, (stream.NO_VECTORIZE, stream.NO_UNROLL))
        v = self.open_loop(u, vstart, end=vend, tag="v")
        vec: dict = {}
        for b in body:
            if b.op is Ops.STORE and b is st:
                x = self.v(self.lanes_of(val, vec, lanes))
                p_st = self.address(idx, dt.vec(lanes), clamp=False)
                self.emit(f"store {mty(dt.vec(lanes))} {x}, ptr {p_st}, align {stream.LINE}, !nontemporal !0")
            elif b.op is Ops.LOAD and b.src[0].src[1] in sp.unit:  # `lanes` elements from the first lane's index
                w = UOp(Ops.LOAD, b.dtype.vec(lanes), b.src, b.arg)
                self.r[w] = self.load(w)
                vec[b] = w
            elif b.op in (Ops.CAST, Ops.BITCAST) or b.op in ALU:
                if any(s in vec for s in b.src):
                    w = UOp(b.op, b.dtype.vec(lanes), tuple(self.lanes_of(s, vec, lanes) for s in b.src), b.arg)
                    self.emit_uop(w)
                    vec[b] = w
                else:
                    self.emit_uop(b)
            else:
                self.emit_uop(b)
        self.close_loop(v, lanes, (stream.NO_VECTORIZE, stream.NO_UNROLL))
        if not sp.outer:
            self.emit("fence seq_cst")  # streaming stores are weakly ordered: visible before the launch returns
        vexit = self.block
        self.emit(f"br label %ntrest{k}")
        self.label(f"ntsmall{k}")
        self.emit(f"br label %ntrest{k}")
        self.label(f"ntrest{k}")
        rest = self.ins(f"phi i64 [{vend}, %{vexit}], [{start}, %ntsmall{k}]")
        self.open_loop(u, rest)  # the rest: the walk continues with the body and the ENDRANGE

    def lanes_of(self, s, vec: dict, lanes: int):
        """The vector stand-in of body value s in the streaming loop: its vector form, or a splat of the scalar."""
        if s in vec:
            return vec[s]
        w = UOp(Ops.VECTORIZE, s.dtype.vec(lanes), (s,) * lanes)
        if s.op is not Ops.CONST:
            self.emit_uop(w)
        else:
            self.r[w] = "<" + ", ".join(f"{lty(s.dtype)} {const_literal(s.arg, s.dtype)}" for _ in range(lanes)) + ">"
        return w
