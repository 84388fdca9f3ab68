"""Every IR-side module imports on its own in a fresh interpreter (no import cycles between ir and render)."""

import subprocess
import sys

import pytest

MODULES = ["devicekit.render", "devicekit.render.cstyle", "devicekit.ir", "devicekit.ir.linearize", "devicekit.kernels",
           "devicekit.reference.interpreter", "devicekit.reference.plugin", "devicekit.testing.random_kernels"]


@pytest.mark.parametrize("mod", MODULES)
def test_module_imports_alone(mod):
    r = subprocess.run([sys.executable, "-c", f"import {mod}"], check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
