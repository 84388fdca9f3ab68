"""Hostile values for every declared setting: the class machine for "a setting passes validation, then breaks
whatever reads it" (DEVICEKIT_PROBE_TIMEOUT=1e10 was accepted, then every probe died of OverflowError in
Thread.join and each plugin was blamed). The settings are enumerated from the registry after every installed plugin
has loaded, so a new setting, in the core or in a plugin, is covered without touching this file.

Each (setting, value) must give either a SettingError naming the variable, or a value inside sane bounds; and a
device listing with that value must either raise that SettingError or record no plugin failure the clean
environment does not."""

from __future__ import annotations

import math
import threading
import warnings
from typing import Any

import devicekit as dk
import pytest
from devicekit import settings
from devicekit.errors import SettingError
from devicekit.registry import Registry
from devicekit.spec import DeviceSpec

MAX_RAW = getattr(settings, "MAX_RAW", 32 << 10)
HOSTILE = ["", " ", "\t\n", "-1", "0", "-0", "nan", "NaN", "inf", "-inf", "1e10", "1e23", str(10 ** 23),
           str(-10 ** 23), "9" * 5000, "x" * 5000, "x" * (MAX_RAW + 1), "0x10", "1_000", "1e", ".",
           "é", "ünïcödé", "١٢", "CPU:١", "CPU:" + str(10 ** 23), "\udcff", "a\udcffb", "'", "\"unclosed",
           ",,,", "../../../../etc/passwd", "😀", "true", "all"]

# connecting to the cluster RAY_ADDRESS names is what it asks for: a hostile address is Ray's to refuse, later
NOT_DURING_DISCOVERY = {"RAY_ADDRESS"}


def _declared() -> list[str]:
    dk.devices()  # every installed plugin loaded: their modules declared their settings
    names = [r["name"] for r in settings.describe()]
    assert len(names) >= 20 and "DEVICEKIT_PROBE_TIMEOUT" in names
    return names


NAMES = _declared()


def _sane(v: Any, where: str) -> None:
    """A parsed value every reader can use: finite numbers within machine bounds, strings of bounded length that
    encode as UTF-8."""
    if v is None or isinstance(v, bool):
        return
    if isinstance(v, int):
        assert abs(v) < 1 << 62, f"{where}: {v} is out of any sane range"
    elif isinstance(v, float):
        assert math.isfinite(v) and abs(v) <= threading.TIMEOUT_MAX, f"{where}: {v} is out of any sane range"
    elif isinstance(v, str):
        assert len(v) <= MAX_RAW, f"{where}: a value of {len(v)} characters"
        v.encode("utf-8")  # a lone surrogate raises here, as it would wherever the value is encoded
    elif isinstance(v, DeviceSpec):
        _sane(v.kind, where)
        _sane(v.index, where)
    elif isinstance(v, (tuple, list, frozenset, set)):
        for x in v:
            _sane(x, where)
    else:
        pytest.fail(f"{where}: unexpected value type {type(v).__name__}")


def _get(name: str) -> Any:
    """settings.get(name); a variable that warns instead of raising (DEVICEKIT_DEBUG) must name itself too."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", settings.SettingWarning)
        v = settings.get(name)
    for w in seen:
        assert name in str(w.message), f"{name}: a warning that does not name it: {w.message}"
    return v


@pytest.mark.parametrize("name", NAMES)
def test_every_setting_refuses_hostile_values_by_name_or_gives_a_sane_value(monkeypatch, name):
    for raw in HOSTILE:
        monkeypatch.setenv(name, raw)
        try:
            v = _get(name)
        except SettingError as e:
            assert name in str(e), f"{name}={raw[:40]!r}: the error does not name the variable: {e}"
            assert len(str(e)) < 2000, f"{name}: the error repeats a huge value ({len(str(e))} characters)"
            continue
        _sane(v, f"{name}={raw[:40]!r}")
        row = next(r for r in settings.describe() if r["name"] == name)  # the diagnostic agrees, never raises
        assert row["error"] is None or settings.declared(name).on_error is not settings._RAISE


def _failures(reg: Registry) -> set[tuple[str, str]]:
    return {(f.plugin, f.phase) for f in reg.failures()}


# the listing leg is the file's longest (~15 s: a discovery per parsed value): in PARTS parts, every setting in one,
# so that the suite's two workers share it
PARTS = 3


@pytest.mark.filterwarnings("ignore::devicekit.compile.cache.CacheWarning")  # CACHE_DIR=../../etc/passwd: said, right
@pytest.mark.parametrize("part", range(PARTS))
def test_a_device_listing_under_each_hostile_value_fails_by_name_or_blames_no_plugin(monkeypatch, tmp_path, part):
    """The end-to-end leg: values that parse are handed to real discovery (every installed plugin probed). In a
    scratch directory with a scratch cache: remembered probe answers are written per environment, and a hostile
    DEVICEKIT_CACHE_DIR such as 'é' is a relative path. Part `part` takes every PARTS-th setting."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(tmp_path / "cache"))
    base = Registry()
    base.devices()
    clean = _failures(base)
    for name in NAMES[part::PARTS]:
        if name in NOT_DURING_DISCOVERY:
            continue
        for raw in HOSTILE:
            monkeypatch.setenv(name, raw)
            try:
                _get(name)
            except SettingError:
                continue  # refused by name: the per-setting test covers the message
            try:
                reg = Registry()
                reg.devices()
            except SettingError as e:
                assert name in str(e)
                continue
            new = _failures(reg) - clean
            assert not new, f"{name}={raw[:40]!r}: discovery blamed plugins {sorted(new)}"
        if name == "DEVICEKIT_CACHE_DIR":
            monkeypatch.setenv(name, str(tmp_path / "cache"))
        else:
            monkeypatch.delenv(name)


def test_a_huge_probe_timeout_is_a_setting_error_not_a_failure_of_every_plugin(monkeypatch):
    """The reported case: 1e10 passed validation, then every probe raised OverflowError blamed on its plugin."""
    monkeypatch.setenv("DEVICEKIT_PROBE_TIMEOUT", "1e10")
    with pytest.raises(SettingError, match=r"DEVICEKIT_PROBE_TIMEOUT='1e10' is not valid \(out of range\)"):
        Registry().devices()


def test_a_kinds_own_huge_probe_timeout_is_clamped_not_an_overflow():
    """A plugin's DeviceKind.probe_timeout is not a setting: bounded() clamps it to what threads accept."""
    from devicekit.registry.probing import bounded
    assert bounded(lambda: 7, "probe", 1e300) == 7


def test_huge_values_are_shown_cut_in_the_error(monkeypatch):
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", "x" * 100_000)
    with pytest.raises(SettingError, match=r"DEVICEKIT_CACHE_DIR='x{80}'\.\.\. \(100000 characters\)"):
        settings.get("DEVICEKIT_CACHE_DIR")
