"""Core test fixtures: an isolated environment, an in-process registry with the TOY plugin, and a throwaway venv
in which the fixture distributions under tests/fixtures are really pip-installed (for entry-point tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
sys.path.insert(0, str(FIXTURES / "toy"))  # in-process use of the TOY plugin (dkfix_toy)
sys.path.insert(0, str(HERE))  # fixture_wheels

from fixture_wheels import layered_venv, worker_dir

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
    """A venv layered on the test venv (devicekit importable) with every fixture distribution installed, shared by
    the xdist workers; each worker has its own side-effect markers, compile cache and working directory."""

    def __init__(self, root: Path):
        self.root = root
        self.python = str(root / "bin" / "python")
        self.own = worker_dir(root)
        self.side_effects = self.own / "side-effects"
        self.side_effects.mkdir(exist_ok=True)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
        env["DEVICEKIT_CACHE_DIR"] = str(self.own / "dk-cache")
        env["DKFIX_SIDE_EFFECT_DIR"] = str(self.side_effects)
        env.update(extra)
        return env

    def run(self, args: list[str], **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.python, *args], env=self.env(**extra), capture_output=True, check=False, text=True,
                              timeout=120, cwd=self.own)

    def script(self, code: str, **extra: str) -> dict:
        """Run `code` (which must print one JSON document last) and return it parsed."""
        p = self.run(["-c", code], **extra)
        assert p.returncode == 0, f"fixture script failed:\n{p.stdout}\n{p.stderr}"
        return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def fixture_venv(tmp_path_factory, request) -> FixtureVenv:
    """The fixture wheels (tests/fixture_wheels.py: cached by content in .pytest_cache) installed with --no-deps into
    a venv layered on the test venv, built once per run for every xdist worker."""
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider: the wheels go next to the venv
    wheels = Path(cache.mkdir("devicekit-fixture-wheels")) if cache is not None else None
    return FixtureVenv(layered_venv(tmp_path_factory, wheels, _fixture_dirs(), FIXTURES, "fixture-venv"))


@pytest.fixture
def webgpu_runner():
    """The fuzzer's Runner for WEBGPU on a real adapter (lavapipe here); skips, saying why, where none runs."""
    from devicekit.testing.fuzz import Runner
    try:
        runner = Runner("WEBGPU")
    except Exception as e:  # noqa: BLE001 - no adapter here
        pytest.skip(f"WEBGPU unavailable: {e}")
    if runner.compile_only:
        pytest.skip("WEBGPU cannot run here (no adapter)")
    return runner
