"""The conformance kit as CI runs it: `pytest --pyargs devicekit.testing --devicekit-device=X` in a subprocess, for
the devices that run here (PYTHON, ACME; plugins/cpu's tests run it for CPU); the kind that cannot run (CUDA) still
renders and compiles; without the option nothing runs; an unknown kind is a usage error; and a device with a real bug fails the kit."""

from __future__ import annotations

import json
import re

import pytest
from devicekit import settings

from .conftest import FIXTURES

# no hypothesis plugin: the kit has no hypothesis test, and the plugin imports hypothesis at every run's end (~1 s)
KIT = ("-m", "pytest", "--pyargs", "devicekit.testing", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
       "-rfEs")

# The default run bounds what another run covers; DEVICEKIT_SLOW=1 runs every kit in full (docs/testing.md, "What the
# default run bounds"). The kit's `devicekit info --json` check (a fresh process that probes every plugin, ~6 s) runs
# in ACME's kit; test_info_json_lists_every_kind_the_kit_runs_on checks the other kinds' rows from one such process.
# PYTHON's random kernels and library kernels are compared with PYTHON itself (2 seeds, every third case of the
# per-kernel checks with --devicekit-sample=3: the paths run; the CPU kit runs every case); ACME renders with the CPU plugin's
# C renderer, whose random kernels the CI fuzz checks by the hundred (tests/reliability/test_fuzz.py): 4 seeds, and
# the checks of what that renderer and a C compiler make of names and memory order (hostile names, target-language
# keywords, memory order: the CPU kit's, and tests/reliability's hostile names on both CPU pairs) are left to the CPU.
SLOW = settings.get("DEVICEKIT_SLOW")
BOUNDS = {"PYTHON": ("--devicekit-seeds=2", "--devicekit-sample=3", "-k", "not info_json"),
          "ACME": ("--devicekit-seeds=4", "-k", "not hostile_names and not keywords_as_names and not memory_order"),
          # hostile names: plugins/cuda/tests/test_cuda_hostile_names.py renders and host-compiles every case, NVRTC
          # compiles a quarter of them; the library kernels compile with NVRTC there and in test_cuda_nvrtc_oldest.py
          "CUDA": ("-k", "not info_json and not hostile_names")}


def _bounds(device: str) -> tuple[str, ...]:
    return () if SLOW else BOUNDS[device]


