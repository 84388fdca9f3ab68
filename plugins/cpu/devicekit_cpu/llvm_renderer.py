"""LLVMRenderer: the linear form -> LLVM IR text (for llvmlite). Pure text: imports no llvmlite.

Semantics follow devicekit.ir.semantics: MAX is (a<b)?b:a, shifts take the amount modulo the width, integer
division by zero gives 0 (instead of a SIGFPE that would kill the process). Floats keep IEEE semantics, with
one licence: the update of a reduction accumulator carries `reassoc contract`, because the order of a
reduction is not part of the contract (threads split it anyway), and without it LLVM cannot vectorize sums. The
product in `acc + a*b` carries `contract` alone (it may fuse into an fma with the update): `reassoc` there would let
LLVM regroup the term's own multiplications. No other fast-math flag (nnan, ninf, nsz, arcp, afn) is ever emitted.

Accumulators live in allocas (promoted to registers by the optimizer); ranges are loops with a phi.
Gated loads clamp the index to 0 when the gate is off (buffers are never empty on the CPU allocator), so they
stay branch-free and vectorizable; gated stores branch.
"""

from __future__ import annotations

import dataclasses

from devicekit.ir.dtypes import DType, dtypes
from devicekit.ir.names import mangle
from devicekit.ir.ops import ALU, Ops
from devicekit.render.renderer import Renderer

from . import hostinfo, split_reduce, stream
from .llvm_types import _SCALAR, const_literal, intrinsic_suffix, lty, mty
from .loop_passes import LoopPasses, settings_salt
from .memo import MemoRender

__all__ = ["LLVMRenderer", "const_literal", "intrinsic_suffix", "lty", "mty"]


class LLVMRenderer(MemoRender, Renderer):
    """Linear form -> LLVM IR, one function named after the kernel, no target triple (the compiler sets it)."""

    device = "CPU"
    lang = "llvm-ir"
    core_split = True
    vectors = True
    unaligned_vectors = True  # vector loads and stores are emitted with their element's alignment
    pack_tiles = True  # a gemm's packed tile (ir/pack.py): its vectors are registers; the c pair's are per lane
    supported_dtypes = frozenset(d for d in dtypes.all() if d.name != "bfloat16")
    # exp2/log2/sin: the core's polynomial decompositions (1-2 ulp) vectorize; libm calls do not (softmax 3x)
    native_ops = ALU - {Ops.EXP2, Ops.LOG2, Ops.SIN}
    vector_register_bytes = hostinfo.vector_register_bytes()  # the host's, as the code runs here

    # output bytes per chunk from which the outer loop streams its stores (stream.py); None: the LLC shared by the
    # default thread count, 0: never
    stream_threshold: int | None = None

    def render_linear(self, lk, name: str) -> str:
        if (plan := split_reduce.plan(lk)) is not None:  # a lone reduction: two stages (split_reduce.py)
            lk = split_reduce.rewrite(lk, plan)
        return _Emitter(lk, name, self.streaming()).run()

    def render_uncached(self, kernel, name: str | None = None):
        """The core's render; a lone reduction's spec gets its pieces as the split (the runtime divides them)."""
        spec = super().render_uncached(kernel, name)
        parts = spec.get_meta("reduce_parts")
        if parts is None:
            return spec
        meta = dict(spec.meta)
        meta["opts"] = (*meta.pop("opts", ()), meta.pop("reduce_opts"))
        return dataclasses.replace(spec, core_split=parts, meta=tuple(meta.items()))

    def streaming(self) -> int:
        """The streaming-store threshold in bytes this renderer writes into its sources (0: off)."""
        return stream.default_threshold() if self.stream_threshold is None else self.stream_threshold

    def entry_symbol(self, name: str) -> str:
        """`@dku_<kernel>`: user names share one namespace with the C-style renderers' (ir.names), so a kernel
        named `sqrtf` or `memcpy` never defines a libm/libc symbol in the process's JIT."""
        return mangle(name)

    def memo_salt(self) -> str:
        return f"{settings_salt()} stream={self.streaming()}"  # the loop passes' variables, then the threshold

    def meta(self, lk) -> tuple:
        from .cost import split_cost
        if (plan := split_reduce.plan(lk)) is not None:  # cost a piece; what the runtime's scratch must hold
            return (("split_cost", plan.cost), ("reduce_parts", plan.parts),
                    ("reduce_scratch", split_reduce.scratch_bytes(plan)), ("reduce_opts", split_reduce.describe(plan, lk)))
        return (("split_cost", split_cost(lk)),)


