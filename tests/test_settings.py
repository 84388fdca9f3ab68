"""devicekit.settings: every environment variable parsed in one place, each error naming the variable, the value and
what it accepts; the default device from DEVICEKIT_DEVICE checked and named in errors, `info` and `devices`; and a
machine check that no code reads a DEVICEKIT_* variable any other way, and that docs/cli.md lists every one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import devicekit as dk
import pytest
from devicekit import settings
from devicekit.cli import main
from devicekit.errors import DeviceKitError, DeviceNotFoundError, SettingError
from devicekit.plugin import CompilerPairFactory

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- parsers


@pytest.mark.parametrize("raw, value", [("1073741824", 1 << 30), ("1G", 1 << 30), ("1g", 1 << 30), ("512M", 512 << 20),
                                        ("512MiB", 512 << 20), ("1.5GiB", 3 << 29), ("64k", 65536), ("64 KB", 65536),
                                        ("0", 0), ("2T", 2 << 40)])
def test_sizes(raw, value):
    assert settings.size(raw) == value


@pytest.mark.parametrize("raw", ["1X", "-1", "1.5", "G", "1 G B", "1e9", "ten", "0x10"])
def test_bad_sizes(raw):
    with pytest.raises(ValueError):
        settings.size(raw)


@pytest.mark.parametrize("raw, value", [("1", True), ("yes", True), ("ON", True), (" true ", True), ("0", False),
                                        ("no", False), ("Off", False)])
def test_flags(raw, value):
    assert settings.flag(raw) is value


@pytest.mark.parametrize("name, raw, accepts", [
    ("DEVICEKIT_CACHE_MAX_BYTES", "1X", "a size in bytes"),
    ("DEVICEKIT_CACHE", "banana", "1 or 0 (also true/false, yes/no, on/off)"),
    ("DEVICEKIT_PROBE_TIMEOUT", "abc", "a number of seconds from 0 to 1000000"),
    ("DEVICEKIT_PROBE_TIMEOUT", "nan", "a number of seconds from 0 to 1000000"),
    ("DEVICEKIT_PROBE_TIMEOUT", "-1", "a number of seconds from 0 to 1000000"),
    ("DEVICEKIT_DEVICE", "garbage!!", "a device name KIND or KIND:INDEX"),
    ("DEVICEKIT_DISABLE_PLUGINS", "cuda;metal", "comma-separated plugin (entry-point) names"),
    ("DEVICEKIT_STRICT_PLUGINS", "2", "1 or 0"),
    ("DEVICEKIT_SLOW", "please", "1 or 0"),
])
def test_a_bad_value_names_the_variable_the_value_and_what_it_accepts(monkeypatch, name, raw, accepts):
    monkeypatch.setenv(name, raw)
    with pytest.raises(SettingError) as ei:
        settings.get(name)
    msg = str(ei.value)
    assert msg.startswith(f"{name}={raw!r} is not valid") and accepts in msg and "Unset it to use the default" in msg
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, DeviceKitError)


def test_values_defaults_and_sources(monkeypatch):
    monkeypatch.setenv("DEVICEKIT_CACHE_MAX_BYTES", "1G")
    monkeypatch.setenv("DEVICEKIT_DISABLE_PLUGINS", " cuda , Metal ,")
    monkeypatch.setenv("DEVICEKIT_PROBE_TIMEOUT", "")  # empty counts as unset
    assert settings.get("DEVICEKIT_CACHE_MAX_BYTES") == 1 << 30
    assert settings.get("DEVICEKIT_DISABLE_PLUGINS") == {"cuda", "Metal"}
    assert settings.get("DEVICEKIT_PROBE_TIMEOUT") == 5.0 and settings.source("DEVICEKIT_PROBE_TIMEOUT") == "default"
    assert settings.source("DEVICEKIT_CACHE_MAX_BYTES") == "environment"
    rows = {r["name"]: r for r in settings.describe()}
    assert rows["DEVICEKIT_CACHE_MAX_BYTES"]["value"] == 1 << 30 and rows["DEVICEKIT_CACHE_MAX_BYTES"]["raw"] == "1G"
    assert rows["DEVICEKIT_DEBUG"]["source"] == "default" and rows["DEVICEKIT_DEBUG"]["error"] is None


def test_cache_settings_go_through_settings(monkeypatch, tmp_path):
    from devicekit.compile import cache
    assert settings.declared("DEVICEKIT_CACHE_MAX_BYTES").default == cache.DEFAULT_MAX_BYTES
    monkeypatch.setenv("DEVICEKIT_CACHE_MAX_BYTES", "1G")  # was a raw int() traceback on every compile
    assert cache.CompileCache(tmp_path).max_bytes == 1 << 30
    monkeypatch.setenv("DEVICEKIT_CACHE_MAX_BYTES", "1X")
    with pytest.raises(SettingError, match="DEVICEKIT_CACHE_MAX_BYTES='1X'"):
        cache.CompileCache(tmp_path)
    monkeypatch.delenv("DEVICEKIT_CACHE_MAX_BYTES")
    monkeypatch.setenv("DEVICEKIT_CACHE", "banana")  # was silently "on"
    with pytest.raises(SettingError, match="DEVICEKIT_CACHE='banana'"):
        cache.CompileCache(tmp_path)
    monkeypatch.setenv("DEVICEKIT_CACHE", "off")
    assert cache.CompileCache(tmp_path).info()["state"].startswith("disabled")


def test_bad_debug_level_warns_once_and_counts_as_1(monkeypatch):
    from devicekit.debug import debug_level
    monkeypatch.setenv("DEVICEKIT_DEBUG", "abc")
    with pytest.warns(settings.SettingWarning, match="DEVICEKIT_DEBUG='abc'.*an integer from 0 to 9"):
        assert debug_level() == 1
    monkeypatch.setenv("DEVICEKIT_DEBUG", "3")
    assert debug_level() == 3


def test_bad_registry_settings_raise_naming_the_variable(monkeypatch):
    from devicekit.registry import Registry
    for name, raw in [("DEVICEKIT_PROBE_TIMEOUT", "abc"), ("DEVICEKIT_STRICT_PLUGINS", "maybe"),
                      ("DEVICEKIT_TRACE_PLUGINS", "loud"), ("DEVICEKIT_DISABLE_PLUGINS", "a b")]:
        monkeypatch.setenv(name, raw)
        with pytest.raises(SettingError, match=f"{name}={raw!r}"):
            Registry(entry_points=False)
        monkeypatch.delenv(name)


# ---------------------------------------------------------------- plugins declare their own


def test_plugins_declare_variables_through_the_same_api(monkeypatch):
    monkeypatch.setattr(settings, "_settings", dict(settings._settings))  # forget the test's declaration afterwards
    settings.register("DKTEST_WIDGETS", settings.int_in(1, 8), 2, "widgets per device", "dk-test-plugin")
    assert settings.get("DKTEST_WIDGETS") == 2
    monkeypatch.setenv("DKTEST_WIDGETS", "9")
    with pytest.raises(SettingError, match=r"DKTEST_WIDGETS='9' is not valid \(out of range\): expected an integer "
                                           r"from 1 to 8. Unset it to use the default \(2\)"):
        settings.get("DKTEST_WIDGETS")
    row = next(r for r in settings.describe() if r["name"] == "DKTEST_WIDGETS")
    assert row["owner"] == "dk-test-plugin" and row["error"] and row["source"] == "environment"
    settings.register("DKTEST_WIDGETS", settings.int_in(1, 8), 3, "widgets", "dk-test-plugin")  # a reload: fine
    with pytest.raises(ValueError, match="already declared by dk-test-plugin"):
        settings.register("DKTEST_WIDGETS", settings.flag, False, "", "another-plugin")
    with pytest.raises(LookupError, match="not a declared setting"):
        settings.get("DKTEST_NEVER_DECLARED")


def test_a_bad_variable_read_by_a_factory_is_an_error_not_a_quiet_fallback(registry, monkeypatch):
    """A pair factory reading a bad value must not be skipped like a missing toolchain (the device would silently
    use another compiler): the SettingError reaches the caller."""
    import types

    from dkfix_toy.toylang import ToyCompiler, ToyRenderer

    def pairs(spec):
        return [CompilerPairFactory("tuned", ToyRenderer, lambda s: ToyCompiler(level=settings.get("DKTEST_TOY_LEVEL")),
                                    priority=50)] if spec.kind == "TOY" else []

    tuned = types.ModuleType("tuned")
    tuned.DEVICEKIT_API = (1, 0)
    tuned.devicekit_compiler_pairs = dk.hookimpl(pairs)
    monkeypatch.setattr(settings, "_settings", dict(settings._settings))
    settings.register("DKTEST_TOY_LEVEL", settings.int_in(0, 9), 1, "toy optimization level", "dk-test-plugin")
    registry.register_plugin(tuned)
    monkeypatch.setenv("DKTEST_TOY_LEVEL", "high")
    with pytest.raises(SettingError, match="DKTEST_TOY_LEVEL='high'"):
        dk.device("TOY")
    monkeypatch.setenv("DKTEST_TOY_LEVEL", "3")
    assert dk.device("TOY").compiler.level == 3


def test_unknown_devicekit_variables_are_found_with_a_suggestion(monkeypatch):
    monkeypatch.setenv("DEVICEKIT_DEBG", "1")
    monkeypatch.setenv("DEVICEKIT_ZZZ", "1")
    found = dict(settings.unknown())
    assert found["DEVICEKIT_DEBG"] == "DEVICEKIT_DEBUG" and found["DEVICEKIT_ZZZ"] is None


# ---------------------------------------------------------------- DEVICEKIT_DEVICE


def test_malformed_default_device_is_a_setting_error(registry, monkeypatch):
    monkeypatch.setenv("DEVICEKIT_DEVICE", "garbage!!")
    with pytest.raises(SettingError, match="DEVICEKIT_DEVICE='garbage!!' is not valid.*KIND or KIND:INDEX"):
        dk.device()
    assert dk.device("TOY").spec.kind == "TOY"  # naming a device explicitly is unaffected


def test_errors_caused_by_the_default_device_name_the_variable(registry, monkeypatch):
    monkeypatch.setenv("DEVICEKIT_DEVICE", "NOPE")
    with pytest.raises(DeviceNotFoundError) as ei:
        dk.device()
    assert str(ei.value).startswith("DEVICEKIT_DEVICE='NOPE' names the default device, but: no device 'NOPE'")
    monkeypatch.setenv("DEVICEKIT_DEVICE", "TOY:5")
    with pytest.raises(DeviceNotFoundError, match=r"DEVICEKIT_DEVICE='TOY:5'.*TOY has 2 device\(s\)"):
        dk.device()
    monkeypatch.setenv("DEVICEKIT_DEVICE", "toy:1")
    assert str(dk.device().spec) == "TOY:1"


def test_info_never_tracebacks_on_a_bad_default_device_and_flags_a_missing_one(registry, monkeypatch, capsys):
    monkeypatch.setenv("DEVICEKIT_DEVICE", "garbage!!")
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "default device: none  (DEVICEKIT_DEVICE='garbage!!' is not valid" in out
    assert re.search(r"DEVICEKIT_DEVICE +ERROR: DEVICEKIT_DEVICE='garbage!!'", out)
    monkeypatch.setenv("DEVICEKIT_DEVICE", "NOPE")
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "default device: NOPE  (from DEVICEKIT_DEVICE)" in out
    assert "WARNING: DEVICEKIT_DEVICE='NOPE' names the default device, but: no device 'NOPE'" in out
    assert re.search(r"DEVICEKIT_DEVICE +NOPE  \(environment\)", out)


def test_devices_marks_the_default_and_honours_the_variable(registry, monkeypatch, capsys):
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\* TOY +available", out, re.MULTILINE) and re.search(r"^  TOY:1 +available", out, re.MULTILINE)
    assert "* the default device (from the available kind of highest priority)" in out
    monkeypatch.setenv("DEVICEKIT_DEVICE", "toy:1")
    assert main(["devices", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["spec"] for r in rows if r["default"]] == ["TOY:1"]
    monkeypatch.setenv("DEVICEKIT_DEVICE", "NOPE")
    assert main(["devices"]) == 0
    cap = capsys.readouterr()
    assert "* " not in cap.out and "warning: no default device: DEVICEKIT_DEVICE='NOPE'" in cap.err
    monkeypatch.setenv("DEVICEKIT_DEVICE", "garbage!!")
    assert main(["devices"]) == 0
    assert "DEVICEKIT_DEVICE='garbage!!' is not valid" in capsys.readouterr().err


def test_a_bad_setting_is_a_message_not_a_traceback_in_other_commands(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("DEVICEKIT_CACHE_MAX_BYTES", "lots")
    from devicekit.compile.cache import reset_default_cache
    reset_default_cache()
    assert main(["cache", "info"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("devicekit: DEVICEKIT_CACHE_MAX_BYTES='lots' is not valid") and "Traceback" not in err


def test_info_shows_every_setting_with_its_source_in_a_real_environment(tmp_path):
    """The installed plugins' variables too (CPU, CUDA, ACME declare theirs through devicekit.settings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    env.update(DEVICEKIT_CACHE_DIR=str(tmp_path), DEVICEKIT_CACHE_MAX_BYTES="1G", DEVICEKIT_DEBG="2",
               DEVICEKIT_CPU_THREADS="lots", DEVICEKIT_DEVICE="garbage!!")
    p = subprocess.run([sys.executable, "-m", "devicekit.cli", "info", "--json"], capture_output=True, text=True,
                       env=env, timeout=300, check=False)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    rep = json.loads(p.stdout)
    rows = {r["name"]: r for r in rep["settings"]}
    assert rows["DEVICEKIT_CACHE_MAX_BYTES"]["value"] == 1 << 30 and rows["DEVICEKIT_CACHE_MAX_BYTES"]["source"] == \
        "environment"
    assert rows["DEVICEKIT_PROBE_TIMEOUT"]["source"] == "default" and rows["DEVICEKIT_PROBE_TIMEOUT"]["value"] == 5.0
    assert rows["DEVICEKIT_CPU_THREADS"]["owner"] == "devicekit-cpu" and "DEVICEKIT_CPU_THREADS='lots'" in \
        rows["DEVICEKIT_CPU_THREADS"]["error"]
    assert {"DEVICEKIT_CUDA_ARCH", "DEVICEKIT_NVRTC", "ACME_DEVICE_COUNT"} <= set(rows)
    assert rep["unknown_settings"] == [{"name": "DEVICEKIT_DEBG", "did_you_mean": "DEVICEKIT_DEBUG"}]
    assert rep["default_device"] is None and "DEVICEKIT_DEVICE='garbage!!'" in rep["default_device_error"]
    assert rep["cache"]["max_bytes"] == 1 << 30


