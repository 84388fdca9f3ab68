"""Imports of core/devicekit point one way: base <- ir <- render <- compile <- memory/runtime <- targets/plugin <-
registry <- api <- tools. Read from the source (ast), every import counted: module level, inside functions and under
TYPE_CHECKING alike. Every module must be placed in a layer, so a new module gets a deliberate place. See
docs/architecture.md ("Layers")."""

from __future__ import annotations

import ast
from pathlib import Path

import devicekit

ROOT = Path(devicekit.__file__).parent

# lowest first: a module may import its own layer and those below it, never one above
LAYERS: list[tuple[str, list[str]]] = [
    ("base", ["devicekit.errors", "devicekit.debug", "devicekit.spec", "devicekit.forksafe", "devicekit.interrupt",
              "devicekit.settings", "devicekit.lru", "devicekit.version", "devicekit.per_index"]),
    ("ir", ["devicekit.ir"]),  # kernels, their signature (ir.params) and lowering: imports nothing of the layers above
    ("render", ["devicekit.render"]),  # kernel -> source (ProgramSpec), the signature reader of hand-written sources
    ("compile", ["devicekit.compile"]),  # source -> bytes, the compile and lowered-kernel caches
    ("memory/runtime", ["devicekit.memory", "devicekit.alloc", "devicekit.runtime", "devicekit.signature",
                        "devicekit.launch_sizes", "devicekit.work_sizes", "devicekit.kernel_args"]),  # buffers, programs, the launch checks
    ("targets/plugin", ["devicekit.targets", "devicekit.plugin", "devicekit.hookspecs", "devicekit.backend",
                        "devicekit.reference", "devicekit.platforms"]),  # what a plugin implements; the PYTHON device
    ("registry", ["devicekit.registry"]),
    # the kernel library sizes its kernels for the default device's capabilities (through the registry)
    ("api", ["devicekit.api", "devicekit.plan", "devicekit.tile_search", "devicekit.kernels", "devicekit.kernels_matmul",
             "devicekit.kernels_target", "devicekit"]),  # `devicekit` itself: the package __init__, the lazy dk.* surface
    # the command, the benchmark tools (one package: definition, report, peers, numba_versions, devices, machine),
    # the inspector and the conformance kit
    ("tools", ["devicekit.cli", "devicekit.bench", "devicekit.inspect_kernel", "devicekit.testing"]),
]
# the upward edges, each a late or TYPE_CHECKING-only import (the reasons are in docs/architecture.md, "Layers")
ALLOWED_UPWARD = {
    ("devicekit.memory", "devicekit.api"),  # Buffer("CPU", ...) resolves the name through dk.device (late)
    ("devicekit.memory", "devicekit.targets"),  # TYPE_CHECKING only: the Device annotation
    ("devicekit.runtime", "devicekit.targets"),  # TYPE_CHECKING only: the Device annotation
    ("devicekit.render.signature", "devicekit.compile.deps"),  # late: the source context of the call in progress
}

# inside the registry package: each module imports only those before it (pluggy's _manager/_hooks/_callers shape)
REGISTRY_ORDER = ["tracing", "suggest", "records", "probing", "probe_memo", "calls", "loading", "resolution", "building", "manager"]


