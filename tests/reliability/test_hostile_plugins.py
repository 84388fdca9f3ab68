"""Plugins that misbehave in ways an `except Exception` does not see, with a really installed distribution
(tests/fixtures/hostile, three entry points driven by $DKFIX_HOSTILE_A/B/C): a KeyboardInterrupt (raised, or a real
SIGINT) or any other BaseException at import, in a hook, in a probe or in count(); an import that hangs, calls
os._exit or aborts. In-process, the registry stays whole (the interrupted plugin is loaded again on next use, nothing
else is lost, the interrupt reaches the caller; other BaseExceptions are the plugin's recorded failure);
`devicekit info --isolate` names the plugins that hang or end their process."""

from __future__ import annotations

import json

import pytest

# One interpreter runs every variant: a fresh registry each time, the fixture's module dropped so it is imported
# again, the mode switched through the environment between the first call and the retry.
VARIANTS = r"""
import json, os, sys, warnings
warnings.simplefilter("ignore")
import devicekit as dk
from devicekit import registry as R


def fresh(mode):
    R.reset_registry()
    sys.modules.pop("dkfix_hostile.a", None)
    os.environ["DKFIX_HOSTILE_A"] = mode


def snapshot():
    reg = R.get_registry()
    devs = {d.spec: d.available for d in dk.devices()}
    plugins = {p.name: [p.status, [f"{f.phase}|{type(f.exception).__name__}" for f in p.failures]]
               for p in reg.plugins()}
    return {"devices": devs, "plugins": plugins, "ids": {n: id(r) for n, r in reg.plugin_set.records.items()},
            "registered": sorted(n for n, _ in reg.pm.list_name_plugin())}


def first_call():
    try:
        return "returned", snapshot()
    except KeyboardInterrupt as e:
        return "KeyboardInterrupt", None
    except BaseException as e:
        return f"escaped {type(e).__name__}: {e}", None


fresh("")
out = {"baseline": snapshot(), "runs": {}}
for mode in sys.argv[1:]:
    fresh(mode)
    reg = R.get_registry()
    how, snap = first_call()
    before = {n: id(r) for n, r in reg.plugin_set.records.items()}
    os.environ["DKFIX_HOSTILE_A"] = "ok"  # the retry finds a plugin that behaves
    try:
        retry = snapshot()
    except BaseException as e:
        retry = {"error": f"{type(e).__name__}: {e}"}
    out["runs"][mode] = {"first": how, "snap": snap, "retry": retry, "before": before}
print(json.dumps(out))
"""

INTERRUPTS = ["import:KeyboardInterrupt", "import:sigint", "hook:KeyboardInterrupt", "probe:KeyboardInterrupt",
              "count:KeyboardInterrupt"]
RECORDED = {  # mode -> the failure recorded on hostile_a
    "import:SystemExit": "import|SystemExit", "import:GeneratorExit": "import|GeneratorExit",
    "import:BaseException": "import|HostileBaseException",
    "hook:SystemExit": "hook devicekit_device_kinds|SystemExit",
    "hook:GeneratorExit": "hook devicekit_device_kinds|GeneratorExit",
    "probe:SystemExit": "probe|SystemExit", "probe:GeneratorExit": "probe|GeneratorExit",
    "count:GeneratorExit": "count|GeneratorExit", "count:BaseException": "count|HostileBaseException",
}


@pytest.fixture(scope="module")
def variants(fixture_venv):
    p = fixture_venv.run(["-c", VARIANTS, *INTERRUPTS, *RECORDED], DEVICEKIT_PROBE_TIMEOUT="0")
    assert p.returncode == 0, f"{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def others(snap: dict, key: str) -> dict:
    return {k: v for k, v in snap[key].items() if "HOSTILE" not in k.upper()}


@pytest.mark.parametrize("mode", INTERRUPTS)
def test_interrupt_reaches_the_caller_and_the_retry_loads_everything(variants, mode):
    base, run = variants["baseline"], variants["runs"][mode]
    assert run["first"] == "KeyboardInterrupt"
    retry = run["retry"]
    assert "error" not in retry, retry
    # nothing else lost: every other plugin and device as in a clean run (PYTHON, METAL, TOY load after hostile_a)
    assert others(retry, "devices") == others(base, "devices") and "PYTHON" in retry["devices"]
    assert others(retry, "plugins") == others(base, "plugins")
    assert retry["registered"] == sorted(set(base["registered"]))  # each plugin registered once, none half-way
    # the interrupted plugin was loaded again, and behaves now
    assert retry["plugins"]["hostile_a"] == ["loaded", []] and retry["devices"]["HOSTILE_A"] is True
    # plugins loaded before the interrupt were kept, not loaded a second time
    if mode.startswith("import"):
        assert run["before"]["cpu"] == retry["ids"]["cpu"]