# ---------------------------------------------------------------- the class: one way to read a variable


def _sources(*globs: str) -> list[Path]:
    out = []
    for g in globs:
        out += [p for p in REPO.glob(g) if ".venv" not in p.parts and "build" not in p.parts]
    return sorted(set(out))


SOURCES = ("core/devicekit/**/*.py", "plugins/*/devicekit_*/**/*.py", "examples/**/*.py", "tests/**/*.py",
           "plugins/*/tests/**/*.py", "bench/**/*.py")
# a read: environ.get("X"), getenv("X"), env_flag("X"), environ["X"] not followed by `=` (setting a variable for a
# child process is fine)
RAW_READ = re.compile(r"""(?:environ\.get\(|getenv\(|env_flag\()\s*["'](DEVICEKIT_\w+)"""
                      r"""|environ\[\s*["'](DEVICEKIT_\w+)["']\](?!\s*=[^=])""")


def test_no_code_reads_a_devicekit_variable_except_through_settings():
    offenders = []
    for p in _sources(*SOURCES):
        for m in RAW_READ.finditer(p.read_text()):
            offenders.append(f"{p.relative_to(REPO)}: {m.group(0)}")
    assert not offenders, "read these through devicekit.settings.get:\n" + "\n".join(offenders)


def _declare_plugin_settings() -> None:
    import importlib
    for mod in ("devicekit_cpu.settings", "devicekit_cuda.settings", "devicekit_acme.settings", "devicekit_opencl.settings",
                "devicekit_ray.settings"):
        importlib.import_module(mod)


def test_every_devicekit_variable_named_in_code_and_docs_is_declared():
    """Tests are left out: they name misspelled variables on purpose."""
    _declare_plugin_settings()
    named = set()
    for p in _sources(*[g for g in SOURCES if "tests" not in g], "docs/*.md", "README.md", "plugins/*/README.md",
                      "examples/**/*.md"):
        named |= set(re.findall(r"\bDEVICEKIT_[A-Z0-9_]*[A-Z0-9]\b", p.read_text()))
    not_env = {"DEVICEKIT_API",  # a module attribute of plugins, not an environment variable
               "DEVICEKIT_BACKEND",  # a plugin module's Backend record (devicekit.backend), not a variable either
               "DEVICEKIT_DEBG"}  # the docs' example of a misspelling that `devicekit info` flags
    declared = {r["name"] for r in settings.describe()}
    assert sorted(named - not_env - declared) == []


def test_docs_list_every_declared_variable():
    _declare_plugin_settings()
    docs = (REPO / "docs" / "cli.md").read_text() + (REPO / "examples" / "vendor_plugin" / "README.md").read_text()
    missing = [r["name"] for r in settings.describe() if f"`{r['name']}" not in docs]
    assert missing == [], f"add to docs/cli.md's table of environment variables: {missing}"
