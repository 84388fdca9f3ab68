"""What a plugin can declare that would make the registry slow or wrong, in-process (the TOY fixture plus plugins
made here): a huge or non-integer count(), NaN / float / bool priorities in every declaration, a pair added to a
kind the plugin does not own that becomes its default (allowed, but never silent), factories that raise
BaseExceptions."""

from __future__ import annotations

import types

import devicekit as dk
import pytest
from devicekit.errors import PluginError
from devicekit.plugin import (
    API_VERSION,
    AllocatorFactory,
    CompilerPairFactory,
    DeviceKind,
    RuntimeFactoryDecl,
)

MAX_IDS = 4096  # devicekit.registry.probing.MAX_IDS


def plugin(name: str, **hooks) -> types.ModuleType:
    m = types.ModuleType(name)
    m.DEVICEKIT_API = API_VERSION
    for hname, fn in hooks.items():
        setattr(m, hname, dk.hookimpl(fn))
    return m


def kinds_plugin(name: str, **kind):
    return plugin(name, devicekit_device_kinds=lambda: [DeviceKind(name.upper(), **kind)])


# ---------------------------------------------------------------- count()


def test_a_million_ids_are_capped_with_a_recorded_failure(registry):
    calls = []
    registry.register_plugin(kinds_plugin("big", count=lambda: calls.append(1) or 10**6))
    with pytest.warns(RuntimeWarning, match="count\\(\\) returned 1000000"):
        infos = [d for d in dk.devices() if d.kind == "BIG"]
    assert len(infos) == MAX_IDS == 4096 and infos[-1].spec == "BIG:4095" and all(d.available for d in infos)
    (f,) = [f for f in registry.failures() if f.plugin == "big"]
    assert f.phase == "count" and "at most 4096 ids" in str(f.exception)
    with pytest.raises(dk.DeviceNotFoundError) as ei:
        dk.device("BIG:4096")
    assert "BIG:4095 (4096 ids)" in str(ei.value) and len(str(ei.value)) < 300  # abbreviated, not 4096 names
    dk.devices()
    assert calls == [1]  # counted once per registry


def test_many_ids_are_abbreviated_in_messages_and_info(registry):
    from devicekit.cli.info import report, text_report
    registry.register_plugin(kinds_plugin("wide", count=lambda: 300))
    with pytest.raises(dk.DeviceNotFoundError) as ei:
        dk.device("NOPE")
    assert "WIDE, WIDE:1, " in str(ei.value) and "WIDE:299 (300 ids)" in str(ei.value)
    rep = report(registry, build=False)
    assert len(rep["kinds"]["WIDE"]["ids"]) == 300  # JSON keeps every id
    line = next(x for x in text_report(rep).splitlines() if x.strip().startswith("WIDE"))
    assert "WIDE:299 (300 ids)" in line and "WIDE:150" not in line


@pytest.mark.parametrize("bad, why", [(2.5, "must return an int, got 2.5 (float)"),
                                      (True, "must return an int, got True (bool)"),
                                      ("3", "must return an int, got '3' (str)"),
                                      (float("nan"), "must return an int, got nan (float)"),
                                      (-1, "returned -1, a negative number")])
def test_count_must_be_a_non_negative_int(registry, bad, why):
    registry.register_plugin(kinds_plugin("odd", count=lambda: bad))
    with pytest.warns(RuntimeWarning, match="odd"):
        (info,) = [d for d in dk.devices() if d.kind == "ODD"]
    assert not info.available and why in info.reason
    (f,) = [f for f in registry.failures() if f.plugin == "odd"]
    assert f.phase == "count" and why in str(f.exception)


def test_numpy_integer_count_is_accepted(registry):
    np = pytest.importorskip("numpy")
    registry.register_plugin(kinds_plugin("npc", count=lambda: np.int64(3)))
    assert [d.spec for d in dk.devices() if d.kind == "NPC"] == ["NPC", "NPC:1", "NPC:2"]


# ---------------------------------------------------------------- priorities


BAD_PRIORITIES = [(float("nan"), "nan (float)"), (2.5, "2.5 (float)"), (True, "True (bool)"), ("5", "'5' (str)"),
                  (None, "None (NoneType)")]


def _decls(priority):
    noop = lambda s: None
    return [lambda: DeviceKind("K", priority=priority), lambda: AllocatorFactory(noop, priority=priority),
            lambda: CompilerPairFactory("p", noop, noop, priority=priority),
            lambda: RuntimeFactoryDecl(noop, priority=priority)]


@pytest.mark.parametrize("bad, shown", BAD_PRIORITIES)
def test_every_declaration_refuses_a_priority_that_is_not_an_int(bad, shown):
    for make in _decls(bad):
        with pytest.raises(TypeError, match=f"priority must be an int, got {shown.replace('(', '.').replace(')', '.')}"):
            make()


def test_integral_priorities_are_plain_ints():
    np = pytest.importorskip("numpy")
    for make in _decls(np.int32(7)):
        d = make()
        assert d.priority == 7 and type(d.priority) is int


