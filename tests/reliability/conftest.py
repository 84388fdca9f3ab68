"""Reliability fixtures: a venv with the faulty plugin distributions of tests/reliability/fixtures really
pip-installed (layered on the test venv, so the real CPU and PYTHON devices are there too), and helpers to run
crash-prone code in a subprocess and see how it ended."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from devicekit import settings

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
sys.path.insert(0, str(HERE.parent))  # fixture_wheels

from fixture_wheels import build_wheels

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
    def __init__(self, root: Path):
        self.root = root
        self.python = str(root / "bin" / "python")
        self.side_effects = root / "side-effects"
        self.side_effects.mkdir(exist_ok=True)

    def run(self, args: list[str], timeout: float = 120, **extra: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
        env.update(DEVICEKIT_CACHE_DIR=str(self.root / "dk-cache"), DKREL_SIDE_EFFECT_DIR=str(self.side_effects))
        env.update(extra)
        return subprocess.run([self.python, *args], env=env, capture_output=True, check=False, text=True,
                              timeout=timeout, cwd=self.root)

    def script(self, code: str, **extra: str) -> dict:
        p = self.run(["-c", code], **extra)
        assert p.returncode == 0, f"script failed ({describe_exit(p.returncode)}):\n{p.stdout}\n{p.stderr}"
        return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def rel_venv(tmp_path_factory, request) -> RelVenv:
    """Wheels built once per fixture content (offline, no build isolation), installed --no-deps into a venv layered
    on the test venv (same scheme as tests/conftest.py's fixture_venv)."""
    dirs = sorted(p.parent for p in FIXTURES.glob("*/pyproject.toml"))
    cache = getattr(request.config, "cache", None)
    base = Path(cache.mkdir("devicekit-reliability-wheels")) if cache is not None else tmp_path_factory.mktemp("w")
    wheels = build_wheels(dirs, FIXTURES, base, tmp_path_factory.mktemp("relbuild"))
    root = tmp_path_factory.mktemp("rel-venv")
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip",
                    "--system-site-packages", str(root)], check=True, timeout=120)
    purelib = subprocess.run([str(root / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_devicekit_test_parent.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--prefix", str(root),
                        *map(str, sorted(wheels.glob("*.whl")))], capture_output=True, text=True, timeout=300,
                       check=False)
    assert p.returncode == 0, f"installing reliability fixture wheels failed:\n{p.stdout}\n{p.stderr}"
    return RelVenv(root)
