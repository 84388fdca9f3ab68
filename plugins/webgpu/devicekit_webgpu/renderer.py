"""WGSLRenderer: the linear form -> a WGSL compute shader, on the core's C-style walk.

WGSL is not C; what changes and where:
  * the module: every buffer is a storage binding, `@group(0) @binding(i) var<storage, read_write> dku_a:
    array<f32>;` (read_write for all, so a buffer bound twice, read and written, is one usage), the vars, scalars
    and each buffer's view offset (in elements) are the fields of one uniform struct at binding n (`dk_args`), local
    arrays are module-scope `var<workgroup>` arrays, and the entry is `@compute @workgroup_size(x, y, z) fn
    dku_<name>(@builtin(workgroup_id) ..., @builtin(local_invocation_id) ...)`: no pointer params (`render_kernel`).
    Its first lines recompute the group id of a grid the runtime folded past 65,535 groups an axis (FOLD_PRELUDE).
  * statements: `let`/`var` declarations, `for (var r: i32 = ...)`, braces on every if and `select` for the gated
    load's conditional are respelled from the walk's C shapes by `wgsl_text` (the base has no hooks for them).
  * 64-bit integers: WGSL has none. Index and loop arithmetic (int64 in the IR) is rendered as i32 where
    `devicekit.ir.narrow` proves every value fits (checked again at launch where the fit depends on the vars'
    values), and refused by name where it cannot. INT64_MIN, the bounds-check record's sentinel, is i32's minimum
    (narrow's order isomorphism). An int64 buffer that the kernel only writes (the bounds-check record) is an
    array<i32> of (low, high) word pairs; loading int64 data is refused (its values are not bounded).
  * dtypes: f32, i32, u32, bool, f16 with the adapter's `shader-f16`. bool memory is bytes: array<u32> words read
    by shifts, written with atomicAnd/atomicOr on array<atomic<u32>> (neighbouring bytes belong to other
    invocations). 8/16-bit ints, uint64, float64 and bfloat16 are refused ("does not support").
  * semantics the IR fixes and WGSL does not: `x / 0 = x % 0 = 0` by select (WGSL gives x for `/`), float -> int
    casts give 0 out of range (WGSL saturates), shift amounts masked, u32 negation as `0u - x`. Integer arithmetic
    wraps in WGSL as in the IR. inf/nan are bitcasts (WGSL has no literals for them); exp2/log2/sin are left to the
    core's decompositions (WGSL's error bounds for them are wider than docs/ir.md's tolerances), sqrt and trunc are
    native.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from dataclasses import dataclass
from typing import ClassVar

from devicekit.ir.dtypes import DType, dtypes
from devicekit.ir.narrow import SENTINEL, has_sentinel, narrow_plan
from devicekit.ir.ops import Ops
from devicekit.ir.uop import KernelError
from devicekit.render.cstyle import CStyleRenderer, KernelParam, infix
from devicekit.render.renderer import Capabilities

from . import nan_exact
from .loops import nest
from .wgsl_text import statement

TYPE_MAP = {"bool": "bool", "int32": "i32", "uint32": "u32", "float32": "f32", "float16": "f16", "int64": "i32"}
UNIFORM_TYPES = {"int32": "i32", "uint32": "u32", "float32": "f32", "int64": "i32", "uint8": "u32"}  # uint8: bool
_ZERO = {"i32": "0i", "u32": "0u", "f32": "0.0f", "f16": "0.0h"}
# A grid with more workgroups on an axis than the adapter dispatches (max-compute-workgroups-per-dimension: 65535 on
# most) is folded by the runtime (runtime.fold) into nx x ny x nz groups, as tinygrad, wonnx and burn do: the flat
# group id is recomputed here and unflattened into the grid's own (g0, g1, g2), and the groups past its total return
# before any work. The test is on uniforms and the workgroup id, so the code after it stays in uniform control flow
# (workgroupBarrier). Unfolded launches (dk_fold 0) keep the dispatched id.
GRID_FIELDS = ("dk_fold", "dk_nx", "dk_ny", "dk_g0", "dk_g1", "dk_total")
FOLD_PRELUDE = [
    "  var dk_gid: vec3<u32> = dk_wg;",
    "  if (dk_args.dk_fold != 0u) {",
    "    let dk_flat: u32 = dk_wg.x + dk_args.dk_nx * (dk_wg.y + dk_args.dk_ny * dk_wg.z);",
    "    if (dk_flat >= dk_args.dk_total) { return; }",
    "    let dk_g01: u32 = dk_args.dk_g0 * dk_args.dk_g1;",
    "    dk_gid = vec3<u32>(dk_flat % dk_args.dk_g0, (dk_flat % dk_g01) / dk_args.dk_g0, dk_flat / dk_g01);",
    "  }",
]
_F32_BITS = {"inf": "0x7f800000u", "-inf": "0xff800000u", "nan": "0x7fc00000u"}


def _t(dt: DType) -> str:
    if dt.scalar() == dtypes.uint8:  # only a bool k.scalar's wire value, cast to bool at once (capabilities)
        return "u32"
    return TYPE_MAP[dt.scalar().name]


_b = infix  # `x - -2.0` is (x-(-2.0)): (x--2.0) reads as a decrement


def _neg(x: str, dtype: DType) -> str:
    t = _t(dtype)
    return f"(!{x})" if t == "bool" else f"(0u-{x})" if t == "u32" else f"(-({x}))"


def _div(op: str):
    def render(a: str, b: str, dtype: DType) -> str:
        t = _t(dtype)
        if t in ("f32", "f16"):
            return f"({a}{op}{b})"
        return f"select(({a}{op}{b}), {_ZERO[t]}, ({b}=={_ZERO[t]}))"  # the IR: x / 0 = x % 0 = 0
    return render


def _shift(op: str):
    def render(a: str, b: str, dtype: DType) -> str:
        t = _t(dtype)
        if dtype.scalar() == dtypes.int64:  # narrowed: the amount is taken modulo 64, then at most 31 (the sign)
            amt = f"u32(min(({b})&63i, 31i))" if op == ">>" else f"u32(({b})&31i)"
        else:
            amt = f"u32(({b})&{31}{t[0]})"
        return f"({a}{op}{amt})"
    return render


def _xor(a: str, b: str, dtype: DType) -> str:
    return f"({a}!={b})" if _t(dtype) == "bool" else f"({a}^{b})"


_CODE = {
    Ops.NEG: _neg, Ops.RECIP: lambda x, dtype: f"({'1.0h' if _t(dtype) == 'f16' else '1.0f'}/{x})",
    Ops.ADD: _b("+"), Ops.SUB: _b("-"), Ops.MUL: _b("*"), Ops.FDIV: _b("/"), Ops.IDIV: _div("/"), Ops.MOD: _div("%"),
    Ops.CMPLT: _b("<"), Ops.CMPNE: _b("!="), Ops.CMPEQ: _b("=="), Ops.AND: _b("&"), Ops.OR: _b("|"), Ops.XOR: _xor,
    Ops.SHL: _shift("<<"), Ops.SHR: _shift(">>"),
    Ops.MAX: lambda a, b, dtype: f"select({a}, {b}, ({a}<{b}))",  # NaN in a propagates, NaN in b does not
    Ops.WHERE: lambda c, a, b, dtype: f"select({b}, {a}, {c})",
    Ops.MULACC: lambda a, b, c, dtype: f"(({a}*{b})+{c})",
}


@dataclass
class _Kernel:
    """What render_linear learns for render_kernel (per thread: one renderer serves every thread)."""

    local_size: tuple[int, ...]
    params: dict[str, tuple[int, DType, bool]]  # WGSL name -> (binding, storage dtype, written)
    wide: bool = False  # loads int64 data or widens 32-bit data (dk_ld64, dk_fit_*): the dk_wide flag binding exists
    sentinel: bool = False  # uses INT64_MIN (ir.narrow.has_sentinel)


class WGSLRenderer(CStyleRenderer):
    """WGSL for one adapter's limits and features (`from_limits`); the defaults are WebGPU's minimums."""

    device = "WEBGPU"
    lang = "wgsl"
    gpu_indexing = True
    has_local = True
    core_split = False
    vectors = True  # vector values reach the walk, which scalarizes them (native_vector: none)
    global_max = (65535, 65535, 65535)  # maxComputeWorkgroupsPerDimension
    local_max = (256, 256, 64)
    local_total_max = 256
    shared_max = 16384
    max_buffers = 8  # maxStorageBuffersPerShaderStage

    infinity: ClassVar[str] = f"bitcast<f32>({_F32_BITS['inf']})"
    nan: ClassVar[str] = f"bitcast<f32>({_F32_BITS['nan']})"
    type_map: ClassVar[dict[str, str]] = TYPE_MAP
    code_for_op = _CODE
    math_fns: ClassVar[dict[Ops, str]] = {Ops.SQRT: "sqrt", Ops.TRUNC: "trunc"}
    repeats_operands: ClassVar[frozenset[Ops]] = frozenset({Ops.MAX, Ops.IDIV, Ops.MOD, Ops.CAST, Ops.SHR})
    barrier: ClassVar[str] = "workgroupBarrier();"

    def __init__(self, fp16: bool = False, local_max: tuple[int, ...] | None = None,
                 local_total_max: int | None = None, shared_max: int | None = None, max_buffers: int | None = None,
                 global_max: int | None = None):
        self.fp16 = fp16
        self.supported_dtypes = frozenset({dtypes.bool, dtypes.int32, dtypes.uint32, dtypes.float32}
                                          | ({dtypes.float16} if fp16 else set()))
        self.set_limits(local_max, local_total_max, shared_max, max_buffers,
                        None if global_max is None else (global_max,) * 3)
        self._tls = threading.local()

    @property
    def capabilities(self) -> Capabilities:
        """The lowering's view: uint8 too, as the wire type of a bool k.scalar (docs/ir.md: bool travels as uint8);
        a uint8 buffer or value is still refused by name here. `supported_dtypes` (what random kernels use) has no
        uint8."""
        caps = super().capabilities
        return dataclasses.replace(caps, dtypes=caps.dtypes | {dtypes.uint8})

    @classmethod
    def from_limits(cls, limits: dict, features) -> WGSLRenderer:
        """The renderer for an adapter's limits (wgpu's dict) and feature set."""
        return cls(fp16="shader-f16" in features,
                   local_max=tuple(int(limits[f"max-compute-workgroup-size-{a}"]) for a in "xyz"),
                   local_total_max=int(limits["max-compute-invocations-per-workgroup"]),
                   shared_max=int(limits["max-compute-workgroup-storage-size"]),
                   max_buffers=int(limits["max-storage-buffers-per-shader-stage"]),
                   global_max=int(limits["max-compute-workgroups-per-dimension"]))

    def __reduce__(self):
        return (type(self), (self.fp16, self.local_max, self.local_total_max, self.shared_max, self.max_buffers,
                             self.global_max[0]))

    def parse_source(self, src: str, entry: str, sizes: dict | None = None, global_size=None, local_size=None,
                     shared_bytes=None):
        """A ProgramSpec for a hand-written WGSL compute shader: its signature from the @group/@binding
        declarations (.source)."""
        from .source import parse_wgsl_source
        return parse_wgsl_source(src, entry, sizes=sizes, global_size=global_size, local_size=local_size,
                                 device=self.device)

    # ---- types and literals
    def render_dtype(self, dt: DType) -> str:
        if dt.count != 1 or dt.name not in TYPE_MAP:
            raise KernelError(f"WEBGPU does not support {dt.name} values (WGSL has f32, i32, u32, bool and f16)")
        return TYPE_MAP[dt.name]

    def render_const(self, value, dt: DType) -> str:
        t = self.render_dtype(dt)
        if dt.is_bool:
            return "true" if value else "false"
        if dt.is_float:
            if math.isnan(value) or math.isinf(value):
                key = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
                x = f"bitcast<f32>({_F32_BITS[key]})"
                return x if t == "f32" else f"f16({x})"
            if t == "f16":  # the value as float16 holds it: 1048576.0 is inf there, and naga refuses the literal
                import numpy as np
                with np.errstate(over="ignore"):  # past 65504 the value is inf in f16: that is the defined result
                    h = float(np.float16(value))
                if math.isinf(h):
                    return self.render_const(h, dtypes.float32).join(("f16(", ")"))
                value = h
            s = repr(float(value))
            if "e" not in s and "." not in s:
                s += ".0"
            s += "h" if t == "f16" else "f"
            return f"({s})" if s.startswith("-") else s
        v = int(value)
        if t == "u32":
            return f"{v}u"
        if v == -(2**31) or (dt == dtypes.int64 and v == SENTINEL):  # INT64_MIN's image (ir.narrow)
            return "(-2147483647i-1i)"
        return f"({v}i)" if v < 0 else f"{v}i"

    def render_cast(self, x: str, src: DType, dst: DType) -> str:
        if dst.scalar() == dtypes.uint8:
            raise KernelError("WEBGPU does not support uint8 values (WGSL has f32, i32, u32, bool and f16)")
        if dst.scalar() == dtypes.int64 and (k := getattr(self._tls, "k", None)) is not None:
            if src.scalar() == dtypes.uint32:  # past 2**31 - 1 does not fit: flagged (ir.narrow.checked_cast)
                return f"dk_fit_u({x})"
            if src.scalar() == dtypes.int32 and k.sentinel:  # int32's minimum is the sentinel's image: flagged
                return f"dk_fit_i({x})"
        s, d = _t(src), _t(dst)
        if s == d:
            return x
        if d == "bool":
            return f"({x}!={_ZERO[s]})"
        if s in ("f32", "f16") and d in ("i32", "u32"):  # the IR: out of range (and NaN) gives 0; WGSL saturates
            f = f"f32({x})" if s == "f16" else x
            lo, hi = ("-2147483648.0f", "2147483648.0f") if d == "i32" else ("-1.0f", "4294967296.0f")
            cond = f"(({f}>={lo})&&({f}<{hi}))" if d == "i32" else f"(({f}>{lo})&&({f}<{hi}))"
            return f"select({_ZERO[d]}, {d}({x}), {cond})"
        return f"{d}({x})"

    def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
        return f"bitcast<{_t(dst)}>({x})"

    def render_math(self, fn: str, x: str, dt: DType) -> str:
        return f"{fn}({x})"

    def render_special(self, name: str, axis: int, extent: str) -> str:
        if not 0 <= axis < 3:
            raise KernelError(f"WGSL has 3 workgroup dimensions; {name} asks for axis {axis}")
        return f"i32({'dk_gid' if name.startswith('g') else 'dk_lid'}.{'xyz'[axis]})"

    # ---- memory
    def _param(self, buf: str) -> tuple[int, DType, bool] | None:
        return self._tls.k.params.get(buf)

    def render_load(self, buf: str, idx: str, dt: DType) -> str:
        p = self._param(buf)
        if p is None:  # a workgroup array
            return f"{buf}[{idx}]"
        if p[1] == dtypes.int64:  # (low, high) words; dk_ld64 flags a value outside int32 (ir.narrow, loads=True)
            at = f"(dk_args.dko_{buf}+2i*({idx}))"
            return f"dk_ld64({buf}[{at}], {buf}[{at}+1i])"
        if dt.is_bool:
            at = f"(dk_args.dko_{buf}+{idx})"
            word = f"atomicLoad(&{buf}[{at}/4i])" if p[2] else f"{buf}[{at}/4i]"
            return f"((({word}>>(8u*u32({at}%4i)))&255u)!=0u)"
        return f"{buf}[dk_args.dko_{buf}+{idx}]"

    def render_store(self, buf: str, idx: str, value: str, dt: DType) -> str:
        p = self._param(buf)
        if p is None:
            return f"{buf}[{idx}] = {value}"
        at = f"(dk_args.dko_{buf}+{idx})"
        if dt.is_bool:
            sh = f"(8u*u32({at}%4i))"
            return (f"atomicAnd(&{buf}[{at}/4i], ~(255u<<{sh})); "
                    f"atomicOr(&{buf}[{at}/4i], (select(0u, 1u, {value})<<{sh}))")
        if p[1] == dtypes.int64:  # (low, high) word pairs: the value is proven to fit in i32
            at = f"(dk_args.dko_{buf}+2i*({idx}))"
            high = f"({value}>>31u)"
            if self._tls.k.sentinel:  # int32's minimum is INT64_MIN's image (ir.narrow): store INT64_MIN back
                high = f"select({high}, (-2147483647i-1i), ({value}==(-2147483647i-1i)))"
            return f"{buf}[{at}] = {value}; {buf}[{at}+1i] = {high}"
        return f"{buf}[{at}] = {value}"

    def render_scalar(self, name: str, dt: DType) -> str:
        return f"{name}: {UNIFORM_TYPES.get(dt.name, dt.name)}"  # a field of DkArgs (render_kernel)

    def render_local(self, name: str, dt: DType, size: int) -> str:
        return f"var<workgroup> {name}: array<{self.render_dtype(dt)}, {size}>;"

    # ---- the module
    def render_linear(self, lk, name: str) -> str:
        narrow_plan(lk, "WEBGPU", loads=True)  # refuses what no launch can narrow; meta() keeps the guards
        params: dict[str, tuple[int, DType, bool]] = {}
        stored = {u.arg[0]: u.dtype for u in lk.uops if u.op is Ops.PARAM}
        written = {u.src[0].src[0].arg[0] for u in lk.uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.PARAM}
        for i, p in enumerate(lk.params):
            dt = stored.get(i, p.dtype)
            if dt.name not in TYPE_MAP or (dt == dtypes.float16 and not self.fp16):
                raise KernelError(f"WEBGPU does not support {dt.name} buffers (param {p.name!r})")
            params[self.user_name(p.name)] = (i, dt, i in written)
        wide = bool(_checked(lk))  # the buffer limit, flag included: Renderer.render's check (buffer_slots)
        for v in lk.vars:
            if v.scalar is not None and v.dtype.name not in UNIFORM_TYPES:
                raise KernelError(f"WEBGPU does not support {v.scalar.name} scalar {v.name!r} (passed as "
                                  f"{v.dtype.name}; WGSL uniforms are f32, i32, u32)")
            if v.scalar is not None and v.dtype == dtypes.int64:
                raise KernelError(f"WEBGPU does not support int64 scalar {v.name!r}: WGSL has no 64-bit integers")
        dims = tuple(lk.local_size or ())  # its size and the workgroup memory: checked by the core (render.prepare)
        if any(not isinstance(d, int) for d in dims):
            raise KernelError(f"WEBGPU does not support a workgroup size that depends on vars ({dims}): WGSL's "
                              "@workgroup_size is fixed when the shader is made")
        self._tls.k = _Kernel(dims, params, wide, has_sentinel(list(lk.uops)))
        try:
            return super().render_linear(nan_exact.rewrite(lk), name)
        finally:
            del self._tls.k

    def buffer_slots(self, lk) -> int:
        """Storage buffers: the params, and the 64-bit index check's flag where the kernel has one (`_checked`)."""
        return len(lk.params) + bool(_checked(lk))

    def render_kernel(self, name: str, params: list[KernelParam], body: list[str], used: set[DType]) -> str:
        k: _Kernel = self._tls.k
        out = ["enable f16;"] if any(d.scalar() == dtypes.float16 for d in used) else []
        fields = [f"  dko_{p.name}: i32," for p in params if p.kind == "buffer"]
        fields += [f"  {p.name}: {UNIFORM_TYPES[p.dtype.name]}," for p in params if p.kind == "var"]
        fields += [f"  {f}: u32," for f in ("dk_zero", *GRID_FIELDS)]  # dk_zero: always 0 (nan_exact's opaque reads)
        out += ["struct DkArgs {", *fields, "}"]
        nbuf = 0
        for p in params:
            if p.kind != "buffer":
                continue
            _, dt, wr = k.params[p.name]
            elem = ("atomic<u32>" if wr else "u32") if dt.is_bool else TYPE_MAP[dt.name]
            out.append(f"@group(0) @binding({p.index}) var<storage, read_write> {p.name}: array<{elem}>;")
            nbuf += 1
        out.append(f"@group(0) @binding({nbuf}) var<uniform> dk_args: DkArgs;")
        if k.wide:
            out += [f"@group(0) @binding({nbuf + 1}) var<storage, read_write> dk_wide: array<atomic<u32>>;",
                    "fn dk_ld64(lo: i32, hi: i32) -> i32 {",
                    "  if ((hi != (lo >> 31u)) || (lo == (-2147483647i-1i))) {",
                    "    atomicStore(&dk_wide[0], 1u); return select(2147483647i, -2147483647i, hi < 0i);",
                    "  }",
                    "  return lo;", "}",
                    "fn dk_fit_i(x: i32) -> i32 {",  # int32 data widened to an index (ir.narrow.checked_cast)
                    "  if (x == (-2147483647i-1i)) { atomicStore(&dk_wide[0], 1u); return -2147483647i; }",
                    "  return x;", "}",
                    "fn dk_fit_u(x: u32) -> i32 {",  # uint32 data widened to an index
                    "  if (x > 2147483647u) { atomicStore(&dk_wide[0], 1u); return 2147483647i; }",
                    "  return i32(x);", "}"]
        lines = [statement(x) for x in body]
        out += [x.strip() for x in lines if x.lstrip().startswith("var<workgroup>")]
        lines = [x for x in lines if not x.lstrip().startswith("var<workgroup>")]
        head = [f"  let {p.name}: {UNIFORM_TYPES[p.dtype.name]} = dk_args.{p.name};" for p in params if p.kind == "var"]
        head.append("  let dk_zero: u32 = dk_args.dk_zero;")
        head += FOLD_PRELUDE
        size = ", ".join(str(d) for d in (k.local_size or (1,)))
        out.append(f"@compute @workgroup_size({size})")
        out.append(f"fn {name}(@builtin(workgroup_id) dk_wg: vec3<u32>, "
                   "@builtin(local_invocation_id) dk_lid: vec3<u32>) {")
        return "\n".join(out + head + lines) + "\n}\n"

    def meta(self, lk) -> tuple:
        stored = {u.arg[0]: u.dtype for u in lk.uops if u.op is Ops.PARAM}
        wire = tuple(UNIFORM_TYPES["int64" if v.scalar is None else v.dtype.name] for v in lk.vars)
        units = tuple(_unit(stored.get(i, p.dtype)) for i, p in enumerate(lk.params))
        return (("wgsl_args", wire), ("wgsl_units", units),
                ("narrow_guards", narrow_plan(lk, "WEBGPU", loads=True)), ("wgsl_wide", _checked(lk)),
                ("narrow_fit_lo", -(2**31) + has_sentinel(list(lk.uops))), ("loop_nest", nest(lk.uops)))


