"""dk.search: time the optimizer's register tiles for one kernel on one device and keep the fastest. (The module is
not named `search`: importing `devicekit.search` would put the module where `dk.search`, the function, is.)

tinygrad's BEAM times candidate kernels on the device; here the candidates are the two knobs of the heuristic
optimizer (ir/optimize.py): rows of the unrolled global range and lanes of the upcast one (`Kernel.with_tiles`),
with the heuristic's own choice and the kernel as written among them. Each candidate is compiled (final build),
run on random inputs sized by the var values given, and timed; one that is three times slower than the best so
far after its first run is not run again. The choice is kept per kernel, device, compiler identity and var values:
in memory, and in the compile cache (a MAC-checked entry like compiled bytes), so a later process reuses it
without timing. A kernel the optimizer does not rewrite (no reduction, `build(optimize=False)`) is compiled as it
is: nothing to search.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from .debug import dprint
from .lru import LRU

ROWS = (1, 2, 4, 8, 16)
LANES = (1, 4, 8, 16)
SLOWER = 3.0  # a candidate this many times slower than the best after one run is not timed further
SEARCH_RULE = "search-1"  # part of the key: a change of the candidates or of what is measured starts afresh
CHOSEN_MEMO_SIZE = 1024  # choices kept in memory; an evicted one is read back from the compile cache
_CHOSEN: LRU[tuple, Any] = LRU(CHOSEN_MEMO_SIZE)  # key -> "heuristic" or [rows, lanes], bounded like every memo


def search(kernel: Any, device: Any = None, /, reps: int = 3, pair: int | str | None = None, **vals: Any):
    """The Program of `kernel` on `device` with the fastest register tile for these var values (every int var and
    scalar of the kernel, by name, as dk.run takes them). `reps`: timed runs per candidate (the best counts)."""
    from .api import resolve_device
    from .ir.accept import as_kernel
    kernel = as_kernel(kernel, "dk.search")
    dev = resolve_device(device)
    if type(reps) is not int or reps < 1:
        raise ValueError(f"{kernel.name}: dk.search(reps=) takes an int >= 1, got {reps!r}")
    base = dev.compile(kernel, pair=pair)
    spec = base.spec
    if missing := [v.name for v in spec.vars if v.name not in vals]:
        raise TypeError(f"{spec.name}: dk.search needs a value for every var to time with; missing "
                        f"{', '.join(missing)}")
    if extra := sorted(set(vals) - {v.name for v in spec.vars}):
        raise TypeError(f"{spec.name}: unexpected argument(s) {', '.join(extra)}; the kernel's vars are "
                        f"{', '.join(v.name for v in spec.vars) or 'none'}")
    if not kernel.optimize or kernel.tiles is not None or not spec.get_meta("opts"):
        return base  # as written, tiled by hand, or nothing the optimizer rewrites: nothing to search
    order = [vals[v.name] for v in spec.vars]
    compiler = dev.pair(pair)[1]
    key = _key(kernel, dev, compiler, order)
    if (choice := _recall(key, compiler)) is not None:
        dprint(2, f"{dev.spec}: {spec.name}: search result reused: {choice}")
        return base if choice == "heuristic" else dev.compile(kernel.with_tiles(*choice), pair=pair)
    var_vals = spec.check_vars(order)
    bufs = _inputs(dev, spec, var_vals)
    seen: dict[str, Any] = {base.spec.src: "heuristic"}
    cands: list[tuple[Any, Any]] = [("heuristic", base)]
    for rows in ROWS:
        for lanes in LANES:
            try:
                prog = dev.compile(kernel.with_tiles(rows, lanes), pair=pair)
            except Exception as e:  # noqa: BLE001 - a candidate that does not build is left out, said at level 2
                dprint(2, f"{dev.spec}: {spec.name}: tiles {rows}x{lanes} left out: {type(e).__name__}: {e}")
                continue
            if prog.spec.src not in seen:
                seen[prog.spec.src] = (rows, lanes)
                cands.append(([rows, lanes], prog))
    best_t, best = float("inf"), cands[0]
    t0 = time.perf_counter()
    for choice, prog in cands:
        prog.upgrade()
        t = _time(prog, bufs, order, reps, best_t)
        dprint(2, f"{dev.spec}: {spec.name}: tiles {choice}: {t * 1e3:.3f} ms")
        if t < best_t:
            best_t, best = t, (choice, prog)
    dprint(1, f"{dev.spec}: {spec.name}: search chose tiles {best[0]} ({best_t * 1e3:.3f} ms) of {len(cands)} "
              f"candidates in {time.perf_counter() - t0:.2f} s")
    _remember(key, compiler, best[0])
    return best[1]


def _time(prog, bufs, vals, reps: int, best: float) -> float:
    t = prog.execute(bufs, vals, wait=True)
    if t > SLOWER * best:
        return t
    for _ in range(reps):  # the first run warmed the caches: `reps` more, the best counts
        t = min(t, prog.execute(bufs, vals, wait=True))
    return t


def _inputs(dev, spec, var_vals) -> list:
    """Buffers of the sizes these var values give: floats random, everything else zero (an index param of zeros
    stays in bounds)."""
    import numpy as np

    from .memory import Buffer, BufferOptions
    rng = np.random.default_rng(0)
    out = []
    for p, n in zip(spec.user_params, spec.buffer_sizes(var_vals)):
        buf = Buffer(dev, n, p.dtype, BufferOptions(zero=True))
        if p.dtype.is_float and p.dtype.np is not None:
            buf.copyin(rng.standard_normal(n * p.dtype.count).astype(p.dtype.np))
        out.append(buf)
    return out


def _key(kernel, dev, compiler, order) -> tuple:
    return (SEARCH_RULE, str(dev.spec), compiler.identity(), kernel.key.hex(), repr(order))


def _cache_key(key: tuple):
    from .compile.cache import CacheKey
    return CacheKey(key[1], f"{SEARCH_RULE} {key[2]}", hashlib.sha256(repr(key[3:]).encode()).hexdigest())


def _recall(key: tuple, compiler) -> Any:
    if (choice := _CHOSEN.get(key)) is not None:
        return choice
    raw = _store(compiler).get(_cache_key(key))
    if raw is None:
        return None
    try:
        choice = json.loads(raw)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested past the parser's depth
        choice = _BAD
    if not valid_choice(choice):  # an entry this version does not understand: search again
        shown = repr(choice)[:80] if choice is not _BAD else f"{bytes(raw[:40])!r} (not JSON)"
        dprint(1, f"stored dk.search choice {shown} is not one this version makes: searching again")
        return None
    return _CHOSEN.put(key, choice)


_BAD = object()


def valid_choice(choice: Any) -> bool:
    """"heuristic", or [rows, lanes] of ints (not bools or floats, which `in ROWS` would take: True == 1) among
    the candidates."""
    return choice == "heuristic" and type(choice) is str or (
        type(choice) is list and len(choice) == 2 and all(type(x) is int for x in choice)
        and choice[0] in ROWS and choice[1] in LANES)


def _remember(key: tuple, compiler, choice: Any) -> None:
    _CHOSEN.put(key, choice)
    _store(compiler).put(_cache_key(key), json.dumps(choice).encode(), replace=True)


def _store(compiler):
    """The compile cache the compiler uses (its own, else the process's): choices live beside the bytes."""
    from .compile.cache import default_cache
    return compiler.cache if compiler.cache is not None else default_cache()
