"""Imports of core/devicekit point one way: base <- contracts <- registry <- api <- tools. Read from the source
(ast), every import counted: module level, inside functions and under TYPE_CHECKING alike. Every module must be
placed in a layer, so a new module gets a deliberate place. See docs/architecture.md ("Layers")."""

from __future__ import annotations

import ast
from pathlib import Path

import devicekit

ROOT = Path(devicekit.__file__).parent

# lowest first: a module may import its own layer and those below it, never one above
LAYERS: list[tuple[str, list[str]]] = [
    ("base", ["devicekit.errors", "devicekit.debug", "devicekit.spec", "devicekit.forksafe", "devicekit.interrupt",
              "devicekit.settings", "devicekit.lru", "devicekit.version"]),
    ("contracts", ["devicekit.ir", "devicekit.kernels", "devicekit.render", "devicekit.compile", "devicekit.plugin", "devicekit.backend",
                   "devicekit.hookspecs", "devicekit.memory", "devicekit.runtime", "devicekit.targets",
                   "devicekit.alloc", "devicekit.signature", "devicekit.launch_sizes",
                   "devicekit.reference"]),
    ("registry", ["devicekit.registry"]),
    ("api", ["devicekit.api", "devicekit.plan", "devicekit.tile_search", "devicekit"]),  # `devicekit` itself: the package __init__, the lazy dk.* surface
    ("tools", ["devicekit.cli", "devicekit.benchmarking", "devicekit.bench_numba", "devicekit.bench_machine",
               "devicekit.bench_peers", "devicekit.bench_devices",
               "devicekit.inspect_kernel", "devicekit.testing"]),
]
# the one upward edge, imported inside the function that needs it (the reason is in docs/architecture.md)
ALLOWED_UPWARD = {("devicekit.memory", "devicekit.api")}  # Buffer("CPU", ...) resolves the name through dk.device

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


def test_the_check_sees_upward_imports_wherever_they_are():
    """A late import inside a function and one under TYPE_CHECKING are both found; the package root counts as the
    api layer, so `import devicekit` from a contract is upward too."""
    mods = {
        "devicekit.memory": (False, "def f():\n    from .registry import device\n"),
        "devicekit.runtime": (False, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import api\n"),
        "devicekit.spec": (False, "import devicekit\n"),
        "devicekit.registry": (True, "from .manager import Registry\n"),
        "devicekit.registry.manager": (False, "from ..cli import main\nfrom ..targets import Device\n"),
        "devicekit.api": (False, ""), "devicekit.cli": (True, ""), "devicekit.targets": (False, ""),
    }
    assert violations(mods) == [
        "devicekit.memory (contracts) imports devicekit.registry (registry)",
        "devicekit.registry.manager (registry) imports devicekit.cli (tools)",
        "devicekit.runtime (contracts) imports devicekit.api (api)",
        "devicekit.spec (base) imports devicekit (api)",
    ]


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
