"""What each C compiler the c pair accepts really supports with the pair's flags on this host, and which one to use.

Why: Debian 12's `clang` (14) rejects `_Float16` on x86 without AVX512-FP16, so every float16 kernel failed when it
was on PATH; gcc 12 with -march=native on an AVX512-FP16 host emits `vmovsh` masking that binutils 2.40's assembler
rejects; gcc ignores `ext_vector_type` (a warning) where tinygrad's kernels need it. So each compiler is probed once
per (compiler, flags, host) — a tiny source per feature compiled, assembled and linked with the real flags — and the
answers are kept in the compile cache (MAC-checked like any entry). `choose()` picks, in the pair's order of
preference, the first compiler whose half works natively (with `-mno-avx512fp16` added where only that stops the
assembler error), else renders half through float with clang's `__fp16` storage type (each result rounded to half,
as the reference computes); the choice is in the compiler's identity, hence in the cache key.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from typing import NamedTuple

FEATURES = {
    # conversions from double/float, a select and a loop: what the renderer emits for half (the vmovsh case is a
    # masked scalar half move of a select)
    "float16": """
_Float16 sel(_Float16 a, _Float16 b, int c) { return c ? a : b; }
void k(_Float16 *restrict o, const double *restrict a, const float *restrict b, const _Float16 *restrict h, int n) {
  for (int i = 0; i < n; i++) {
    _Float16 x = (_Float16)a[i], y = (_Float16)b[i];
    o[i] = (_Float16)(x > y ? (_Float16)(x * y) : (_Float16)(x + h[i]));
    if (o[i] != o[i]) o[i] = sel(x, y, i & 1);
  }
}""",
    "fp16_storage": """
float k(const __fp16 *a, __fp16 *o, const double *d, int n) { float s = 0; for (int i = 0; i < n; i++) {
  o[i] = (__fp16)(a[i] * 2); o[i + n] = (__fp16)d[i]; s += a[i]; } return s; }""",
    "bfloat16": "float k(const __bf16 *a) { return (float)a[0]; }",
    "vector_size": """typedef float v4 __attribute__((vector_size(16)));
_Static_assert(sizeof(v4) == 16, "vector_size ignored");
v4 k(v4 a) { return a * a; }""",
    "ext_vector_type": """typedef float e4 __attribute__((ext_vector_type(4)));
