"""The core's conformance kit (devicekit.testing), run against the CPU device in a subprocess."""

from __future__ import annotations

import subprocess
import sys


def test_conformance_kit_passes_on_cpu(tmp_path):
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "--pyargs", "devicekit.testing",
                        "--devicekit-device=CPU", "-p", "no:cacheprovider", f"--basetemp={tmp_path}"],
                       capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert " passed" in p.stdout
