"""CPUProgram: a loaded kernel called natively through ctypes, its outer range split across the thread pool."""

from __future__ import annotations

import ctypes
import operator
import time
import warnings
from functools import partial
from typing import Any

from devicekit.ir.symfn import compile_sym
from devicekit.runtime import Program

from . import spinpool
from .direct import compile_direct
from .hostinfo import num_threads
from .loader import load
from .memo import loaded
from .replay import MAX_ARGS, replayer, run_records
from .threadpool import pool
from .upgrade import QuickTier

# below this many estimated operations a launch runs on the calling thread. An estimated operation is one of the IR's
# scalar ops (cost.py); the compiled code runs 20-60 of them a ns (SIMD, FMA, unrolling: measured 0.016-0.06 ns each
# on the MLP's matmuls and elementwise kernels), so 2^18 is ~4-13 us of one thread. A split launch hands its chunks
# to workers spinning in native code (spinpool.py: ~1-2 us) or, asleep, runs them itself: it pays where the work is
# more than that, and more in a step whose data the last split kernels left half in each core's cache: the 784-512-10
# step's `dz @ w2^T * (h > 0)` (514K ops, h written by both threads) took 92-101 us on one thread and 62 split.
# Through a Python queue (threadpool.py: 20-80 us to wake a worker on a 2-core KVM guest) the bar was 2^21, and a
# 784x512 SGD update (2.0M ops, 96 us) ran on one thread where two take 26 us (issue 31)
PARALLEL_MIN_WORK = 1 << 18
# from this many estimated operations (and for every hand-written source kernel, whose work is unknown) a launch from
# the main thread runs on a launcher thread, so Ctrl-C returns at once (devicekit.interrupt); below (~0.5-1.7 ms of
# work), Ctrl-C waits for the launch to return and the handoff (~20 us: waking the launcher on a 2-core KVM guest) is
# not paid. 2^22 (~0.1 ms) paid it on a 784x512 layer's 0.8 ms
INTERRUPTIBLE_MIN_WORK = 1 << 25
# a program on its quick build (tiers: LLVM O0, 3-10x slower code) starts building its final one (O3, ~20 ms to
# compile) on the upgrade thread (upgrade.py) at the launch that brings it to TIER_LAUNCHES launches or TIER_WORK
# estimated operations, and adopts it at its first launch after the build is done: no launch waits for a build
# (all the kernels of a training step reach their 32nd launch together: 19 O3 compiles in that step stalled it ~124 ms)
TIER_LAUNCHES = 32
TIER_WORK = 1 << 20
# a single launch of this many estimated operations or more waits for the final build (built on the launching
# thread): its O0 code would cost more than the ~20 ms compile (O0 runs such a launch 3-10x slower than O3's ~5 ms)
TIER_SYNC_WORK = 1 << 24
CHUNK_MEMO = 64  # entries of a program's per-launch memos (thread counts, chunk records), emptied when full


def _remember(memo: dict, key: tuple, value):
    """`value` stored in one of a program's per-launch memos, emptied when it holds CHUNK_MEMO entries: a dict, not
    devicekit.lru's LRU, whose lock costs ~0.3 us a lookup (a dict get ~0.06) on a split launch's path."""
    if len(memo) >= CHUNK_MEMO:
        memo.clear()
    memo[key] = value
    return value


