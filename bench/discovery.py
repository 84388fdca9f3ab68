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

CHILD = ("import time; t, c = time.perf_counter(), time.process_time(); import devicekit; ds = devicekit.devices(); "
         "print(time.perf_counter() - t, time.process_time() - c, sum(d.available for d in ds), len(ds))")


def once(env: dict[str, str]) -> tuple[float, float, str, float]:
    """(seconds in the child from `import devicekit` to `devices()` returned, the whole child's wall time, what it
    found, the child's CPU seconds over the same span: on a loaded machine the CPU time is the steadier figure)."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, check=True)
    wall = time.perf_counter() - t0
    inner, cpu, avail, n = out.stdout.split()
    return float(inner), wall, f"{avail}/{n} available", float(cpu)


def _line(label: str, xs: list[float]) -> str:
    xs = sorted(xs)
    return f"{label}: median {statistics.median(xs) * 1e3:.1f} ms (min {xs[0] * 1e3:.1f}, max {xs[-1] * 1e3:.1f})"


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
        pairs = [(once(off), once(on)) for _ in range(a.n)]
        for i, label in enumerate(("DEVICEKIT_PROBE_CACHE=0 (every kind probed)", "DEVICEKIT_PROBE_CACHE=1 (default)")):
            print(f"{_line(label, [p[i][0] for p in pairs])}; {_line('CPU time', [p[i][3] for p in pairs])}; "
                  f"{a.n} fresh processes")
        print(f"load: {os.getloadavg()[0]:.2f} (1-min average), {os.cpu_count()} CPUs")
        return 0
    runs = [once(env) for _ in range(a.n)]
    print(f"{_line('import devicekit; devicekit.devices()', [r[0] for r in runs])}; "
          f"{_line('CPU time', [r[3] for r in runs])}; {a.n} fresh processes; {runs[0][2]}")
    if a.total:
        wall = sorted(r[1] for r in runs)
        print(f"whole process (interpreter start included): median {statistics.median(wall) * 1e3:.1f} ms")
    print(f"load: {os.getloadavg()[0]:.2f} (1-min average), {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
