"""CCompiler: C -> a shared object, with clang when one is on PATH, else `cc` (CC overrides both).

Every compiler the pair accepts must give right answers, so known-bad compiler/flag combinations are kept out
(`KNOWN_BAD`): the compiler's family and version are read from its predefined macros, and a combination that
miscompiles gets the flag that avoids it. Compiler, version and final flags are in the identity, so cached bytes
follow a change of any of them.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
from typing import NamedTuple

from devicekit.compile import Compiler
from devicekit.compile.subproc import run_compiler
from devicekit.errors import CompileError

from .hostinfo import cpu_fingerprint, cpu_flags

# IEEE semantics: no -ffast-math, no fp contraction (MULACC is two roundings); errno never set by libm calls;
# -fwrapv: signed int arithmetic wraps (two's complement) as in the IR, instead of being UB the optimizer exploits
FLAGS = ("-shared", "-fPIC", "-O2", "-march=native", "-fno-math-errno", "-ffp-contract=off", "-fwrapv", "-std=gnu11",
         "-fno-plt", "-Wno-unused-variable", "-Wno-unused-function")


class CCInfo(NamedTuple):
    """What the compiler says it is: family ("clang", "gcc" or "unknown") and version (major, minor, patch)."""
    family: str
    version: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.family}-{'.'.join(map(str, self.version))}"


class KnownBad(NamedTuple):
    """A compiler/flag combination that gives wrong answers, and the flag that avoids it."""
    family: str
    versions: range  # major versions affected
    when: tuple[str, ...]  # any of these flags makes the combination (e.g. the -O levels that enable a pass)
    host_isa: str  # a /proc/cpuinfo flag the host must have for it to bite ("" for any host)
    fix: str  # the flags that avoid it (split on spaces: `-mllvm -opt=value` is two arguments)
    why: str


KNOWN_BAD = (
    # gcc 12.2 at -O2 (which enables the SLP vectorizer from gcc 12 on) with -fwrapv and AVX2 or AVX-512: the SLP
    # vectorizer miscompiles an integer max over the lanes of an unroll range or a scalarized vector (fz2293:
    # max of x // x over 4 int8 lanes gave -1 instead of 1; the case gave 0 instead of 2). The C is right:
    # gcc -O0/-O1, -march=x86-64 (SSE2) and -fno-tree-slp-vectorize give the right answer. Not seen with clang.
    KnownBad("gcc", range(12, 13), ("-O2", "-O3", "-Ofast"), "", "-fno-tree-slp-vectorize",
             "gcc 12's SLP vectorizer miscompiles integer max reductions"),
    # clang 14 at -O2 with -fwrapv and AVX2 or AVX-512 (x86-64-v3 and up; SSE2 is right): the loop vectorizer's
    # interleaved access groups move a load of z[2i] above the stores of z[2i + j] of the inner loop just before it
    # (fuzz seed 301863, memory profile: y[2i] = z[2i] after z[2i + j] += x[2i + j] gave the old z). The C is right:
    # clang 19, gcc, -O1, -fno-vectorize and the flag below give the right answer. 15-18 are not installed here to
    # try: the flag only turns off one vectorizer optimization, so they get it too.
    KnownBad("clang", range(0, 19), ("-O2", "-O3", "-Ofast"), "avx2", "-mllvm -enable-interleaved-mem-accesses=false",
             "clang 14's loop vectorizer reorders a load above a store to the same address in interleaved groups"),
)


def _clangs_on_path() -> list[str]:
    """`clang`, then versioned `clang-N` on PATH, newest first."""
    found = {}
    for d in os.environ.get("PATH", "").split(os.pathsep):
        for f in glob.glob(os.path.join(d or ".", "clang-[0-9]*")):
            m = re.fullmatch(r"clang-(\d+)", os.path.basename(f))
            if m and os.access(f, os.X_OK) and int(m.group(1)) not in found:
                found[int(m.group(1))] = f
    return ["clang"] + [found[v] for v in sorted(found, reverse=True)]


def find_cc() -> str | None:
    """$CC, else clang (or the newest clang-N), else cc, else gcc: the first found on PATH (a path), or None."""
    for cand in (os.environ.get("CC"), *_clangs_on_path(), "cc", "gcc"):
        if cand and (path := shutil.which(cand)):
            return path
    return None


@functools.cache
def cc_version(cc: str) -> str:
    try:
        out = run_compiler([cc, "--version"], timeout=30).stdout
    except CompileError as e:
        return f"unknown ({e})"
    return out.splitlines()[0].strip() if out else "unknown"


@functools.cache
def cc_info(cc: str) -> CCInfo:
    """Family and version from the predefined macros (`cc -dM -E`): `cc --version` does not always say `gcc`."""
    try:
        out = run_compiler([cc, "-dM", "-E", "-x", "c", os.devnull], timeout=30).stdout
    except CompileError:
        return CCInfo("unknown", ())
    macros = dict(m.groups() for m in re.finditer(r"^#define (\w+) (.*)$", out, re.MULTILINE))
    if "__clang__" in macros:
        keys, family = ("__clang_major__", "__clang_minor__", "__clang_patchlevel__"), "clang"
    elif "__GNUC__" in macros:
        keys, family = ("__GNUC__", "__GNUC_MINOR__", "__GNUC_PATCHLEVEL__"), "gcc"
    else:
        return CCInfo("unknown", ())
    return CCInfo(family, tuple(int(macros[k]) for k in keys if macros.get(k, "").isdigit()))


def _contains(flags: list[str], run: list[str]) -> bool:
    """Whether `run` appears in `flags` as consecutive arguments."""
    return any(flags[i:i + len(run)] == run for i in range(len(flags) - len(run) + 1))


def safe_flags(info: CCInfo, flags: tuple[str, ...], host_isa: frozenset[str]) -> tuple[tuple[str, ...], list[str]]:
    """`flags` plus the fix of every KNOWN_BAD combination they hit on this host; and why each was added."""
    out, why = list(flags), []
    for bad in KNOWN_BAD:
        hit = (info.family == bad.family and info.version[:1] and info.version[0] in bad.versions
               and any(f in flags for f in bad.when) and (not bad.host_isa or bad.host_isa in host_isa))
        fix = bad.fix.split()
        if hit and not _contains(out, fix):
            out.extend(fix)
            why.append(f"{bad.fix}: {bad.why}")
    return tuple(out), why


@functools.cache
def builtin_include_args(cc: str | None) -> tuple[str, ...]:
    """Where `cc` keeps its builtin headers (stddef.h, stdbool.h, float.h, stdarg.h), as libclang args: clang's
    resource dir, or gcc's include dir. The `libclang` wheel ships none, so the signature reader borrows them from
    the compiler the pair uses; () when none is found (then only headers that need none parse)."""
    if cc is None:
        return ()
    is_clang = "clang" in os.path.basename(cc) or "clang" in cc_version(cc).lower()
    query = ["-print-resource-dir"] if is_clang else ["-print-file-name=include"]
    try:
        out = run_compiler([cc, *query], timeout=30).stdout.strip()
    except CompileError:
        return ()
    if is_clang and os.path.isfile(os.path.join(out, "include", "stddef.h")):
        return ("-resource-dir", out)
    if os.path.isfile(os.path.join(out, "stddef.h")):
        return ("-isystem", out)
    return ()


def reader_args(cc: str | None = None, flags: tuple[str, ...] = FLAGS) -> list[str]:
    """libclang args that read a C source as `cc` with `flags` compiles it: the language standard, -D/-I/-U flags
    and the compiler's builtin headers."""
    keep = [f for f in flags if f.startswith(("-std=", "-D", "-I", "-U"))]
    return ["-x", "c", *keep, *builtin_include_args(cc or find_cc())]


