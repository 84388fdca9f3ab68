"""Damaged compiled bytes given to the OPENCL runtime are refused by name, before the driver sees them.

PoCL ends the process (SIGSEGV) in clBuildProgram on a third of its own program binary, so the runtime checks the
record the compiler wrapped the driver's binary in (devicekit_opencl/binary.py: length, device key, sha256). Each case
runs in a fresh interpreter: a loader that crashes fails its case instead of ending pytest.
"""

from __future__ import annotations

import pytest

_CASE = r"""
import sys
import numpy as np
import devicekit as dk
from devicekit import kernels
from devicekit.compile.compiler import CompiledSpec
from devicekit_opencl import binary, context

how = sys.argv[1]
dev = dk.device("OPENCL")
r, c = dev.compilers[0]
good = c.compile(r.render(kernels.elementwise("a * b + c", name="dk_hostile_bin")))
lib = good.lib
if how == "good":
    bad = lib
elif how == "truncated":
    bad = lib[: len(lib) // 3]
elif how == "truncated_payload":  # a whole header, the driver binary cut short
    bad = lib[:-1000]
elif how == "flipped":
    i = len(lib) * 2 // 3
    bad = lib[:i] + bytes([lib[i] ^ 0x10]) + lib[i + 1:]
elif how == "empty":
    bad = b""
elif how == "cpu_object":  # another device's binary
    cr, cc = dk.device("CPU").compilers[0]
    bad = cc.compile(cr.render(kernels.elementwise("a * b + c", name="dk_hostile_bin"))).lib
elif how == "bare_driver_binary":  # what clGetProgramInfo returned, without the record
    bad = binary.unwrap(lib, context.get(0).binary_key, "x")
elif how == "other_driver":  # a correct record made by another driver
    payload = binary.unwrap(lib, context.get(0).binary_key, "x")
    bad = binary.wrap(payload, "Other Platform|OpenCL 3.0|other device|OpenCL 3.0|driver 9.9")
try:
    prog = dev.runtime(CompiledSpec(good.spec, bad, good.compiler_id))
except Exception as e:
    print("REFUSED", type(e).__name__, str(e).replace("\n", " "))
    sys.exit(0)
a, b, cc = (np.arange(1, 9, dtype=np.float32) * s for s in (1.5, -2.0, 0.25))
got = dk.run(prog, dev, a=a, b=b, c=cc, n=8)["out"]
print("RAN", "ok" if np.array_equal(got, a * b + cc) else f"wrong {got}")
"""

REFUSED = {
    "truncated": "truncated",
    "truncated_payload": "truncated",
    "flipped": "sha256",
    "empty": "empty",
    "cpu_object": "not a devicekit-opencl program record",
    "bare_driver_binary": "not a devicekit-opencl program record",
    "other_driver": "built for another device or driver",
}


def _run(run_py, how: str) -> str:
    p = run_py("-c", _CASE, how, timeout=180)
    assert p.returncode == 0, f"{how}: loading the bytes ended the process (exit {p.returncode}): {p.stderr[-1500:]}"
    return p.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("how", sorted(REFUSED))
def test_damaged_bytes_are_refused_by_name(cl_device, run_py, how):
    """Each damage is a MalformedBinaryError (a devicekit CompileError) at load that says what was wrong."""
    out = _run(run_py, how)
    assert out.startswith("REFUSED MalformedBinaryError "), f"{how}: {out}"
    assert REFUSED[how] in out and "dk_hostile_bin" in out, f"{how}: the error does not say why: {out}"


def test_good_bytes_load_and_compute(cl_device, run_py):
    """The record round-trips: the compiler's own bytes load and compute a*b+c."""
    assert _run(run_py, "good") == "RAN ok"


def test_record_checks_in_process():
    """The record's checks without a driver: a good record unwraps to its payload; each damage is refused."""
    from devicekit.errors import CompileError
    from devicekit_opencl import binary

    lib = binary.wrap(b"payload" * 10, "key")
    assert binary.unwrap(lib, "key", "k") == b"payload" * 10
    for bad, why in ((lib[:-1], "truncated"), (lib + b"x", "trailing"), (lib[:20], "shorter than"),
                     (lib[:-1] + b"?", "sha256"), (b"\x7fELF" + lib[4:], "not a devicekit-opencl"),
                     (binary.wrap(b"p", "other"), "another device")):
        with pytest.raises(CompileError, match=why):
            binary.unwrap(bad, "key", "k")
