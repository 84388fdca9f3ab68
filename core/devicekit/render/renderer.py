"""Renderer: turns a kernel into source for one language. It declares what it can do; the core lowers the rest."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..ir.dtypes import DType, dtypes
from ..ir.ops import ALU, Ops
from .program_spec import ProgramSpec


@dataclass(frozen=True)
class Capabilities:
    """What a renderer renders natively. Lowering decomposes everything outside it."""

    dtypes: frozenset[DType]
    ops: frozenset[Ops]  # ALU ops rendered natively; others are decomposed (exp2 -> polynomial, ...)
    gpu_indexing: bool = False  # global/local ranges become SPECIAL thread indices instead of loops
    core_split: bool = False  # CPU: the outermost global range is split by the runtime (start/end args)
    has_local: bool = False  # local ranges and shared memory exist
    vectors: bool = True  # vector dtypes may reach the renderer
    unaligned_vectors: bool = False  # vector loads/stores may start at any element (else only width-aligned ones)
    global_max: tuple[int, ...] | None = None
    local_max: tuple[int, ...] | None = None
    shared_max: int = 0  # bytes
    max_buffers: int | None = None
    vector_register_bytes: int = 0  # the SIMD register file (count x width; 0: unknown): register tiles are sized by it


class Renderer(ABC):
    device: str = ""  # the kind it renders for
    lang: str = ""  # the language of ProgramSpec.src
    supported_dtypes: frozenset[DType] = frozenset(dtypes.all())
    native_ops: frozenset[Ops] = ALU
    gpu_indexing = False
    core_split = False
    has_local = False
    vectors = True
    unaligned_vectors = False
    global_max: tuple[int, ...] | None = None
    local_max: tuple[int, ...] | None = None
    shared_max = 0
    max_buffers: int | None = None
    vector_register_bytes = 0

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(frozenset(self.supported_dtypes), frozenset(self.native_ops), self.gpu_indexing,
                            self.core_split, self.has_local, self.vectors, self.unaligned_vectors, self.global_max, self.local_max,
                            self.shared_max, self.max_buffers, self.vector_register_bytes)

    def render(self, kernel, name: str | None = None) -> ProgramSpec:
        """Lower `kernel` (an ir.Kernel) for this renderer's capabilities and render the linear form."""
        from ..ir.accept import as_kernel
        from ..ir.linearize import lower
        lk = lower(as_kernel(kernel, f"{type(self).__name__}.render"), self.capabilities)
        name = name or lk.name
        symbol = self.entry_symbol(name)
        src = self.render_linear(lk, symbol)
        return ProgramSpec(name=name, src=src, device=self.device, lang=self.lang, params=lk.params, vars=lk.vars,
                           global_size=lk.global_size, local_size=lk.local_size, core_split=lk.core_split,
                           outs=lk.outs, ins=lk.ins, kernel=kernel, checks=lk.checks,
                           meta=(*self.meta(lk), ("opts", lk.opts)) if lk.opts else self.meta(lk),
                           symbol="" if symbol == name else symbol)

    def entry_symbol(self, name: str) -> str:
        """The entry point's symbol for kernel `name`, passed to `render_linear` and kept as ProgramSpec.symbol.
        Renderers of generated source return `ir.names.mangle(name)` (the C-style base and LLVM do); default: the
        name itself."""
        return name

    @abstractmethod
    def render_linear(self, lk, name: str) -> str:
        """Turn the linear op list of `lk` (an ir.LinearKernel) into source text; `name` is the entry symbol."""

    def meta(self, lk) -> tuple:
        return ()

    def __reduce__(self):
        return (type(self), ())
