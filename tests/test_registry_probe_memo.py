"""Remembered probe answers (registry/probe_memo.py), with the really installed plugins: a second process lists
OPENCL and CUDA without running their probes (no pyopencl import), a changed environment is a miss, a device is
probed for real before it is built, `devicekit info` always probes, and a planted or malformed answer is never
trusted beyond listing. Speed itself is measured in bench/discovery.py, never asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import devicekit as dk
import pytest
from devicekit.compile.cache import reset_default_cache
from devicekit.plugin import Availability, DeviceKind
from devicekit.registry import Registry, probe_memo

LIST = ("import sys, json, devicekit as dk; from devicekit.registry import get_registry; dk.devices(); "
        "r = get_registry(); print(json.dumps({'remembered': sorted(k for k, e in r.kind_table().items() "
        "if e.remembered), 'pyopencl': 'pyopencl' in sys.modules}))")


def _run(code: str, cache: str, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    env.update(DEVICEKIT_CACHE_DIR=cache, **extra)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(tmp_path))
    reset_default_cache()
    yield str(tmp_path)
    reset_default_cache()


def test_a_second_process_lists_remembered_kinds_without_probing_them(cache):
    first = _run(LIST, cache)
    assert first["remembered"] == [] and first["pyopencl"]  # the first process probes OPENCL (imports pyopencl)
    second = _run(LIST, cache)
    assert {"OPENCL", "CUDA"} <= set(second["remembered"]), second
    assert not second["pyopencl"], "a remembered OPENCL answer must not import pyopencl"
    assert "CPU" not in second["remembered"] and "RAY" not in second["remembered"]  # kinds that did not opt in


def test_a_changed_environment_is_a_miss(cache):
    _run(LIST, cache)
    assert _run(LIST, cache, OCL_ICD_VENDORS="/nonexistent-vendors")["remembered"] == []
    assert _run(LIST, cache, DEVICEKIT_PROBE_CACHE="0")["remembered"] == []


def test_building_a_device_and_info_probe_for_real(cache):
    Registry().devices()  # remembers
    reg = Registry()
    reg.devices()
    entry = reg.kind_table()["OPENCL"]
    assert entry.remembered
    reg.device("OPENCL")  # probed again before it is built
    assert not entry.remembered
    from devicekit.cli.info import report
    reg = Registry()
    reg.devices()
    assert any(e.remembered for e in reg.kind_table().values())
    report(reg, build=False)
    assert not any(e.remembered for e in reg.kind_table().values())


def test_a_stale_answer_never_builds_and_info_corrects_it(cache):
    """A remembered 'unavailable' (a driver installed since, and nothing in the key noticed) shows in the listing
    only: dk.device probes for real, and info rewrites the answer."""
    reg = Registry()
    entry = reg.kind_table()["OPENCL"]
    real = reg.availability(entry)
    assert real.ok, "PoCL is installed by scripts/dev-setup.sh"
    probe_memo.remember(entry, Availability.no("stale: planted by the test"), None)
    reg = Registry()
    assert next(d for d in reg.devices() if d.kind == "OPENCL").reason == "stale: planted by the test"
    assert reg.device("OPENCL").spec.kind == "OPENCL"
    reg = Registry()
    reg.probe_all()
    assert reg.availability(reg.kind_table()["OPENCL"]).ok
    assert probe_memo.recall(reg.kind_table()["OPENCL"])[0].ok  # refreshed


@pytest.mark.parametrize("stored", [b"[]", b"null", b'{"ok": 1, "reason": "", "priority": null, "count": 1}',
                                    b'{"ok": true, "reason": "", "priority": null, "count": 0}',
                                    b'{"ok": true, "reason": "", "priority": true, "count": 1}',
                                    b'{"ok": false, "reason": "x", "priority": null, "count": 3}',
                                    b'{"ok": true, "reason": "", "priority": 1.5, "count": 1}', b"\xff", b"[" * 50_000])
def test_a_malformed_remembered_answer_is_a_miss(cache, stored):
    reg = Registry()
    entry = reg.kind_table()["OPENCL"]
    probe_memo._store().put(probe_memo.key(entry), stored, replace=True)
    assert probe_memo.recall(entry) is None
    reg.devices()
    assert not entry.remembered


def test_in_process_plugins_and_kinds_that_do_not_opt_in_are_never_remembered(cache):
    calls = []

    def probe():
        calls.append(1)
        return Availability.yes()

    m = __import__("types").ModuleType("memo_toy")
    m.DEVICEKIT_API = dk.plugin.API_VERSION
    m.devicekit_device_kinds = dk.hookimpl(lambda: [DeviceKind("MEMOTOY", "t", 1, probe=probe, memo=True)])
    for _ in range(2):
        reg = Registry(entry_points=False)
        reg.register_plugin(m, "memo_toy")
        reg.devices()
    assert len(calls) == 2  # no distribution: probed each time
    with pytest.raises(TypeError, match="memo must be a bool"):
        DeviceKind("X", memo="yes")
