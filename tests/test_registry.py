import importlib
import threading
import types

import devicekit as dk
import pytest
from devicekit.errors import DeviceNotFoundError, DeviceUnavailableError, PluginError, ResolutionError
from devicekit.plugin import API_VERSION, Availability, CompilerPairFactory, DeviceKind
from devicekit.registry import Registry


def plugin(name: str, **hooks) -> types.ModuleType:
    """An in-process plugin module with the given hook implementations."""
    m = types.ModuleType(name)
    m.DEVICEKIT_API = API_VERSION
    for hname, fn in hooks.items():
        setattr(m, hname, dk.hookimpl(fn))
    return m


def test_device_created_once_per_canonical_spec(registry):
    a = dk.device("TOY")
    assert dk.device("toy:0") is a and dk.device(dk.DeviceSpec("TOY")) is a
    assert dk.device("TOY:1") is not a and str(dk.device("TOY:1").spec) == "TOY:1"
    assert a.base_device_key == "TOY" == dk.device("TOY:1").base_device_key


def test_device_creation_is_thread_safe(registry):
    got, barrier = [], threading.Barrier(16)

    def worker():
        barrier.wait()
        got.append(dk.device("TOY:1"))

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 16 and all(d is got[0] for d in got)


def test_failing_pair_is_skipped_with_reason(registry):
    d = dk.device("TOY")
    assert d.pair_names == ["toy"]
    assert "toy-turbo" in d.fallback_reason and "toycc-turbo" in d.fallback_reason
    t = dk.target("TOY")
    assert t.pair_names == ["toy"] and t.compiler.name == "toyc" and t.renderer.lang == "toy"
    assert t.fallback_reason == d.fallback_reason


def test_fallback_is_printed_under_debug(registry, monkeypatch, capsys):
    monkeypatch.setenv("DEVICEKIT_DEBUG", "1")
    dk.device("TOY")
    err = capsys.readouterr().err
    assert "using compiler pair 'toy'" in err and "toy-turbo" in err


def test_unknown_device_lists_available(registry):
    with pytest.raises(DeviceNotFoundError) as ei:
        dk.device("NOPE")
    msg = str(ei.value)
    assert "'NOPE'" in msg and "Available: TOY, TOY:1" in msg


def test_index_out_of_range_lists_ids(registry):
    with pytest.raises(DeviceNotFoundError, match=r"TOY has 2 device\(s\): TOY, TOY:1"):
        dk.device("TOY:2")


def test_unavailable_kind_says_why(registry):
    registry.register_plugin(plugin("nodrv", devicekit_device_kinds=lambda: [
        DeviceKind("NODRV", probe=lambda: Availability.no("libnodrv.so not found"))]))
    with pytest.raises(DeviceUnavailableError, match="libnodrv.so not found"):
        dk.device("NODRV")
    info = {d.spec: d for d in dk.devices()}
    assert not info["NODRV"].available and info["NODRV"].reason == "libnodrv.so not found"
    assert info["NODRV"].plugin == "nodrv"


def test_devices_lists_kinds_with_provenance(registry):
    infos = dk.devices()
    toy = [d for d in infos if d.kind == "TOY"]
    assert [d.spec for d in toy] == ["TOY", "TOY:1"]
    assert all(d.available and d.plugin == "toy" for d in toy)
    assert toy[0].pair_names == ("toy-turbo", "toy")  # declared pairs; building is not needed to list
    assert toy[0].to_dict()["pair_names"] == ["toy-turbo", "toy"]


def test_pair_from_another_plugin_ordered_by_priority(registry):
    from dkfix_toy.toylang import ToyCompiler, ToyRenderer
    registry.register_plugin(plugin("extra", devicekit_compiler_pairs=lambda spec: [
        CompilerPairFactory("extra-hi", ToyRenderer, lambda s: ToyCompiler(level=9), priority=3),
        CompilerPairFactory("extra-lo", ToyRenderer, lambda s: ToyCompiler(level=1), priority=0),
    ] if spec.kind == "TOY" else []))
    assert dk.device("TOY").pair_names == ["extra-hi", "toy", "extra-lo"]
    assert dk.device("TOY").compiler.level == 9


def test_tie_at_top_names_both_plugins(registry):
    from dkfix_toy.toylang import ToyCompiler, ToyRenderer
    registry.register_plugin(plugin("rival", devicekit_compiler_pairs=lambda spec: [
        CompilerPairFactory("rival", ToyRenderer, lambda s: ToyCompiler(), priority=10)]))
    with pytest.raises(ResolutionError, match=r"'rival'.*'toy'|'toy'.*'rival'"):
        dk.device("TOY")


def test_same_kind_from_two_plugins(registry):
    registry.register_plugin(plugin("toy2", devicekit_device_kinds=lambda: [DeviceKind("TOY", priority=-10)]))
    with pytest.raises(ResolutionError, match="device kind TOY"):
        dk.device("TOY")
    assert not next(d for d in dk.devices() if d.kind == "TOY").available


