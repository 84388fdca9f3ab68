"""One declarative record per device kind, instead of six lazy factory functions and four hooks per plugin.

A plugin module sets `DEVICEKIT_BACKEND = Backend(...)` (or a list of them, one per kind); the registry generates
the four hooks from it when it registers the module (`BackendHooks`), and the module's own `@hookimpl` functions
still run beside them for what a record cannot say (a pair offered only on some machines, pairs discovered at run
time). Every piece is named by a `"package.module:attr"` string and imported on first use, never when devices are
listed:

    DEVICEKIT_BACKEND = Backend(
        "ACME", "example vendor device", priority=5, probe="devicekit_acme.toolchain:probe",
        pairs=[Pair("acme-cc", "devicekit_acme.renderer:AcmeRenderer()", "devicekit_acme.compiler:AcmeCompiler()")],
        allocator="devicekit_acme.allocator:AcmeAllocator(str(spec))", runtime="devicekit_acme.runtime:factory")

A factory reference (a pair's renderer and compiler, `allocator`, `runtime`) is called for each device or target
with its DeviceSpec, written as the call it stands for: `"m:f"` or `"m:f(spec)"` is `f(spec)`, `"m:C()"` is `C()`,
`"m:C(spec.index)"` is `C(spec.index)`, `"m:C(str(spec))"` is `C("ACME:1")`. Nothing else is accepted (it is
never evaluated). `probe` and `count` name functions of no argument, `describe_id` one of the id. A plain callable
is accepted anywhere a reference is, called the same way (a factory gets the spec)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .errors import PluginError
from .hookspecs import hookimpl
from .plugin import API_VERSION, AllocatorFactory, CompilerPairFactory, DeviceKind, RuntimeFactoryDecl

__all__ = ["Backend", "BackendHooks", "LazyRef", "Pair", "backends_of"]

Ref = str | Callable[..., Any]

# the argument a factory reference passes, written as the expression it stands for; None: written without parentheses
_FACTORY_ARGS: dict[str | None, Callable[[Any], tuple]] = {
    None: lambda spec: (spec,), "spec": lambda spec: (spec,), "": lambda spec: (),
    "spec.index": lambda spec: (spec.index,), "str(spec)": lambda spec: (str(spec),),
}
_REF = re.compile(r"^(?P<module>[A-Za-z_][\w.]*):(?P<attr>[A-Za-z_][\w.]*)(?:\((?P<args>[^()]*(?:\(spec\))?)\))?$")


class LazyRef:
    """A `"package.module:attr"` reference, imported on its first call. `factory`: called with a DeviceSpec and
    passing the argument its text names; otherwise the call's arguments pass through unchanged."""

    def __init__(self, text: str, what: str, factory: bool) -> None:
        m = _REF.match(text) if isinstance(text, str) else None
        args = m["args"].strip() if m and m["args"] is not None else None
        allowed = sorted(repr(a) for a in _FACTORY_ARGS if a)
        if m is None or (factory and args not in _FACTORY_ARGS) or (not factory and args is not None):
            form = (f"'package.module:attr' (called with the DeviceSpec), or a call of it with no argument ('m:C()') "
                    f"or with one of {', '.join(allowed)} ('m:C(spec.index)')" if factory else "'package.module:function' (no parentheses: the registry calls it)")
            raise PluginError(f"{what}: {text!r} is not a reference of the form {form}")
        self.text, self.what, self.module, self.attr = text, what, m["module"], m["attr"]
        self._args = _FACTORY_ARGS[args] if factory else None
        self._target: Callable[..., Any] | None = None
        # registry/probe_memo keys a remembered probe by the files beside `probe.__module__`: the plugin's package,
        # imported with its entry point (the referenced module itself may not be imported yet)
        self.__module__ = self.module.rpartition(".")[0] or self.module

    def resolve(self) -> Callable[..., Any]:
        """The referenced object, imported once; PluginError naming the reference when it is missing."""
        if self._target is None:
            try:
                obj: Any = importlib.import_module(self.module)
            except ImportError as e:
                raise PluginError(f"{self.what}: {self.text!r}: cannot import {self.module!r} "
                                  f"({type(e).__name__}: {e})") from e
            for part in self.attr.split("."):
                if not hasattr(obj, part):
                    raise PluginError(f"{self.what}: {self.text!r}: {getattr(obj, '__name__', obj)!r} has no "
                                      f"attribute {part!r}")
                obj = getattr(obj, part)
            if not callable(obj):
                raise PluginError(f"{self.what}: {self.text!r} names {type(obj).__name__} {obj!r}, not a callable")
            self._target = obj
        return self._target

    def __call__(self, *args: Any) -> Any:
        fn = self.resolve()
        return fn(*self._args(*args)) if self._args is not None else fn(*args)

    def __repr__(self) -> str:
        return f"LazyRef({self.text!r})"


def _ref(value: Ref | None, what: str, factory: bool) -> Callable[..., Any] | None:
    if value is None or (callable(value) and not isinstance(value, str)):
        return value
    if not isinstance(value, str):
        raise PluginError(f"{what}: expected a 'package.module:attr' string or a callable, got {type(value).__name__} "
                          f"{value!r}")
    return LazyRef(value, what, factory)


class Pair(NamedTuple):
    """One (renderer, compiler) pair of a Backend. `priority` None: by position, the first pair preferred."""

    name: str
    renderer: Ref
    compiler: Ref
    priority: int | None = None