def _checked(lk) -> tuple[str, ...]:
    """What the kernel checks at run time against the dk_wide flag, for the launch's error: the int64 params it
    loads (dk_ld64), by name, and the 32-bit data it widens to 64 bits (dk_fit_u; dk_fit_i where the kernel has
    the sentinel), as 'idx (uint32)' where it comes straight from a param's load."""
    sentinel = has_sentinel(list(lk.uops))
    out = []
    for u in lk.uops:
        if u.op is Ops.LOAD and u.dtype.scalar() == dtypes.int64 and u.src[0].src[0].op is Ops.PARAM:
            out.append(lk.params[u.src[0].src[0].arg[0]].name)
        elif u.op is Ops.CAST and u.dtype.scalar() == dtypes.int64 and (
                (s := u.src[0].dtype.scalar()) == dtypes.uint32 or (s == dtypes.int32 and sentinel)):
            x = u.src[0]
            param = x.op is Ops.LOAD and x.src[0].op is Ops.INDEX and x.src[0].src[0].op is Ops.PARAM
            out.append(f"{lk.params[x.src[0].src[0].arg[0]].name} ({s.name})" if param else f"a {s.name} value")
    return tuple(dict.fromkeys(out))


def _unit(dt: DType) -> int:
    """Bytes per element of the WGSL array a buffer of dt is bound as: a view's offset is passed in these units
    (bool: bytes of u32 words; int64: i32 words)."""
    return 1 if dt.is_bool else 4 if dt == dtypes.int64 else dt.itemsize
