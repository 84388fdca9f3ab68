"""CPUProgram: a loaded kernel called natively through ctypes, its outer range split across the thread pool."""

from __future__ import annotations

import ctypes
import os
import threading
import time
import warnings
from functools import partial
from operator import is_ as _is

from devicekit import interrupt
from devicekit.ir.dtypes import largest_float
from devicekit.ir.symfn import compile_sym
from devicekit.runtime import Launch, Program

from .hostinfo import num_threads
from .loader import load
from .memo import loaded
from .replay import MAX_ARGS, replayer, run_records
from .threadpool import pool

# `"DEVICEKIT_DEBUG" in os.environ` costs a KeyError when unset; the raw mapping answers in ~50 ns
_ENV_DATA = getattr(os.environ, "_data", None)
_DEBUG_KEY = os.environ.encodekey("DEVICEKIT_DEBUG") if hasattr(os.environ, "encodekey") else None


def _debugging() -> bool:
    if _ENV_DATA is not None and _DEBUG_KEY is not None:
        return _DEBUG_KEY in _ENV_DATA
    return "DEVICEKIT_DEBUG" in os.environ


# buffers and vals the fast path takes as they are; anything else (an int, a dict, a generator) goes through the base
# class, whose check raises the TypeError naming the argument
_SEQ = (list, tuple)

# below this many estimated operations a launch runs on the calling thread (waking workers costs ~10-30 us)
PARALLEL_MIN_WORK = 1 << 16
# from this many estimated operations (and for every hand-written source kernel, whose work is unknown) a launch from
# the main thread runs on a launcher thread, so Ctrl-C returns at once (devicekit.interrupt); below, it is too short
# to matter and the handoff (~20 us) is not paid
INTERRUPTIBLE_MIN_WORK = PARALLEL_MIN_WORK
# a program on its quick build (tiers: LLVM O0, 3-10x slower code) swaps to the final one (O3, ~20 ms to compile)
# before the launch that brings it to TIER_LAUNCHES launches or TIER_WORK estimated operations: by then the slow
# code has cost a few ms, a fraction of the compile it saved; a kernel run once or twice on small data never pays it
TIER_LAUNCHES = 32
TIER_WORK = 1 << 20


class _QuickTier:
    """The pending swap of a program on its quick build: how to build the final Program, and what ran so far."""

    __slots__ = ("build", "launches", "lock", "work")

    def __init__(self, build):
        self.build, self.launches, self.work, self.lock = build, 0, 0, threading.Lock()


