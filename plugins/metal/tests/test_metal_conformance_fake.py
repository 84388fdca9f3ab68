"""devicekit's conformance kit against METAL on a fake Mac: the registry, Device, Buffer, allocator, compiler and
runtime of the plugin's macOS path, with the fake `Metal` module of fake_metal.py (kernels run on the host).

On a real Mac run the kit itself: `pytest --pyargs devicekit.testing --devicekit-device=METAL`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from devicekit import settings
from devicekit_metal.hostcheck import cxx, libclang_available

# the kit's hostile-name and keyword checks build a kernel each (a g++ run on the fake Mac): every name with
# DEVICEKIT_SLOW=1, in the default run the plugin's own test_metal_hostile_names.py covers names (render + emulation).
# Likewise every third case of the per-kernel checks (library kernels, memory order: --devicekit-sample=3) and 2
# random kernels of 6: test_metal_kernels.py runs every corpus and library kernel and 16 random kernels through the
# same host emulation, and the CPU kit every case on the CPU; DEVICEKIT_SLOW=1 runs them all here
SLOW = settings.get("DEVICEKIT_SLOW")
SKIP = "" if SLOW else " and not hostile_names_match_reference and not keywords_as_names"
BOUND = ["--devicekit-seeds=6"] if SLOW else ["--devicekit-seeds=2", "--devicekit-sample=3"]

BOOT = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("devicekit_metal_fake", {fake!r})
fake = importlib.util.module_from_spec(spec); spec.loader.exec_module(fake)
fake.install()
import pytest
sys.exit(pytest.main(["--pyargs", "devicekit.testing", "--devicekit-device=METAL", *{bound!r}, "-q",
                      "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rfEs", "-W", "ignore::Warning",
                      # `devicekit info --json` runs in a fresh process, where there is no fake Mac
                      "-k", "not info_json{skip}"]))
"""


@pytest.mark.slow
@pytest.mark.skipif(cxx() is None or libclang_available() is not None,
                    reason="the fake GPU needs a host C++ compiler and libclang")
def test_conformance_kit_on_a_fake_mac(tmp_path):
    fake = str(Path(__file__).with_name("fake_metal.py"))
    env = dict(os.environ, DEVICEKIT_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-c", BOOT.format(fake=fake, skip=SKIP, bound=BOUND)], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=1200, check=False)
    tail = (p.stdout + p.stderr)[-6000:]
    assert p.returncode == 0, tail
    assert " passed" in p.stdout and "failed" not in p.stdout and " error" not in p.stdout, tail
