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

import struct

import numpy as np
from devicekit.ir.dtypes import DType, dtypes
from devicekit.ir.names import mangle
from devicekit.ir.ops import ALU, Ops
from devicekit.ir.uop import UOp
from devicekit.render.renderer import Renderer

from . import hostinfo, settings, stream
from .memo import MemoRender

_SCALAR = {"bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "i8", "uint16": "i16",
           "uint32": "i32", "uint64": "i64", "float16": "half", "bfloat16": "bfloat", "float32": "float",
           "float64": "double"}
_SUFFIX = {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64"}


def lty(dt: DType) -> str:
    """LLVM type of a value (bool is i1)."""
    s = _SCALAR[dt.name]
    return s if dt.count == 1 else f"<{dt.count} x {s}>"


def mty(dt: DType) -> str:
    """LLVM type of a value in memory (bool is a byte)."""
    s = "i8" if dt.name == "bool" else _SCALAR[dt.name]
    return s if dt.count == 1 else f"<{dt.count} x {s}>"


def intrinsic_suffix(dt: DType) -> str:
    s = _SCALAR[dt.name]
    s = _SUFFIX.get(s, s)
    return s if dt.count == 1 else f"v{dt.count}{s}"


def const_literal(value, dt: DType) -> str:
    """An LLVM literal of scalar dtype dt."""
    if dt.is_bool:
        return "true" if value else "false"
    if dt.is_int:
        v = int(value) & ((1 << dt.bits) - 1)
        return str(v - (1 << dt.bits) if v >> (dt.bits - 1) else v)
    with np.errstate(over="ignore"):  # a literal past the type's range is +-inf, the defined rounding (no warning)
        if dt.name == "float16":
            return f"0xH{int(np.float16(value).view(np.uint16)):04X}"
        if dt.name == "bfloat16":
            from devicekit.ir.dtypes import f32_to_bf16
            return f"0xR{int(f32_to_bf16(np.array([value], np.float32))[0]):04X}"
        if dt.name == "float32":
            value = float(np.float32(value))
    return f"0x{struct.unpack('<Q', struct.pack('<d', float(value)))[0]:016X}"


class LLVMRenderer(MemoRender, Renderer):
    """Linear form -> LLVM IR, one function named after the kernel, no target triple (the compiler sets it)."""

    device = "CPU"
    lang = "llvm-ir"
    core_split = True
    vectors = True
    supported_dtypes = frozenset(d for d in dtypes.all() if d.name != "bfloat16")
    # exp2/log2/sin: the core's polynomial decompositions (1-2 ulp) vectorize; libm calls do not (softmax 3x)
    native_ops = ALU - {Ops.EXP2, Ops.LOG2, Ops.SIN}
    vector_register_bytes = hostinfo.vector_register_bytes()  # the host's, as the code runs here

    # output bytes per chunk from which the outer loop streams its stores (stream.py); None: the LLC shared by the
    # default thread count, 0: never
    stream_threshold: int | None = None

    def render_linear(self, lk, name: str) -> str:
        return _Emitter(lk, name, self.streaming()).run()

    def streaming(self) -> int:
        """The streaming-store threshold in bytes this renderer writes into its sources (0: off)."""
        return stream.default_threshold() if self.stream_threshold is None else self.stream_threshold

    def entry_symbol(self, name: str) -> str:
        """`@dku_<kernel>`: user names share one namespace with the C-style renderers' (ir.names), so a kernel
        named `sqrtf` or `memcpy` never defines a libm/libc symbol in the process's JIT."""
        return mangle(name)

    def memo_salt(self) -> str:
        return f"{settings.get('DEVICEKIT_CPU_SPLIT')} stream={self.streaming()}"

    def meta(self, lk) -> tuple:
        from .cost import split_cost
        return (("split_cost", split_cost(lk)),)


class _Emitter:
    def __init__(self, lk, name: str, stream_bytes: int = 0):
        self.lk, self.name = lk, name
        self.stream_bytes = stream_bytes
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

    def emit_stream_loop(self, u, q: int, st, lanes: int) -> None:
        """The split range of a kernel that writes one large output (stream.py): when the chunk's output is at least
        `stream_bytes`, a scalar peel to the output's next 64-byte boundary, then `lanes`-wide iterations whose one
        store is a cache-line `!nontemporal` store, then a fence; the ordinary loop (the walk continues with the
        body and the ENDRANGE) runs the rest, or the whole chunk when it is small or the output is misaligned."""
        i = self.uops.index(u)
        body = self.uops[i + 1:q]
        idx, val = st.src
        dt = val.dtype
        esz = dt.itemsize
        start, end = self.v(u.src[0]), self.v(u.src[1])
        k = self.tmp()[2:]
        big = self.ins(f"icmp sge i64 {self.ins(f'sub i64 {end}, {start}')}, {max(2 * lanes, self.stream_bytes // esz)}")
        self.emit(f"br i1 {big}, label %nt{k}, label %ntsmall{k}")
        self.label(f"nt{k}")
        first = self.ins(f"getelementptr inbounds {mty(dt)}, ptr {self.v(idx.src[0])}, i64 {start}")
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
            elif b.op is Ops.LOAD and b.src[0].src[1] is u:
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
            self.close_loop(self.loops[src[0]])
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
        for i, vn in enumerate(vnames):
            ty = "i64" if i >= len(lk.vars) or lk.vars[i].scalar is None else lty(lk.vars[i].dtype)  # k.scalar: wire type
            args.append(f"{ty} %{mangle(vn) if i < len(lk.vars) else vn}")
        self.pnames = pnames
        self.vmap = {vn: a.split(" ", 1)[1] for vn, a in zip(vnames, args[len(lk.params):])}
        for i, u in enumerate(self.uops):
            if u.op is Ops.RANGE and (plan := self.split_plan(i)) is not None:
                self.emit_split_loop(u, *plan)
            elif u.op is Ops.RANGE and self.stream_bytes and (plan := stream.plan(self.uops, i)) is not None:
                self.emit_stream_loop(u, *plan)
            else:
                self.emit_uop(u)
        self.emit("ret void")
        fname = self.name.replace('"', "")
        head = f'define void @"{fname}"({", ".join(args)}) #0 {{\nentry:'
        decls = "\n".join(sorted(self.decls))
        return (f"; devicekit kernel {fname}\n{head}\n" + "\n".join(self.allocas + self.lines) + "\n}\n\n" + decls
                + '\n\nattributes #0 = { nounwind nofree norecurse nosync "frame-pointer"="none" }\n'
                + "".join(m + "\n" for m in self.metadata))