def test_wrong_return_type_is_the_plugins_failure(registry):
    registry.register_plugin(plugin("liar", devicekit_device_kinds=lambda: {"kind": "LIAR"},
                                    devicekit_allocator=lambda spec: "not a factory"))
    with pytest.warns(RuntimeWarning, match="liar"):
        assert dk.device("TOY").allocator is not None  # others keep working
    fails = {f.phase: f for f in registry.failures() if f.plugin == "liar"}
    assert isinstance(fails["hook devicekit_device_kinds"].exception, TypeError)
    assert "list of DeviceKind" in str(fails["hook devicekit_device_kinds"].exception)
    assert isinstance(fails["hook devicekit_allocator"].exception, TypeError)


def test_raising_hook_is_isolated(registry):
    def boom():
        raise RuntimeError("enumeration exploded")
    registry.register_plugin(plugin("boom", devicekit_device_kinds=boom))
    with pytest.warns(RuntimeWarning, match="enumeration exploded"):
        devs = dk.devices()
    assert any(d.kind == "TOY" and d.available for d in devs)
    boom_dev = next(d for d in devs if d.kind == "BOOM")
    assert not boom_dev.available and "enumeration exploded" in boom_dev.reason


def test_strict_mode_raises_on_hook_failure():
    reg = Registry(entry_points=False, strict=True, disabled=set())
    reg.register_plugin(plugin("boom2", devicekit_device_kinds=lambda: 1 / 0))
    with pytest.raises(PluginError, match="ZeroDivisionError.*STRICT"):
        reg.devices()


def test_misspelled_hook_caught_by_check_pending(registry):
    def no_kinds():
        return []

    with pytest.raises(PluginError, match="devicekit_device_kind"):
        registry.register_plugin(plugin("typo", devicekit_device_kind=no_kinds))
    assert registry.pm.get_plugin("typo") is None
    assert [p.status for p in registry.plugins() if p.name == "typo"] == ["failed"]


def test_api_major_mismatch_refused(registry):
    m = plugin("future")
    m.DEVICEKIT_API = (API_VERSION[0] + 1, 0)
    with pytest.raises(PluginError) as ei:
        registry.register_plugin(m)
    msg = str(ei.value)
    assert f"API {API_VERSION[0] + 1}.0" in msg and f"API {API_VERSION[0]}.{API_VERSION[1]}" in msg
    assert "upgrade devicekit" in msg


def test_missing_api_declaration_is_noted(registry):
    m = types.ModuleType("legacy")
    rec = registry.register_plugin(m)
    assert rec.status == "loaded" and any("DEVICEKIT_API" in n for n in rec.notes)


def test_duplicate_name_refused(registry):
    import dkfix_toy.plugin
    with pytest.raises(PluginError, match="already registered"):
        registry.register_plugin(dkfix_toy.plugin, "toy")


def test_unregister(registry):
    registry.unregister_plugin("toy")
    with pytest.raises(DeviceNotFoundError):
        dk.device("TOY")


def test_default_device(registry, monkeypatch):
    assert str(registry.default_spec()) == "TOY"
    assert dk.device() is dk.device("TOY")
    monkeypatch.setenv("DEVICEKIT_DEVICE", "toy:1")
    assert str(dk.device().spec) == "TOY:1"
    monkeypatch.setenv("DEVICEKIT_DEVICE", "NOPE")
    with pytest.raises(DeviceNotFoundError):
        dk.device()


def test_default_device_tie_is_an_error(registry):
    registry.register_plugin(plugin("twin", devicekit_device_kinds=lambda: [DeviceKind("TWIN", priority=-10)]))
    with pytest.raises(ResolutionError, match="DEVICEKIT_DEVICE"):
        dk.device()


def test_target_of_unavailable_kind(registry):
    from dkfix_toy.toylang import ToyCompiler, ToyRenderer
    registry.register_plugin(plugin(
        "faraway",
        devicekit_device_kinds=lambda: [DeviceKind("FAR", probe=lambda: Availability.no("no such hardware here"))],
        devicekit_compiler_pairs=lambda spec: [CompilerPairFactory("far", ToyRenderer, lambda s: ToyCompiler())]
        if spec.kind == "FAR" else []))
    t = dk.target("FAR")
    assert t.pair_names == ["far"] and t.base_device_key == "FAR"
    with pytest.raises(DeviceUnavailableError, match="no such hardware here"):
        dk.device("FAR")
    with pytest.raises(DeviceNotFoundError):
        dk.target("NOWHERE")


def test_trace_plugins(capsys):
    import dkfix_toy.plugin
    reg = Registry(entry_points=False, strict=False, disabled=set(), trace=True)
    reg.register_plugin(dkfix_toy.plugin, "toy")
    reg.devices()
    err = capsys.readouterr().err
    assert "devicekit-trace: call devicekit_device_kinds() -> [toy]" in err
    assert "devicekit_device_kinds returned" in err


