"""The core's conformance kit (devicekit.testing), run against the CPU device in a subprocess, as a vendor runs it
for their own plugin. (tests/ecosystem runs the kit for PYTHON and ACME; CPU's run is this one.)"""

from __future__ import annotations

import re
import subprocess
import sys

from devicekit import settings

# the default run: 4 random-kernel seeds (the CI fuzz checks both CPU pairs on 100 kernels each,
# tests/reliability/test_fuzz.py), and no `devicekit info --json` check (tests/ecosystem/test_conformance_kit.py's
# test_info_json_lists_every_kind_the_kit_runs_on checks CPU's row); DEVICEKIT_SLOW=1 runs the whole kit, 12 seeds
BOUNDS = () if settings.get("DEVICEKIT_SLOW") else ("--devicekit-seeds=4", "-k", "not info_json")


def test_conformance_kit_passes_on_cpu(tmp_path):
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "--pyargs", "devicekit.testing",
                        "--devicekit-device=CPU", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                        f"--basetemp={tmp_path}", *BOUNDS],
                       capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped)", p.stdout.strip().splitlines()[-1])}
    assert counts.get("passed", 0) >= 60 and "failed" not in counts, counts
    # only what needs another setup skips: the fuzzer (--devicekit-fuzz=N) and the checks that need two CPU ids
    allowed = ("the differential fuzzer is off", "the wrong-device checks need two")
    skips = [line for line in p.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all(any(a in s for a in allowed) for s in skips), "\n".join(skips)
