"""Target (the compile side of a kind: renderer + compiler pairs) and Device (a Target plus allocator and runtime)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import forksafe
from .debug import dprint
from .errors import DeviceKitError
from .lru import LRU
from .spec import DeviceSpec

if TYPE_CHECKING:
    from .compile.compiler import CompiledSpec, Compiler
    from .memory import Allocator
    from .render.renderer import Renderer
    from .runtime import Program, RuntimeFactory

__all__ = ["Device", "Target"]

CompilerPair = tuple["Renderer", "Compiler"]
PROGRAM_MEMO_SIZE = 4096  # Programs memoized per device by Device.compile (least recently compiled evicted)


class Target:
    """What compiles for a kind, even where it cannot run: (renderer, compiler) pairs, best first.

    `fallback_reason` is None when the best declared pair was built, else why better pairs were skipped.
    """

    def __init__(self, spec: DeviceSpec | str, compilers: Sequence[CompilerPair], pair_names: Sequence[str],
                 fallback_reason: str | None = None):
        self.spec = DeviceSpec.parse(spec)
        if not compilers:
            raise DeviceKitError(f"{self.spec}: a target needs at least one (renderer, compiler) pair")
        if len(pair_names) != len(compilers):
            raise ValueError(f"{self.spec}: {len(compilers)} compiler pairs but {len(pair_names)} names")
        self.compilers: list[CompilerPair] = [tuple(p) for p in compilers]  # type: ignore[misc]
        self.pair_names: list[str] = list(pair_names)
        self.fallback_reason = fallback_reason

    @property
    def renderer(self) -> Renderer:
        return self.compilers[0][0]

    @property
    def compiler(self) -> Compiler:
        return self.compilers[0][1]

    @property
    def base_device_key(self) -> str:
        """The kind without the index: compiled bytes are shared between CUDA:0 and CUDA:1 under this key."""
        return self.spec.kind

    def pair_index(self, which: int | str | None = None) -> int:
        """The index of a compiler pair given by index or name (None: 0, the best)."""
        if which is None:
            return 0
        if isinstance(which, int):
            if not -len(self.compilers) <= which < len(self.compilers):
                raise IndexError(f"{self.spec} has {len(self.compilers)} compiler pairs, no pair {which}")
            return which % len(self.compilers)
        if which not in self.pair_names:
            raise KeyError(f"{self.spec} has no compiler pair {which!r}; it has {', '.join(self.pair_names)}")
        return self.pair_names.index(which)

    def pair(self, which: int | str | None = None) -> CompilerPair:
        """A compiler pair by index or name (None: the best)."""
        return self.compilers[self.pair_index(which)]

    def program_from_source(self, src: str, entry: str, **options: Any) -> CompiledSpec:
        """Compile hand-written source without the hardware: the first pair whose renderer has `parse_source` reads
        `entry`'s signature (a ProgramSpec), its compiler compiles it. Returns the CompiledSpec: `.lib` the compiled
        bytes, `.spec` the signature (params, vars, launch dims). `include_dirs=` (paths, searched in order after
        the source's own folder, the working dir) and `defines=` ({"N": 64} or ["N=64"]) are honoured alike by the
        reader, the compiler and the cache key; the other `options` go to parse_source (sizes=, global_size=,
        local_size=, shared_bytes=, ...; each plugin's README lists its own)."""
        return self._compile_source(src, entry, options)[0]

    def _compile_source(self, src: str, entry: str, options: dict[str, Any]) -> tuple[CompiledSpec, Compiler]:
        from .compile import deps
        _check_text(src, "the source")
        _check_text(entry, "entry")
        ctx = deps.make_context(options.pop("include_dirs", None), options.pop("defines", None))
        for (renderer, compiler), pname in zip(self.compilers, self.pair_names):
            parse = getattr(renderer, "parse_source", None)
            if callable(parse):
                dprint(2, f"{self.spec}: reading {entry!r} from source with pair {pname!r}")
                with deps.using(ctx):  # the reader, the spec and so the compiler and its cache key see one setup
                    return compiler.compile(parse(src, entry, **options)), compiler
        raise DeviceKitError(f"{self.spec}: none of its compiler pairs ({', '.join(self.pair_names)}) can read "
                             "hand-written source (no renderer with parse_source); use a kind whose plugin offers "
                             "it, e.g. CPU with devicekit-cpu installed")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec} pairs={self.pair_names}>"


def _check_text(x: Any, what: str) -> None:
    """A str that encodes as UTF-8 (a lone surrogate, e.g. from errors='surrogateescape', does not): CompileError
    naming where, instead of a UnicodeEncodeError from deep inside a reader or compiler."""
    from .errors import CompileError
    if not isinstance(x, str):
        return  # the plugin's reader names the wrong type
    try:
        x.encode()
    except UnicodeEncodeError as e:
        line = x.count("\n", 0, e.start) + 1
        col = e.start - (x.rfind("\n", 0, e.start) + 1) + 1
        raise CompileError(f"{what} is not valid text: {x[e.start]!r} at line {line}, column {col} is a lone "
                           "surrogate (a file read with errors='surrogateescape'?): read it as UTF-8, or fix its "
                           "bytes", "", "") from None


class Device(Target):
    """A complete unit for one device: compiler pairs, an allocator and a runtime (CompiledSpec -> Program).

    One constructor for one pair or many:
    `Device(spec, allocator, renderer, compiler, runtime)` (one pair, named `compiler.name`; vendors' tests build
    theirs this way) or `Device(spec, allocator, runtime=..., pairs=[(renderer, compiler), ...], pair_names=[...])`
    (the registry's: every pair the plugins offer, best first; `pair_names` defaults to each compiler's name).
    `fallback_reason` (either form) says why better pieces were skipped. Giving both forms, or neither, is a
    TypeError naming what was wrong.
    """

    def __init__(self, spec: DeviceSpec | str, allocator: Allocator, renderer: Renderer | None = None,
                 compiler: Compiler | None = None, runtime: RuntimeFactory | None = None, *,
                 pairs: Sequence[CompilerPair] | None = None, pair_names: Sequence[str] | None = None,
                 fallback_reason: str | None = None):
        compilers, names = _pairs_of(spec, renderer, compiler, pairs, pair_names)
        if runtime is None:
            raise TypeError(f"Device({str(spec)!r}): no runtime: pass the runtime factory (CompiledSpec -> Program) "
                            "as the fifth argument or runtime=")
        if allocator is None:
            raise TypeError(f"Device({str(spec)!r}): no allocator: pass the device's Allocator as the second argument")
        Target.__init__(self, spec, compilers, names, fallback_reason)
        self.allocator = allocator
        self.runtime = runtime
        self._programs: LRU[tuple, Program] = LRU(PROGRAM_MEMO_SIZE)  # an evicted Program still works for its holder
        self._lock = forksafe.lock()

    @classmethod
    def from_pairs(cls, spec: DeviceSpec | str, allocator: Allocator, compilers: Sequence[CompilerPair],
                   pair_names: Sequence[str], runtime: RuntimeFactory, fallback_reason: str | None = None) -> Device:
        """An alias of `Device(spec, allocator, runtime=runtime, pairs=compilers, pair_names=pair_names,
        fallback_reason=fallback_reason)`, kept for plugins and tests written when this was the many-pair
        constructor (API 1.0); the core no longer calls it."""
        return cls(spec, allocator, runtime=runtime, pairs=compilers, pair_names=pair_names,
                   fallback_reason=fallback_reason)

    def _program(self, compiled, compiler: Compiler | None = None) -> Program:
        """The runtime's Program for `compiled`. Bytes that came from the compile cache and fail to load (a stale
        or damaged entry whose MAC still verified: another toolchain's object, a wrong symbol) are discarded and
        recompiled once by `compiler`; a second failure, or a failure of freshly compiled bytes, is raised."""
        try:
            program = self.runtime(compiled)
        except Exception as e:  # any load failure of cached bytes earns one rebuild
            if compiler is None or not getattr(compiled, "from_cache", False):
                raise
            reason = f"{type(e).__name__}: {e}"
            dprint(1, f"{self.spec}: cached bytes of {compiled.name} failed to load ({reason}); recompiling once")
            program = self.runtime(compiler.recompile(compiled.spec, reason))
        if getattr(program, "device", None) is None:
            program.device = self
        return program

    def compile(self, kernel: Any, name: str | None = None, pair: int | str | None = None) -> Program:
        """render -> compile -> runtime. Memoized per device by one key: the pair and the lowering key
        (compile/lowered.py: the kernel, the name, the renderer, every setting that changes a source or a build);
        the render itself goes through the lowered-kernel cache, so a kernel cached on disk is never lowered again.
        (Not the compiler's identity: it is fixed when the compiler is made, and some cost a ms to compute.)"""
        from .compile import lowered
        from .ir.accept import as_kernel
        kernel = as_kernel(kernel, f"{self.spec}: compile")
        idx = self.pair_index(pair)
        renderer, compiler = self.compilers[idx]
        lkey = lowered.lowering_key(renderer, kernel, name)
        key = (idx, lkey)
        if (prog := self._programs.get(key)) is not None:
            return prog
        dprint(2, f"{self.spec}: compiling {getattr(kernel, 'name', kernel)} with pair {self.pair_names[idx]!r}")
        spec = lowered.render(renderer, kernel, name, key=lkey, cache=compiler.cache)
        if opts := spec.get_meta("opts"):
            dprint(2, f"{self.spec}: {spec.name}: optimizer: {', '.join(opts)}")
        return self._programs.setdefault(key, self._first_program(spec, compiler))  # two racing threads: one wins

    def _first_program(self, spec, compiler: Compiler) -> Program:
        """The Program of `compiler.first_build(spec)`: a quick build (tiers) is given the way to its final one."""
        first = compiler.first_build(spec)
        program = self._program(first, compiler)
        if program.compiled.tier == "quick" and not program._set_final(
                lambda: self._program(compiler.compile(spec), compiler)):
            program = self._program(compiler.compile(spec), compiler)  # a runtime that cannot swap: final at once
        return program

    def compile_many(self, kernels: Sequence[Any], pair: int | str | None = None, jobs: int | None = None
                     ) -> list[Program]:
        """`compile` for many kernels at once, in order: `jobs` threads (default: the CPUs this process may use, at
        most 8). Compilers spend most of their time outside the GIL (a C compiler process, LLVM's passes and codegen
        through ctypes), so one thread renders the next kernel while another's bytes are built. The first error is
        raised after the others finished; the memo and the compile cache make repeated kernels free."""
        from concurrent.futures import ThreadPoolExecutor
        kernels = list(kernels)
        jobs = jobs if jobs is not None else min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                                 else (os.cpu_count() or 1))
        if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
            raise ValueError(f"{self.spec}: compile_many(jobs=) takes an int >= 1, got {jobs!r}")
        if jobs == 1 or len(kernels) < 2:
            return [self.compile(k, pair=pair) for k in kernels]
        with ThreadPoolExecutor(min(jobs, len(kernels)), thread_name_prefix="devicekit-compile") as ex:
            futures = [ex.submit(self.compile, k, None, pair) for k in kernels]
        return [f.result() for f in futures]

    def program_from_source(self, src: str, entry: str, **options: Any) -> Program:
        """A Program from hand-written source: `Target.program_from_source` (read the signature, compile), then
        loaded on this device (cached bytes that fail to load are rebuilt once, as in `compile`). `options` go to the
        renderer's parse_source (docs/handwritten.md)."""
        return self._program(*self._compile_source(src, entry, options))

    def synchronize(self) -> None:
        self.allocator.synchronize()

    def __repr__(self) -> str:
        return f"<Device {self.spec} pairs={self.pair_names}>"


