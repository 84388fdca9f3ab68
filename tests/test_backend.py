"""The declarative plugin record (devicekit.backend): one `DEVICEKIT_BACKEND = Backend(...)` in a plugin module and the
registry generates the four hooks; the pieces are named by strings and imported when a device is built; a malformed
record is a PluginError naming the field; and registry/calls.py reads each hook's answer type from hookspecs.py."""

from __future__ import annotations

import sys
import textwrap
import types

import numpy as np
import pytest
from devicekit import hookspecs, ir
from devicekit.backend import Backend, BackendHooks, LazyRef, Pair
from devicekit.errors import PluginError
from devicekit.ir import dtypes
from devicekit.plugin import CompilerPairFactory, DeviceKind
from devicekit.registry.calls import HOOK_TYPES, answer_type
from devicekit.spec import DeviceSpec

# the CPU plugin's documented pieces, under another kind
CPU_PIECES = dict(pairs=[Pair("c", "devicekit_cpu.c_renderer:CRenderer()", "devicekit_cpu.cc_compiler:CCompiler()")],
                  allocator="devicekit_cpu.allocator:CPUAllocator(str(spec))",
                  runtime="devicekit_cpu.runtime:runtime_factory")


def plugin(name: str, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    return mod


@pytest.fixture
def pieces(tmp_path, monkeypatch):
    """A real module of factories that record what they were called with (imported only through a reference)."""
    (tmp_path / "dkrec_pieces.py").write_text(textwrap.dedent("""
        calls = []
        def take(*args):
            calls.append(args)
            return args
        class Holder:
            take = staticmethod(take)
        not_callable = 3
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "dkrec_pieces", raising=False)
    yield "dkrec_pieces"
    sys.modules.pop("dkrec_pieces", None)


def saxpy() -> ir.Kernel:
    k = ir.KernelBuilder("saxpy")
    x = k.param("x", dtypes.float32, 16)
    out = k.param("out", dtypes.float32, 16, writable=True)
    i = k.range(16)
    out[i] = x[i] * 2.0
    return k.build()


def test_a_record_is_a_working_device(registry):
    import devicekit as dk

    registry.register_plugin(plugin("rec", DEVICEKIT_BACKEND=Backend("REC", "the CPU's C pair", **CPU_PIECES)))
    assert "REC" in {d.kind for d in dk.devices()}
    x = np.arange(16, dtype=np.float32)
    out = dk.run(saxpy(), "REC", x=x)["out"]
    assert np.array_equal(out, x * 2)
    assert dk.device("REC").pair_names == ["c"]


def test_pieces_are_imported_when_a_device_is_built_not_when_listed(registry, pieces):
    import devicekit as dk

    registry.register_plugin(plugin("lazy", DEVICEKIT_BACKEND=Backend(
        "LAZY", pairs=[Pair("p", f"{pieces}:take", f"{pieces}:take")], allocator=f"{pieces}:take")))
    assert "LAZY" in {d.kind for d in dk.devices()}
    assert pieces not in sys.modules


def test_a_reference_says_what_it_passes(pieces):
    spec = DeviceSpec("REC", 3)
    assert LazyRef(f"{pieces}:take", "x", factory=True)(spec) == (spec,)
    assert LazyRef(f"{pieces}:take(spec)", "x", factory=True)(spec) == (spec,)
    assert LazyRef(f"{pieces}:take()", "x", factory=True)(spec) == ()
    assert LazyRef(f"{pieces}:take(spec.index)", "x", factory=True)(spec) == (3,)
    assert LazyRef(f"{pieces}:take(str(spec))", "x", factory=True)(spec) == ("REC:3",)
    assert LazyRef(f"{pieces}:Holder.take", "x", factory=True)(spec) == (spec,)
    assert LazyRef(f"{pieces}:take", "x", factory=False)(7) == (7,)  # probe/count/describe_id: passed through


@pytest.mark.parametrize("text, words", [
    ("no_colon", "is not a reference of the form"),
    ("m:f(spec.name)", "with no argument ('m:C()') or with one of 'spec', 'spec.index', 'str(spec)'"),
    ("m:f(", "is not a reference"),
    ("m:f(); import os", "is not a reference"),
    (":f", "is not a reference"),
])
def test_a_malformed_reference_is_refused_when_the_record_is_made(text, words):
    with pytest.raises(PluginError, match=r"Backend 'REC' allocator: ") as ei:
        Backend("REC", allocator=text)
    assert words in str(ei.value)


def test_a_probe_reference_takes_no_call():
    with pytest.raises(PluginError, match=r"Backend 'REC' probe: 'm:probe\(\)' .*no parentheses"):
        Backend("REC", probe="m:probe()")


def test_a_missing_piece_is_said_when_it_is_built(pieces):
    spec = DeviceSpec("REC")
    with pytest.raises(PluginError, match=r"runtime: 'dkrec_nosuch:f': cannot import 'dkrec_nosuch'"):
        LazyRef("dkrec_nosuch:f", "runtime", factory=True)(spec)
    with pytest.raises(PluginError, match=r"'dkrec_pieces:gone': 'dkrec_pieces' has no attribute 'gone'"):
        LazyRef(f"{pieces}:gone", "runtime", factory=True)(spec)
    with pytest.raises(PluginError, match=r"names int 3, not a callable"):
        LazyRef(f"{pieces}:not_callable", "runtime", factory=True)(spec)


def test_a_missing_pair_piece_is_the_pairs_fallback_reason(registry):
    import devicekit as dk

    registry.register_plugin(plugin("half", DEVICEKIT_BACKEND=Backend(
        "HALF", pairs=[Pair("gone", "dkrec_nosuch:R()", "dkrec_nosuch:C()"), *CPU_PIECES["pairs"]],
        allocator=CPU_PIECES["allocator"], runtime=CPU_PIECES["runtime"])))
    t = dk.target("HALF")
    assert t.pair_names == ["c"]
    assert "cannot import 'dkrec_nosuch'" in t.fallback_reason


@pytest.mark.parametrize("kwargs, words", [
    (dict(kind="not a name"), "kind must be a name like 'ACME'"),
    (dict(kind="REC", pairs="c"), "pairs must be a list of Pair"),
    (dict(kind="REC", pairs=[("c", "m:R()")]), r"pairs\[0\] must be Pair\(name, renderer, compiler"),
    (dict(kind="REC", pairs=[Pair("c", "m:R()", "m:C()"), Pair("c", "m:R()", "m:C()")]), "two pairs are named 'c'"),
    (dict(kind="REC", pairs=[Pair("c", "m:R()", "m:C()", 2.5)]), "priority must be an int"),
    (dict(kind="REC", allocator=42), "expected a 'package.module:attr' string or a callable, got int 42"),
    (dict(kind="REC", probe_timeout=-1), "probe_timeout must be a number of seconds >= 0"),
    (dict(kind="REC", priority=float("nan")), "priority must be an int"),
])
def test_a_malformed_record_is_a_plugin_error(kwargs, words):
    with pytest.raises(PluginError, match=words):
        Backend(**kwargs)


def test_pairs_are_best_first_unless_they_say(registry):
    b = Backend("REC", pairs=[Pair("a", "m:R()", "m:C()"), Pair("b", "m:R()", "m:C()"),
                              Pair("c", "m:R()", "m:C()", 50)])
    assert [(f.name, f.priority) for f in BackendHooks([b]).devicekit_compiler_pairs(DeviceSpec("REC"))] == \
        [("a", 2), ("b", 1), ("c", 50)]


def test_generated_hooks_answer_for_their_kind_only():
    h = BackendHooks([Backend("REC", "d", priority=3, **CPU_PIECES)])
    assert h.devicekit_device_kinds() == [DeviceKind("REC", "d", 3, probe=h.devicekit_device_kinds()[0].probe)]
    other = DeviceSpec("CPU")
    assert h.devicekit_allocator(other) is None and h.devicekit_runtime_factory(other) is None
    assert h.devicekit_compiler_pairs(other) == []
    assert h.devicekit_allocator(DeviceSpec("REC")) is not None


def test_module_hooks_still_run_beside_the_record(registry):
    """What a record cannot say (pairs found at run time, RAY's) stays a hook of the module, counted as its own."""
    import devicekit as dk
    from devicekit.hookspecs import hookimpl

    @hookimpl
    def devicekit_compiler_pairs(spec):
        if spec.kind != "MIX":
            return []
        from devicekit_cpu.c_renderer import CRenderer
        from devicekit_cpu.cc_compiler import CCompiler
        return [CompilerPairFactory("late", lambda s: CRenderer(), lambda s: CCompiler(), priority=9)]

    rec = registry.register_plugin(plugin("mix", devicekit_compiler_pairs=devicekit_compiler_pairs,
                                          DEVICEKIT_BACKEND=Backend("MIX", **CPU_PIECES)))
    assert dk.target("MIX").pair_names == ["late", "c"]
    assert [d.plugin for d in dk.devices() if d.kind == "MIX"] == ["mix"] and rec.hooks is not None
    registry.unregister_plugin("mix")  # the generated hooks go with the module
    assert "MIX" not in {d.kind for d in dk.devices()}


@pytest.mark.parametrize("value, words", [(42, "must be a Backend or a list of them, got 42"), ([], "got []"),
                                          ([Backend("REC"), Backend("REC")], "declares a kind twice")])
def test_a_bad_devicekit_backend_attribute_is_the_plugins_failure(registry, value, words):
    with pytest.raises(PluginError, match=words.replace("[", r"\[").replace("]", r"\]")):
        registry.register_plugin(plugin("bad", DEVICEKIT_BACKEND=value))
    registry.unregister_plugin("bad")
    assert registry.plugin_set.pm.get_plugin("bad") is None


def test_two_kinds_in_one_plugin(registry):
    import devicekit as dk

    registry.register_plugin(plugin("two", DEVICEKIT_BACKEND=[Backend("ONE", **CPU_PIECES),
                                                             Backend("TWO", **CPU_PIECES)]))
    assert {"ONE", "TWO"} <= {d.kind for d in dk.devices()}


def test_a_remembered_probe_is_keyed_by_the_plugins_package():
    """registry/probe_memo keys a kind's remembered answer by the files beside `probe.__module__`: a reference says
    its plugin's package (imported with the entry point), not devicekit.backend's."""
    assert LazyRef("devicekit_opencl.platform:probe", "probe", factory=False).__module__ == "devicekit_opencl"
    assert LazyRef("flat:probe", "probe", factory=False).__module__ == "flat"


# ---------------------------------------------------------------- the hooks' answer types, from hookspecs.py
def test_hook_types_are_the_specs_annotations():
    assert HOOK_TYPES == {
        "devicekit_device_kinds": (DeviceKind, True),
        "devicekit_allocator": (hookspecs.AllocatorFactory, False),
        "devicekit_compiler_pairs": (CompilerPairFactory, True),
        "devicekit_runtime_factory": (hookspecs.RuntimeFactoryDecl, False),
    }


def test_answer_type_reads_list_and_optional_and_refuses_the_rest():
    def lst() -> list[DeviceKind]: ...
    def opt() -> CompilerPairFactory | None: ...
    def bad() -> DeviceKind: ...
    assert answer_type(lst) == (DeviceKind, True)
    assert answer_type(opt) == (CompilerPairFactory, False)
    with pytest.raises(TypeError, match="hook spec bad returns .*expected list\\[X\\] or X \\| None"):
        answer_type(bad)


def test_pieces_builds_a_records_parts_without_the_registry():
    from devicekit.targets import Device

    b = Backend("REC", **CPU_PIECES)
    spec = DeviceSpec("REC")
    dev = Device(spec, *b.pieces(spec, "c"))
    x = np.arange(16, dtype=np.float32)
    import devicekit as dk
    assert np.array_equal(dk.run(saxpy(), dev, x=x)["out"], x * 2)
    with pytest.raises(PluginError, match=r"Backend 'REC' has no pair 'llvm'; its pairs: \['c'\]"):
        b.pieces(spec, "llvm")
    with pytest.raises(PluginError, match="declares no allocator"):
        Backend("REC", pairs=CPU_PIECES["pairs"]).pieces(spec, "c")
