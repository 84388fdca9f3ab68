"""The long kernel that Ctrl-C checks interrupt (2^38 multiply-adds at n=256, m=2^30: minutes on any device), and
the one child process that runs it and reports what a SIGINT did.

The conformance kit's interrupt check (test_conformance_interrupt.py) and bench/interrupt_latency.py both start the
child with `start_child` (`python -m devicekit.testing.spin SPEC HOW`) and read the same report; the CPU's own
interrupt tests (tests/reliability/test_interrupt.py) use `long_kernel`. At m=1 the kernel is a quick launch that
loads the program first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from devicekit import ir
from devicekit.ir import dtypes

HOWS = ("wait=True", "wait=False+wait()")  # execute(wait=True), or execute() then .wait()


def long_kernel(name: str = "dk_long") -> ir.Kernel:
    """out[i] = sum over r < m of x[i] * r: its run time grows with the var m, so one program is quick or minutes."""
    k = ir.KernelBuilder(name)
    n, m = k.var("n", 1, 1 << 20), k.var("m", 1, 1 << 30)
    x = k.param("x", dtypes.float32, n)
    o = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    r = k.range(m, "reduce")
    o[i] = (x[i] * r.cast(dtypes.float32)).sum(r)
    return k.build()


def start_child(spec: str, how: str) -> subprocess.Popen:
    """The child on device `spec`, waiting as `how` says (one of HOWS); text pipes. Its stdout: "running" once the
    long launch begins (send SIGINT then), then one JSON line: {"caught": CLOCK_MONOTONIC seconds at the
    KeyboardInterrupt} (one clock for both processes), {"finished": true}, {"refused": "Type: message"} (a device
    that refuses so long a kernel), or, instead of "running", {"unavailable": why} (a device a fresh process
    cannot make, such as a fake)."""
    if how not in HOWS:
        raise ValueError(f"start_child: how= is one of {', '.join(HOWS)}, got {how!r}")
    return subprocess.Popen([sys.executable, "-m", "devicekit.testing.spin", str(spec), how],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def _child(spec: str, how: str) -> None:
    import numpy as np

    import devicekit as dk
    try:
        dev = dk.device(spec)
    except dk.DeviceKitError as e:  # a device made in-process only (a fake), or one gone since
        print(json.dumps({"unavailable": str(e)}), flush=True)
        return
    prog = dev.compile(long_kernel())
    bufs = [dk.Buffer(dev, 256, "float32").copyin(np.ones(256, np.float32)), dk.Buffer(dev, 256, "float32")]
    prog.execute(bufs, [256, 1], wait=True)  # loaded and run once: the signal comes during the long launch only
    print("running", flush=True)
    try:
        if how == "wait=True":
            prog.execute(bufs, [256, 1 << 30], wait=True)
        else:
            prog.execute(bufs, [256, 1 << 30]).wait()
        print(json.dumps({"finished": True}), flush=True)
    except KeyboardInterrupt:
        print(json.dumps({"caught": time.monotonic()}), flush=True)
    except Exception as e:  # noqa: BLE001 - a device that refuses so long a kernel, saying why (WebGPU on llvmpipe)
        print(json.dumps({"refused": f"{type(e).__name__}: {e}"}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in HOWS:
        sys.exit(f"usage: python -m devicekit.testing.spin DEVICE {{{'|'.join(HOWS)}}}")
    _child(sys.argv[1], sys.argv[2])
