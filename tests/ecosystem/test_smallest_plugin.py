"""The smallest complete plugin (examples/smallest_plugin, kind TINY): at most 60 lines, shown whole in
docs/writing-a-plugin.md (each file there as it is here, like ACME's plugin.py in section 3), and, pip-installed as a
real distribution with its entry point, it passes the conformance kit."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from devicekit import settings

from .conftest import ROOT

HERE = ROOT / "examples" / "smallest_plugin"
FILES = ["pyproject.toml", "devicekit_tiny/__init__.py", "devicekit_tiny/renderer.py", "devicekit_tiny/plugin.py"]


def test_the_whole_plugin_is_at_most_60_lines():
    files = sorted(p.relative_to(HERE).as_posix() for p in HERE.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts and ".egg-info" not in str(p))
    assert files == sorted(FILES), "a new file counts too: add it to FILES and to the doc"
    lines = sum(len((HERE / f).read_text().splitlines()) for f in FILES)
    assert lines <= 60, f"{lines} lines"


def test_the_doc_shows_every_file_as_it_is():
    doc = (ROOT / "docs" / "writing-a-plugin.md").read_text()
    blocks = re.findall(r"^```\w+[^\n]*\n# (examples/\S+)\n(.*?)^```", doc, re.DOTALL | re.MULTILINE)
    shown = dict(blocks)
    # the TINY files, and section 3's whole ACME plugin.py
    for name in [*(f"examples/smallest_plugin/{f}" for f in FILES), "examples/vendor_plugin/devicekit_acme/plugin.py"]:
        assert name in shown, f"docs/writing-a-plugin.md shows no block starting '# {name}'"
        assert shown[name] == (ROOT / name).read_text(), f"the doc's {name} differs from the file"


@pytest.fixture(scope="module")
def tiny_venv(tmp_path_factory, request) -> Path:
    """A venv layered on the test venv with devicekit-tiny pip-installed from its wheel (tests/fixture_wheels.py's
    layered_venv, as tests/conftest.py's fixture_venv installs tests/fixtures)."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from fixture_wheels import layered_venv
    finally:
        sys.path.remove(str(ROOT / "tests"))
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider: the wheel goes next to the venv
    wheels = Path(cache.mkdir("devicekit-smallest-wheel")) if cache is not None else None
    return layered_venv(tmp_path_factory, wheels, [HERE], HERE.parent, "tiny-venv")


def _run(venv: Path, *args: str, tmp: Path) -> subprocess.CompletedProcess:
    import os
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    env["DEVICEKIT_CACHE_DIR"] = str(tmp / "dk-cache")
    return subprocess.run([str(venv / "bin" / "python"), *args], env=env, cwd=tmp, capture_output=True, text=True,
                          timeout=600, check=False)


def test_installed_it_is_found_by_its_entry_point(tiny_venv, tmp_path):
    code = ("import devicekit as dk, numpy as np; from devicekit import ir; from devicekit.ir import dtypes\n"
            "k = ir.KernelBuilder('twice'); x = k.param('x', dtypes.float32, 8)\n"
            "o = k.param('o', dtypes.float32, 8, writable=True); i = k.range(8); o[i] = x[i] * 2.0\n"
            "info = {d.kind: d for d in dk.devices()}['TINY']\n"
            "print(info.plugin, info.distribution, dk.run(k.build(), 'TINY', x=np.arange(8, dtype=np.float32))['o'])")
    p = _run(tiny_venv, "-c", code, tmp=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[0] == "tiny devicekit-tiny [ 0.  2.  4.  6.  8. 10. 12. 14.]"


def _kit(venv: Path, tmp: Path, *modules: str) -> dict[str, int]:
    p = _run(venv, "-m", "pytest", "--pyargs", *modules, "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rfEs",
             "--devicekit-device=TINY", tmp=tmp)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    tail = p.stdout.strip().splitlines()[-1]
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", tail)}
    assert "failed" not in counts and "error" not in tail, tail
    return counts


def test_it_passes_the_kits_plugin_checks(tiny_venv, tmp_path):
    """The kit's checks of the plugin surface (hooks, identity, info, loading alone, lazy imports) and of running
    (the library kernels against the reference): the whole kit is the next test, under DEVICEKIT_SLOW=1."""
    counts = _kit(tiny_venv, tmp_path, "devicekit.testing.test_conformance_hooks",
                  "devicekit.testing.test_conformance_runtime")
    assert counts.get("passed", 0) >= 10, counts


@pytest.mark.skipif(not settings.get("DEVICEKIT_SLOW"), reason="the whole kit on TINY: minutes on two busy cores; "
                    "DEVICEKIT_SLOW=1 runs it")
def test_it_passes_the_whole_conformance_kit(tiny_venv, tmp_path):
    counts = _kit(tiny_venv, tmp_path, "devicekit.testing")
    assert counts.get("passed", 0) >= 100, counts
