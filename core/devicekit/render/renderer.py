"""Renderer: turns a kernel into source for one language. It declares what it can do; the core lowers the rest."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ..ir.dtypes import DType, dtypes
from ..ir.ops import ALU, Ops
from ..ir.uop import KernelError
from .program_spec import ProgramSpec


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What a renderer renders natively (lowering decomposes everything outside it), its launch limits (checked by
    the core before rendering: render/prepare.py) and its extra linear passes. Built by keyword only."""

    dtypes: frozenset[DType]
    ops: frozenset[Ops]  # ALU ops rendered natively; others are decomposed (exp2 -> polynomial, ...)
    gpu_indexing: bool = False  # global/local ranges become SPECIAL thread indices instead of loops
    core_split: bool = False  # CPU: the outermost global range is split by the runtime (start/end args)
    has_local: bool = False  # local ranges and shared memory exist
    vectors: bool = True  # vector dtypes may reach the renderer
    unaligned_vectors: bool = False  # vector loads/stores may start at any element (else only width-aligned ones)
    global_max: tuple[int, ...] | None = None
    local_max: tuple[int, ...] | None = None  # threads a workgroup per axis
    local_total_max: int | None = None  # threads a workgroup in all (None: no limit but local_max's)
    shared_max: int = 0  # bytes of local memory a workgroup (0: not checked)
    max_buffers: int | None = None
    vector_register_bytes: int = 0  # the SIMD register file (count x width; 0: unknown): register tiles are sized by it
    pack_tiles: bool = False  # the optimizer may pack a gemm's b into a local array per K block (ir/pack.py)
    # linear passes run after lowering, in order (tinygrad's extra_matcher): each maps the op list to a new op list
    passes: tuple[Callable[[list[Any]], list[Any]], ...] = ()


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
    local_total_max: int | None = None
    shared_max = 0
    max_buffers: int | None = None
    vector_register_bytes = 0
    pack_tiles = False  # a CPU renderer whose vector values are vector registers (not one scalar per lane)
    passes: ClassVar[tuple[Callable[[list[Any]], list[Any]], ...]] = ()  # see Capabilities.passes

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(dtypes=frozenset(self.supported_dtypes), ops=frozenset(self.native_ops),
                            gpu_indexing=self.gpu_indexing, core_split=self.core_split, has_local=self.has_local,
                            vectors=self.vectors, unaligned_vectors=self.unaligned_vectors,
                            global_max=self.global_max, local_max=self.local_max,
                            local_total_max=self.local_total_max, shared_max=self.shared_max,
                            max_buffers=self.max_buffers, vector_register_bytes=self.vector_register_bytes,
                            pack_tiles=self.pack_tiles, passes=tuple(self.passes))

    def set_limits(self, local_max: tuple[int, ...] | None = None, local_total_max: int | None = None,
                   shared_max: int | None = None, max_buffers: int | None = None,
                   global_max: tuple[int, ...] | None = None) -> None:
        """One device's own limits, read from its driver, over the language's minimums (the class attributes): each
        one given replaces its default, and `local_max` is cut to `local_total_max` (no axis of a workgroup runs more
        threads than the whole workgroup may)."""
        if local_total_max is not None:
            self.local_total_max = local_total_max
        if local_max is not None:
            total = self.local_total_max
            self.local_max = tuple(x if total is None else min(x, total) for x in local_max)
        if shared_max is not None:
            self.shared_max = shared_max
        if max_buffers is not None:
            self.max_buffers = max_buffers
        if global_max is not None:
            self.global_max = global_max

    def render(self, kernel, name: str | None = None) -> ProgramSpec:
        """Lower `kernel` (an ir.Kernel) for this renderer's capabilities (passes and limits: render/prepare.py)
        and render the linear form. A renderer with local memory gets `shared_bytes` first in its meta."""
        from .prepare import prepare, shared_bytes
        caps = self.capabilities
        lk = prepare(kernel, caps, name, self.device, f"{type(self).__name__}.render")
        if self.max_buffers is not None and (slots := self.buffer_slots(lk)) > self.max_buffers:
            raise KernelError(f"kernel {lk.name!r} needs {slots} buffer slots; {self.device or type(self).__name__} "
                              f"allows at most {self.max_buffers} (max_buffers)")
        name = name or lk.name
        symbol = self.entry_symbol(name)
        src = self.render_linear(lk, symbol)
        meta = self.meta(lk)
        if caps.has_local:
            meta = (("shared_bytes", shared_bytes(lk)), *meta)
        return ProgramSpec(name=name, src=src, device=self.device, lang=self.lang, params=lk.params, vars=lk.vars,
                           global_size=lk.global_size, local_size=lk.local_size, core_split=lk.core_split,
                           outs=lk.outs, ins=lk.ins, kernel=kernel, checks=lk.checks,
                           meta=(*meta, ("opts", lk.opts)) if lk.opts else meta,
                           symbol="" if symbol == name else symbol)

    def buffer_slots(self, lk) -> int:
        """What counts against `max_buffers` (checked by `render` for every renderer that declares one): the
        kernel's buffers. Metal: its vars too, which take slots of the same buffer table; WGSL: its index check's
        flag buffer."""
        return len(lk.params)

    def entry_symbol(self, name: str) -> str:
        """The entry point's symbol for kernel `name`, passed to `render_linear` and kept as ProgramSpec.symbol.
        Renderers of generated source return `ir.names.mangle(name)` (the C-style base and LLVM do); default: the
        name itself."""
        return name

    @abstractmethod
    def render_linear(self, lk, name: str) -> str:
        """Turn the linear op list of `lk` (an ir.LinearKernel) into source text; `name` is the entry symbol."""

    def meta(self, lk) -> tuple:
        """The renderer's own facts for the ProgramSpec's meta (the core adds `shared_bytes` and `opts`)."""
        return ()

    def __reduce__(self):
        return (type(self), ())