class CPUProgram(Program):
    """Args: buffer pointers (param order), int64 vars (declaration order), then core_start, core_end when the
    spec has a `core_split`: [0, extent) is cut into one contiguous chunk per thread."""

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
        splits = [ctypes.c_int64] * (2 if spec.core_split is not None else 0)
        self._fn = ctypes.CFUNCTYPE(None, *argtypes, *splits)(addr)
        self._addr = addr
        # plans replay natively (replay.py) the launches whose every argument is a pointer or an int64
        self._int_abi = all(t in (ctypes.c_void_p, ctypes.c_int64) for t in argtypes)
        self.threads = threads or num_threads()
        # everything a launch computes from the var values, compiled once to functions of the vals tuple
        names = self._names = tuple(v.name for v in spec.vars)
        self._split = None if spec.core_split is None else compile_sym(spec.core_split, names)
        self._cost = compile_sym(spec.get_meta("split_cost", 1), names, fallback=1 << 10)  # estimated ops per outer iteration
        self._sizes = tuple(compile_sym(p.size, names) for p in spec.user_params)
        from devicekit.memory import Buffer
        self._buffer_type = Buffer
        self._pdtypes = tuple(p.dtype for p in spec.user_params)
        self._checked = spec.checks is not None  # a hidden bounds-check record follows the user's buffers
        self._vbounds = tuple(_fast_bounds(v) for v in spec.vars)
        # bounds that name other vars (k.var("kk", 0, n - 1)), compiled: (slot, lo fn, hi fn)
        self._rels = tuple((j, compile_sym(v.lo if v.lo_rel is None else v.lo_rel, names),
                            compile_sym(v.hi if v.hi_rel is None else v.hi_rel, names))
                           for j, v in enumerate(spec.vars) if v.related)
        # estimated operations of a whole launch; hand-written source kernels say nothing about their loops
        self._from_source = bool(spec.get_meta("from_source", False))
        cost = spec.get_meta("split_cost", 1)
        work = cost if spec.core_split is None else spec.core_split * cost
        self._work = compile_sym(work, names, fallback=INTERRUPTIBLE_MIN_WORK)
        self._maybe_long = self._from_source or not (isinstance(work, int) and work < INTERRUPTIBLE_MIN_WORK)
        self._last = None  # (buffers, vals, handles) of the last fast-path launch that needs no Ctrl-C or record
        self._quick: _QuickTier | None = None  # set by Device.compile on a quick build (tiers)

    def _set_final(self, build) -> bool:
        if self.compiled.tier != "quick":
            return False
        self._quick = _QuickTier(build)
        return True

    def upgrade(self) -> None:
        q = self._quick
        if q is None:
            return
        with q.lock:  # one build, however many threads launch it; the others wait for it
            if self._quick is None:
                return
            try:
                final = q.build()
            except Exception as e:  # noqa: BLE001 - the quick build runs right: keep it, and say why
                warnings.warn(f"devicekit-cpu: {self.name}: its final build failed ({type(e).__name__}: {e}); it "
                              "keeps running its quick build (same values, slower)", RuntimeWarning, stacklevel=2)
            else:
                # launches in flight on other threads finish on the quick code, kept alive with the final one
                self._keep = (self._keep, final._keep, final)
                self._fn, self._addr, self.compiled, self._last = final._fn, final._addr, final.compiled, None
            self._quick = None

    def _tick(self, vals) -> None:
        """Count a launch of a quick build: upgrade before the one that reaches the tier limits."""
        q = self._quick
        q.launches += 1
        q.work += self._work(vals)
        if q.launches >= TIER_LAUNCHES or q.work >= TIER_WORK:
            self.upgrade()

    def may_run_long(self, vals) -> bool:
        """Hand-written source kernels (their loops are unknown) and launches estimated at INTERRUPTIBLE_MIN_WORK
        operations or more: on the main thread they run where Ctrl-C can leave them (devicekit.interrupt)."""
        return self._maybe_long and (self._from_source or self._work(vals) >= INTERRUPTIBLE_MIN_WORK)

    def execute(self, buffers, vals=(), global_size=None, local_size=None, wait=False):
        """The base class's checks with precomputed dtypes and compiled size expressions: buffer count, device,
        dtype and size, var count and bounds; buffers sharing memory take the base check for aliasing. Anything unusual (buffers or vals not a list or tuple, another device,
        DEVICEKIT_DEBUG, a failed check) goes through the base `execute`, which raises the error naming it."""
        last = self._last  # the launch before, when it took the fast path with nothing to read back afterwards
        if (last is not None and global_size is None and local_size is None and type(buffers) in _SEQ
                and vals == last[4] and len(buffers) == len(last[0]) and all(map(_is, buffers, last[0]))
                and list(map(type, vals)) == last[5]):  # 1 == 1.0 == True: the types must match too
            t0 = time.perf_counter()  # the same Buffers (held by the memo: their ids cannot be reused) and values:
            if last[3] is not None:  # every check passed for them already; one thread: the very native call,
                rep = last[6]  # as a replay record (2 ctypes args, not 7), made at the first repeat
                if rep is None:
                    rep = self._record_of(last[3]) or False
                    self._last = (*last[:6], rep)
                if rep:
                    rep[0](rep[1], 1)
                else:
                    self._fn(*last[3])
                return time.perf_counter() - t0 if wait else Launch(self.device, t0)
            t = self._launch(last[2], last[1], None, None, None, wait)
            return t if wait else Launch(self.device, t0)
        if (global_size is not None or local_size is not None or type(buffers) not in _SEQ or type(vals) not in _SEQ
                or len(buffers) != len(self._pdtypes) or len(vals) != len(self._vbounds) or _debugging()):
            return super().execute(buffers, vals, global_size, local_size, wait)
        for v, (lo, hi, t) in zip(vals, self._vbounds):
            if type(v) is not t or not lo <= v <= hi:
                return super().execute(buffers, vals, global_size, local_size, wait)
        for j, lo_f, hi_f in self._rels:
            if not lo_f(vals) <= vals[j] <= hi_f(vals):
                return super().execute(buffers, vals, global_size, local_size, wait)
        t0 = time.perf_counter()
        handles = []
        dev, btype = self.device, self._buffer_type
        for b, dt, size in zip(buffers, self._pdtypes, self._sizes):
            if type(b) is not btype or b.size < size(vals) or (b.dtype is not dt and b.dtype != dt) \
                    or b.device is not dev:
                return super().execute(buffers, vals, global_size, local_size, wait)
            h = b._handle
            handles.append(h if h is not None else b.handle)
        if len({id(b._base if b._base is not None else b) for b in buffers}) != len(buffers):
            return super().execute(buffers, vals, global_size, local_size, wait)  # shared memory: checked there
        given, vals = vals, list(vals)
        rec = None
        if self._checked:  # the hidden bounds-check record (ir/bounds.py), from the base class's pool
            rec = self._record(self.spec.checks.size)
            handles.append(rec.handle)
        long = self._maybe_long and (self._from_source or self._work(vals) >= INTERRUPTIBLE_MIN_WORK)
        if long and interrupt.on_main_thread():
            t = interrupt.call(self._launch, (handles, vals, None, None, None, wait), [*buffers, rec])
        elif rec is None and not self._from_source and not long:
            # short: its one native call (when on one thread) is made here and kept, so a repeat may skip the
            # checks and the Ctrl-C path; the arguments are built once (not again by _launch)
            one = self._one_call(handles, vals)
            if one is not None:
                if self._quick is not None:
                    self._tick(vals)
                self._fn(*one)
                t = time.perf_counter() - t0 if wait else None
            else:
                t = self._launch(handles, vals, None, None, None, wait)
            if self._quick is None:  # a quick build's launches are counted: not through the fast path
                self._last = (tuple(buffers), vals, handles, one, type(given)(given), list(map(type, vals)), None)
        else:
            t = self._launch(handles, vals, None, None, None, wait)
        if rec is not None:
            self._read_record(rec, dict(zip(self._names, vals)))
        return t if wait else Launch(dev, t0)

    def _record_of(self, one: tuple | None) -> tuple | None:
        """(replayer, record address, record) that makes the native call `one` through replay.py's dk_replay: a
        ctypes call converts each argument (~0.1 us apiece), so a repeated launch with 7 arguments costs ~0.5 us
        less this way. None for calls dk_replay cannot make (non-int64 scalars, hand-written argument orders)."""
        if one is None or not self._int_abi or self._order is not None or len(one) > MAX_ARGS:
            return None
        import numpy as np
        rec = np.array([self._addr, len(one), *one], np.int64)
        return replayer(), rec.ctypes.data, rec

    def _one_call(self, handles, vals) -> tuple | None:
        """The arguments of the single native call this launch makes when it runs on one thread, else None."""
        args = [h.ptr for h in handles] + vals if self._order is None else \
            [handles[j].ptr if kind == "buffer" else vals[j] for kind, j in self._order]
        if self._split is None:
            return tuple(args)
        extent = self._split(vals)
        return (*args, 0, extent) if self.chunks(extent, vals) == 1 else None

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
        """How many threads a launch with this extent (and these var values, in declaration order) uses."""
        n = min(self.threads, extent)
        if n <= 1 or extent * max(1, self._cost(tuple(vals))) < PARALLEL_MIN_WORK:
            return 1
        return n

    def _launch(self, handles, vals, var_vals, global_size, local_size, wait):
        if self._quick is not None:
            self._tick(vals)
        t0 = time.perf_counter() if wait else 0.0
        if self._order is None:
            args = [h.ptr for h in handles]
            args += vals
        else:
            args = [handles[j].ptr if kind == "buffer" else vals[j] for kind, j in self._order]
        if self._split is None:
            self._fn(*args)
        else:
            extent = self._split(vals)
            n = self.chunks(extent, vals)
            if n == 1:
                self._fn(*args, 0, extent)
            else:
                bounds = [extent * i // n for i in range(n + 1)]
                pool().run(self._fn, [(*args, bounds[i], bounds[i + 1]) for i in range(n)])
        return time.perf_counter() - t0 if wait else None


_CTYPES = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
           "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32,
           "uint64": ctypes.c_uint64, "float32": ctypes.c_float, "float64": ctypes.c_double}


def _fast_bounds(v) -> tuple:
    """(lo, hi, type) of the values the fast path passes to the kernel as they are: ints within a var's bounds or an
    int scalar's dtype, finite Python floats within a float32/float64 scalar's range (ctypes rounds to float32 to
    nearest even, as the launch check does). Anything else (a half or bool scalar, whose value is rounded or
    converted first, inf, nan, a numpy number) takes the base class's check."""
    if v.scalar is None or v.scalar.is_int:
        return (v.lo, v.hi, int)
    if v.scalar.name in ("float32", "float64"):
        big = largest_float(v.scalar)
        return (-big, big, float)
    return (1, 0, int)  # bounds no value meets


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
