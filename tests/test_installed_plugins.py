"""Entry points of really pip-installed distributions (tests/fixtures), checked in subprocesses of a venv that has
them installed: discovery, failure isolation, API versions, priorities, ties, blocking, strict mode, tracing, CLI."""

import json

import pytest

REPORT = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import devicekit as dk
from devicekit.registry import get_registry
out = {"devices": [d.to_dict() for d in dk.devices()],
       "plugins": {p.name: p.to_dict() for p in get_registry().plugins()},
       "modules": sorted(m for m in sys.modules if m.startswith("dkfix_"))}
try:
    t = dk.target("TOY")
    out["toy_target"] = {"pairs": t.pair_names, "fallback": t.fallback_reason}
except Exception as e:
    out["toy_target"] = {"error": f"{type(e).__name__}: {e}"}
for name in ("TIE", "BROKENIMP", "NOSUCH"):
    try:
        dk.device(name)
        out[name] = "ok"
    except Exception as e:
        out[name] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def report(fixture_venv):
    return fixture_venv.script(REPORT)


def by_kind(report):
    return {d["spec"]: d for d in report["devices"]}


def test_good_plugins_work_despite_broken_ones(report):
    devs = by_kind(report)
    assert devs["TOY"]["available"] and devs["TOY:1"]["available"]
    assert devs["TOY"]["distribution"] == "dk-fixture-toy" and devs["TOY"]["version"] == "1.2.3"
    assert report["plugins"]["toy"]["status"] == "loaded"


def test_import_failure_recorded_with_phase_and_exception(report):
    p = report["plugins"]["brokenimp"]
    assert p["status"] == "failed" and p["distribution"] == "dk-fixture-broken-import" and p["version"] == "1.2.3"
    (f,) = p["failures"]
    assert f["phase"] == "import" and f["exception"] == "ImportError" and "libbroken.so.1" in f["message"]
    d = by_kind(report)["BROKENIMP"]
    assert not d["available"] and "failed at import" in d["reason"] and "libbroken.so.1" in d["reason"]
    assert "DeviceUnavailableError" in report["BROKENIMP"] and "libbroken.so.1" in report["BROKENIMP"]


def test_hook_exception_recorded(report):
    (f,) = report["plugins"]["raisehook"]["failures"]
    assert f["phase"] == "hook devicekit_device_kinds" and f["exception"] == "RuntimeError"
    assert "enumeration exploded" in f["message"]


def test_api_major_mismatch_refused_naming_versions_and_distribution(report):
    p = report["plugins"]["apitwo"]
    (f,) = p["failures"]
    assert f["phase"] == "api"
    assert "API 2.0" in f["message"] and "API 1.0" in f["message"] and "dk-fixture-api2" in f["message"]
    assert "APITWO" not in {d["kind"] for d in report["devices"] if d["available"]}


def test_wrong_return_type_recorded(report):
    (f,) = report["plugins"]["wrongtype"]["failures"]
    assert f["exception"] == "TypeError" and "list of DeviceKind" in f["message"] and "'WRONGTYPE'" in f["message"]


def test_pairs_from_two_distributions_by_priority_with_fallback(report):
    t = report["toy_target"]
    assert t["pairs"] == ["toy-fast", "toy"]  # toy-fast (priority 5) comes from dk-fixture-toy-fast
    assert "toy-turbo" in t["fallback"] and "toycc-turbo" in t["fallback"]
    assert by_kind(report)["TOY"]["pair_names"] == ["toy-turbo", "toy-fast", "toy"]


def test_tie_at_top_is_an_error_naming_both(report):
    msg = report["TIE"]
    assert msg.startswith("ResolutionError") and "'tiea'" in msg and "'tieb'" in msg
    assert "dk-fixture-tie-a" in msg and "dk-fixture-tie-b" in msg and "priority 7" in msg