class CPUProgram(Program):
    """Args: buffer pointers (param order), int64 vars (declaration order), then core_start, core_end when the
    spec has a `core_split`: [0, extent) is cut into one contiguous chunk per thread. The core's `execute` checks
    and launches (devicekit.signature); this class implements `_launch` and `plan_record` only, and a repeated
    launch becomes one native record through `run_records.bind` (replay.py)."""

    launch_takes_dims = False  # vals and the split say everything: no var_vals dict or dims per launch

    def __init__(self, compiled, device=None, threads: int | None = None):
        super().__init__(compiled, device)
        spec = compiled.spec
        # bytes our compiler just made or a cache entry whose MAC verified skip the structural ELF check; foreign
        # bytes (a CompiledSpec built by hand, an unauthenticated file) are always checked. Only a real True counts.
        trusted = getattr(compiled, "trusted", False) is True
        self._keep, addr = loaded(compiled.lib, spec.entry, partial(load, trusted=trusted, program=spec.name))
        order = spec.get_meta("args")  # hand-written C: buffers and scalars interleaved, scalars of their C type
        self._order = None if order is None or order == _plain_order(spec) else tuple(order)
        argtypes = [ctypes.c_void_p if kind == "buffer" else _ctype(spec.vars[j].dtype) for kind, j in spec.arg_order()]
        # a lone reduction split in pieces (split_reduce.py): the scratch's address follows the split's bounds
        self._scratch = spec.get_meta("reduce_scratch", 0) if spec.core_split is not None else 0
        self._tail = (0,) if self._scratch else ()  # one thread: no scratch given, the call's own
        splits = [ctypes.c_int64] * ((2 if spec.core_split is not None else 0) + (1 if self._scratch else 0))
        self._fn = ctypes.CFUNCTYPE(None, *argtypes, *splits)(addr)
        self._addr = addr
        # plans replay natively (replay.py) the launches whose every argument is a pointer or an int64
        self._int_abi = all(t in (ctypes.c_void_p, ctypes.c_int64) for t in argtypes)
        self.threads = threads or num_threads()
        # everything a launch computes from the var values, compiled once to functions of the vals tuple
        names = self._names = tuple(v.name for v in spec.vars)
        self._split = None if spec.core_split is None else compile_sym(spec.core_split, names)
        self._cost = compile_sym(spec.get_meta("split_cost", 1), names, fallback=1 << 10)  # estimated ops per outer iteration
        self._chunk_memo: dict[tuple, int] = {}  # (threads, extent, *vals) -> chunks
        # a split launch's chunk records for the spin pool, by code address, arguments and bounds: a framework's step
        # repeats its launches, and building the ctypes array is ~1-2 us of each
        self._chunk_records: dict[tuple | None, Any] = {}
        # a constant cost per outer iteration: below this extent a launch is one thread without asking `chunks`
        cost0 = spec.get_meta("split_cost", 1)
        self._serial_below = -(-PARALLEL_MIN_WORK // cost0) if isinstance(cost0, int) and cost0 >= 1 else 0
        long_below = -(-INTERRUPTIBLE_MIN_WORK // cost0) if self._serial_below else 0
        self._checked = spec.checks is not None  # a hidden bounds-check record follows the user's buffers
        # estimated operations of a whole launch; hand-written source kernels say nothing about their loops
        self._from_source = bool(spec.get_meta("from_source", False))
        cost = spec.get_meta("split_cost", 1)
        work = cost if spec.core_split is None else spec.core_split * cost
        self._work = compile_sym(work, names, fallback=INTERRUPTIBLE_MIN_WORK)
        self._maybe_long = self._from_source or not (isinstance(work, int) and work < INTERRUPTIBLE_MIN_WORK)
        self._quick: QuickTier | None = None  # set by Device.compile on a quick build (tiers)
        # the one-thread call with its arguments spelled out (direct.py): handles, then vars, then the split
        self._direct, self._long = compile_direct(spec, len(argtypes) - len(spec.vars), self._serial_below,
                                                  self._split, self._tail, long_below) if self._order is None \
            else (None, None)

    def _set_final(self, build) -> bool:
        if self.compiled.tier != "quick":
            return False

        def final():
            replayer()  # the final build's repeats go through dk_replay: compiled here too, once per process (~20 ms)
            return build()
        self._quick = QuickTier(final)
        return True

    def upgrade(self) -> None:
        """Swap to the final build now: wait for the upgrade thread's build when it started one, else build here."""
        q = self._quick
        if q is not None:
            self._adopt(q, q.result(wait=True))

    def _adopt(self, q: QuickTier, final) -> None:
        """Run `final` (a Program, or the Exception its build raised) from the next launch on; once per program."""
        with q.lock:
            if self._quick is not q:  # another thread adopted it
                return
            if isinstance(final, Exception):
                warnings.warn(f"devicekit-cpu: {self.name}: its final build failed ({type(final).__name__}: "
                              f"{final}); it keeps running its quick build (same values, slower)", RuntimeWarning,
                              stacklevel=3)
            else:
                # launches in flight on other threads finish on the quick code, kept alive with the final one
                self._keep = (self._keep, final._keep, final)
                self._fn, self._addr, self.compiled = final._fn, final._addr, final.compiled
            self._quick = None
            self._forget_launches()  # the next repeat binds the final code's native record (the launch cache)

    def _tick(self, vals) -> None:
        """Count a launch of a quick build: adopt a finished final build; start building it (off this thread) at the
        tier limits; a launch of TIER_SYNC_WORK operations or more waits for it (its O0 code costs more)."""
        q = self._quick
        final = q.result(wait=False)
        if final is not None:
            self._adopt(q, final)
            return
        q.launches += 1
        work = self._work(vals)
        q.work += work
        if work >= TIER_SYNC_WORK:
            self.upgrade()
        elif q.launches >= TIER_LAUNCHES or q.work >= TIER_WORK:
            q.start()

    def may_run_long(self, vals) -> bool:
        """Hand-written source kernels (their loops are unknown) and launches estimated at INTERRUPTIBLE_MIN_WORK
        operations or more: on the main thread they run where Ctrl-C can leave them (devicekit.interrupt)."""
        if not self._maybe_long:
            return False
        if self._long is not None and not self._from_source:  # work = extent x a constant: one comparison
            return self._long(vals)
        return self._from_source or self._work(vals) >= INTERRUPTIBLE_MIN_WORK

    def _one_call(self, handles, vals) -> tuple | None:
        """The arguments of the single native call this launch makes when it runs on one thread, else None."""
        args = [h.ptr for h in handles] + vals if self._order is None else \
            [handles[j].ptr if kind == "buffer" else vals[j] for kind, j in self._order]
        if self._split is None:
            return tuple(args)
        extent = self._split(vals)
        return (*args, 0, extent, *self._tail) if extent < self._serial_below or self.chunks(extent, vals) == 1 \
            else None

    def plan_record(self, handles, vals):
        """For dk.Plan: (replay.run_records, [fn, argc, args...]) when this launch runs on one thread with pointer
        and int64 arguments only (no check record, not hand-written); None otherwise (the plan calls _launch)."""
        if self._quick is not None:  # a plan repeats its launches natively: the final build first
            self.upgrade()
        if not self._int_abi or self._checked or self._from_source or self._order is not None:
            return None
        args = self._one_call(handles, vals)
        if args is None or len(args) > MAX_ARGS:
            return None
        return run_records, [self._addr, len(args), *args]

    def chunks(self, extent: int, vals) -> int:
        """How many threads a launch with this extent (and these var values, in declaration order) uses. Memoized
        by the values: a packed gemm's cost is an expression of ~40 ceiling divisions over its vars (~9 us a launch
        of a 30 us layer, issue 31), and a framework launches each kernel with a few sets of sizes."""
        key = (self.threads, extent, *vals)
        n = self._chunk_memo.get(key)
        if n is None:
            n = min(self.threads, extent)
            if n <= 1 or extent * max(1, self._cost(tuple(vals))) < PARALLEL_MIN_WORK:
                n = 1
            _remember(self._chunk_memo, key, n)
        return n

    def _launch(self, handles, vals, var_vals, global_size, local_size, wait):
        if self._quick is not None:
            self._tick(vals)
        t0 = time.perf_counter() if wait else 0.0
        if self._direct is not None and self._direct(self, handles, vals):  # one thread: one native call
            return time.perf_counter() - t0 if wait else None
        if self._order is None:
            args = list(map(_PTR, handles))
            args += vals
        else:
            args = [handles[j].ptr if kind == "buffer" else vals[j] for kind, j in self._order]
        if self._split is None:
            self._fn(*args)
        else:
            extent = self._split(vals)
            n = 1 if extent < self._serial_below else self.chunks(extent, vals)
            if n == 1:
                self._fn(*args, 0, extent, *self._tail)
            else:
                bounds = [extent * i // n for i in range(n + 1)]
                buf = ctypes.create_string_buffer(self._scratch + 64) if self._scratch else None
                tail = (-(-ctypes.addressof(buf) // 64) * 64,) if buf is not None else ()
                if not self._spin_split(args, bounds, tail):
                    pool().run(self._fn, [(*args, bounds[i], bounds[i + 1], *tail) for i in range(n)])
                if tail:  # a split reduction: the combine of the pieces and the stores (split_reduce.py)
                    self._fn(*args, -1, -1, *tail)
        return time.perf_counter() - t0 if wait else None

    def _spin_split(self, args: list, bounds: list[int], tail: tuple) -> bool:
        """The chunks of a split launch through the native spin pool (spinpool.py); False where it cannot take them
        (arguments other than int64 and pointers, more than a record holds, the pool not built yet or busy)."""
        argc = len(args) + 2 + len(tail)
        if not self._int_abi or argc > MAX_ARGS or (sp := spinpool.get()) is None:
            return False
        n, w = len(bounds) - 1, argc + 2
        key = None if tail else (self._addr, *args, *bounds)  # a split reduction's scratch is new each launch
        recs = self._chunk_records.get(key)
        if recs is None:
            recs = (ctypes.c_int64 * (w * n))()
            head = [self._addr, argc, *args]
            try:
                for i in range(n):
                    recs[i * w:(i + 1) * w] = [*head, bounds[i], bounds[i + 1], *tail]
            except TypeError:  # a null pointer (None): the ctypes path passes it
                return False
            if key is not None:
                _remember(self._chunk_records, key, recs)
        return sp.run(recs, n, w)


_PTR = operator.attrgetter("ptr")  # a handle's address (CPUMem.ptr)

_CTYPES = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
           "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32,
           "uint64": ctypes.c_uint64, "float32": ctypes.c_float, "float64": ctypes.c_double}


def _ctype(dt):
    """The ctypes type a scalar param is passed as (generated kernels: every var is int64)."""
    if dt is None:
        return ctypes.c_int64
    if dt.count != 1 or dt.name not in _CTYPES:
        raise TypeError(f"a {dt} scalar cannot be passed through the C ABI by ctypes")
    return _CTYPES[dt.name]


def _plain_order(spec) -> tuple:
    return tuple(("buffer", i) for i in range(len(spec.params))) + tuple(("var", j) for j in range(len(spec.vars)))


def runtime_factory(spec=None):
    """The RuntimeFactory of a CPU device: CompiledSpec -> CPUProgram."""
    return CPUProgram
