"""The test kernels compile with the oldest NVRTC devicekit-cuda supports (13.2), not only with the installed one:
NVRTC versions differ in what they accept and produce. An H200 whose NVRTC was 13.0 refused the lane-by-lane lambdas
of half and bool vector ops that 13.5 takes, and miscompiled a gated load (so 13.0 and 13.1 are refused now,
`compiler.MIN_NVRTC`). scripts/dev-setup.sh unpacks NVRTC 13.2 and its headers into .venv/nvrtc-13.2; NVRTC is
loaded once per process (one soname), so the compiles run in a child interpreter with DEVICEKIT_NVRTC and
DEVICEKIT_CUDA_INCLUDE pointing there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from devicekit_cuda.compiler import MIN_NVRTC

HERE = Path(__file__).resolve().parent
LEAST = "{}.{}".format(*MIN_NVRTC)  # scripts/dev-setup.sh unpacks this version's wheels into .venv/nvrtc-<it>
OLDEST = Path(sys.prefix) / f"nvrtc-{LEAST}" / "nvidia" / "cu13"
FUZZ_SEEDS = range(700000, 700200)  # profile mixed: about one in forty has a half or bool vector op

pytestmark = pytest.mark.skipif(not (OLDEST / "lib" / "libnvrtc.so.13").exists(),
                                reason=f"NVRTC {LEAST} is not unpacked at {OLDEST} (scripts/dev-setup.sh does it)")

_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import cuda_kernels as ck
from devicekit_cuda.compiler import CUDACompiler
from devicekit_cuda.renderer import CUDARenderer
from devicekit.testing.fuzzgen import make_case
c, r = CUDACompiler("sm_90"), CUDARenderer()
kernels = [(n, k) for n, k, _ in [*ck.all_kernels(), *ck.reduce_kernels(), *ck.local_kernels(), *ck.library_kernels()]]
kernels += [(f"fuzz{s}", make_case(s, "mixed").kernel) for s in range(int(sys.argv[2]), int(sys.argv[3]))]
bad = []
for name, k in kernels:
    try:
        c.compile_src(r.render(k).src)
    except Exception as e:
        bad.append(f"{name}: {str(e)[:600]}")
print(json.dumps({"identity": c.identity(), "n": len(kernels), "bad": bad}))
"""


def test_kernels_compile_with_the_oldest_supported_nvrtc():
    env = {**os.environ, "DEVICEKIT_NVRTC": str(OLDEST / "lib" / "libnvrtc.so.13"),
           "DEVICEKIT_CUDA_INCLUDE": str(OLDEST / "include"), "DEVICEKIT_CACHE": "0"}
    r = subprocess.run([sys.executable, "-c", _CHILD, str(HERE), str(FUZZ_SEEDS.start), str(FUZZ_SEEDS.stop)],
                       env=env, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert f"nvrtc-{LEAST} " in out["identity"], out["identity"]
    assert out["n"] > len(FUZZ_SEEDS)
    assert not out["bad"], f"{len(out['bad'])} of {out['n']} kernels refused by NVRTC {LEAST}:\n" + "\n".join(out["bad"][:5])
