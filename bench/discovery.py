"""Discovery cost: `import devicekit; devicekit.devices()` in fresh processes, median of N (issue: <= 100 ms with
every plugin installed). Each child times itself from before `import devicekit` to after `devices()` returns, so
the interpreter's own start is left out; `--total` also reports the whole process's wall time.

    .venv/bin/python bench/discovery.py [-n 15] [--total] [--compare] [--profile]

`--compare` alternates runs with DEVICEKIT_PROBE_CACHE=0 (every kind probed, as before the probe memo) and =1, so
a loaded machine weighs on both alike. `--profile` prints where one discovery spends its time (cProfile, top 25)."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CHILD = ("import time; t = time.perf_counter(); import devicekit; ds = devicekit.devices(); "
         "print(time.perf_counter() - t, sum(d.available for d in ds), len(ds))")


def once(env: dict[str, str]) -> tuple[float, float, str]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, check=True)
    wall = time.perf_counter() - t0
    inner, avail, n = out.stdout.split()
    return float(inner), wall, f"{avail}/{n} available"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15)
    ap.add_argument("--total", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--compare", action="store_true")
    a = ap.parse_args()
    env = dict(os.environ)
    if a.profile:
        code = ("import cProfile, pstats, io; pr = cProfile.Profile(); pr.enable(); import devicekit; "
                "devicekit.devices(); pr.disable(); s = io.StringIO(); "
                "pstats.Stats(pr, stream=s).sort_stats('cumulative').print_stats(25); print(s.getvalue())")
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        return 0
    once(env)  # warm the OS's file cache (and the remembered probe answers)
    if a.compare:
        off, on = {**env, "DEVICEKIT_PROBE_CACHE": "0"}, {**env, "DEVICEKIT_PROBE_CACHE": "1"}
        pairs = [(once(off)[0], once(on)[0]) for _ in range(a.n)]
        for label, xs in (("DEVICEKIT_PROBE_CACHE=0 (every kind probed)", [p[0] for p in pairs]),
                          ("DEVICEKIT_PROBE_CACHE=1 (default)", [p[1] for p in pairs])):
            xs = sorted(xs)
            print(f"{label}: median {statistics.median(xs) * 1e3:.1f} ms (min {xs[0] * 1e3:.1f}, "
                  f"max {xs[-1] * 1e3:.1f}; {a.n} fresh processes)")
        print(f"load: {os.getloadavg()[0]:.2f} (1-min average), {os.cpu_count()} CPUs")
        return 0
    runs = [once(env) for _ in range(a.n)]
    inner = sorted(r[0] for r in runs)
    print(f"import devicekit; devicekit.devices(): median {statistics.median(inner) * 1e3:.1f} ms "
          f"(min {inner[0] * 1e3:.1f}, max {inner[-1] * 1e3:.1f}; {a.n} fresh processes; {runs[0][2]})")
    if a.total:
        wall = sorted(r[1] for r in runs)
        print(f"whole process (interpreter start included): median {statistics.median(wall) * 1e3:.1f} ms")
    print(f"load: {os.getloadavg()[0]:.2f} (1-min average), {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
