#!/usr/bin/env python3
"""devicekit-ray on a local two-node Ray cluster (Ray's own `ray.cluster_utils.Cluster`, started here and always
shut down): what a remote launch, a copy and spreading work over two remote devices cost next to the local CPU
device. See docs/distributed.md (the table lives there).

    python bench/ray.py                 # prints the table
    python bench/ray.py --quick         # fewer repetitions
    python bench/ray.py --update-docs   # also writes it between the markers in docs/distributed.md

Both "nodes" are processes of this machine: a remote call costs what Ray's local IPC costs, and spreading kernels
over two remote devices shares the same cores, so the spread row measures the overhead, never a speed-up.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# run as `python bench/ray.py`, this file's folder comes first on sys.path and this module would shadow Ray's package
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
DOC = os.path.join(HERE, os.pardir, "docs", "distributed.md")
BEGIN, END = "<!-- bench-ray:begin -->", "<!-- bench-ray:end -->"
NODE = {"num_cpus": 1, "object_store_memory": 400 << 20}  # room for a few 64 MB copies in flight per node
ENV = {"DEVICEKIT_RAY_KINDS": "CPU"}
SIZES_MB = (1, 16, 64)
N_SPREAD = 64  # independent kernels of the throughput row
SPREAD_N = 4 << 20  # floats per kernel: a*b+c over 4M floats, a few ms on one core


def _times(fn: Callable[[], Any], reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _us(t: float) -> str:
    return f"{t * 1e6:.0f} us" if t >= 1e-4 else f"{t * 1e6:.1f} us"


class Bench:
    """The rows, on RAY and RAY:1 (the two nodes' CPU devices) and the local CPU device."""

    def __init__(self, quick: bool):
        import devicekit as dk
        from devicekit import kernels
        self.dk, self.quick = dk, quick
        self.local = dk.device("CPU")
        self.remote = [dk.device("RAY"), dk.device("RAY:1")]
        self.tiny = kernels.elementwise("a + 1.0", name="tiny")
        self.fma = kernels.elementwise("a * b + c", name="fma")
        self.rows: list[tuple[str, str, str, str]] = []  # (row, RAY, local CPU, ratio/note)

    # ---- launches
    def launch_rows(self) -> None:
        dk = self.dk
        reps = 60 if self.quick else 300
        res = {}
        for name, dev in (("ray", self.remote[1]), ("cpu", self.local)):
            p = dev.compile(self.tiny)
            a = dk.Buffer(dev, 1, dk.dtypes.float32).copyin(np.ones(1, np.float32))
            o = dk.Buffer(dev, 1, dk.dtypes.float32)
            for _ in range(20):
                p.execute([a, o], [1], wait=True)
            rt = _times(lambda p=p, a=a, o=o: p.execute([a, o], [1], wait=True), reps)
            k = 200 if self.quick else 1000

            def queued(p=p, a=a, o=o, dev=dev, k=k) -> None:
                for _ in range(k):
                    p.execute([a, o], [1])
                dev.synchronize()
            q = min(_times(queued, 3)) / k
            res[name] = (statistics.median(rt), min(rt), q)
        r, c = res["ray"], res["cpu"]
        self.rows.append((f"launch round trip, 1 element, `execute(wait=True)`: median (best) of {reps}",
                          f"{_us(r[0])} ({_us(r[1])})", f"{_us(c[0])} ({_us(c[1])})", f"{r[0] / c[0]:.0f}x local"))
        self.rows.append(("queued launch (no wait), per launch, then one synchronize", _us(r[2]), _us(c[2]),
                          f"{r[2] / c[2]:.0f}x local"))

    # ---- copies
    def copy_rows(self) -> None:
        dk = self.dk
        reps = 3 if self.quick else 7
        for mb in SIZES_MB:
            n = (mb << 20) // 4
            host = np.random.default_rng(mb).standard_normal(n).astype(np.float32)
            back = np.empty_like(host)
            rates = {}
            for name, dev in (("ray", self.remote[1]), ("cpu", self.local)):
                b = dk.Buffer(dev, n, dk.dtypes.float32).copyin(host)
                dev.synchronize()

                def cin(b=b, dev=dev, host=host) -> None:
                    b.copyin(host)
                    dev.synchronize()
                tin = min(_times(cin, reps))
                tout = min(_times(lambda b=b, back=back: b.copyout(back), reps))
                np.testing.assert_array_equal(back, host)
                rates[name] = (mb / tin, mb / tout)
                del b
            r, c = rates["ray"], rates["cpu"]
            self.rows.append((f"copyin {mb} MB f32 (MB/s, best of {reps})", f"{r[0]:,.0f}", f"{c[0]:,.0f}",
                              f"{r[0] / c[0]:.3g}x local"))
            self.rows.append((f"copyout {mb} MB f32 (MB/s, best of {reps})", f"{r[1]:,.0f}", f"{c[1]:,.0f}",
                              f"{r[1] / c[1]:.3g}x local"))

    # ---- spreading
    def _setup(self, dev: Any) -> tuple[Any, list[Any], list[Any]]:
        dk = self.dk
        rng = np.random.default_rng(7)
        p = dev.compile(self.fma)
        ins = [dk.Buffer(dev, SPREAD_N, dk.dtypes.float32).copyin(rng.standard_normal(SPREAD_N).astype(np.float32))
               for _ in range(3)]
        outs = [dk.Buffer(dev, SPREAD_N, dk.dtypes.float32) for _ in range(4)]  # 4 outputs, written in turn
        p.execute([*ins, outs[0]], [SPREAD_N], wait=True)
        return p, ins, outs

    def spread_row(self) -> None:
        reps = 2 if self.quick else 4
        local = self._setup(self.local)
        remote = [self._setup(d) for d in self.remote]

        def run(on: list[tuple[Any, list[Any], list[Any]]], devs: list[Any]) -> None:
            for i in range(N_SPREAD):  # round-robin, not waited for: each device queues its share
                p, ins, outs = on[i % len(on)]
                p.execute([*ins, outs[(i // len(on)) % len(outs)]], [SPREAD_N])
            for d in devs:
                d.synchronize()
        t_local = min(_times(lambda: run([local], [self.local]), reps))
        t_ray = min(_times(lambda: run(remote, self.remote), reps))
        for _p, ins, outs in remote:  # the remote results are the local ones
            a, b, c = (x.numpy() for x in ins)
            np.testing.assert_allclose(outs[0].numpy(), a * b + c, rtol=1e-6)
        k_local, k_ray = N_SPREAD / t_local, N_SPREAD / t_ray
        row = f"{N_SPREAD} independent a*b+c over 4M f32 (kernels/s, best of {reps}): RAY + RAY:1 vs one local CPU"
        self.rows.append((row, f"{k_ray:.1f}", f"{k_local:.1f}", f"{k_ray / k_local:.2f}x local"))

    def table(self) -> str:
        lines = ["| row | RAY (remote CPU) | local CPU | RAY / local |", "|---|---|---|---|"]
        lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in self.rows]
        return "\n".join(lines)


def start_cluster() -> Any:
    """A local two-node cluster, as devicekit-ray's tests start it; this process is its driver."""
    import ray
    from ray.cluster_utils import Cluster
    c = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    try:
        c.add_node(**NODE)
        c.wait_for_nodes()
        ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    except BaseException:
        c.shutdown()
        raise
    return c


def _cpu_name() -> str:
    try:
        from devicekit_cpu.hostinfo import cpu_fingerprint
        return cpu_fingerprint().split(" flags=")[0]
    except Exception:  # noqa: BLE001 - the name is decoration
        return platform.machine()


def update_docs(text: str) -> None:
    with open(DOC, encoding="utf-8") as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"bench/ray.py: {os.path.normpath(DOC)} has no {BEGIN} ... {END} markers")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(DOC, "w", encoding="utf-8") as f:
        f.write(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--update-docs", action="store_true", help="write the table into docs/distributed.md")
    args = ap.parse_args(argv)
    os.environ.update(ENV)
    os.environ.pop("RAY_ADDRESS", None)
    from devicekit.bench import machine as bench_machine
    load0 = bench_machine.load()
    if (busy := bench_machine.busy_warning()) is not None:
        print(busy, file=sys.stderr)
    t0 = time.perf_counter()
    cluster = start_cluster()
    try:
        import devicekit as dk
        import ray
        from devicekit_ray import rediscover
        rediscover()
        t_cluster = time.perf_counter() - t0
        t1 = time.perf_counter()
        specs = [d.spec for d in dk.devices() if d.kind == "RAY" and d.available]
        if specs != ["RAY", "RAY:1"]:
            raise SystemExit(f"bench/ray.py: expected RAY and RAY:1 on the two-node cluster, found {specs}")
        t_disc = time.perf_counter() - t1
        b = Bench(args.quick)
        b.launch_rows()
        b.copy_rows()
        b.spread_row()
        ray_version = ray.__version__
    finally:
        import ray
        ray.shutdown()
        cluster.shutdown()
    load1 = bench_machine.load()
    fmt = (lambda x: "n/a" if x is None else f"{x:.2f}")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    cmd = "python bench/ray.py" + (" --quick" if args.quick else "")
    text = (f"_Last run: {stamp}, `{cmd}`._\n\n"
            f"Machine: {_cpu_name()}, {bench_machine.cpus()} CPUs shared by the "
            f"driver and both nodes; python {platform.python_version()}, numpy {np.__version__}, ray {ray_version}. "
            f"Two-node local cluster started in {t_cluster:.1f} s, first discovery {t_disc:.1f} s. Load average "
            f"before/after the run: {fmt(load0)} / {fmt(load1)} (other processes share the CPUs).\n\n{b.table()}")
    print(text)
    if args.update_docs:
        update_docs(text)
        print(f"\nwritten to {os.path.normpath(DOC)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