def _pairs_of(spec: Any, renderer: Any, compiler: Any, pairs: Sequence[CompilerPair] | None,
              pair_names: Sequence[str] | None) -> tuple[list[CompilerPair], list[str]]:
    """Device's (pairs, names) from one form or the other: renderer and compiler (one pair), or pairs= (many)."""
    where = f"Device({str(spec)!r})"
    if pairs is not None:
        if renderer is not None or compiler is not None:
            given = " and ".join(n for n, v in (("renderer", renderer), ("compiler", compiler)) if v is not None)
            raise TypeError(f"{where}: both a single pair ({given}) and pairs= were given: pass renderer and compiler "
                            "for one pair, or pairs=[(renderer, compiler), ...] for many, not both")
        if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence):
            raise TypeError(f"{where}: pairs= must be a list of (renderer, compiler) tuples, got {pairs!r}")
        bad = [i for i, p in enumerate(pairs) if not isinstance(p, (tuple, list)) or len(p) != 2]
        if bad:
            raise TypeError(f"{where}: pairs[{bad[0]}] must be a (renderer, compiler) tuple, got {pairs[bad[0]]!r}")
        names = list(pair_names) if pair_names is not None else [_pair_name(c) for _, c in pairs]
        return list(pairs), names
    if pair_names is not None:
        raise TypeError(f"{where}: pair_names= was given without pairs=: it names the pairs of pairs=[...]; a single "
                        "pair is named by its compiler's name")
    if renderer is None or compiler is None:
        missing = " and ".join(n for n, v in (("renderer", renderer), ("compiler", compiler)) if v is None)
        raise TypeError(f"{where}: no compiler pair ({missing} missing): pass renderer and compiler for one pair, "
                        "or pairs=[(renderer, compiler), ...] for many")
    return [(renderer, compiler)], [_pair_name(compiler)]


def _pair_name(compiler: Any) -> str:
    return getattr(compiler, "name", None) or type(compiler).__name__