def test_missing_device_lists_available_and_failed(report):
    msg = report["NOSUCH"]
    assert msg.startswith("DeviceNotFoundError") and "TOY:1" in msg and "Available:" in msg
    assert "brokenimp" in msg


def test_blocked_plugin_never_imported(fixture_venv):
    marker = fixture_venv.side_effects / "dkfix_blocked-imported"
    marker.unlink(missing_ok=True)
    out = fixture_venv.script(REPORT, DEVICEKIT_DISABLE_PLUGINS="blocked, apitwo")
    assert not marker.exists() and "dkfix_blocked" not in out["modules"]
    assert out["plugins"]["blocked"]["status"] == "blocked" and out["plugins"]["blocked"]["failures"] == []
    assert "dkfix_api2" not in out["modules"] and out["plugins"]["apitwo"]["status"] == "blocked"
    assert "disabled by DEVICEKIT_DISABLE_PLUGINS" in by_kind(out)["BLOCKED"]["reason"]
    # control: without the block the same module leaves its mark, so the check above can fail
    out = fixture_venv.script(REPORT)
    assert marker.exists() and "dkfix_blocked" in out["modules"] and by_kind(out)["BLOCKED"]["available"]


def test_strict_mode_makes_failures_fatal(fixture_venv):
    p = fixture_venv.run(["-c", "import devicekit as dk; dk.devices()"], DEVICEKIT_STRICT_PLUGINS="1")
    assert p.returncode != 0 and "PluginError" in p.stderr and "DEVICEKIT_STRICT_PLUGINS" in p.stderr
    p = fixture_venv.run(["-m", "devicekit.cli", "info", "--json"], DEVICEKIT_STRICT_PLUGINS="1")
    assert p.returncode == 1 and "failed" in p.stderr


def test_cli_info_json_reports_everything_and_exits_0(fixture_venv):
    p = fixture_venv.run(["-m", "devicekit.cli", "info", "--json"])
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    plugins = {x["name"]: x for x in rep["plugins"]}
    assert plugins["brokenimp"]["failures"][0]["phase"] == "import"
    assert plugins["toyfast"]["distribution"] == "dk-fixture-toy-fast"
    toy = rep["kinds"]["TOY"]
    assert [x["name"] for x in toy["pairs"]] == ["toy-turbo", "toy-fast", "toy"]
    assert toy["pairs_built"] == ["toy-fast", "toy"] and "toycc-turbo" in toy["fallback"]
    assert toy["ids"] == ["TOY", "TOY:1"] and toy["plugin"] == "toy"
    # toy-turbo (the owner's best) is skipped, so toyfast's pair is TOY's default: allowed, and said in one line
    assert toy["override"] == ("TOY's default compiler pair 'toy-fast' comes from plugin 'toyfast' "
                               "(dk-fixture-toy-fast 1.2.3), not from TOY's owner 'toy' (dk-fixture-toy 1.2.3)")
    assert "'tiea'" in rep["kinds"]["TIE"]["error"] and "'tieb'" in rep["kinds"]["TIE"]["error"]
    assert rep["cache"]["state"] == "enabled" and rep["cache"]["dir"].startswith(str(fixture_venv.root))
    assert rep["devicekit"]["api"] == [1, 0]
    text = fixture_venv.run(["-m", "devicekit.cli", "info"])
    assert text.returncode == 0 and "FAILED at import" in text.stdout and "fallback:" in text.stdout
    assert text.stdout.count("override: ") == 1 and f"override: {toy['override']}" in text.stdout


def test_trace_plugins(fixture_venv):
    p = fixture_venv.run(["-c", "import devicekit as dk; dk.devices()"], DEVICEKIT_TRACE_PLUGINS="1")
    assert p.returncode == 0
    assert "devicekit-trace: entry point 'toy' = dkfix_toy.plugin (dk-fixture-toy 1.2.3): loaded" in p.stderr
    assert "devicekit-trace: call devicekit_device_kinds()" in p.stderr
    assert "raised RuntimeError: fixture: device enumeration exploded" in p.stderr