class _Emitter(LoopPasses):
    """One kernel's walk: each op of the linear form in order; a RANGE that a loop pass takes is emitted by it."""

    def __init__(self, lk, name: str, stream_bytes: int = 0):
        self.lk, self.name = lk, name
        self.stream_bytes = stream_bytes
        self.streams: dict = {}  # inner RANGE -> its stream.Stream, planned at the split range (loop_passes)
        self.fence_after: dict = {}  # positions of ENDRANGEs a fence follows
        self.metadata: list[str] = []
        self.uops = list(lk.uops)
        # where each value is last used, where each loop ends: split_plan asked both by scanning the op list
        self.last_use: dict = {}
        self.ends: dict = {}
        for pos, u in enumerate(self.uops):
            for s in u.src:
                self.last_use[s] = pos
            if u.op is Ops.ENDRANGE:
                self.ends.setdefault(u.src[0], []).append(pos)
        self.lines: list[str] = []
        self.loop_hints: dict = dict(getattr(lk, "loop_hints", ()))  # RANGE -> its `!llvm.loop` properties
        self.allocas: list[str] = []
        self.decls: set[str] = set()
        self.r: dict = {}
        self.n = 0
        self.block = "entry"
        self.loops: dict = {}  # RANGE uop -> its local loop label suffix
        self.nloops = 0
        self.ifs: dict = {}
        self.index: dict = {}  # INDEX uop -> (buf uop, idx uop, gate uop | None)
        self.accs: dict = {}  # DEFINE_ACC / ASSIGN uop -> (alloca name, dtype)
        # values that depend on memory or accumulators: index math without them gets `nsw`
        self.data: set = set()
        data = self.data
        for u in self.uops:
            if u.op in (Ops.LOAD, Ops.DEFINE_ACC, Ops.ASSIGN) or not data.isdisjoint(u.src):
                data.add(u)
        self.acc_update: set = set()  # ALU uops whose value is stored straight back into an accumulator they read
        feeders: set = set()  # the a*b of acc + a*b: `contract` only (fma), never `reassoc`
        for u in self.uops:
            if u.op is Ops.ASSIGN and u.src[1].op in (Ops.ADD, Ops.MUL, Ops.MAX, Ops.MULACC) and u.src[0] in u.src[1].src:
                self.acc_update.add(u.src[1])
                if u.src[1].op is Ops.ADD:  # acc + a*b, a and b not computed by float ALU ops: may become an fma
                    feeders.update(s for s in u.src[1].src if s.op is Ops.MUL
                                   and not any(x.op in ALU and x.dtype.scalar().is_float for x in s.src))
        # `reassoc` on the product let LLVM regroup the term itself: (x * 1e30) * 0.0 became x * (1e30 * 0.0) = 0
        # where inf * 0 must give NaN, and (x * 0) * x became (x * x) * 0 = NaN where 0 is right. A contracted
        # product becomes an fma carrying the add's `reassoc`, and the code generator then folds a multiplicand's
        # own multiply by a constant into it the same way: only products of loads, constants and casts contract.
        self.fma_only = feeders - self.acc_update
        self.acc_update |= feeders

    # ---- helpers
    def tmp(self) -> str:
        self.n += 1
        return f"%t{self.n}"

    def emit(self, s: str) -> None:
        self.lines.append("  " + s)

    def label(self, lbl: str) -> None:
        self.lines.append(f"{lbl}:")
        self.block = lbl

    def ins(self, expr: str) -> str:
        self.n += 1  # tmp() and emit() inlined: one call per instruction, not three
        t = f"%t{self.n}"
        self.lines.append(f"  {t} = {expr}")
        return t

    def v(self, u) -> str:
        """Operand text of uop u (loading accumulators at the point of use)."""
        if u in self.accs:
            name, dt = self.accs[u]
            return self.ins(f"load {lty(dt)}, ptr {name}")
        if u.op is Ops.CONST:
            return const_literal(u.arg, u.dtype)
        return self.r[u]

    def call(self, fn: str, ret: str, args: list[str], flags: str = "") -> str:
        self.decls.add(f"declare {ret} @{fn}({', '.join(a.rsplit(' ', 1)[0] for a in args)})")
        return self.ins(f"call {flags}{ret} @{fn}({', '.join(args)})")

    def splat_like(self, lit: str, dt: DType) -> str:
        """A literal of dt's scalar type, splatted to dt's lanes."""
        if dt.count == 1:
            return lit
        return f"<{', '.join(f'{_SCALAR[dt.name]} {lit}' for _ in range(dt.count))}>"

    def zero(self, dt: DType) -> str:
        return self.splat_like(const_literal(0, dt.scalar()), dt)

    # ---- ops
    def alu(self, u) -> str:
        op, dt = u.op, u.dtype
        sdt = u.src[0].dtype if u.src else dt
        a = [self.v(s) for s in u.src]
        t = lty(dt)
        fl = sdt.is_float
        sig = sdt.is_int and not sdt.is_unsigned
        fm = ("contract " if u in self.fma_only else "reassoc contract ") if u in self.acc_update and fl else ""
        nsw = "nsw " if (sdt is dtypes.index or sdt == dtypes.index) and u not in self.data else ""
        if op is Ops.NEG:
            if fl:
                return self.ins(f"fneg {t} {a[0]}")
            if sdt.is_bool:
                return self.ins(f"xor {t} {a[0]}, {self.splat_like('true', dt)}")
            return self.ins(f"sub {t} {self.zero(dt)}, {a[0]}")
        if op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.TRUNC):
            fn = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt", Ops.TRUNC: "trunc"}[op]
            return self.call(f"llvm.{fn}.{intrinsic_suffix(dt)}", t, [f"{t} {a[0]}"])
        if op is Ops.RECIP:
            return self.ins(f"fdiv {t} {self.splat_like(const_literal(1.0, dt.scalar()), dt)}, {a[0]}")
        if op in (Ops.ADD, Ops.SUB, Ops.MUL):
            base = {Ops.ADD: "add", Ops.SUB: "sub", Ops.MUL: "mul"}[op]
            if sdt.is_bool:
                base = {Ops.ADD: "or", Ops.SUB: "xor", Ops.MUL: "and"}[op]
                return self.ins(f"{base} {t} {a[0]}, {a[1]}")
            return self.ins(f"f{base} {fm}{t} {a[0]}, {a[1]}" if fl else f"{base} {nsw}{t} {a[0]}, {a[1]}")
        if op is Ops.FDIV:
            return self.ins(f"fdiv {t} {a[0]}, {a[1]}")
        if op in (Ops.IDIV, Ops.MOD):
            # x / 0 gives 0 (the reference); INT_MIN / -1 wraps: neither may trap (x86 idiv raises SIGFPE)
            ins = ("s" if sig else "u") + ("div" if op is Ops.IDIV else "rem")
            b, bt = u.src[1], self.booltype(dt)
            if b.op is Ops.CONST and b.arg != 0 and not (sig and b.arg == -1):
                return self.ins(f"{ins} {t} {a[0]}, {a[1]}")
            z = self.ins(f"icmp eq {t} {a[1]}, {self.zero(dt)}")
            bad = z
            if sig:
                m1 = self.ins(f"icmp eq {t} {a[1]}, {self.splat_like('-1', dt)}")
                bad = self.ins(f"or {bt} {z}, {m1}")
            d = self.ins(f"select {bt} {bad}, {t} {self.splat_like('1', dt)}, {t} {a[1]}")
            q = self.ins(f"{ins} {t} {a[0]}, {d}")  # a % 1 == 0 covers both cases of MOD
            if op is Ops.IDIV:
                if sig:
                    q = self.ins(f"select {bt} {m1}, {t} {self.ins(f'sub {t} {self.zero(dt)}, {q}')}, {t} {q}")
                q = self.ins(f"select {bt} {z}, {t} {self.zero(dt)}, {t} {q}")
            return q
        if op is Ops.MAX:
            if fl and u in self.acc_update:  # reductions: the vectorizer knows maxnum-like intrinsics; NaN: see docs
                c = self.ins(f"fcmp {fm}olt {t} {a[0]}, {a[1]}")
            else:
                c = self.ins(f"fcmp olt {t} {a[0]}, {a[1]}" if fl else f"icmp {'s' if sig else 'u'}lt {t} {a[0]}, {a[1]}")
            return self.ins(f"select {fm}{self.booltype(dt)} {c}, {t} {a[1]}, {t} {a[0]}")
        if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
            st = lty(sdt)
            if fl:
                cc = {Ops.CMPLT: "olt", Ops.CMPNE: "une", Ops.CMPEQ: "oeq"}[op]
                return self.ins(f"fcmp {cc} {st} {a[0]}, {a[1]}")
            cc = {Ops.CMPLT: "slt" if sig else "ult", Ops.CMPNE: "ne", Ops.CMPEQ: "eq"}[op]
            return self.ins(f"icmp {cc} {st} {a[0]}, {a[1]}")
        if op in (Ops.AND, Ops.OR, Ops.XOR):
            return self.ins(f"{op.name.lower()} {t} {a[0]}, {a[1]}")
        if op in (Ops.SHL, Ops.SHR):
            amt = self.ins(f"and {t} {a[1]}, {self.splat_like(str(dt.bits - 1), dt)}")
            ins = "shl" if op is Ops.SHL else ("ashr" if sig else "lshr")
            return self.ins(f"{ins} {t} {a[0]}, {amt}")
        if op is Ops.WHERE:
            return self.ins(f"select {lty(u.src[0].dtype)} {a[0]}, {t} {a[1]}, {t} {a[2]}")
        if op is Ops.MULACC:
            if fl:
                if u in self.acc_update:
                    return self.call(f"llvm.fmuladd.{intrinsic_suffix(dt)}", t, [f"{t} {x}" for x in a], fm)
                m = self.ins(f"fmul {t} {a[0]}, {a[1]}")
                return self.ins(f"fadd {t} {m}, {a[2]}")
            m = self.ins(f"mul {t} {a[0]}, {a[1]}")
            return self.ins(f"add {t} {m}, {a[2]}")
        raise NotImplementedError(f"LLVMRenderer: no rendering for {u.short()}")

    @staticmethod
    def booltype(dt: DType) -> str:
        return "i1" if dt.count == 1 else f"<{dt.count} x i1>"

    def cast(self, x: str, s: DType, d: DType) -> str:
        ts, td = lty(s), lty(d)
        if d.is_bool:
            if s.is_bool:
                return x
            if s.is_float:
                return self.ins(f"fcmp une {ts} {x}, {self.zero(s)}")
            return self.ins(f"icmp ne {ts} {x}, {self.zero(s)}")
        if s.is_bool:
            return self.ins(f"uitofp {ts} {x} to {td}" if d.is_float else f"zext {ts} {x} to {td}")
        if s.is_float and d.is_float:
            if s.scalar() == d.scalar():
                return x
            if s.itemsize == d.itemsize:  # half <-> bfloat16, through float32
                f32 = dtypes.float32 if d.count == 1 else dtypes.float32.vec(d.count)
                return self.cast(self.ins(f"fpext {ts} {x} to {lty(f32)}"), f32, d)
            if s.scalar() == dtypes.float64 and d.itemsize == 2:
                f32 = dtypes.float32 if s.count == 1 else dtypes.float32.vec(s.count)
                return self.cast(self.round_to_odd_f32(x, s), f32, d)
            return self.ins(f"{'fpext' if d.itemsize > s.itemsize else 'fptrunc'} {ts} {x} to {td}")
        if s.is_float:
            return self.ins(f"{'fptoui' if d.is_unsigned else 'fptosi'} {ts} {x} to {td}")
        if d.is_float:
            return self.ins(f"{'uitofp' if s.is_unsigned else 'sitofp'} {ts} {x} to {td}")
        if d.bits == s.bits:
            return x
        if d.bits < s.bits:
            return self.ins(f"trunc {ts} {x} to {td}")
        return self.ins(f"{'zext' if s.is_unsigned else 'sext'} {ts} {x} to {td}")

    def round_to_odd_f32(self, x: str, s: DType) -> str:
        """double -> float rounded to odd: a second rounding to half is then correctly rounded, with no libcall
        (LLVM lowers fptrunc double->half to __truncdfhf2, which the process may not have)."""
        n = s.count
        vt = (lambda t: t if n == 1 else f"<{n} x {t}>")
        f = self.ins(f"fptrunc {vt('double')} {x} to {vt('float')}")
        back = self.ins(f"fpext {vt('float')} {f} to {vt('double')}")
        inexact = self.ins(f"fcmp one {vt('double')} {back}, {x}")  # false for NaN
        bits = self.ins(f"bitcast {vt('float')} {f} to {vt('i32')}")
        lsb = self.ins(f"and {vt('i32')} {bits}, {self.splat_like('1', dtypes.int32 if n == 1 else dtypes.int32.vec(n))}")
        even = self.ins(f"icmp eq {vt('i32')} {lsb}, {self.zero(dtypes.int32 if n == 1 else dtypes.int32.vec(n))}")
        need = self.ins(f"and {vt('i1')} {inexact}, {even}")
        ab = self.call(f"llvm.fabs.{'f64' if n == 1 else f'v{n}f64'}", vt("double"), [f"{vt('double')} {back}"])
        ax = self.call(f"llvm.fabs.{'f64' if n == 1 else f'v{n}f64'}", vt("double"), [f"{vt('double')} {x}"])
        away = self.ins(f"fcmp ogt {vt('double')} {ab}, {ax}")
        i32 = dtypes.int32 if n == 1 else dtypes.int32.vec(n)
        step = self.ins(f"select {vt('i1')} {away}, {vt('i32')} {self.splat_like('-1', i32)}, "
                        f"{vt('i32')} {self.splat_like('1', i32)}")
        moved = self.ins(f"add {vt('i32')} {bits}, {step}")
        fixed = self.ins(f"select {vt('i1')} {need}, {vt('i32')} {moved}, {vt('i32')} {bits}")
        return self.ins(f"bitcast {vt('i32')} {fixed} to {vt('float')}")

    def address(self, idx_uop, dt: DType, clamp: bool) -> str:
        buf, i, gate = self.index[idx_uop]
        iv = self.v(i)
        if clamp and gate is not None:
            iv = self.ins(f"select i1 {self.v(gate)}, i64 {iv}, i64 0")
        return self.ins(f"getelementptr inbounds {mty(dt.scalar())}, ptr {self.v(buf)}, i64 {iv}")

    def load(self, u) -> str:
        """A scalar gated load reads element 0 when the gate is off (branch-free); a vector one branches, since
        `count` lanes from element 0 may not be inside a small buffer."""
        dt = u.dtype
        gate = self.index[u.src[0]][2]
        if gate is not None and dt.count > 1:
            g, k = self.v(gate), self.tmp()[2:]
            pred = self.block
            default = self.v(u.src[1])
            self.emit(f"br i1 {g}, label %ld{k}, label %ldx{k}")
            self.label(f"ld{k}")
            x = self.raw_load(self.address(u.src[0], dt, clamp=False), dt)
            got = self.block
            self.emit(f"br label %ldx{k}")
            self.label(f"ldx{k}")
            return self.ins(f"phi {lty(dt)} [{x}, %{got}], [{default}, %{pred}]")
        x = self.raw_load(self.address(u.src[0], dt, clamp=True), dt)
        if gate is not None:
            x = self.ins(f"select i1 {self.v(gate)}, {lty(dt)} {x}, {lty(dt)} {self.v(u.src[1])}")
        return x

    def raw_load(self, p: str, dt: DType) -> str:
        x = self.ins(f"load {mty(dt)}, ptr {p}, align {dt.itemsize}")
        if dt.scalar().is_bool:
            i8 = dtypes.int8 if dt.count == 1 else dtypes.int8.vec(dt.count)
            x = self.ins(f"icmp ne {mty(dt)} {x}, {self.splat_like('0', i8)}")
        return x

    def store(self, u) -> None:
        idx, val = u.src
        dt = val.dtype
        gate = self.index[idx][2]
        if gate is not None:
            k = self.tmp()[2:]
            g = self.v(gate)
            self.emit(f"br i1 {g}, label %st{k}, label %stx{k}")
            self.label(f"st{k}")
        p = self.address(idx, dt, clamp=False)
        x = self.v(val)
        if dt.scalar().is_bool:
            x = self.ins(f"zext {lty(dt)} {x} to {mty(dt)}")
        self.emit(f"store {mty(dt)} {x}, ptr {p}, align {dt.itemsize}")
        if gate is not None:
            self.emit(f"br label %stx{k}")
            self.label(f"stx{k}")

    def open_loop(self, u, start: str, step: int = 1, end: str | None = None, tag: str = "") -> str:
        """Emit the header of the loop of RANGE u from `start` while < `end` (its end); returns the block label
        suffix. The matching ENDRANGE (or close_loop) emits the latch with `step`."""
        self.nloops += 1
        k = f"{self.nloops - 1}{tag}"  # local numbering: the source is the cache key
        self.loops[u] = k
        end = self.v(u.src[1]) if end is None else end
        pred = self.block
        self.emit(f"br label %loop{k}")
        self.label(f"loop{k}")
        iv = f"%ridx{k}"
        self.emit(f"{iv} = phi i64 [{start}, %{pred}], [{iv}.next, %latch{k}]")
        c = self.ins(f"icmp slt i64 {iv}, {end}")
        self.emit(f"br i1 {c}, label %body{k}, label %exit{k}")
        self.label(f"body{k}")
        self.r[u] = iv
        return k

    def close_loop(self, k: str, step: int = 1, hints: tuple[str, ...] = ()) -> None:
        """`hints`: `!llvm.loop` properties of the back edge (a loop the renderer vectorized itself is not
        vectorized again: compile time)."""
        self.emit(f"br label %latch{k}")
        self.label(f"latch{k}")
        self.emit(f"%ridx{k}.next = add nsw i64 %ridx{k}, {step}")
        if not hints:
            self.emit(f"br label %loop{k}")
        else:
            m = len(self.metadata) + 1
            self.metadata.append(f"!{m} = distinct !{{!{m}, {', '.join(hints)}}}")
            self.emit(f"br label %loop{k}, !llvm.loop !{m}")
        self.label(f"exit{k}")

    def emit_uop(self, u) -> None:
        op, dt, src = u.op, u.dtype, u.src
        if op is Ops.PARAM:
            self.r[u] = self.pnames.get(u.arg[1], f"%arg{u.arg[0]}")
        elif op is Ops.VAR:
            self.r[u] = self.vmap[u.arg[0]]
        elif op is Ops.SCALAR:
            self.r[u] = self.vmap[u.arg]
        elif op is Ops.CONST:
            pass
        elif op is Ops.RANGE:
            self.open_loop(u, self.v(src[0]))
        elif op is Ops.ENDRANGE:
            self.close_loop(self.loops[src[0]], 1, self.loop_hints.get(src[0], ()))
        elif op is Ops.IF:
            k = self.tmp()[2:]
            self.ifs[u] = k
            self.emit(f"br i1 {self.v(src[0])}, label %if{k}, label %endif{k}")
            self.label(f"if{k}")
        elif op is Ops.ENDIF:
            k = self.ifs[src[0]]
            self.emit(f"br label %endif{k}")
            self.label(f"endif{k}")
        elif op is Ops.DEFINE_ACC:
            nm = f"%acc{len(self.accs)}"
            self.allocas.append(f"  {nm} = alloca {lty(dt)}")
            self.emit(f"store {lty(dt)} {self.v(src[0])}, ptr {nm}")
            self.accs[u] = (nm, dt)
        elif op is Ops.ASSIGN:
            nm, adt = self.accs[src[0]]
            self.emit(f"store {lty(adt)} {self.v(src[1])}, ptr {nm}")
            self.accs[u] = (nm, adt)
        elif op is Ops.DEFINE_LOCAL:
            nm = f"%local{self.tmp()[2:]}"
            self.allocas.append(f"  {nm} = alloca {mty(dt)}, i64 {u.arg[1]}, align 64")
            self.r[u] = nm
        elif op is Ops.INDEX:
            self.index[u] = (src[0], src[1], src[2] if len(src) > 2 else None)
        elif op is Ops.LOAD:
            self.r[u] = self.load(u)
        elif op is Ops.STORE:
            self.store(u)
        elif op is Ops.BARRIER:
            pass  # one thread per chunk: nothing to wait for
        elif op in ALU:
            self.r[u] = self.alu(u)
        elif op is Ops.CAST:
            self.r[u] = self.cast(self.v(src[0]), src[0].dtype, dt)
        elif op is Ops.BITCAST:
            self.r[u] = self.ins(f"bitcast {lty(src[0].dtype)} {self.v(src[0])} to {lty(dt)}")
        elif op is Ops.VECTORIZE:
            if all(s.op is Ops.CONST for s in src):
                self.r[u] = "<" + ", ".join(f"{lty(s.dtype)} {const_literal(s.arg, s.dtype)}" for s in src) + ">"
            else:
                x = "poison"
                for i, s in enumerate(src):
                    x = self.ins(f"insertelement {lty(dt)} {x}, {lty(s.dtype)} {self.v(s)}, i32 {i}")
                self.r[u] = x
        elif op is Ops.GEP:
            self.r[u] = self.ins(f"extractelement {lty(src[0].dtype)} {self.v(src[0])}, i32 {u.arg}")
        elif op is Ops.SPECIAL:
            raise NotImplementedError("LLVMRenderer renders CPU kernels: no GPU indices (SPECIAL)")
        else:
            raise NotImplementedError(f"LLVMRenderer cannot render {u.short()}")

    # ---- the walk
    def run(self) -> str:
        lk = self.lk
        args = []
        pnames = {}
        for p in lk.params:
            nm = f"%{mangle(p.name)}"  # `%t1`, `%entry`, `%loop0` are ours: user names are `%dku_*`
            pnames[p.name] = nm
            attrs = "noalias" + ("" if p.writable else " readonly")
            args.append(f"ptr {attrs} align {p.dtype.itemsize} {nm}")
        vnames = [v.name for v in lk.vars] + (["core_start", "core_end"] if lk.core_split is not None else [])
        scratch = getattr(lk, "scratch_bytes", 0)  # a lone reduction's pieces (split_reduce.py)
        if scratch:
            vnames.append(split_reduce.SCRATCH_VAR)
        for i, vn in enumerate(vnames):
            ty = "i64" if i >= len(lk.vars) or lk.vars[i].scalar is None else lty(lk.vars[i].dtype)  # k.scalar: wire type
            args.append(f"{ty} %{mangle(vn) if i < len(lk.vars) else vn}")
        self.pnames = pnames
        self.vmap = {vn: a.split(" ", 1)[1] for vn, a in zip(vnames, args[len(lk.params):])}
        if scratch:  # the caller's scratch (an address; 0: none given, this call's own on the stack)
            self.allocas.append(f"  %scr.local = alloca [{scratch} x i8], align 64")
            given = self.ins(f"inttoptr i64 %{split_reduce.SCRATCH_VAR} to ptr")
            base = self.ins(f"select i1 {self.ins(f'icmp eq i64 %{split_reduce.SCRATCH_VAR}, 0')}, ptr %scr.local, "
                            f"ptr {given}")
            for pname, off in lk.regions:
                pnames[pname] = self.ins(f"getelementptr inbounds i8, ptr {base}, i64 {off}")
        for i, u in enumerate(self.uops):
            if u.op is Ops.RANGE and (plan := self.split_plan(i)) is not None:
                self.emit_split_loop(u, *plan)
            elif not (u.op is Ops.RANGE and self.stream_bytes and self.stream_range(i, u)):
                self.emit_uop(u)
            if i in self.fence_after:  # after the split range of a nested streaming loop (loop_passes)
                self.emit("fence seq_cst")
        self.emit("ret void")
        fname = self.name.replace('"', "")
        head = f'define void @"{fname}"({", ".join(args)}) #0 {{\nentry:'
        decls = "\n".join(sorted(self.decls))
        return (f"; devicekit kernel {fname}\n{head}\n" + "\n".join(self.allocas + self.lines) + "\n}\n\n" + decls
                # a packed tile's panel (ir/pack.py) is a local array of up to 192 KiB on the calling thread's stack:
                # probed page by page, a stack too small for it faults at its guard page instead of writing past it
                + '\n\nattributes #0 = { nounwind nofree norecurse nosync "frame-pointer"="none" '
                  '"probe-stack"="inline-asm" }\n'
                + "".join(m + "\n" for m in self.metadata))
