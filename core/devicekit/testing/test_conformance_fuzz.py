"""Conformance: the differential fuzzer (`devicekit.testing.fuzz`) against the device under test, when
`--devicekit-fuzz=N` asks for it: N random well-formed kernels (`fuzzgen`, profile "mixed") on every compiler pair
of the device, each compared with PYTHON at docs/ir.md's tolerances; any finding fails with its seed (rerun it with
`python -m devicekit.testing.fuzz --device KIND --n 1 --seed S`, which also shrinks it). Kernels outside the
device's documented dtypes (float16 without cl_khr_fp16, float64 on Metal) are counted as unsupported, not failed;
the kernels are drawn in the dtypes every pair of the device renders (`fuzz --fit`: a WEBGPU or Metal run checks
kernels instead of counting refusals; on a device that renders every dtype, the kernel each seed always gave).
In process, one worker: a vendor CI sizes N to its time budget (PoCL: about 0.5 s a kernel)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.devicekit_conformance


def test_fuzz_matches_reference(dk_device, dk_spec, dk_fuzz):
    from .fuzz import fuzz_seeds
    rep = fuzz_seeds(dk_fuzz, str(dk_spec), fit=True)
    assert rep.tried == len(dk_fuzz)
    checked = sum(rep.checks.values())
    assert checked == len(dk_fuzz) * len(dk_device.pair_names), rep.checks
    lines = [f"seed {f.seed} on {f.target}: {f.kind}: {f.message[:300]}" for f in rep.findings]
    assert not rep.findings, f"{len(rep.findings)} fuzz finding(s) in seeds {dk_fuzz.start}..{dk_fuzz.stop - 1}:\n" \
        + "\n".join(lines[:10])