_Static_assert(sizeof(e4) == 16, "ext_vector_type ignored");
e4 k(e4 a) { return a.wzyx * a; }""",
}
PROBE_VERSION = "2"
NO_FP16_FLAG = "-mno-avx512fp16"  # x86: keeps the compiler from emitting AVX512-FP16 code the assembler may reject


class Features(NamedTuple):
    float16: bool
    fp16_storage: bool
    bfloat16: bool
    vector_size: bool
    ext_vector_type: bool

    def text(self) -> str:
        return ",".join(k for k, v in self._asdict().items() if v) or "none"


class Choice(NamedTuple):
    """A compiler of the c pair with its final flags, what it supports, how half is rendered ("_Float16", "__fp16",
    or "" when neither works) and why flags were added."""
    cc: str
    flags: tuple[str, ...]
    features: Features
    half: str
    notes: tuple[str, ...]


def _compiles(cc: str, flags: tuple[str, ...], src: str) -> bool:
    from devicekit.compile.subproc import compiler_tmpdir, run_compiler
    from devicekit.errors import CompileError
    with compiler_tmpdir(prefix="devicekit_ccprobe_") as d:
        try:
            # -z defs: a feature that needs a runtime helper the kernel's .so would not find (clang's __fp16 without
            # F16C calls __gnu_h2f_ieee) is a feature this compiler does not have here
            p = run_compiler([cc, *flags, "-Wl,-z,defs", "-x", "c", "-", "-o", os.path.join(d, "probe.so")],
                             input=src, timeout=60)
        except CompileError:
            return False
        return p.returncode == 0


def _probe_now(cc: str, flags: tuple[str, ...]) -> Features:
    if _compiles(cc, flags, "\n".join(FEATURES.values())):  # one compile when everything works
        return Features(*(True for _ in FEATURES))
    return Features(*(_compiles(cc, flags, src) for src in FEATURES.values()))


@functools.cache
def probe(cc: str, flags: tuple[str, ...]) -> Features:
    """The features `cc` with `flags` really builds here: from the compile cache, else probed and stored."""
    from devicekit.compile.cache import CacheKey, CompileCache

    from .cc_compiler import cc_version
    from .hostinfo import cpu_fingerprint
    ident = (f"cc-probe v{PROBE_VERSION} {os.path.realpath(cc)} {cc_version(cc)} [{' '.join(flags)}] "
             f"host={cpu_fingerprint()}")
    digest = hashlib.sha256(json.dumps(FEATURES, sort_keys=True).encode()).hexdigest()
    # a cache of its own over the same directory (same pinning and MAC): the probes stay out of the kernels' stats
    raw = CompileCache().get_or_compile(CacheKey("CPU", ident, digest),
                                         lambda: json.dumps(_probe_now(cc, flags)._asdict()).encode())
    try:
        got = json.loads(raw)
        return Features(**{k: bool(got[k]) for k in Features._fields})
    except (ValueError, KeyError, TypeError):
        return _probe_now(cc, flags)


def candidates() -> list[str]:
    """$CC alone when set; else clang, the versioned clang-N newest first, cc, gcc: those on PATH, each once."""
    import shutil

    from .cc_compiler import _clangs_on_path
    if os.environ.get("CC"):
        names = [os.environ["CC"]]
    else:
        names = [*_clangs_on_path(), "cc", "gcc"]
    out, seen = [], set()
    for n in names:
        if (path := shutil.which(n)) and (real := os.path.realpath(path)) not in seen:
            seen.add(real)
            out.append(path)
    return out


def settle(cc: str, flags: tuple[str, ...]) -> Choice:
    """`cc` with `flags`: its features, with -mno-avx512fp16 added when only that makes its half build."""
    feats, notes = probe(cc, flags), ()
    if not feats.float16 and "-march=native" in flags and NO_FP16_FLAG not in flags:
        from .hostinfo import cpu_flags
        if "avx512fp16" in cpu_flags() and (alt := probe(cc, (*flags, NO_FP16_FLAG))).float16:
            flags, feats = (*flags, NO_FP16_FLAG), alt
            notes = ((f"{NO_FP16_FLAG}: its AVX512-FP16 code does not assemble here (gcc 12 + binutils 2.40: "
                     "'unsupported masking for vmovsh')"),)
    half = "_Float16" if feats.float16 else "__fp16" if feats.fp16_storage else ""
    return Choice(cc, flags, feats, half, notes)


@functools.cache
def choose(flags: tuple[str, ...], needs: frozenset[str] = frozenset({"float16"})) -> Choice | None:
    """The first candidate (pair order) that has every feature in `needs`, with its flags made safe; else the first
    candidate, half rendered through float where it can (`Choice.half`); None when there is no C compiler."""
    from .cc_compiler import cc_info, safe_flags
    from .hostinfo import cpu_flags
    found = []
    for cc in candidates():
        fixed, _ = safe_flags(cc_info(cc), flags, cpu_flags())
        c = settle(cc, fixed)
        if all(getattr(c.features, n) for n in needs):
            return c
        found.append(c)
        if os.environ.get("CC"):
            break
    return found[0] if found else None


def needs_of(src: str) -> frozenset[str]:
    """The compiler features a hand-written C source names (so a compiler that has them is picked for it)."""
    out = set()
    if "_Float16" in src:
        out.add("float16")
    if "__bf16" in src:
        out.add("bfloat16")
    if "ext_vector_type" in src:
        out.add("ext_vector_type")
    if "vector_size" in src:
        out.add("vector_size")
    return frozenset(out)