class CCompiler(Compiler):
    """Runs the system C compiler in a private temp dir (removed afterwards); the bytes are the .so itself."""

    name = "cc"

    def __init__(self, cc: str | None = None, flags: tuple[str, ...] = FLAGS):
        from devicekit.debug import dprint

        from . import cc_probe
        self._base_flags = tuple(flags)
        if cc is None:
            choice = cc_probe.choose(self._base_flags)
            if choice is None:
                raise RuntimeError("no C compiler: none of $CC, clang, clang-N, cc, gcc is on PATH")
            if not os.environ.get("CC") and os.path.basename(choice.cc) != "clang":
                dprint(1, f"CPU pair 'c': using {choice.cc} ({cc_version(choice.cc)}): the first C compiler here "
                       f"whose half builds{'' if choice.half == '_Float16' else ' (none does: half through float)'}")
        else:
            choice = cc_probe.settle(cc, safe_flags(cc_info(cc), self._base_flags, cpu_flags())[0])
        self.cc, self.choice = choice.cc, choice
        self.info = cc_info(self.cc)
        self.flags, self.notes = safe_flags(self.info, choice.flags, cpu_flags())
        self.notes = [*self.notes, *choice.notes]
        self.half = choice.half
        if self.notes:
            dprint(1, f"CPU pair 'c': {self.info} with {' '.join(flags)}: added " + "; ".join(self.notes))
        self._id = f"{self.name} {os.path.basename(self.cc)} {self.info}: {cc_version(self.cc)} " \
                   f"[{' '.join(self.flags)}] features={choice.features.text()} half={self.half or 'none'} " \
                   f"host={cpu_fingerprint()}"
        self._alts: dict[frozenset[str], CCompiler] = {}

    def for_source(self, src: str) -> CCompiler:
        """This compiler, or another C compiler here that has the features a hand-written source names and this one
        lacks (clang's ext_vector_type where gcc is used; a compiler whose _Float16 builds)."""
        from . import cc_probe
        needs = cc_probe.needs_of(src)
        if all(getattr(self.choice.features, n) for n in needs):
            return self
        if needs not in self._alts:
            alt = cc_probe.choose(self._base_flags, needs)
            ok = alt is not None and all(getattr(alt.features, n) for n in needs)
            self._alts[needs] = CCompiler(alt.cc, self._base_flags) if ok and alt.cc != self.cc else self
        return self._alts[needs]

    def cache_key(self, spec):
        alt = self.for_source(spec.src)
        return super().cache_key(spec) if alt is self else alt.cache_key(spec)

    def compile(self, spec):
        alt = self.for_source(spec.src)
        return super().compile(spec) if alt is self else alt.compile(spec)

    def recompile(self, spec, reason: str = ""):
        alt = self.for_source(spec.src)
        return super().recompile(spec, reason) if alt is self else alt.recompile(spec, reason)

    def identity(self) -> str:
        return self._id

    def compile_src(self, src: str) -> bytes:
        return self._run(src)[0]

    def compile_tracked(self, src: str, ctx) -> tuple[bytes, list[str] | None]:
        """Hand-written C: compiled in `ctx.cwd` (the source's quoted includes resolve there) with its -I/-D, and
        the files it read from the compiler's own dependency output (-MD -MF)."""
        return self._run(src, ctx)

    def _run(self, src: str, ctx=None) -> tuple[bytes, list[str] | None]:
        from devicekit.compile.deps import parse_make_deps
        from devicekit.compile.subproc import compiler_tmpdir, failure_message, run_compiler

        from .cc_probe import needs_of
        with compiler_tmpdir(prefix="devicekit_cc_") as d:
            out, dep = os.path.join(d, "kernel.so"), os.path.join(d, "kernel.d")
            extra = [*ctx.cc_args(), "-MD", "-MF", dep] if ctx is not None else []
            name = os.path.basename(self.cc)
            p = run_compiler([self.cc, *self.flags, *extra, "-x", "c", "-", "-o", out, "-lm"], input=src,
                             cwd=ctx.cwd if ctx is not None else None, what=name)
            if p.returncode != 0:
                missing = [n for n in sorted(needs_of(src)) if not getattr(self.choice.features, n)]
                hint = (f" (it uses {', '.join(missing)}, which {name} lacks here, as does every other C compiler "
                        "found: clang has them)") if missing else ""
                raise CompileError(failure_message(p, name) or f"{name} rejected the C source (exit {p.returncode})"
                                   + hint, p.stderr, src)
            with open(out, "rb") as f:
                lib = f.read()
            if ctx is None:
                return lib, None
            try:
                with open(dep, encoding="utf-8", errors="surrogateescape") as f:
                    return lib, parse_make_deps(f.read())
            except OSError:
                return lib, None

    def __reduce__(self):
        return (type(self), (self.cc, self.flags))
