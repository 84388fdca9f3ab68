"""The conformance kit on OPENCL as CI runs it, in a subprocess: with one PoCL device (the whole kit, a bounded
random-kernel sample and a bounded run of the differential fuzzer) and with two (`POCL_DEVICES="pthread pthread"`:
the checks that need two ids, against OPENCL:1). The long fuzz campaign (>= 5,000 kernels) is run by hand:
`python -m devicekit.testing.fuzz --device OPENCL --n 5000 --jobs 2` (docs/decisions.md, OPENCL)."""

from __future__ import annotations

import re

import pytest
from devicekit import settings
from devicekit_opencl import settings as _opencl_settings  # noqa: F401 - declares DEVICEKIT_OPENCL_KIT_FUZZ

KIT = ("-m", "pytest", "--pyargs", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rfEs")
FUZZ_N = settings.get("DEVICEKIT_OPENCL_KIT_FUZZ")
if FUZZ_N is None:
    FUZZ_N = 200 if settings.get("DEVICEKIT_SLOW") else 15


def _counts(out: str) -> dict[str, int]:
    tail = out.strip().splitlines()[-1]
    return {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", tail)}


def test_kit_passes_on_one_device(cl_device, run_py):
    # the kit's `devicekit info --json` check (a fresh process probing every plugin, ~2.5 s) with DEVICEKIT_SLOW=1;
    # tests/ecosystem/test_conformance_kit.py::test_info_json_lists_every_kind_the_kit_runs_on checks OPENCL's row
    bound = () if settings.get("DEVICEKIT_SLOW") else ("-k", "not info_json")
    p = run_py(*KIT, "devicekit.testing", "--devicekit-device=OPENCL", "--devicekit-seeds=6",
               f"--devicekit-fuzz={FUZZ_N}", "--devicekit-fuzz-seed=7000", *bound)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    counts = _counts(p.stdout)
    assert counts.get("passed", 0) >= 100 and "failed" not in counts, counts
    skips = [line for line in p.stdout.splitlines() if line.startswith("SKIPPED")]
    allowed = ("need two", "needs the device", "neither as_buffer nor transfer", "has no as_buffer", "has no from_host")
    assert all(any(a in s for a in allowed) for s in skips), skips


def test_kit_passes_on_the_second_of_two_devices(cl_device, run_py):
    mods = [f"devicekit.testing.{m}" for m in ("test_conformance_contract", "test_conformance_cache_threads",
                                               "test_conformance_errors")]
    p = run_py(*KIT, *mods, "--devicekit-device=OPENCL:1", env={"POCL_DEVICES": "pthread pthread"})
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    counts = _counts(p.stdout)
    assert counts.get("passed", 0) >= 20 and "failed" not in counts and "skipped" not in counts, p.stdout[-3000:]


@pytest.mark.parametrize("n_devices", [2])
def test_each_id_has_its_own_context(run_py, cl_device, n_devices):
    code = """
import numpy as np, devicekit as dk
from devicekit import kernels
d0, d1 = dk.device("OPENCL"), dk.device("OPENCL:1")
p1 = d1.compile(kernels.elementwise("a + 1.0", name="ctx"))
b = dk.Buffer(d1, 8, dk.dtypes.float32).copyin(np.zeros(8, np.float32))
o = dk.Buffer(d1, 8, dk.dtypes.float32)
p1.execute([b, o], [8])
print(p1.ctx.index, b.handle.index, p1.ctx.context is not d0.allocator.ctx.context, list(o.numpy()))
"""
    p = run_py("-c", code, env={"POCL_DEVICES": " ".join(["pthread"] * n_devices)})
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split()[:3] == ["1", "1", "True"], p.stdout
