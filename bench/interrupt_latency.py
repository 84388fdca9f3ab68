#!/usr/bin/env python3
"""How long Ctrl-C takes to give KeyboardInterrupt while a kernel that never ends runs: a real SIGINT to a child
process (devicekit.testing.spin's child, the one the conformance kit's interrupt check signals), the latency
measured on CLOCK_MONOTONIC in both processes (the tests only guard against a hang:
tests/reliability/test_interrupt.py, plugins/opencl/tests/test_opencl_launch.py). Per device and wait mode: the
median and worst of a few tries. The target the project had in its tests: 100 ms.

    python bench/interrupt_latency.py                    # CPU, and OPENCL where it runs
    python bench/interrupt_latency.py --device CPU --tries 5
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import time

from devicekit.testing import spin


def once(device: str, how: str) -> float | None:
    """Seconds from SIGINT to KeyboardInterrupt, or None when the child did not report one."""
    p = spin.start_child(device, how)  # the child the conformance kit's interrupt check signals
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
        for how in spin.HOWS:
            got = [once(device, how) for _ in range(args.tries)]
            ok = [t for t in got if t is not None]
            if not ok:
                print(f"{device:8s} {how:18s} no KeyboardInterrupt reported")
                continue
            print(f"{device:8s} {how:18s} median {statistics.median(ok) * 1e3:7.2f} ms  worst {max(ok) * 1e3:7.2f} ms"
                  f"  ({len(ok)}/{len(got)} interrupted)")


if __name__ == "__main__":
    main()
