"""8 threads building and running different kernels on one CPU device: every result right, resident memory and
the LRU allocator bounded. A short run in CI; the soak (DEVICEKIT_SLOW=1) runs minutes with fresh kernels."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from devicekit import ir, settings
from devicekit.ir import dtypes
from devicekit.testing.random_kernels import assert_matches

THREADS = 8
LRU_CAP = 8 << 20


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _kernel(t: int, dt):
    """A different kernel per thread (and dtype): a row reduction plus an elementwise part."""
    k = ir.KernelBuilder(f"thr{t}_{dt.name}")
    n, m = k.var("n", 1, 1 << 16), k.var("m", 1, 64)
    a = k.param("a", dt, n * m)
    b = k.param("b", dt, n)
    o = k.param("out", dt, n, writable=True)
    i, r = k.range(n, "global"), k.range(m, "reduce")
    # small multipliers: a float sum's order is free (docs/ir.md), so cancellation must not be amplified
    o[i] = a[i * m + r].sum(r) * (t % 4 + 1) + ir.maximum(b[i], a[i * m]) + t // 4
    return k.build()


def _device():
    import devicekit as dk
    from devicekit.targets import Device
    from devicekit_cpu.allocator import CPUAllocator
    cpu = dk.device("CPU")
    return Device(cpu.spec, CPUAllocator(max_cached_bytes=LRU_CAP), runtime=cpu.runtime, pairs=cpu.compilers,
                  pair_names=cpu.pair_names)


def _hammer(dev, seconds: float | None, iters: int, fresh_every: int = 0) -> dict:
    """Each thread builds its kernels, runs them on random sizes against the PYTHON reference, allocating as it
    goes. Returns errors, launches and the RSS curve."""
    import devicekit as dk
    errors: list[str] = []
    launches = [0] * THREADS
    start = threading.Barrier(THREADS)
    deadline = None if seconds is None else time.monotonic() + seconds

    def work(t: int) -> None:
        rng = np.random.default_rng(t)
        try:
            start.wait()
            j = 0
            while (j < iters) if deadline is None else (time.monotonic() < deadline):
                dt = (dtypes.float32, dtypes.int32, dtypes.float64)[j % 3]
                gen = j // fresh_every if fresh_every else 0
                kern = _kernel(t + 100 * gen, dt)
                pair = ("llvm", "c")[(t + j) % 2]
                prog = dev.compile(kern, pair=pair)
                n, m = int(rng.integers(1, 4096)), int(rng.integers(1, 9))
                a = (rng.standard_normal(n * m) * 4).astype(dt.np)
                b = (rng.standard_normal(n) * 4).astype(dt.np)
                ba = dk.Buffer(dev, n * m, dt).copyin(a)
                bb = dk.Buffer(dev, n, dt).copyin(b)
                bo = dk.Buffer(dev, n, dt)
                prog.execute([ba, bb, bo], [n, m], wait=True)
                want = dk.run(kern, device="PYTHON", a=a, b=b, n=n, m=m)["out"]
                assert_matches(bo.numpy(), want, dt, f"thread {t} iteration {j} ({pair}, {dt})")
                launches[t] += 1
                j += 1
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(f"thread {t}: {type(e).__name__}: {e}")
            start.abort()

    rss = [_rss()]
    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    while any(th.is_alive() for th in threads):
        time.sleep(0.2)
        rss.append(_rss())
    for th in threads:
        th.join()
    return {"errors": errors, "launches": launches, "rss": rss}


def test_eight_threads_different_kernels_one_device():
    dev = _device()
    warm = _hammer(dev, None, iters=3)  # compiles everything once
    assert not warm["errors"], warm["errors"]
    base = _rss()
    res = _hammer(dev, None, iters=30)
    assert not res["errors"], "\n".join(res["errors"])
    assert res["launches"] == [30] * THREADS
    grew = max(res["rss"]) - base
    assert grew < 256 << 20, f"resident memory grew by {grew >> 20} MiB over {sum(res['launches'])} launches"
    a = dev.allocator
    assert a.cached_bytes <= a.max_cached_bytes == LRU_CAP
    assert a.stats["hits"] > 0 and a.stats["evicted"] > 0  # the cache was used and hit its bound


@pytest.mark.slow
def test_soak_threads_fresh_kernels():
    """DEVICEKIT_SOAK_SECONDS (default 300) of 8 threads; a new generation of kernels every 50 launches per thread.
    RSS over the second half must stay within 256 MiB of its value at the halfway point."""
    seconds = settings.get("DEVICEKIT_SOAK_SECONDS")
    dev = _device()
    res = _hammer(dev, seconds, iters=0, fresh_every=50)
    assert not res["errors"], "\n".join(res["errors"][:10])
    rss = res["rss"]
    half = rss[len(rss) // 2]
    assert max(rss[len(rss) // 2:]) - half < 256 << 20, [r >> 20 for r in rss[::max(1, len(rss) // 20)]]
    assert dev.allocator.cached_bytes <= LRU_CAP
    print(f"soak: {sum(res['launches'])} launches in {seconds:.0f} s, RSS {rss[0] >> 20} -> {rss[-1] >> 20} MiB")


def test_lru_allocator_bounded_under_thread_churn():
    """Many threads allocating and freeing odd sizes: the cache never holds more than its cap, counts add up."""
    from devicekit_cpu.allocator import CPUAllocator
    a = CPUAllocator(max_cached_bytes=1 << 20)
    peak = [0]
    errors: list[str] = []

    def churn(t: int) -> None:
        rng = np.random.default_rng(t)
        try:
            held = []
            for _ in range(400):
                nb = int(rng.choice([64, 4096, 65536, 300_000, 2 << 20]))
                held.append((a.alloc(nb), nb))
                if len(held) > 4:
                    h, sz = held.pop(int(rng.integers(0, len(held))))
                    a.free(h, sz)
                peak[0] = max(peak[0], a.cached_bytes)
            for h, sz in held:
                a.free(h, sz)
        except Exception as e:  # noqa: BLE001
            errors.append(f"{type(e).__name__}: {e}")

    ths = [threading.Thread(target=churn, args=(t,)) for t in range(THREADS)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert not errors, errors
    assert peak[0] <= 1 << 20 and a.cached_bytes <= 1 << 20
    assert a.stats["hits"] + a.stats["misses"] == THREADS * 400
    assert a.cached_bytes == sum(k[0] * len(v) for k, v in a._cache.items())  # bookkeeping matches the contents


def test_program_memo_is_bounded(monkeypatch):
    """Device.compile memoizes Programs; a process that compiles without end must not keep them all."""
    import devicekit.targets
    monkeypatch.setattr(devicekit.targets, "PROGRAM_MEMO_SIZE", 5)
    dev = _device()
    progs = [dev.compile(_kernel(t, dtypes.int32), pair="c") for t in range(8)]
    assert len(dev._programs) == 5
    assert dev.compile(_kernel(7, dtypes.int32), pair="c") is progs[7]  # recent ones are still memoized
    import devicekit as dk
    a = np.arange(4, dtype=np.int32)
    got = dk.run(_kernel(0, dtypes.int32), device="PYTHON", a=a, b=a, n=4, m=1)["out"]
    bo = dk.Buffer(dev, 4, dtypes.int32)
    progs[0].execute([dk.Buffer(dev, 4, dtypes.int32).copyin(a), dk.Buffer(dev, 4, dtypes.int32).copyin(a), bo],
                     [4, 1], wait=True)  # evicted from the memo, still runs
    np.testing.assert_array_equal(bo.numpy(), got)
