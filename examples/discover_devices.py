"""Discover every device devicekit knows, say why the missing ones are missing, and run one kernel (saxpy) on each
available device, checked against numpy.

    .venv/bin/python examples/discover_devices.py

Exit status 1 if any device computes a wrong result.
"""

import sys

import devicekit as dk
import numpy as np
from devicekit import kernels


def main() -> int:
    n = 10_000
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    saxpy = kernels.elementwise("x * 2.0 + y", name="saxpy")
    want = x * np.float32(2.0) + y

    bad = 0
    for info in dk.devices():
        origin = f"{info.distribution} {info.version}" if info.distribution else info.plugin
        if not info.available:
            print(f"{info.spec:<8} unavailable ({origin}): {info.reason}")
            continue
        dev = dk.device(info.spec)
        out = dk.run(saxpy, device=dev, x=x, y=y, n=n)["out"]
        err = float(np.max(np.abs(out - want)))
        ok = err <= 1e-5
        bad += not ok
        print(f"{info.spec:<8} ran saxpy n={n} with pair {dev.pair_names[0]!r} ({origin}): max abs error {err:.2g} "
              f"{'ok' if ok else 'MISMATCH'}")
    print(f"default device: {dk.device().spec}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
