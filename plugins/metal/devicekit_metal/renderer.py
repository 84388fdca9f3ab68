"""MetalRenderer: the linear form -> Metal Shading Language (MSL), on the core's C-style base.

What it produces for a kernel `saxpy(x, y, out, n)`:

    #include <metal_stdlib>
    using namespace metal;
    kernel void dku_saxpy(device const float *dku_x [[buffer(0)]], ..., constant long& dku_n [[buffer(3)]],
                      uint3 gid [[threadgroup_position_in_grid]], uint3 lid [[thread_position_in_threadgroup]]) {
      long gidx0 = gid.x; ...
    }

Choices (see docs/decisions.md, "Metal plugin"):
- User names (kernel, buffers, vars, threadgroup arrays) are `dku_<name>` (devicekit.ir.names, applied by the base),
  so no MSL keyword, type, address space or metal:: function can be hit; `gid`/`lid`/`dk_v` are ours.
- Buffers are `device T*` with `[[buffer(i)]]` in slot order; int vars follow as `constant long&` (64-bit, set with
  setBytes by the runtime). Metal has 31 buffer slots, so params + vars <= 31 is checked at render time.
- SPECIAL gidxN/lidxN read `threadgroup_position_in_grid` / `thread_position_in_threadgroup`; the runtime dispatches
  `dispatchThreadgroups(global_size, local_size)`.
- No float64 (Metal has no double): it is left out of `supported_dtypes`, so lowering/verification reports it.
- float32 math is `precise::` (the compiler is also asked for non-fast math); half math functions and every bfloat
  ALU op are computed in float32 and rounded back, which is what the reference interpreter does.
- Vectors of 2-4 lanes are Metal's own (float4, half2, ...); 8 and 16 lanes (Metal has none) are scalarized lane by
  lane by the C-style base. Vector loads/stores go lane by lane: a buffer view may start at any element offset, and
  Metal's vector types need natural alignment (the compiler merges the lanes where it can prove alignment).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

from devicekit.ir.dtypes import DType, dtypes
from devicekit.ir.ops import ALU, COMPARE, Ops
from devicekit.ir.uop import KernelError, UOp
from devicekit.render.cstyle import CStyleRenderer, KernelParam, infix
from devicekit.render.prepare import hoist_locals

MAX_BUFFERS = 31  # Metal's buffer argument table (params + vars)
SHARED_MAX = 32768  # threadgroup memory every Apple GPU has (bytes)
MAX_THREADS_PER_GROUP = 1024
_LANES = "xyzw"
_F32_MATH = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT})
_SCALARS = ("bool", "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half", "bfloat", "float",
            "double", "size_t", "ptrdiff_t")
def _is_vec(dt: DType) -> bool:
    return dt.count > 1


_bin = infix  # `x - -2.0` is (x-(-2.0)): (x--2.0) reads as a decrement


def _shift(op: str) -> Callable[..., str]:
    # the reference shifts by the amount modulo the bit width (C leaves >= width undefined)
    return lambda a, b, dtype: f"({a}{op}({b}&{dtype.bits - 1}))"


def _neg(x: str, dtype: DType) -> str:
    return f"(!{x})" if dtype.scalar() == dtypes.bool else f"(-{x})"


def _max(a: str, b: str, dtype: DType) -> str:
    # (a < b) ? b : a exactly as the reference defines it (NaN in a propagates, NaN in b does not)
    return f"select({a},{b},{a}<{b})" if _is_vec(dtype) else f"(({a}<{b})?{b}:{a})"


def _where(c: str, a: str, b: str, dtype: DType) -> str:
    return f"select({b},{a},{c})" if _is_vec(dtype) else f"({c}?{a}:{b})"


_SIGNED_WIDE = {"int32": ("int", "uint"), "int64": ("long", "ulong")}
_WRAPPING = frozenset({Ops.NEG, Ops.ADD, Ops.SUB, Ops.MUL, Ops.SHL, Ops.MULACC})


def _wrapping(fn: Callable[..., str], op: Ops) -> Callable[..., str]:
    """Signed 32/64-bit add/sub/mul/neg/shl/mulacc in unsigned arithmetic, read back with as_type: signed overflow
    is undefined in MSL as in C++ (the compiler folds `x < x + 1` to true), the IR says it wraps."""
    def render(*xs: str, dtype: DType) -> str:
        names = _SIGNED_WIDE.get(dtype.scalar().name)
        if names is None or op not in _WRAPPING:
            return fn(*xs, dtype=dtype)
        lanes = str(dtype.count) if dtype.count > 1 else ""
        t, u = names[0] + lanes, names[1] + lanes
        return f"as_type<{t}>({fn(*[f'(({u})({x}))' for x in xs], dtype=dtype)})"
    return render


def _needs_f32(u: UOp) -> bool:
    if u.op not in ALU or u.op is Ops.WHERE:
        return False
    operand = u.src[0].dtype.scalar()
    if operand == dtypes.bfloat16 or (u.dtype.scalar() == dtypes.bfloat16 and u.op not in COMPARE):
        return True
    return u.op in _F32_MATH and operand == dtypes.float16


def route_through_float32(uops: list[UOp]) -> list[UOp]:
    """Rewrite ALU ops on bfloat16 (all of them) and float16 math functions to compute in float32.

    `bfloat` in MSL is a storage-and-convert type on most Apple GPUs, and half-precision exp2/log2/sin/sqrt are
    less accurate than the reference; float32 then one rounding matches the reference interpreter.
    """
    if not any(_needs_f32(u) for u in uops):
        return uops
    out: list[UOp] = []
    placed: set[int] = set()
    m: dict[int, UOp] = {}

    def put(u: UOp) -> UOp:
        if id(u) not in placed:
            placed.add(id(u))
            out.append(u)
        return u

    def f32(dt: DType) -> DType:
        return dtypes.float32.vec(dt.count) if dt.count > 1 else dtypes.float32

    for u in uops:
        src = tuple(m.get(id(s), s) for s in u.src)
        if _needs_f32(u):
            low = {dtypes.bfloat16, dtypes.float16}
            csrc = tuple(put(UOp(Ops.CAST, f32(s.dtype), (s,))) if s.dtype.scalar() in low else s for s in src)
            res_dt = f32(u.dtype) if u.dtype.scalar() in low else u.dtype
            new = put(UOp(u.op, res_dt, csrc, u.arg))
            if res_dt != u.dtype:
                new = put(UOp(Ops.CAST, u.dtype, (new,)))
        else:
            new = put(u if src == u.src else u.replace(src=src))
        m[id(u)] = new
    return out


class MetalRenderer(CStyleRenderer):
    device = "METAL"
    lang = "metal"
    supported_dtypes = frozenset(d for d in dtypes.all() if d != dtypes.float64)
    gpu_indexing = True
    has_local = True
    vectors = True
    global_max = (2**31 - 1, 2**31 - 1, 2**31 - 1)  # threadgroups per grid axis (uint3 gid)
    local_max = (MAX_THREADS_PER_GROUP, MAX_THREADS_PER_GROUP, MAX_THREADS_PER_GROUP)
    local_total_max = MAX_THREADS_PER_GROUP
    shared_max = SHARED_MAX
    max_buffers = MAX_BUFFERS
    # threadgroup arrays at kernel function scope (MSL allows them nowhere else), then bfloat/half through float32
    passes: ClassVar[tuple] = (hoist_locals, route_through_float32)

    # ---- signature
    kernel_prefix: ClassVar[str] = "kernel "
    kernel_return: ClassVar[str] = "void"
    buffer_prefix: ClassVar[str] = "device "
    buffer_const: ClassVar[str] = "const "
    buffer_restrict: ClassVar[str] = ""
    arg_int_prefix: ClassVar[str] = "constant long&"
    extra_params: ClassVar[tuple[str, ...]] = ("uint3 gid [[threadgroup_position_in_grid]]",
                                               "uint3 lid [[thread_position_in_threadgroup]]")
    # ---- memory and sync
    smem_prefix: ClassVar[str] = "threadgroup "
    smem_align: ClassVar[str] = "__attribute__((aligned(16))) "
    barrier: ClassVar[str] = "threadgroup_barrier(mem_flags::mem_threadgroup);"
    # ---- literals (MSL has no `long long`: int64 is `long`)
    float_suffix: ClassVar[dict[str, str]] = {"float32": "f", "float16": "f", "bfloat16": "f"}
    int_suffix: ClassVar[dict[str, str]] = {"int64": "l", "uint64": "ul", "uint32": "u", "int32": ""}
    type_map: ClassVar[dict[str, str]] = {
        "bool": "bool", "int8": "char", "int16": "short", "int32": "int", "int64": "long",
        "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "ulong",
        "float16": "half", "bfloat16": "bfloat", "float32": "float", "float64": "double"}
    code_for_op: ClassVar[dict[Ops, Callable[..., str]]] = {
        **CStyleRenderer.code_for_op,
        Ops.NEG: _neg, Ops.ADD: _bin("+"), Ops.SUB: _bin("-"), Ops.MUL: _bin("*"), Ops.FDIV: _bin("/"),
        Ops.IDIV: _bin("/"), Ops.MOD: _bin("%"), Ops.AND: _bin("&"), Ops.OR: _bin("|"), Ops.XOR: _bin("^"),
        Ops.SHL: _shift("<<"), Ops.SHR: _shift(">>"), Ops.MAX: _max, Ops.WHERE: _where,
        Ops.MULACC: lambda a, b, c, dtype: f"(({a}*{b})+{c})",
    }
    code_for_op = {op: _wrapping(fn, op) for op, fn in code_for_op.items()}
    math_fns: ClassVar[dict[Ops, str]] = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt",
                                          Ops.TRUNC: "trunc"}
    repeats_operands: ClassVar[frozenset[Ops]] = frozenset({Ops.MAX})

    def render(self, kernel, name: str | None = None):
        try:
            return super().render(kernel, name)
        except KernelError as e:
            if "float64" in str(e) and "Metal has no" not in str(e):
                raise KernelError("METAL cannot run float64: Metal has no 64-bit float type (no `double`); use "
                                  f"float32 for this kernel on METAL. ({e.args[0] if e.args else e})") from e
            raise

    # ================= types, literals, conversions
    def promotes(self, dt: DType) -> bool:
        # char/short results are int in MSL as in C: the base casts them back. half is computed in half on Apple
        # GPUs (no excess precision) and bfloat arithmetic arrives as float32 from lowering: nothing to round back.
        return dt.name in ("int8", "uint8", "int16", "uint16")

    def native_vector(self, dt: DType) -> bool:
        """Metal's own vectors have 2, 3 or 4 lanes; wider ones are scalarized lane by lane by the base."""
        return 2 <= dt.count <= 4

    def vector_type(self, dt: DType) -> str:
        return f"{self.type_map[dt.name]}{dt.count}"

    def render_cast(self, x: str, src: DType, dst: DType) -> str:
        t = self.render_dtype(dst)
        bf = dtypes.bfloat16
        # bfloat converts only to/from float: route other types through float32
        if (src.scalar() == bf) != (dst.scalar() == bf) and dtypes.float32 not in (src.scalar(), dst.scalar()):
            mid = dtypes.float32.vec(src.count) if src.count > 1 else dtypes.float32
            x = self.render_cast(x, src, mid)
        if _is_vec(dst):
            return f"{t}({x})"
        return f"(({t})({x}))"

    def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
        return f"as_type<{self.render_dtype(dst)}>({x})"

    def render_vectorize(self, lanes: list[str], dt: DType) -> str:
        return f"{self.render_dtype(dt)}({','.join(lanes)})"

    def render_gep(self, x: str, lane: int, dt: DType) -> str:
        return f"{x}.{_LANES[lane]}"

    def render_math(self, fn: str, x: str, dt: DType) -> str:
        # float32 only reaches here for exp2/log2/sin/sqrt (half and bfloat are routed through float32 first)
        return f"{fn}({x})" if fn == "trunc" else f"precise::{fn}({x})"

    # ================= memory
    def render_load(self, buf: str, idx: str, dt: DType) -> str:
        if dt.count == 1:
            return f"{buf}[{idx}]"
        return f"{self.render_dtype(dt)}(" + ",".join(f"{buf}[({idx})+{i}]" for i in range(dt.count)) + ")"

    def render_store(self, buf: str, idx: str, value: str, dt: DType) -> str:
        if dt.count == 1:
            return f"{buf}[{idx}] = {value}"
        lanes = " ".join(f"{buf}[({idx})+{i}] = {self.render_gep('dk_v', i, dt)};" for i in range(dt.count))
        return f"{{ {self.render_dtype(dt)} dk_v = {value}; {lanes} }}"

    def render_special(self, name: str, axis: int, extent: str) -> str:
        return f"{'gid' if name.startswith('g') else 'lid'}.{_LANES[axis]}"

    def parse_source(self, src: str, entry: str, **options):
        """A ProgramSpec for a hand-written Metal kernel (`options`: sizes=, global_size=, local_size=, shared_bytes=):
        its signature read with libclang (devicekit_metal.source) through the core's read_source."""
        from devicekit.compile.source_spec import read_source
        return read_source("devicekit_metal.source:read_msl", src, entry, device=self.device, lang=self.lang,
                           meta=(("shared_bytes", 0),), **options)

    # ================= file
    def render_scalar(self, name: str, dt: DType) -> str:
        """A k.scalar is bound like an int var: a constant reference to its bytes (setBytes)."""
        return f"constant {self.render_dtype(dt)}& {name}"

    def render_preamble(self, used: set[DType]) -> str:
        return "#include <metal_stdlib>\nusing namespace metal;"

    def render_kernel(self, name: str, params: list[KernelParam], body: list[str], used: set[DType]) -> str:
        params = [dataclasses.replace(p, decl=f"{p.decl} [[buffer({i})]]") for i, p in enumerate(params)]
        return super().render_kernel(name, params, body, used)

    def buffer_slots(self, lk) -> int:
        """Params, int vars and scalars: each takes a slot of Metal's buffer table (`[[buffer(i)]]`)."""
        return len(lk.params) + len(lk.vars)

    def meta(self, lk) -> tuple:
        uses_bf16 = any(u.dtype.scalar() == dtypes.bfloat16 for u in lk.uops) or \
            any(p.dtype == dtypes.bfloat16 for p in lk.params)
        version = "3.1" if uses_bf16 else "2.4"  # the compilers read it from the source (compiler.needs_msl_version)
        return (("max_threads_per_threadgroup", MAX_THREADS_PER_GROUP),
                ("buffer_slots", self.buffer_slots(lk)), ("msl_version", version))