def test_no_submodule_is_named_like_a_public_function():
    """Importing a submodule binds it on the package: a module named `device` would shadow dk.device()."""
    import pkgutil
    functions = {n for n in dk.__all__ if callable(getattr(dk, n)) and not isinstance(getattr(dk, n), type)}
    assert {"device", "target", "devices", "run"} <= functions
    modules = {m.name for m in pkgutil.iter_modules(dk.__path__)}
    assert not functions & modules, functions & modules
    for m in sorted(modules):
        importlib.import_module(f"devicekit.{m}")
    assert all(callable(getattr(dk, n)) and not isinstance(getattr(dk, n), types.ModuleType) for n in functions)


def test_disabled_name_blocks_in_process_registration():
    import dkfix_toy.plugin
    reg = Registry(entry_points=True, strict=False, disabled={"toy"})
    rec = reg.register_plugin(dkfix_toy.plugin, "toy")
    assert rec.status == "blocked" and reg.pm.get_plugin("toy") is None
    assert "TOY" not in {d.kind for d in reg.devices() if d.available}


def test_the_probe_may_set_the_kinds_priority(registry):
    """A probe knows what it found (a real GPU, or a host-CPU emulation): its Availability.priority replaces the
    declared one for listing and for the default device; None keeps the declared one."""
    registry.register_plugin(plugin("gpuish", devicekit_device_kinds=lambda: [
        DeviceKind("LOWGPU", priority=-50, probe=lambda: Availability.yes(priority=500)),
        DeviceKind("EMUL", priority=400, probe=lambda: Availability.yes(priority=-60)),
        DeviceKind("PLAIN", priority=-70, probe=lambda: Availability.yes())]))
    rows = {d.spec: d for d in dk.devices()}
    assert (rows["LOWGPU"].priority, rows["EMUL"].priority, rows["PLAIN"].priority) == (500, -60, -70)
    assert registry.default_spec().kind == "LOWGPU"  # not EMUL, whose declaration said 400
    order = [d.kind for d in dk.devices()]
    assert order.index("LOWGPU") < order.index("TOY") < order.index("EMUL") < order.index("PLAIN")


@pytest.mark.parametrize("bad", [float("nan"), 2.5, True, "5"])
def test_a_probe_priority_must_be_an_int(bad):
    with pytest.raises(TypeError, match="priority must be an int"):
        Availability.yes(priority=bad)


@pytest.mark.parametrize(("bad", "exc", "words"), [(-1, ValueError, ">= 0"), (float("nan"), ValueError, ">= 0"),
                                                  ("30", TypeError, "number of seconds"),
                                                  (True, TypeError, "number of seconds")])
def test_a_kinds_probe_timeout_must_be_seconds(bad, exc, words):
    from devicekit.plugin import DeviceKind
    with pytest.raises(exc, match=f"DeviceKind 'SLOW': probe_timeout.*{words}"):
        DeviceKind("SLOW", probe_timeout=bad)
    assert DeviceKind("SLOW", probe_timeout=30).probe_timeout == 30.0


def test_a_misspelled_kind_says_did_you_mean(registry):
    with pytest.raises(DeviceNotFoundError, match=r"no device 'TOYY'\. Did you mean 'TOY'\? Available: TOY"):
        dk.device("TOYY")
    with pytest.raises(DeviceNotFoundError) as ei:
        dk.device("ZZZZZ")
    assert "Did you mean" not in str(ei.value)


def test_real_plugins_did_you_mean_and_gpu_lists_the_gpu_kinds():
    """With the installed plugins (CPU, CUDA, METAL, OPENCL, ...): `CPUU` -> CPU; `GPU` names each GPU kind
    installed and whether it is available here; `NVIDIA` -> CUDA."""
    reg = Registry()
    with pytest.raises(DeviceNotFoundError, match=r"Did you mean 'CPU'\?"):
        reg.device("CPUU")
    with pytest.raises(DeviceNotFoundError) as ei:
        reg.device("GPU")
    msg = str(ei.value)
    assert "GPU is not a device kind; GPUs are reached through their own kinds: installed" in msg
    for kind in ("CUDA", "METAL", "OPENCL"):  # installed by scripts/dev-setup.sh
        assert kind in reg.kind_table()
        avail = "available" if reg.availability(reg.kind_table()[kind]).ok else "unavailable here"
        assert f"{kind} ({avail})" in msg
    with pytest.raises(DeviceNotFoundError, match="NVIDIA is not a device kind; it is reached through CUDA"):
        reg.device("nvidia:0")


def test_gpu_without_gpu_plugins_says_what_to_install():
    from devicekit.registry.suggest import kind_hint
    hint = kind_hint("GPU", {"CPU": (True, "the host CPU"), "PYTHON": (True, "")})
    assert "none of them installed" in hint and "pip install devicekit-cuda, devicekit-metal, devicekit-opencl" in hint
    assert "VEGA" in kind_hint("GPU", {"VEGA": (True, "an AMD GPU"), "CPU": (True, "")})  # a GPU by its description
    assert kind_hint("CPU", {"CPU": (True, "")}) == ""