def module_name(path: Path, root: Path) -> str:
    parts = ["devicekit", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imports_of(name: str, package: bool, source: str, known: set[str]) -> set[str]:
    """The devicekit modules `source` (module `name`) imports; `from pkg import sub` counts as pkg.sub."""
    base_parts = name.split(".") if package else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base_parts[:len(base_parts) - node.level + 1]
                mod = ".".join(parts + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in known]
            out.update(subs or [mod])
    return {m for m in out if m == "devicekit" or m.startswith("devicekit.")}


def layer_of(mod: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (mod == p or (p != "devicekit" and mod.startswith(p + "."))) and len(p) > best:
                best, rank = len(p), i
    if rank is None:
        raise LookupError(f"{mod} is in no layer: add it to LAYERS in tests/test_layers.py")
    return rank


def violations(modules: dict[str, tuple[bool, str]]) -> list[str]:
    """Upward imports among `modules` (name -> (is a package __init__, source))."""
    known = set(modules)
    bad = []
    for name, (package, source) in sorted(modules.items()):
        for target in sorted(imports_of(name, package, source, known)):
            lo, hi = layer_of(name), layer_of(target)
            if hi > lo and (name, target) not in ALLOWED_UPWARD:
                bad.append(f"{name} ({LAYERS[lo][0]}) imports {target} ({LAYERS[hi][0]})")
    return bad


def core_modules() -> dict[str, tuple[bool, str]]:
    return {module_name(p, ROOT): (is_package(p), p.read_text()) for p in sorted(ROOT.rglob("*.py"))}


def test_every_module_has_a_layer():
    for name in core_modules():
        layer_of(name)


def test_no_lower_layer_imports_an_upper_one():
    assert violations(core_modules()) == []


def test_the_benchmark_tools_are_one_package_in_the_tools_layer():
    """The benchmark's modules live in devicekit.bench (not loose at the core's root), all of it in the tools layer,
    so nothing a user's program imports can reach them."""
    names = core_modules()
    bench = sorted(n for n in names if n == "devicekit.bench" or n.startswith("devicekit.bench."))
    assert "devicekit.bench.definition" in bench and "devicekit.bench.report" in bench
    assert {layer_of(n) for n in bench} == {[n for n, _ in LAYERS].index("tools")}
    loose = sorted(n for n in names if n.count(".") == 1 and n.split(".")[1].startswith(("bench_", "benchmarking")))
    assert loose == [], f"benchmark modules at the core's root: {loose}"


def test_the_check_sees_upward_imports_wherever_they_are():
    """A late import inside a function and one under TYPE_CHECKING are both found; the package root counts as the
    api layer, so `import devicekit` from a lower layer is upward too."""
    mods = {
        "devicekit.memory": (False, "def f():\n    from .registry import device\n"),
        "devicekit.runtime": (False, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import api\n"),
        "devicekit.spec": (False, "import devicekit\n"),
        "devicekit.registry": (True, "from .manager import Registry\n"),
        "devicekit.registry.manager": (False, "from ..cli import main\nfrom ..targets import Device\n"),
        "devicekit.api": (False, ""), "devicekit.cli": (True, ""), "devicekit.targets": (False, ""),
    }
    assert violations(mods) == [
        "devicekit.memory (memory/runtime) imports devicekit.registry (registry)",
        "devicekit.registry.manager (registry) imports devicekit.cli (tools)",
        "devicekit.runtime (memory/runtime) imports devicekit.api (api)",
        "devicekit.spec (base) imports devicekit (api)",
    ]


def test_the_ir_render_compile_runtime_order_is_checked():
    """The old single contracts layer let the IR import the render package (ir/builder.py built ParamSpec from
    render/program_spec.py, which imports the IR): each is its own layer now, so such an import fails."""
    mods = {
        "devicekit.ir.builder": (False, "def build():\n    from ..render.program_spec import ParamSpec\n"),
        "devicekit.render.program_spec": (False, "from ..ir.params import ParamSpec\n"),
        "devicekit.ir.params": (False, ""),
        "devicekit.render.renderer": (False, "from ..compile.compiler import Compiler\n"),
        "devicekit.compile.compiler": (False, "from ..runtime import Program\n"),
        "devicekit.alloc": (False, "from .targets import Device\n"), "devicekit.targets": (False, ""),
        "devicekit.runtime": (False, ""),
    }
    assert violations(mods) == [
        "devicekit.alloc (memory/runtime) imports devicekit.targets (targets/plugin)",
        "devicekit.compile.compiler (compile) imports devicekit.runtime (memory/runtime)",
        "devicekit.ir.builder (ir) imports devicekit.render.program_spec (render)",
        "devicekit.render.renderer (render) imports devicekit.compile.compiler (compile)",
    ]
    names = [n for n, _ in LAYERS]
    assert names.index("ir") < names.index("render") < names.index("compile") < names.index("memory/runtime") \
        < names.index("targets/plugin")


def test_allowed_upward_edges_are_still_there():
    """An allowed edge that no longer exists is dropped from the list, so the list stays the truth."""
    mods = core_modules()
    known = set(mods)
    for src, dst in sorted(ALLOWED_UPWARD):
        package, source = mods[src]
        assert dst in imports_of(src, package, source, known), f"{src} no longer imports {dst}: drop the edge"


def test_registry_modules_import_in_one_direction():
    mods = core_modules()
    known = set(mods)
    listed = {f"devicekit.registry.{m}" for m in REGISTRY_ORDER}
    assert {m for m in mods if m.startswith("devicekit.registry.")} == listed, "add new registry modules to the order"
    for i, m in enumerate(REGISTRY_ORDER):
        name = f"devicekit.registry.{m}"
        package, source = mods[name]
        deps = {t.rsplit(".", 1)[1] for t in imports_of(name, package, source, known)
                if t.startswith("devicekit.registry.")}
        later = deps & set(REGISTRY_ORDER[i:])
        assert not later, f"{name} imports {sorted(later)}, which come after it in {REGISTRY_ORDER}"
