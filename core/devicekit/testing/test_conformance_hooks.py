"""Conformance: the hook contract. The kind is declared, resolves to an allocator, compiler pairs and a runtime, is
listed by `devicekit info --json`, loads and probes alone in a fresh process (what `devicekit info --isolate` does),
and listing devices does not import the plugin's toolchain modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.devicekit_conformance


def _registry():
    from devicekit.registry import get_registry
    return get_registry()


def test_kind_is_declared_with_provenance(dk_spec, dk_info):
    assert dk_info.kind == dk_spec.kind
    assert dk_info.plugin, "the device row names the plugin that declares it"
    if not dk_info.available:
        assert dk_info.reason.strip(), "an unavailable device must say why"


def test_plugin_loaded_without_failures(dk_info):
    rec = next((r for r in _registry().plugins() if r.name == dk_info.plugin), None)
    assert rec is not None, f"plugin {dk_info.plugin!r} not in the registry"
    assert rec.status == "loaded", f"plugin {rec.name!r} is {rec.status}: {[str(f) for f in rec.failures]}"
    failures = [str(f) for f in rec.failures if f.phase != "probe" or dk_info.available]
    assert not failures, failures
    from devicekit.plugin import API_VERSION
    if rec.api is not None:
        assert rec.api[0] == API_VERSION[0]


def test_declared_pairs_resolve(dk_spec, dk_target):
    declared = _registry().pair_names(dk_spec)
    assert declared, f"no compiler pairs declared for {dk_spec}"
    assert dk_target.pair_names, "the target built no pair"
    assert set(dk_target.pair_names) <= set(declared)
    assert dk_target.pair_names[0] == declared[0] or dk_target.fallback_reason, \
        "a target that skipped the best declared pair must say why (fallback_reason)"
    assert dk_target.base_device_key == dk_spec.kind
    for renderer, _compiler in dk_target.compilers:
        assert renderer.device == dk_spec.kind, f"{type(renderer).__name__}.device is {renderer.device!r}"


def test_compiler_identity_names_what_changes_the_bytes(dk_target):
    """`identity()` is the compiler's part of the compile-cache key: toolchain, version, flags, arch. A bare name
    (the base class's default, `llvm`, `cc`) would let an upgraded toolchain reuse stale bytes; two pairs of one kind
    with one identity would share entries."""
    seen: dict[str, str] = {}
    for pair, (_renderer, compiler) in zip(dk_target.pair_names, dk_target.compilers):
        ident = compiler.identity()
        assert isinstance(ident, str) and ident.strip(), f"pair {pair!r}: identity() must be a non-empty str"
        assert compiler.identity() == ident, f"pair {pair!r}: identity() must be stable"
        bare = {pair, getattr(compiler, "name", ""), type(compiler).__name__, type(compiler).__name__.lower()}
        assert ident.strip() not in bare, \
            f"pair {pair!r}: identity() is the bare name {ident!r}: name the toolchain's version, flags and target"
        assert any(ch.isdigit() for ch in ident), f"pair {pair!r}: identity() {ident!r} names no version"
        assert ident not in seen, f"pairs {seen.get(ident)!r} and {pair!r} have one identity {ident!r}"
        seen[ident] = pair


def test_device_resolves_allocator_and_runtime(dk_spec, dk_device):
    from devicekit.memory import Allocator

    assert str(dk_device.spec) == str(dk_spec)
    assert isinstance(dk_device.allocator, Allocator)
    assert callable(dk_device.runtime)
    import devicekit as dk
    assert dk.device(str(dk_spec)) is dk_device, "devices are created once per canonical spec"


def test_probe_and_count(dk_spec, dk_info):
    infos = [d for d in _registry().devices() if d.kind == dk_spec.kind]
    if dk_info.available or infos[0].available:
        assert all(d.available for d in infos)
        from devicekit.spec import DeviceSpec
        want = [str(DeviceSpec(dk_spec.kind, i)) for i in range(len(infos))]
        assert [d.spec for d in infos] == want, "ids are KIND, KIND:1, ... (id 0 prints without ':0')"
    else:
        assert len(infos) == 1 and infos[0].reason


def _fresh_process_sees_it(dk_info) -> None:
    """Skip when the plugin was registered in-process (dk.register_plugin): a fresh interpreter does not have it."""
    if dk_info.distribution is None:
        pytest.skip(f"plugin {dk_info.plugin!r} was registered in-process, not installed: a fresh process has no "
                    f"{dk_info.kind}")


def _subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DEVICEKIT_TRACE_PLUGINS", None)
    return env


def test_devicekit_info_json_lists_the_kind(dk_spec, dk_info):
    _fresh_process_sees_it(dk_info)
    p = subprocess.run([sys.executable, "-m", "devicekit.cli", "info", "--json"], capture_output=True, text=True,
                       timeout=120, env=_subprocess_env(), check=False)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert dk_spec.kind in rep["kinds"], sorted(rep["kinds"])
    k = rep["kinds"][dk_spec.kind]
    assert k["plugin"] == dk_info.plugin
    assert k["available"] == (dk_info.available or k["available"])
    assert [p["name"] for p in k["pairs"]], "info lists the kind's compiler pairs"


def test_plugin_loads_alone_in_a_process_of_its_own(dk_spec, dk_info):
    """Imported, asked for its kinds and probed alone in a fresh process, as `devicekit info --isolate` does: it
    loads without failures, declares the kind and the process exits on its own: no hang, no os._exit, no signal."""
    _fresh_process_sees_it(dk_info)
    from devicekit.cli.isolate import run_one
    row = run_one(dk_info.plugin, timeout=120)
    assert row["outcome"] == "loaded", row.get("detail") or row.get("plugin", {}).get("failures") or row
    assert "note" not in row, row["note"]
    assert dk_spec.kind in row["kinds"], f"alone, plugin {dk_info.plugin!r} declares {sorted(row['kinds'])}"


def test_listing_devices_imports_no_toolchain(dk_spec, dk_target, dk_info):
    """What the pair factories build (renderer and compiler modules) is not imported by `dk.devices()`."""
    _fresh_process_sees_it(dk_info)
    rec = next(r for r in _registry().plugins() if r.name == dk_info.plugin)
    heavy = {type(x).__module__ for pair in dk_target.compilers for x in pair} - {rec.value}
    code = "import json, sys, devicekit as dk; dk.devices(); print(json.dumps(sorted(sys.modules)))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=_subprocess_env(), check=False)
    assert p.returncode == 0, p.stderr
    imported = set(json.loads(p.stdout.strip().splitlines()[-1]))
    assert not heavy & imported, f"dk.devices() imported {sorted(heavy & imported)}: import them in the factories"