@pytest.mark.parametrize("mode", sorted(RECORDED))
def test_other_base_exceptions_are_the_plugins_failure(variants, mode):
    base, run = variants["baseline"], variants["runs"][mode]
    assert run["first"] == "returned", run["first"]
    snap = run["snap"]
    assert RECORDED[mode] in snap["plugins"]["hostile_a"][1]
    assert others(snap, "devices") == others(base, "devices")
    assert others(snap, "plugins") == others(base, "plugins")
    if mode.startswith(("import", "hook")):
        assert snap["plugins"]["hostile_a"][0] == "failed"
    else:  # the kind is declared, and unavailable with the reason
        assert snap["devices"]["HOSTILE_A"] is False


def test_isolate_names_the_plugins_that_hang_exit_or_die(fixture_venv):
    """One plugin's import hangs, one calls os._exit(3), one aborts: in-process each would hang or end the
    program; --isolate names each with the phase, exit code or signal, and reports the rest in process."""
    disabled = "acme,cuda,metal,apitwo,blocked,tiea,tieb,wrongtype,raisehook,toyfast"
    p = fixture_venv.run(["-m", "devicekit.cli", "info", "--isolate", "--timeout", "4", "--json"],
                         DKFIX_HOSTILE_A="import:hang", DKFIX_HOSTILE_B="import:os_exit", DKFIX_HOSTILE_C="probe:abort",
                         DEVICEKIT_DISABLE_PLUGINS=disabled)
    assert p.returncode == 1, p.stderr  # a plugin that hangs or ends its process fails the check
    rep = json.loads(p.stdout)
    rows = {r["name"]: r for r in rep["isolated"]["plugins"]}
    assert rows["hostile_a"]["outcome"] == "hung" and rows["hostile_a"]["phase"] == "import"
    assert "within 4s" in rows["hostile_a"]["detail"]
    assert rows["hostile_b"]["outcome"] == "exited" and rows["hostile_b"]["returncode"] == 3
    assert "code 3 during import" in rows["hostile_b"]["detail"]
    assert rows["hostile_c"]["outcome"] == "killed" and rows["hostile_c"]["signal"] == "SIGABRT"
    assert rows["hostile_c"]["phase"] == "probe of HOSTILE_C"
    assert rows["cpu"]["outcome"] == "loaded" and rows["cpu"]["kinds"]["CPU"]["available"]
    assert rows["brokenimp"]["outcome"] == "failed" and rows["brokenimp"]["plugin"]["failures"][0]["phase"] == "import"
    assert rows["cuda"]["outcome"] == "blocked"
    # the in-process report that follows leaves the three out, and has everything else
    assert rep["isolated"]["left_out"] == ["hostile_a", "hostile_b", "hostile_c"]
    assert {"CPU", "PYTHON", "TOY"} <= set(rep["kinds"]) and not {"HOSTILE_A", "HOSTILE_C"} & set(rep["kinds"])
    text = fixture_venv.run(["-m", "devicekit.cli", "info", "--isolate", "--timeout", "4"],
                            DKFIX_HOSTILE_B="import:os_exit", DEVICEKIT_DISABLE_PLUGINS=disabled + ",hostile_c")
    assert text.returncode == 1
    assert "hostile_b    EXITED" in text.stdout and "exited with code 3 during import" in text.stdout
    assert "left out of the report below" in text.stdout and "device kinds:" in text.stdout


def test_in_process_os_exit_at_import_ends_the_program_unless_disabled(fixture_venv):
    """What in-process loading cannot survive (docs/reliability.md): the program ends with the plugin's exit code
    and no word; disabling the plugin by name is the remedy --isolate points to."""
    code = "import devicekit as dk; dk.devices(); print('listed')"
    p = fixture_venv.run(["-c", code], DKFIX_HOSTILE_B="import:os_exit")
    assert p.returncode == 3 and "listed" not in p.stdout
    p = fixture_venv.run(["-c", code], DKFIX_HOSTILE_B="import:os_exit", DEVICEKIT_DISABLE_PLUGINS="hostile_b")
    assert p.returncode == 0 and "listed" in p.stdout
