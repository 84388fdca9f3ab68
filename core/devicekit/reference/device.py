"""The PYTHON device's parts: a renderer that keeps the kernel graph, an identity compiler, an interpreting runtime."""

from __future__ import annotations

from ..compile.compiler import Compiler
from ..ir.ops import Ops
from ..render.program_spec import ProgramSpec
from ..render.renderer import Renderer
from ..runtime import Program


class PythonRenderer(Renderer):
    """Renders nothing: the interpreter runs the kernel graph itself, so the source is a readable listing of it."""

    device = "PYTHON"
    lang = "python"

    def render(self, kernel, name: str | None = None) -> ProgramSpec:
        outs = tuple(sorted({st.src[0].src[0].arg[0] for st in kernel.sink.src
                             if st.op is Ops.STORE and st.src[0].src[0].op is Ops.PARAM}))
        return ProgramSpec(name=name or kernel.name, src=self.render_linear(kernel, name or kernel.name),
                           device=self.device, lang=self.lang, params=kernel.params, vars=kernel.vars, outs=outs,
                           kernel=kernel)

    def render_linear(self, kernel, name: str) -> str:
        lines = [f"# kernel {name} (reference graph)"]
        ids: dict = {}
        for n, u in enumerate(kernel.sink.toposort()):
            ids[u] = n
            srcs = ", ".join(f"%{ids[s]}" for s in u.src)
            lines.append(f"%{n} = {u.op.name}<{u.dtype}>({srcs}){'' if u.arg is None else f' arg={u.arg!r}'}")
        return "\n".join(lines)


class PythonCompiler(Compiler):
    """Nothing to compile: the bytes are the listing, so the cache still sees one entry per kernel."""

    name = "python-reference"

    def identity(self) -> str:
        """The listing's format and the core's version: the interpreter that runs it ships with the core."""
        from ..version import installed_version
        return f"python-reference listing-1 devicekit-{installed_version()}"

    def compile_src(self, src: str) -> bytes:
        return src.encode()


class PythonProgram(Program):
    def _launch(self, handles, vals, var_vals, global_size, local_size, wait):
        import time

        from .interpreter import run_kernel
        kernel = self.spec.kernel
        if kernel is None:
            raise RuntimeError(f"{self.name}: the PYTHON device runs kernels built with ir.KernelBuilder, not source")
        t0 = time.perf_counter()
        run_kernel(kernel, handles, var_vals)
        return time.perf_counter() - t0 if wait else None
