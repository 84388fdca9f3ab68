#!/usr/bin/env python3
"""How long Ctrl-C takes to give KeyboardInterrupt while a kernel that never ends runs: a real SIGINT to a child
process, the latency measured on CLOCK_MONOTONIC in both processes (the tests only guard against a hang:
tests/reliability/test_interrupt.py, plugins/opencl/tests/test_opencl_launch.py). Per device and wait mode: the
median and worst of a few tries. The target the project had in its tests: 100 ms.

    python bench/interrupt_latency.py                    # CPU, and OPENCL where it runs
    python bench/interrupt_latency.py --device CPU --tries 5
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time

CHILD = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import devicekit as dk
    from devicekit.testing.spin import long_kernel
    dev = dk.device(sys.argv[1])
    prog = dev.compile(long_kernel("bench_long"))
    bufs = [dk.Buffer(dev, 256, "float32").copyin(np.ones(256, np.float32)), dk.Buffer(dev, 256, "float32")]
    prog.execute(bufs, [256, 1], wait=True)
    print("running", flush=True)
    try:
        if sys.argv[2] == "wait=True":
            prog.execute(bufs, [256, 1 << 30], wait=True)
        else:
            prog.execute(bufs, [256, 1 << 30]).wait()
        print(json.dumps({"finished": True}), flush=True)
    except KeyboardInterrupt:
        print(json.dumps({"caught": time.monotonic()}), flush=True)
""")


def once(device: str, how: str) -> float | None:
    """Seconds from SIGINT to KeyboardInterrupt, or None when the child did not report one."""
    p = subprocess.Popen([sys.executable, "-c", CHILD, device, how], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=dict(os.environ))
    try:
        if p.stdout.readline().strip() != "running":
            return None
        time.sleep(0.5)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        return None
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    rep = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    return rep["caught"] - sent if "caught" in rep else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", action="append", help="device spec (repeatable); default CPU and OPENCL")
    ap.add_argument("--tries", type=int, default=3)
    args = ap.parse_args()
    import devicekit as dk
    avail = {d.spec for d in dk.devices() if d.available}
    for device in args.device or [d for d in ("CPU", "OPENCL") if d in avail]:
        for how in ("wait=True", "wait=False+wait()"):
            got = [once(device, how) for _ in range(args.tries)]
            ok = [t for t in got if t is not None]
            if not ok:
                print(f"{device:8s} {how:18s} no KeyboardInterrupt reported")
                continue
            print(f"{device:8s} {how:18s} median {statistics.median(ok) * 1e3:7.2f} ms  worst {max(ok) * 1e3:7.2f} ms"
                  f"  ({len(ok)}/{len(got)} interrupted)")


if __name__ == "__main__":
    main()
