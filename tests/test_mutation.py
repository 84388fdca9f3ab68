"""Mutation testing of the checking and comparing code (issue 38; scripts/mutation.py, mutmut): the fixed sample (every
mutant of the comparator `assert_matches` and its `tolerance`) must be >= 90% killed, the survivors being the
equivalent ones docs/testing.md lists. DEVICEKIT_SLOW=1 runs every target module in full (minutes)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from devicekit import settings

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(importlib.util.find_spec("mutmut") is None,
                                reason="mutmut is not installed (pip install -e '.[test]')")


def _mutation(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "mutation.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_the_comparator_sample_is_killed():
    p = _mutation("--sample", "--min-score", "90", timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    survivors = {line.split()[-1].rsplit(".", 1)[-1] for line in p.stdout.splitlines() if "survived:" in line}
    documented = (ROOT / "docs" / "testing.md").read_text()
    assert all(s in documented for s in survivors), f"survivors not in docs/testing.md: {survivors}"


@pytest.mark.skipif(not settings.get("DEVICEKIT_SLOW"), reason="the full mutation run needs DEVICEKIT_SLOW=1")
def test_every_target_module_is_killed():
    p = _mutation("--min-score", "90", timeout=7200)
    assert p.returncode == 0, p.stdout[-5000:] + p.stderr[-3000:]