@dataclass(frozen=True)
class Backend:
    """A device kind and the pieces that build its devices (see the module's docstring for references). The
    DeviceKind fields (`description`, `priority`, `probe`, `count`, `example`, `memo`, `describe_id`,
    `probe_timeout`, `recheck_after`) mean what they mean there; `pairs` are best first unless each gives its priority."""

    kind: str
    description: str = ""
    pairs: Sequence[Pair | tuple] = ()
    allocator: Ref | None = None
    runtime: Ref | None = None
    priority: int = 0
    probe: Ref | None = None
    count: Ref | None = None
    example: bool = False
    memo: bool = False
    describe_id: Ref | None = None
    probe_timeout: float | None = None
    recheck_after: float | None = None
    _built: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind.isidentifier():
            raise PluginError(f"Backend: kind must be a name like 'ACME', got {self.kind!r}")
        w = f"Backend {self.kind!r}"
        if isinstance(self.pairs, (str, bytes)) or not isinstance(self.pairs, Sequence):
            raise PluginError(f"{w}: pairs must be a list of Pair(name, renderer, compiler), got {self.pairs!r}")
        pairs: list[CompilerPairFactory] = []
        seen: set[str] = set()
        for i, p in enumerate(self.pairs):
            if not isinstance(p, tuple) or len(p) not in (3, 4) or not isinstance(p[0], str) or not p[0]:
                raise PluginError(f"{w}: pairs[{i}] must be Pair(name, renderer, compiler[, priority]), got {p!r}")
            p = Pair(*p)
            if p.name in seen:
                raise PluginError(f"{w}: two pairs are named {p.name!r}")
            seen.add(p.name)
            prio = len(self.pairs) - 1 - i if p.priority is None else p.priority
            try:
                pairs.append(CompilerPairFactory(p.name, _ref(p.renderer, f"{w} pair {p.name!r} renderer", True),
                                                 _ref(p.compiler, f"{w} pair {p.name!r} compiler", True), prio))
            except TypeError as e:  # a priority that is not an int
                raise PluginError(f"{w}: {e}") from e
        self._built["pairs"] = pairs
        for name in ("allocator", "runtime"):
            self._built[name] = _ref(getattr(self, name), f"{w} {name}", True)
        try:
            extra = {k: f for k in ("probe", "count", "describe_id")
                     if (f := _ref(getattr(self, k), f"{w} {k}", False)) is not None}
            self._built["kind"] = DeviceKind(self.kind, self.description, self.priority, example=self.example,
                                             memo=self.memo, probe_timeout=self.probe_timeout,
                                             recheck_after=self.recheck_after, **extra)
        except (TypeError, ValueError) as e:
            raise PluginError(f"{w}: {e}") from e

    def device_kind(self) -> DeviceKind:
        return self._built["kind"]

    def pair_factories(self) -> list[CompilerPairFactory]:
        return list(self._built["pairs"])

    def allocator_factory(self) -> AllocatorFactory | None:
        return AllocatorFactory(f) if (f := self._built["allocator"]) is not None else None

    def runtime_factory(self) -> RuntimeFactoryDecl | None:
        return RuntimeFactoryDecl(f) if (f := self._built["runtime"]) is not None else None

    def pieces(self, spec: Any, pair: str) -> tuple[Any, Any, Any, Any]:
        """(allocator, renderer, compiler, runtime) of the record built for `spec` with the pair named `pair`, without
        the registry: a plugin's own tests build a Device from them on a fake driver."""
        pf = {f.name: f for f in self._built["pairs"]}.get(pair)
        if pf is None:
            raise PluginError(f"Backend {self.kind!r} has no pair {pair!r}; its pairs: {sorted(p.name for p in self.pairs)}")
        alloc, rt = self._built["allocator"], self._built["runtime"]
        if alloc is None or rt is None:
            raise PluginError(f"Backend {self.kind!r} declares no {'allocator' if alloc is None else 'runtime'}")
        return alloc(spec), pf.renderer(spec), pf.compiler(spec), rt(spec)


def backends_of(obj: Any) -> list[Backend]:
    """The Backend records a plugin object declares in `DEVICEKIT_BACKEND` (one, or a list): [] when it has none;
    PluginError when the attribute holds anything else or two records of one kind."""
    value = getattr(obj, "DEVICEKIT_BACKEND", None)
    if value is None:
        return []
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    bad = [x for x in items if not isinstance(x, Backend)]
    if bad or not items:
        raise PluginError(f"DEVICEKIT_BACKEND must be a Backend or a list of them, got {value!r}")
    kinds = [b.kind for b in items]
    if len(set(kinds)) != len(kinds):
        raise PluginError(f"DEVICEKIT_BACKEND declares a kind twice: {kinds}")
    return items


class BackendHooks:
    """The four hooks generated from a plugin's Backend records; the registry registers it beside the plugin's
    module and counts its answers as that plugin's."""

    DEVICEKIT_API = API_VERSION

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.backends = {b.kind: b for b in backends}

    def __repr__(self) -> str:
        return f"BackendHooks({', '.join(self.backends)})"

    @hookimpl
    def devicekit_device_kinds(self) -> list[DeviceKind]:
        return [b.device_kind() for b in self.backends.values()]

    @hookimpl
    def devicekit_allocator(self, spec: Any) -> AllocatorFactory | None:
        b = self.backends.get(spec.kind)
        return b.allocator_factory() if b is not None else None

    @hookimpl
    def devicekit_compiler_pairs(self, spec: Any) -> list[CompilerPairFactory]:
        b = self.backends.get(spec.kind)
        return b.pair_factories() if b is not None else []

    @hookimpl
    def devicekit_runtime_factory(self, spec: Any) -> RuntimeFactoryDecl | None:
        b = self.backends.get(spec.kind)
        return b.runtime_factory() if b is not None else None
