"""Reliability fixtures: a venv with the faulty plugin distributions of tests/reliability/fixtures really
pip-installed (layered on the test venv, so the real CPU and PYTHON devices are there too), and helpers to run
crash-prone code in a subprocess and see how it ended."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from devicekit import settings

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
sys.path.insert(0, str(HERE.parent))  # fixture_wheels

from fixture_wheels import layered_venv, worker_dir

SLOW = settings.get("DEVICEKIT_SLOW")


def pytest_collection_modifyitems(config, items):
    """`slow` tests run only with DEVICEKIT_SLOW=1 (the CI command is plain `pytest -q`)."""
    skip = pytest.mark.skip(reason="long run: set DEVICEKIT_SLOW=1 (see docs/reliability.md)")
    for item in items:
        if "slow" in item.keywords and not SLOW and str(item.fspath).startswith(str(HERE)):
            item.add_marker(skip)


def run_isolated(code: str, timeout: float = 120, **env: str) -> tuple[int, str]:
    """Run python `code` in a fresh interpreter; (returncode, stdout+stderr). A negative code is a signal."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    e.update(env)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=e,
                       check=False)
    return p.returncode, p.stdout + p.stderr


def describe_exit(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


class Isolated:
    run = staticmethod(run_isolated)
    describe = staticmethod(describe_exit)


@pytest.fixture
def isolated() -> Isolated:
    """`isolated.run(code, **env)` -> (returncode, output) in a fresh interpreter; `isolated.describe(rc)`."""
    return Isolated()


class RelVenv:
    """The venv of the faulty plugin distributions, shared by the xdist workers; each worker has its own side-effect
    markers, compile cache and working directory."""

    def __init__(self, root: Path):
        self.root = root
        self.python = str(root / "bin" / "python")
        self.own = worker_dir(root)
        self.side_effects = self.own / "side-effects"
        self.side_effects.mkdir(exist_ok=True)

    def run(self, args: list[str], timeout: float = 120, **extra: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
        env.update(DEVICEKIT_CACHE_DIR=str(self.own / "dk-cache"), DKREL_SIDE_EFFECT_DIR=str(self.side_effects))
        env.update(extra)
        return subprocess.run([self.python, *args], env=env, capture_output=True, check=False, text=True,
                              timeout=timeout, cwd=self.own)

    def script(self, code: str, **extra: str) -> dict:
        p = self.run(["-c", code], **extra)
        assert p.returncode == 0, f"script failed ({describe_exit(p.returncode)}):\n{p.stdout}\n{p.stderr}"
        return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def rel_venv(tmp_path_factory, request) -> RelVenv:
    """Wheels built once per fixture content (offline, no build isolation), installed --no-deps into a venv layered
    on the test venv (tests/fixture_wheels.py's layered_venv, as tests/conftest.py's fixture_venv): once per run."""
    dirs = sorted(p.parent for p in FIXTURES.glob("*/pyproject.toml"))
    cache = getattr(request.config, "cache", None)
    wheels = Path(cache.mkdir("devicekit-reliability-wheels")) if cache is not None else None
    return RelVenv(layered_venv(tmp_path_factory, wheels, dirs, FIXTURES, "rel-venv"))