def _counts(out: str) -> dict[str, int]:
    tail = out.strip().splitlines()[-1]
    return {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", tail)}


@pytest.mark.parametrize("device", ["PYTHON", "ACME"])  # CPU's kit run is plugins/cpu/tests/test_conformance.py
def test_kit_passes(run_py, device):
    p = run_py(*KIT, *_bounds(device), f"--devicekit-device={device}")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    counts = _counts(p.stdout)
    assert counts.get("passed", 0) >= 60, counts
    assert "failed" not in counts, counts
    if device != "PYTHON":  # only PYTHON lacks hand-written source; the fuzzer is off without --devicekit-fuzz
        reasons = [line for line in p.stdout.splitlines() if line.startswith("SKIPPED")]
        allowed = ["the differential fuzzer is off"]
        assert all(any(a in r for a in allowed) for r in reasons), p.stdout[-3000:]


def test_kit_for_a_kind_that_cannot_run_here(run_py):
    import devicekit as dk
    cuda = [d for d in dk.devices() if d.kind == "CUDA"]
    if not cuda or cuda[0].available:
        pytest.skip("needs the CUDA plugin installed on a machine without a CUDA driver")
    p = run_py(*KIT, *_bounds("CUDA"), "--devicekit-device=CUDA")
    assert p.returncode == 0, p.stdout[-4000:]
    counts = _counts(p.stdout)
    assert counts.get("passed", 0) >= 20, counts  # hooks, render and compile of every library kernel
    assert "CUDA cannot run here: no CUDA driver" in p.stdout


def test_info_json_lists_every_kind_the_kit_runs_on(run_py):
    """The kit's test_devicekit_info_json_lists_the_kind, for every kind whose kit run the default run bounds
    (PYTHON, CPU, CUDA, OPENCL and WEBGPU where their plugins are installed) and ACME, from one `devicekit info
    --json` process instead of one per kit run."""
    import devicekit as dk
    from devicekit.testing.conformance import device_info
    p = run_py("-m", "devicekit.cli", "info", "--json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    installed = {d.kind for d in dk.devices()}
    for kind in ("PYTHON", "CPU", "CUDA", "ACME", *({"OPENCL", "WEBGPU"} & installed)):
        info = device_info(kind)
        assert kind in rep["kinds"], sorted(rep["kinds"])
        k = rep["kinds"][kind]
        assert k["plugin"] == info.plugin, (kind, k["plugin"], info.plugin)
        assert k["available"] == (info.available or k["available"]), kind
        assert [p["name"] for p in k["pairs"]], f"info lists {kind}'s compiler pairs"


def test_kit_without_the_option_runs_nothing(run_py):
    p = run_py(*KIT)
    assert p.returncode == 0, p.stdout[-2000:]
    counts = _counts(p.stdout)
    assert counts.get("skipped", 0) >= 60 and "passed" not in counts, counts
    assert "pass --devicekit-device=KIND" in p.stdout


def test_unknown_kind_is_a_usage_error(run_py):
    p = run_py(*KIT, "--devicekit-device=NOSUCH")
    assert p.returncode == 4, p.stdout + p.stderr
    assert "no plugin declares the kind NOSUCH" in p.stderr
    assert "CPU (available)" in p.stderr
    p = run_py(*KIT, "--devicekit-device=CPU:3")
    assert p.returncode == 4 and "CPU has CPU here, no CPU:3" in p.stderr, p.stderr


def test_kit_catches_an_off_by_one_device(run_py):
    # the modules whose checks the assertions below name (the whole kit would only add passing tests: 2x the time)
    p = run_py(*KIT, "-p", "dkfix_buggy_pytest", "--devicekit-device=BUGGY", "-k",
               "library_kernel or several_sizes or random_kernels or round_trip or hook or render or plugin_loaded "
               "or declared_pairs", env={"PYTHONPATH": str(FIXTURES)})
    assert p.returncode == 1, p.stdout[-4000:] + p.stderr[-2000:]
    failed = set(re.findall(r"FAILED \S+::(\w+)", p.stdout))
    assert {"test_library_kernel_matches_reference", "test_one_program_serves_several_sizes",
            "test_random_kernels_match_reference"} <= failed, failed
    assert not any("round_trip" in t or "hook" in t or "render" in t for t in failed), failed
    assert "SKIPPED" in p.stdout and "registered in-process, not installed" in p.stdout  # no fresh-process checks
    assert "test_plugin_loaded_without_failures" not in failed and "test_declared_pairs_resolve" not in failed


def test_plugin_is_inert_in_unrelated_test_runs(run_py, tmp_path):
    """Installed devicekit adds the option to every pytest run, and nothing else: no devicekit import, no skips."""
    (tmp_path / "test_other.py").write_text(
        "import sys\n\n"
        "def test_untouched():\n"
        "    light = {'devicekit', 'devicekit.plugin', 'devicekit.testing', 'devicekit.testing.pytest_plugin'}\n"
        "    assert {m for m in sys.modules if m.split('.')[0] == 'devicekit'} <= light\n"
        "    assert 'devicekit.registry' not in sys.modules\n")
    p = run_py("-m", "pytest", str(tmp_path / "test_other.py"), "-q", "-p", "no:cacheprovider",
               "--rootdir", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 passed" in p.stdout and "skipped" not in p.stdout
    h = run_py("-m", "pytest", "--help", "--rootdir", str(tmp_path))
    assert "--devicekit-device=KIND" in h.stdout and "--devicekit-seeds=N" in h.stdout


def test_kit_never_writes_the_users_cache(tmp_path):
    """No DEVICEKIT_CACHE_DIR: the kit still compiles into a temporary cache, not $XDG_CACHE_HOME/devicekit."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    # outside the repository (no conftest.py of ours, no pyproject addopts): as a vendor runs it
    # six compiles (the elementwise and reduce kernels; the matmuls add seconds and no cache write of another kind)
    p = subprocess.run([sys.executable, *KIT, "--devicekit-device=CPU", "-k", "test_compile and (elementwise or reduce)",
                        "--noconftest",
                        "--rootdir", str(tmp_path)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert _counts(p.stdout).get("passed", 0) >= 5, p.stdout[-2000:]
    assert not (tmp_path / "xdg" / "devicekit").exists(), list((tmp_path / "xdg").rglob("*"))


def test_sample_runs_every_kth_case_of_the_per_kernel_checks_only(run_py):
    """--devicekit-sample=3 (the bound of the secondary devices' kits) keeps cases 0, 3, 6, ... of each per-kernel
    check and every other check; without it (what a vendor runs) every case is collected; 0 is a usage error."""
    from devicekit.testing.pytest_plugin import SAMPLED

    def collected(*extra: str) -> list[str]:
        p = run_py(*KIT, "--devicekit-device=PYTHON", "--co", *extra)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        return [line.split("::", 1)[1] for line in p.stdout.splitlines() if "::" in line]

    whole, sampled = collected(), collected("--devicekit-sample=3")
    assert set(sampled) < set(whole)
    for name in {t.split("[")[0] for t in whole}:
        cases = [t for t in whole if t.split("[")[0] == name]
        want = cases[::3] if name in SAMPLED and len(cases) > 1 else cases
        assert [t for t in sampled if t.split("[")[0] == name] == want, name
    assert all(any(t.startswith(f"{n}[") and t not in sampled for t in whole) for n in SAMPLED), "each one is cut"
    p = run_py(*KIT, "--devicekit-device=PYTHON", "--devicekit-sample=0")
    assert p.returncode == 4 and "--devicekit-sample must be >= 1, got 0" in p.stderr, p.stderr[-2000:]