def test_a_bad_priority_is_the_plugins_failure_and_names_it(registry):
    """Built inside the hook (the dataclass refuses it) or forced in afterwards (object.__setattr__, a subclass):
    either way the hook's answer is refused, the plugin named, and the others keep working."""
    from dkfix_toy.toylang import ToyCompiler, ToyRenderer

    def sneaky_pairs(spec):
        if spec.kind != "TOY":
            return []
        decl = CompilerPairFactory("sneaky", ToyRenderer, lambda s: ToyCompiler(level=5), priority=1)
        object.__setattr__(decl, "priority", float("nan"))  # would sort anywhere: NaN compares false both ways
        return [decl]

    nank = plugin("nankind", devicekit_device_kinds=lambda: [DeviceKind("NANK", priority=float("nan"))])
    registry.register_plugin(nank)
    registry.register_plugin(plugin("sneaky", devicekit_compiler_pairs=sneaky_pairs))
    with pytest.warns(RuntimeWarning, match="nankind|sneaky"):
        infos = dk.devices()
    dev = dk.device("TOY")
    assert dev.pair_names == ["toy"] and "NANK" not in {d.kind for d in infos if d.available}
    fails = {f.plugin: f for f in registry.failures()}
    assert fails["nankind"].phase == "hook devicekit_device_kinds"
    assert "DeviceKind 'NANK': priority must be an int, got nan" in str(fails["nankind"])
    assert fails["sneaky"].phase == "hook devicekit_compiler_pairs" and "'sneaky'" in str(fails["sneaky"])
    assert "plugin 'sneaky'" in str(fails["sneaky"]) and "got nan (float)" in str(fails["sneaky"])


# ---------------------------------------------------------------- a pair added to a kind the plugin does not own


def _hijack(priority=50):
    from dkfix_toy.toylang import ToyCompiler, ToyRenderer
    return plugin("hijack", devicekit_compiler_pairs=lambda spec: [
        CompilerPairFactory("hijack-cc", ToyRenderer, lambda s: ToyCompiler(level=7), priority=priority)]
        if spec.kind == "TOY" else [])


def test_foreign_default_pair_is_kept_and_shown_in_info(registry):
    from devicekit.cli.info import report, text_report
    registry.register_plugin(_hijack())
    assert dk.device("TOY").pair_names[0] == "hijack-cc"  # the override is a feature: it stays
    note = registry.pair_override("TOY")
    assert note == ("TOY's default compiler pair 'hijack-cc' comes from plugin 'hijack' (not from a distribution), "
                    "not from TOY's owner 'toy' (not from a distribution)")
    text = text_report(report(registry))
    assert sum("override:" in line for line in text.splitlines()) == 1 and note in text


def test_foreign_default_pair_is_shown_under_debug(registry, monkeypatch, capsys):
    registry.register_plugin(_hijack())
    monkeypatch.setenv("DEVICEKIT_DEBUG", "1")
    dk.device("TOY")
    err = capsys.readouterr().err
    assert "TOY's default compiler pair 'hijack-cc' comes from plugin 'hijack'" in err


def test_owner_pair_in_use_is_not_flagged(registry, monkeypatch, capsys):
    registry.register_plugin(_hijack(priority=0))  # below the owner's working pair: the owner's pair is used
    monkeypatch.setenv("DEVICEKIT_DEBUG", "1")
    assert dk.device("TOY").pair_names[0] == "toy"
    assert registry.pair_override("TOY") is None and "comes from plugin" not in capsys.readouterr().err


# ---------------------------------------------------------------- factories raising BaseExceptions


@pytest.mark.parametrize("exc", [SystemExit("factory exit"), GeneratorExit("factory genexit")])
def test_a_pair_factory_raising_a_base_exception_is_skipped(registry, exc):
    from dkfix_toy.toylang import ToyRenderer

    def boom(spec):
        raise exc

    registry.register_plugin(plugin("exiter", devicekit_compiler_pairs=lambda spec: [
        CompilerPairFactory("exiter", ToyRenderer, boom, priority=50)] if spec.kind == "TOY" else []))
    d = dk.device("TOY")
    assert d.pair_names == ["toy"] and type(exc).__name__ in d.fallback_reason


def test_a_keyboard_interrupt_in_a_factory_reaches_the_caller_and_nothing_is_cached(registry):
    from dkfix_toy.toylang import ToyCompiler, ToyRenderer
    state = {"interrupt": True}

    def compiler(spec):
        if state.pop("interrupt", False):
            raise KeyboardInterrupt
        return ToyCompiler(level=4)

    registry.register_plugin(plugin("ctrlc", devicekit_compiler_pairs=lambda spec: [
        CompilerPairFactory("ctrlc", ToyRenderer, compiler, priority=50)] if spec.kind == "TOY" else []))
    with pytest.raises(KeyboardInterrupt):
        dk.device("TOY")
    assert dk.device("TOY").pair_names[0] == "ctrlc"  # built on the next use, not a half-made device


def test_interrupted_in_process_registration_leaves_no_trace(registry):
    class Hostile(types.ModuleType):
        def __getattr__(self, name):
            if name == "DEVICEKIT_API":
                raise KeyboardInterrupt
            raise AttributeError(name)

    with pytest.raises(KeyboardInterrupt):
        registry.register_plugin(Hostile("hostile"), "hostile")
    assert "hostile" not in {p.name for p in registry.plugins()} and registry.pm.get_plugin("hostile") is None
    registry.register_plugin(kinds_plugin("hostile"))  # the name is free again
    assert "HOSTILE" in {d.kind for d in dk.devices()}


def test_a_failed_registration_keeps_its_record(registry):
    """Unlike an interrupt, a refused registration is a result: the record stays, with the failure."""
    m = plugin("badapi")
    m.DEVICEKIT_API = (99, 0)
    with pytest.raises(PluginError):
        registry.register_plugin(m)
    assert [p.status for p in registry.plugins() if p.name == "badapi"] == ["failed"]
