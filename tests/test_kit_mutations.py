"""The conformance kit is mutation-tested (issue 38): tests/fixtures/broken_plugins holds a small correct C device
(BRK, `good`) and one variant per contract row of docs/conformance.md, each breaking that row and nothing else. The
kit must fail every variant, on the check that enforces the row, and pass `good` on the same checks. Each run is the
kit in a subprocess with a `-k` selection of the relevant checks (a few seconds of CPU each). A variant that crashes
the process (a wrong C argument list may) fails the kit too: the crash must happen in the named check."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "broken_plugins"

# variant -> (the kit check(s) that must fail it: -k expression, a test name that must fail or be where it crashed)
ROWS = {
    "buffers_then_vars": ("handwritten_source_matches_numpy and order", "test_handwritten_source_matches_numpy"),
    "int_split": ("handwritten_source_matches_numpy and split", "test_handwritten_source_matches_numpy"),
    "scalars_as_int64": ("scalar_params or (handwritten_source_matches_numpy and order)",
                         "test_scalar_params_match_reference|test_handwritten_source_matches_numpy"),
    "zero_seconds": ("wait_returns", "test_wait_returns_the_kernels_seconds"),
    "keeps_core_state": ("cores_state", "test_a_program_leaves_the_cores_state_to_the_core"),
    "bare_identity": ("identity", "test_compiler_identity_names_what_changes_the_bytes"),
    "loads_at_first_launch": ("cannot_load", "test_bytes_it_cannot_load_are_refused_at_load"),
    "off_by_one": ("library_kernel_matches and elementwise_fma", "test_library_kernel_matches_reference"),
    "short_allocations": ("round_trip_every and float32", "test_round_trip_every_dtype"),
    "fast_math": ("ieee", "test_ieee_semantics"),
    "another_kinds_renderer": ("declared_pairs", "test_declared_pairs_resolve"),
}


def _kit(variant: str, select: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    env.update(PYTHONPATH=str(FIXTURE), DKBROKEN_VARIANT=variant, DEVICEKIT_CACHE_DIR=str(tmp_path / "cache"))
    cmd = [sys.executable, "-X", "faulthandler", "-m", "pytest", "--pyargs", "devicekit.testing", "-q", "-rf",
           "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "dkbroken_pytest", "--devicekit-device=BRK", "-k", select]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False)


def test_the_kit_passes_the_good_device(tmp_path):
    select = " or ".join(f"({k})" for k, _ in ROWS.values())
    p = _kit("good", select, tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", p.stdout).group(1))
    assert passed >= len(ROWS), p.stdout[-1000:]


@pytest.mark.parametrize("variant", sorted(ROWS))
def test_the_kit_fails_each_broken_device(variant, tmp_path):
    select, must_fail = ROWS[variant]
    p = _kit(variant, select, tmp_path)
    assert p.returncode != 0, f"the kit passed the broken {variant!r}:\n{p.stdout[-2000:]}"
    if p.returncode == 1:  # an ordinary failure: the named check is among the failed
        assert re.search(rf"FAILED \S+::({must_fail})\b", p.stdout), p.stdout[-3000:]
    else:  # a crash (SIGSEGV, SIGBUS): faulthandler's traceback is in the named check
        assert "Fatal Python error" in p.stderr and re.search(must_fail, p.stderr), \
            f"exit {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
