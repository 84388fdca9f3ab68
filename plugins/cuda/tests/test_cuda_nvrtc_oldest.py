"""The test kernels compile with the oldest NVRTC devicekit-cuda supports (13.2), not only with the installed one:
NVRTC versions differ in what they accept and produce. An H200 whose NVRTC was 13.0 refused the lane-by-lane lambdas
of half and bool vector ops that 13.5 takes, and miscompiled a gated load (so 13.0 and 13.1 are refused now,
`compiler.MIN_NVRTC`). scripts/dev-setup.sh unpacks NVRTC 13.2 and its headers into .venv/nvrtc-13.2; NVRTC is
loaded once per process (one soname), so the compiles run in a child interpreter with DEVICEKIT_NVRTC and
DEVICEKIT_CUDA_INCLUDE pointing there.

Two parts, one child each, so that the suite's two workers share them: the fixed test kernels, and the fuzz kernels.
The default run compiles, of the 200 fuzz seeds, the first 40 and every one whose CUDA source applies a half or bool
vector op lane by lane (the kind 13.0 refused; about one in forty, all rendered to pick them: ~2 s);
DEVICEKIT_SLOW=1 compiles all 200."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from devicekit import settings
from devicekit_cuda.compiler import MIN_NVRTC

HERE = Path(__file__).resolve().parent
LEAST = "{}.{}".format(*MIN_NVRTC)  # scripts/dev-setup.sh unpacks this version's wheels into .venv/nvrtc-<it>
OLDEST = Path(sys.prefix) / f"nvrtc-{LEAST}" / "nvidia" / "cu13"
FUZZ_SEEDS = range(700000, 700200)  # profile mixed: about one in forty has a half or bool vector op
FUZZ_FIRST = 40  # the default run's plain sample; the half and bool vector ones are added to it

pytestmark = pytest.mark.skipif(not (OLDEST / "lib" / "libnvrtc.so.13").exists(),
                                reason=f"NVRTC {LEAST} is not unpacked at {OLDEST} (scripts/dev-setup.sh does it)")

_CHILD = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import cuda_kernels as ck
from devicekit_cuda.compiler import CUDACompiler
from devicekit_cuda.renderer import CUDARenderer
from devicekit.testing.fuzzgen import make_case
c, r = CUDACompiler("sm_90"), CUDARenderer()
part, first, stop, plain = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
if part == "fixed":
    srcs = [(n, r.render(k).src)
            for n, k, _ in [*ck.all_kernels(), *ck.reduce_kernels(), *ck.local_kernels(), *ck.library_kernels()]]
else:
    srcs = [(f"fuzz{s}", r.render(make_case(s, "mixed").kernel).src) for s in range(first, stop)]
lanes = [n for n, src in srcs if "dk_map<" in src and re.search(r"dk_(half|bool)x[0-9]", src)]
if part == "fuzz":  # the first `plain` seeds and every seed with a half or bool vector op applied lane by lane
    srcs = [(n, src) for i, (n, src) in enumerate(srcs) if i < plain or n in lanes]
bad = []
for name, src in srcs:
    try:
        c.compile_src(src)
    except Exception as e:
        bad.append(f"{name}: {str(e)[:600]}")
print(json.dumps({"identity": c.identity(), "n": len(srcs), "lanes": lanes, "bad": bad}))
"""


@pytest.mark.parametrize("part", ["fixed", "fuzz"])
def test_kernels_compile_with_the_oldest_supported_nvrtc(part):
    env = {**os.environ, "DEVICEKIT_NVRTC": str(OLDEST / "lib" / "libnvrtc.so.13"),
           "DEVICEKIT_CUDA_INCLUDE": str(OLDEST / "include"), "DEVICEKIT_CACHE": "0"}
    plain = len(FUZZ_SEEDS) if settings.get("DEVICEKIT_SLOW") else FUZZ_FIRST
    r = subprocess.run([sys.executable, "-c", _CHILD, str(HERE), part, str(FUZZ_SEEDS.start), str(FUZZ_SEEDS.stop),
                        str(plain)], env=env, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert f"nvrtc-{LEAST} " in out["identity"], out["identity"]
    if part == "fixed":
        assert out["n"] > 90, out["n"]  # every test kernel of cuda_kernels.py
    else:
        assert len(out["lanes"]) >= 2 and out["n"] == min(plain, len(FUZZ_SEEDS)) + sum(
            int(n[4:]) - FUZZ_SEEDS.start >= plain for n in out["lanes"]), out
    assert not out["bad"], f"{len(out['bad'])} of {out['n']} kernels refused by NVRTC {LEAST}:\n" + "\n".join(out["bad"][:5])
