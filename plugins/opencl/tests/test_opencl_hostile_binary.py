"""Damaged compiled bytes given to the OPENCL runtime are refused by name, before the driver sees them.

PoCL ends the process (SIGSEGV) in clBuildProgram on a third of its own program binary, so the runtime checks the
record the compiler wrapped the driver's binary in (devicekit.compile.envelope, compiler.RECORD: length, device key, sha256). Each case
runs in a fresh interpreter (one for all, in order, each announced first): a loader that crashes fails its case
(and names it) instead of ending pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_CASE = r"""
import sys
import numpy as np
import devicekit as dk
from devicekit import kernels
from devicekit.compile.compiler import CompiledSpec
from devicekit_opencl import context
from devicekit_opencl.compiler import RECORD as binary

dev = dk.device("OPENCL")
r, c = dev.compilers[0]
good = c.compile(r.render(kernels.elementwise("a * b + c", name="dk_hostile_bin")))
lib = good.lib
key = context.get(0).binary_key


def damaged(how):
    if how == "good":
        return lib
    if how == "truncated":
        return lib[: len(lib) // 3]
    if how == "truncated_payload":  # a whole header, the driver binary cut short
        return lib[:-1000]
    if how == "flipped":
        i = len(lib) * 2 // 3
        return lib[:i] + bytes([lib[i] ^ 0x10]) + lib[i + 1:]
    if how == "empty":
        return b""
    if how == "cpu_object":  # another device's binary
        cr, cc = dk.device("CPU").compilers[0]
        return cc.compile(cr.render(kernels.elementwise("a * b + c", name="dk_hostile_bin"))).lib
    if how == "bare_driver_binary":  # what clGetProgramInfo returned, without the record
        return binary.unwrap(lib, key, "x")
    if how == "other_driver":  # a correct record made by another driver
        return binary.wrap(binary.unwrap(lib, key, "x"), "Other Platform|OpenCL 3.0|other device|OpenCL 3.0|driver 9.9")
    raise ValueError(how)


for how in sys.argv[1:]:
    print("START", how, flush=True)
    try:
        prog = dev.runtime(CompiledSpec(good.spec, damaged(how), good.compiler_id))
    except Exception as e:
        print("RESULT", how, "REFUSED", type(e).__name__, str(e).replace("\n", " "), flush=True)
        continue
    a, b, cc = (np.arange(1, 9, dtype=np.float32) * s for s in (1.5, -2.0, 0.25))
    got = dk.run(prog, dev, a=a, b=b, c=cc, n=8)["out"]
    print("RESULT", how, "RAN", "ok" if np.array_equal(got, a * b + cc) else f"wrong {got}", flush=True)
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


@pytest.fixture(scope="module")
def outcomes(cl_device, tmp_path_factory) -> tuple[dict[str, str], subprocess.CompletedProcess]:
    """Every case in one fresh interpreter, in order; {case: its result line} for the cases that finished."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVICEKIT_", "POCL_DEVICES"))}
    env["DEVICEKIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("dk-cache"))
    p = subprocess.run([sys.executable, "-c", _CASE, *sorted(REFUSED), "good"], env=env, capture_output=True,
                       text=True, timeout=300, check=False)
    done = {}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            _, how, rest = line.split(" ", 2)
            done[how] = rest
    return done, p


def _result(outcomes, how: str) -> str:
    done, p = outcomes
    if how not in done:
        started = [x.split()[1] for x in p.stdout.splitlines() if x.startswith("START ")]
        pytest.fail(f"{how}: the process ended (exit {p.returncode}) during case {started[-1] if started else None!r}"
                    f" before this one finished: {p.stderr[-1500:]}")
    return done[how]


@pytest.mark.parametrize("how", sorted(REFUSED))
def test_damaged_bytes_are_refused_by_name(outcomes, how):
    """Each damage is a MalformedBinaryError (a devicekit CompileError) at load that says what was wrong."""
    out = _result(outcomes, how)
    assert out.startswith("REFUSED MalformedBinaryError "), f"{how}: {out}"
    assert REFUSED[how] in out and "dk_hostile_bin" in out, f"{how}: the error does not say why: {out}"


def test_good_bytes_load_and_compute(outcomes):
    """The record round-trips: the compiler's own bytes load and compute a*b+c."""
    assert _result(outcomes, "good") == "RAN ok"


def test_record_checks_in_process():
    """The record's checks without a driver: a good record unwraps to its payload; each damage is refused."""
    from devicekit.errors import CompileError
    from devicekit_opencl.compiler import RECORD as binary

    lib = binary.wrap(b"payload" * 10, "key")
    assert binary.unwrap(lib, "key", "k") == b"payload" * 10
    for bad, why in ((lib[:-1], "truncated"), (lib + b"x", "trailing"), (lib[:20], "shorter than"),
                     (lib[:-1] + b"?", "sha256"), (b"\x7fELF" + lib[4:], "not a devicekit-opencl"),
                     (binary.wrap(b"p", "other"), "another device")):
        with pytest.raises(CompileError, match=why):
            binary.unwrap(bad, "key", "k")
