"""LLVMCompiler: LLVM IR text -> optimized host object code, with llvmlite, in process."""

from __future__ import annotations

import re

from devicekit.compile import Compiler
from devicekit.errors import CompileError

from . import compile_worker, llvm_jit, settings, upgrade

_SEXT = re.compile(r"(%[\w.]+) = sext ")
_UITOFP = re.compile(r"uitofp [^%]*(%[\w.]+)")
# LLVM's SLP vectorizer (LLVM 22 at least) narrows `uitofp (sext x)` to the float's width: int8 -21 -> uint32 ->
# float16 became 65504 instead of inf, -21 -> uint64 -> float32 4.29e9 instead of 1.84e19 (fuzz seed 3002524). A
# module with that pattern is optimized without SLP; the rule's version is part of the identity (cached bytes follow)
SLP_RULE = "slp-off-for-uitofp-of-sext-1"
# the quick tier (Compiler.first_build): IR whose every operation has one IEEE result, so O0 and O3 compute the same
# values: no fast-math flag (a reduction's `reassoc contract`) and no fmuladd (fused or not, at the optimizer's choice)
_LOOSE = re.compile(r"\b(?:reassoc|contract|fast|afn|arcp|nnan|ninf|nsz)\b|@llvm\.fmuladd")
QUICK_RULE = "quick-O0-exact-1"


def slp_safe(src: str) -> bool:
    """Whether the SLP vectorizer may run on this IR: no `uitofp` reads the result of a `sext`."""
    sexts = set(_SEXT.findall(src))
    return not (sexts and any(v in sexts for v in _UITOFP.findall(src)))


def _parsed(src: str, tm):
    """The module of `src`, verified, for target machine `tm` (the caller holds llvm_jit.LOCK)."""
    import llvmlite.binding as llvm
    try:
        mod = llvm.parse_assembly(src)
        mod.verify()
    except RuntimeError as e:
        raise CompileError("LLVM rejected the IR", str(e), src) from None
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    return mod


def optimized_object(tm, opt: int, src: str) -> bytes:
    """The object code of `src` after the new pass manager's O`opt` pipeline for target machine `tm`: the one
    definition of a final build, in this process and in the compile worker (the caller holds llvm_jit.LOCK)."""
    import llvmlite.binding as llvm

    mod = _parsed(src, tm)
    if opt > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=min(opt, 3))
        pto.loop_vectorization = True
        pto.slp_vectorization = slp_safe(src)
        pto.loop_unrolling = True
        pto.loop_interleaving = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return bytes(tm.emit_object(mod))


class LLVMCompiler(Compiler):
    """Parses and verifies the IR, runs the new pass manager's O3 pipeline (loop + SLP vectorization, unrolling,
    interleaving) tuned for the host CPU, and emits an ELF/Mach-O object. `identity()` names llvmlite and LLVM
    versions, triple, CPU, its features and the opt level: all of them change the bytes."""

    name = "llvm"

    def __init__(self, opt: int = 3, cpu: str | None = None, features: str | None = None):
        triple, host_cpu, host_features = llvm_jit.host()
        self.opt = opt if (env_opt := settings.get("DEVICEKIT_CPU_OPT")) is None else env_opt
        self.triple = triple
        self.cpu = cpu or host_cpu
        self.features = host_features if features is None else features
        self._tm = llvm_jit.target_machine(self.cpu, self.features, self.opt)
        self._id = self._identity(f"O{self.opt} {SLP_RULE}")
        self._tm_quick = None

    def identity(self) -> str:
        return self._id

    def quick_tier(self, src: str) -> bool:
        """IR without fast-math flags has a quick tier (O0: no passes, fast instruction selection, ~1 ms where O3
        takes ~20) whose program computes the same values bit for bit; none at DEVICEKIT_CPU_OPT=0 (that is final)."""
        return self.opt > 0 and _LOOSE.search(src) is None

    def quick_identity(self) -> str:
        return self._identity(f"O0 {QUICK_RULE}")

    def _identity(self, level: str) -> str:
        """Everything that changes the bytes; `level`: the opt level and its rules."""
        return f"{self.name} {llvm_jit.versions()} {self.triple} cpu={self.cpu} {level} features={self.features}"

    def quick_compile_src(self, src: str) -> bytes:
        with llvm_jit.LOCK:
            if self._tm_quick is None:
                self._tm_quick = llvm_jit.target_machine(self.cpu, self.features, 0)
            return bytes(self._tm_quick.emit_object(_parsed(src, self._tm_quick)))

    def compile_src(self, src: str) -> bytes:
        """The final object of `src`. On the upgrade thread (tiers) it is built in the compile worker process
        (compile_worker.py: the same function, so the same bytes), which holds neither this process's GIL nor its
        LLVM lock; where there is no worker (it died, it is off, another OS), here."""
        if self.opt > 0 and upgrade.on_upgrade_thread():
            lib = compile_worker.build(self.opt, self.cpu, self.features, src)
            if lib is not None:
                return lib
        with llvm_jit.LOCK:
            return optimized_object(self._tm, self.opt, src)

    def disassemble(self, src: str) -> str:
        """The optimized IR and the host assembly of `src` (for DEVICEKIT_DEBUG and the curious)."""
        import llvmlite.binding as llvm

        with llvm_jit.LOCK:
            mod = llvm.parse_assembly(src)
            mod.triple = self._tm.triple
            mod.data_layout = str(self._tm.target_data)
            pto = llvm.create_pipeline_tuning_options(speed_level=min(self.opt, 3))
            pto.loop_vectorization = True
            pto.slp_vectorization = slp_safe(src)
            pb = llvm.create_pass_builder(self._tm, pto)
            pb.getModulePassManager().run(mod, pb)
            return str(mod) + "\n" + self._tm.emit_assembly(mod)

    def __reduce__(self):
        return (type(self), (self.opt, self.cpu, self.features))
