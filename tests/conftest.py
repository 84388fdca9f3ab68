"""Core test fixtures: an isolated environment, an in-process registry with the TOY plugin, and a throwaway venv
in which the fixture distributions under tests/fixtures are really pip-installed (for entry-point tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
sys.path.insert(0, str(FIXTURES / "toy"))  # in-process use of the TOY plugin (dkfix_toy)
sys.path.insert(0, str(HERE))  # fixture_wheels

from fixture_wheels import build_wheels

# the DEVICEKIT_* isolation and the private compile cache of every test: the repository's conftest.py


@pytest.fixture
def registry():
    """A fresh process-wide registry without entry points, with the TOY plugin registered in-process."""
    import dkfix_toy.plugin
    from devicekit import registry as reg_mod

    old = reg_mod._registry
    reg = reg_mod.reset_registry(reg_mod.Registry(entry_points=False, strict=False, disabled=set(), trace=False))
    reg.register_plugin(dkfix_toy.plugin, "toy")
    yield reg
    reg_mod._registry = old


def _fixture_dirs() -> list[Path]:
    return sorted(p.parent for p in FIXTURES.glob("*/pyproject.toml"))


class FixtureVenv:
    """A venv layered on the test venv (devicekit importable) with every fixture distribution installed."""

    def __init__(self, root: Path):
        self.root = root
        self.python = str(root / "bin" / "python")
        self.side_effects = root / "side-effects"
        self.side_effects.mkdir(exist_ok=True)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
        env["DEVICEKIT_CACHE_DIR"] = str(self.root / "dk-cache")
        env["DKFIX_SIDE_EFFECT_DIR"] = str(self.side_effects)
        env.update(extra)
        return env

    def run(self, args: list[str], **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.python, *args], env=self.env(**extra), capture_output=True, check=False, text=True,
                              timeout=120, cwd=self.root)

    def script(self, code: str, **extra: str) -> dict:
        """Run `code` (which must print one JSON document last) and return it parsed."""
        p = self.run(["-c", code], **extra)
        assert p.returncode == 0, f"fixture script failed:\n{p.stdout}\n{p.stderr}"
        return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def fixture_venv(tmp_path_factory, request) -> FixtureVenv:
    """Build the fixture wheels once (tests/fixture_wheels.py: cached by content in .pytest_cache, shared by xdist
    workers), then install them with --no-deps into a fresh venv layered on the test venv."""
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider: build into a temp dir
    base = Path(cache.mkdir("devicekit-fixture-wheels")) if cache is not None else tmp_path_factory.mktemp("wheels")
    wheels = build_wheels(_fixture_dirs(), FIXTURES, base, tmp_path_factory.mktemp("fixture-build"))
    root = tmp_path_factory.mktemp("fixture-venv")
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip",
                    "--system-site-packages", str(root)], check=True, timeout=120)
    # --system-site-packages reaches the base interpreter, not the test venv: layer the test venv's site-packages
    # (and its .pth files: the editable devicekit) under the new one
    purelib = subprocess.run([str(root / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_devicekit_test_parent.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--prefix", str(root),
                        *map(str, sorted(wheels.glob("*.whl")))], capture_output=True, check=False, text=True, timeout=300)
    assert p.returncode == 0, f"installing fixture wheels failed:\n{p.stdout}\n{p.stderr}"
    return FixtureVenv(root)
