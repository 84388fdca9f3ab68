"""Program: compiled bytes loaded on a device, checked and launched. RuntimeFactory: CompiledSpec -> Program."""

from __future__ import annotations

import numbers
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any, ClassVar

from . import interrupt, launch_sizes
from .debug import debug_level, dprint
from .errors import FreedBufferError, ReadOnlyBufferError
from .signature import Signature, debugging

if TYPE_CHECKING:
    from .compile.compiler import CompiledSpec
    from .render.program_spec import ProgramSpec
    from .targets import Device

__all__ = ["EventLaunch", "Launch", "Program", "RuntimeFactory"]


class Launch:
    """What `execute(wait=False)` returns: a launch that may still be running. `wait()` waits for it (for every
    launch and copy queued on its device before it: one queue per device id runs in submission order) and returns
    the seconds from submission until `wait` saw it complete (an upper bound of the kernel's time: `execute(...,
    wait=True)` reports the kernel's own); `done` says whether it has been waited for. A backend whose `_launch`
    returns its own handle (an object with `wait()`: a CUDA or OpenCL event) is returned as it is."""

    __slots__ = ("_device", "_t0", "seconds")

    def __init__(self, device: Any, t0: float):
        self._device, self._t0, self.seconds = device, t0, None

    @property
    def done(self) -> bool:
        return self.seconds is not None

    def wait(self) -> float:
        if self.seconds is None:
            if self._device is not None:
                self._device.synchronize()
            self.seconds = time.perf_counter() - self._t0
        return self.seconds

    def __repr__(self) -> str:
        return f"<Launch done in {self.seconds:.6f} s>" if self.done else "<Launch submitted>"


class EventLaunch(Launch):
    """A backend's own handle for `execute(wait=False)` when each launch has a driver event (OpenCL): `finish(*args)`
    waits for that launch only (the device's one in-order queue ran everything before it) and returns its time on
    the device, which `wait()` keeps. The arguments are kept rather than bound in a partial, and the slots are set
    here rather than through Launch's __init__: a cached launch makes one of these (~0.5 us less on OPENCL)."""

    __slots__ = ("_args", "_finish")

    def __init__(self, finish: Callable[..., float], *args: Any):
        self._device, self._t0, self.seconds, self._finish, self._args = None, 0.0, None, finish, args

    def wait(self) -> float:
        if self.seconds is None:
            self.seconds = self._finish(*self._args)
        return self.seconds


def launched(program: Program, t: Any, t0: float, wait: bool) -> Any:
    """execute's return: the seconds when it waited, else a handle (the backend's own, or a Launch)."""
    if wait or hasattr(t, "wait"):
        return t
    return Launch(program.device, t0)


class Program(ABC):
    """A kernel ready to run. `execute` checks every argument against the ProgramSpec, then calls `_launch`.

    Backends implement `_launch(handles, vals, var_vals, global_size, local_size, wait)`: the allocator handles of
    the buffers in param order, the int vars in declaration order (and by name), the launch dims (from the spec
    when the caller gave none), and whether to wait; return elapsed seconds when `wait` is true.
    """

    # False: this backend's `_launch` ignores `var_vals`, `global_size` and `local_size` (the CPU device: its vals
    # and its own split say everything), so the fast path passes None for them instead of computing them
    launch_takes_dims: ClassVar[bool] = True
    # True: this backend's own `execute` only adds keyword options (work_sizes.WorkSizes), so a cached launch without
    # them may still take the core's generated front, which hands any option to that execute
    execute_adds_options: ClassVar[bool] = False
    _sig: Signature | None = None  # the compiled signature and launch cache, made on the first launch
    _lookup: Callable | None = None  # its `lookup` (one attribute read on the hot path)
    # what the core keeps on each Program, made as launches need it: a backend's subclass must not use these names
    # (the conformance kit checks it; a CPU pool's chunk records once named `_records` broke checked launches)
    CORE_STATE: ClassVar[tuple[str, ...]] = ("_sig", "_lookup", "_records", "_bind_names", "execute")

    def __init__(self, compiled: CompiledSpec, device: Device | None = None):
        self.compiled = compiled
        self.device = device

    @property
    def spec(self) -> ProgramSpec:
        return self.compiled.spec

    @property
    def name(self) -> str:
        return self.compiled.spec.name

    def _kind(self) -> str:
        if self.device is not None:
            return self.device.spec.kind
        return self.spec.device

    def check(self, buffers: Sequence[Any], vals: Sequence[int] = ()) -> dict[str, int]:
        """Validate buffers and vars; returns the vars by name. Raises TypeError/ValueError naming the argument."""
        from .memory import Buffer

        spec = self.spec
        params = spec.user_params
        if not isinstance(buffers, (list, tuple)):
            raise TypeError(f"{spec.name}: buffers must be a list of Buffers in param order, got "
                            f"{type(buffers).__name__}")
        _check_int_vals(spec, vals)
        if len(buffers) != len(params):
            names = ", ".join(p.name for p in params) or "none"
            raise TypeError(f"{spec.name}: expected {len(params)} buffers ({names}), got {len(buffers)}")
        var_vals = spec.check_vars(tuple(vals))
        needed = spec.buffer_sizes(var_vals)
        kind = self._kind()
        home = self.device.spec if self.device is not None else getattr(self, "home", None)  # a runtime's own (RAY:1)
        for p, buf, n in zip(params, buffers, needed):
            if not isinstance(buf, Buffer):
                raise TypeError(f"{spec.name}: param {p.name!r} must be a devicekit Buffer, got {type(buf).__name__}"
                                f"{_HOW_TO_BUFFER if hasattr(buf, '__array__') or hasattr(buf, '__dlpack__') else ''}")
            if buf._freed:
                raise FreedBufferError(f"{spec.name}: param {p.name!r} is {buf!r}: it was freed (Buffer.free() or "
                                       "the end of its `with` block) and its memory may belong to another Buffer")
            if home is not None and buf.device.spec != home:  # CUDA:1's memory is not CUDA:0's: kind and index
                raise ValueError(f"{spec.name}: param {p.name!r} is a buffer on {buf.device.spec}, "
                                 f"the program runs on {home}: copy its data to a buffer on {home} first")
            if home is None and kind and buf.device.spec.kind != kind:
                raise ValueError(f"{spec.name}: param {p.name!r} is a buffer on {buf.device.spec}, "
                                 f"the program runs on {kind}")
            if buf.dtype is not p.dtype and buf.dtype != p.dtype:
                raise TypeError(f"{spec.name}: param {p.name!r} is {p.dtype}, the buffer is {buf.dtype}")
            if buf._nbytes < n * p.dtype.nbytes:  # the allocation's own byte count, never a settable attribute
                raise ValueError(f"{spec.name}: param {p.name!r} needs {n} elements for "
                                 f"{var_vals or 'this launch'}, the buffer has {buf._nbytes // p.dtype.nbytes}")
            if p.writable and buf._readonly:
                raise ReadOnlyBufferError(f"{spec.name}: param {p.name!r} is writable and {buf!r} is read-only (it "
                                          "wraps read-only memory, such as a jax array's): pass a writable Buffer")
        _check_aliasing(spec, buffers, needed)
        return var_vals

    def _signature(self) -> Signature:
        sig = self._sig
        if sig is None or sig.spec is not self.spec:  # a swapped build keeps its spec; a new spec gets a new one
            sig = self._sig = Signature(self.spec)
            self._lookup = sig.lookup
            own = type(self).execute
            if own is Program.execute or self.execute_adds_options:  # a backend's own execute is left alone
                front = sig.front(self, own, Launch)
                if front is None:
                    self.__dict__.pop("execute", None)
                else:
                    self.execute = front  # the instance's: a cached launch runs without the method's frame
        return sig

    def _forget_launches(self) -> None:
        """Drop the launch cache (a backend that swaps its code or its spec: the tiers' final build)."""
        if self._sig is not None:
            self._sig.hits.clear()

    def _entry(self, buffers: Sequence[Any], vals: Sequence[int] = ()) -> list | None:
        """The launch cache's entry of these Buffers and values, or None (tests: what a repeat will run)."""
        sig = self._sig
        e = None if sig is None or sig.lookup is None else sig.lookup(buffers, vals)
        return e if type(e) is list else None

    def execute(self, buffers: Sequence[Any], vals: Sequence[int] = (), global_size: tuple[int, ...] | None = None,
                local_size: tuple[int, ...] | None = None, wait: bool = False) -> Any:
        """Run the kernel on `buffers` (in param order) with `vals` in declaration order: an int per var, a value of
        its dtype's kind per k.scalar (checked and rounded to its dtype first). Seconds when `wait`, else a Launch
        handle (`.wait()` returns the seconds).

        The one launch path of every backend: a launch with Buffers and values already accepted together (the launch
        cache, keyed by each Buffer's token: devicekit.signature) launches at once; else the compiled signature checks
        them in a few comparisons; anything it cannot prove right takes `check`, which raises the error naming the
        argument."""
        lookup, e = self._lookup, None
        if lookup is not None and global_size is None and local_size is None:
            e = lookup(buffers, vals)
            if type(e) is list:
                t0 = perf_counter()
                fn = e[0]
                if fn is not None:  # a native call of no arguments, run now (the CPU device's bound record)
                    fn()
                    if wait:
                        return perf_counter() - t0
                    h = _NEW_LAUNCH(Launch)  # Launch(device, t0) without a Python __init__ (~35 ns of ~115)
                    h._device, h._t0, h.seconds = self.device, t0, None
                    return h
                return self._again(e, t0, wait)
        sig = self._sig
        if sig is None or sig.spec is not self.spec:
            sig, e = self._signature(), None
        if global_size is not None or local_size is not None or debugging():
            return self._execute_checked(buffers, vals, global_size, local_size, wait)
        handles = sig.fast(buffers, vals, self.device or sig.home)
        if handles is None:
            return self._execute_checked(buffers, vals, global_size, local_size, wait)
        t0 = perf_counter()
        vals = list(vals)
        if self.launch_takes_dims:
            var_vals = dict(zip(sig.names, vals))
            g, loc = sig.dims(vals)
        else:
            var_vals = g = loc = None
        if sig.checked:  # the hidden bounds-check record (ir/bounds.py), zeroed, after the user's buffers
            rec = self._record(sig.spec.checks.size)
            handles.append(rec.handle)
            args = (handles, vals, var_vals, g, loc, wait)
            if self.may_run_long(vals) and interrupt.on_main_thread():
                t = interrupt.call(self._launch, args, keep=[*buffers, rec])
            else:
                t = self._launch(*args)
            self._read_record(rec, dict(zip(sig.names, vals)))
            return launched(self, t, t0, wait)
        if self.may_run_long(vals):
            if interrupt.on_main_thread():
                t = interrupt.call(self._launch, (handles, vals, var_vals, g, loc, wait), keep=buffers)
            else:
                t = self._launch(handles, vals, var_vals, g, loc, wait)
            return launched(self, t, t0, wait)  # not cached: a repeat from the main thread must stay interruptible
        t = self._launch(handles, vals, var_vals, g, loc, wait)
        # the launch cache: these Buffers (by their tokens: freed, a Buffer's is 0) and values were proved right
        # together; the entry holds no Buffer (only handles), so a dropped Buffer is not kept alive by it
        k = e if type(e) is tuple else sig.key(buffers, vals) if sig.key is not None else None
        if k is not None:
            hits = sig.hits
            if len(hits) >= CACHED_LAUNCHES:
                hits.clear()  # full: start again (cheaper per miss than dropping the oldest, ~0.15 us a launch)
            hits[k] = [None, None, handles, vals, var_vals, g, loc, self.device]
        if wait or (t is not None and hasattr(t, "wait")):
            return t
        return Launch(self.device, t0)

    def _again(self, e: list, t0: float, wait: bool) -> Any:
        """A cached launch that is not a bound native call: from its second run, `_repeat` may bind one (the CPU
        device: one ctypes call of two arguments) or the backend's `prepare_launch` a call of its own (OpenCL: its own
        kernel object, arguments set once); else `_launch` with the cached arguments."""
        go = e[1]
        if go is None:
            go = self._repeat(e)
            if e[0] is not None:
                e[0]()
                return perf_counter() - t0 if wait else Launch(self.device, t0)
        if go is _LAUNCH:
            return launched(self, self._launch(e[2], e[3], e[4], e[5], e[6], wait), t0, wait)
        return launched(self, go(wait), t0, wait)

    def _repeat(self, e: list) -> Any:
        """Bind a cached launch: e[0] the backend's one native record of no arguments when its `plan_record` offers a
        `bind` for it, else e[1] the backend's `prepare_launch`, else `_LAUNCH` (call `_launch` again). A quick build
        (tiers) repeats through `_launch`, which counts its launches (the cache is dropped when it adopts the final
        build). Returns e[1]; left None (ask again) while a bind is not ready (the CPU's replay builds elsewhere)."""
        if self.tier == "quick":
            e[1] = _LAUNCH
            return _LAUNCH
        rec = self.plan_record(e[2], e[3])
        if rec is not None and getattr(rec[0], "bind", None) is not None:
            import numpy as np
            fn = rec[0].bind(np.array(rec[1], dtype=np.int64), 1)
            if fn is None:  # the backend's replay is not built yet (it builds elsewhere): launch, ask again later
                return _LAUNCH
            e[0] = fn
            return None
        go = self.prepare_launch(e[2], e[3], e[4], e[5], e[6])
        e[1] = _LAUNCH if go is None else go
        return e[1]

    def prepare_launch(self, handles: list, vals: list[int], var_vals: dict[str, int] | None,
                       global_size: tuple[int, ...] | None, local_size: tuple[int, ...] | None) -> Any:
        """The launch-cache hook: for a launch already checked and about to repeat (the same Buffers and values), a
        call `go(wait)` that launches it again with everything per launch done once (the same return as `_launch`).
        It must keep no Buffer alive (handles only) and stay right for as long as those handles are live. None (the
        default): repeats call `_launch`."""
        return None

    def _execute_checked(self, buffers: Sequence[Any], vals: Sequence[int], global_size: tuple[int, ...] | None,
                         local_size: tuple[int, ...] | None, wait: bool) -> Any:
        """`execute` with the full check: the path of anything the signature's fast check does not prove."""
        t0 = perf_counter()
        var_vals = self.check(buffers, vals)
        if self.device is None and buffers:  # the seed path's Program: where its Buffers live, for the fast check
            self._signature().home = buffers[0].device
        if global_size is not None or local_size is not None:  # the caller's: ints, local >= 1 (launch_sizes)
            global_size, local_size = launch_sizes.check_values(self.name, global_size, local_size)
        g, loc = self.spec.launch_dims(var_vals)
        global_size = g if global_size is None else global_size
        local_size = loc if local_size is None else local_size
        checks = self.spec.checks
        if checks is not None:  # the hidden bounds-check record (ir/bounds.py), zeroed, after the user's buffers
            buffers = [*buffers, self._record(checks.size)]
        handles = [b.handle for b in buffers]
        if debug_level() >= 4:
            dprint(4, f"launch {self.name} vars={var_vals} global={global_size} local={local_size}")
        args = (handles, [var_vals[v.name] for v in self.spec.vars], var_vals, global_size, local_size, wait)
        if self.may_run_long(args[1]) and interrupt.on_main_thread():
            t = interrupt.call(self._launch, args, keep=buffers)  # Ctrl-C returns; the buffers outlive the kernel
        else:
            t = self._launch(*args)
        if checks is not None:
            self._read_record(buffers[-1], var_vals)
        if wait and t is not None:
            dprint(2, f"ran {self.name} in {t * 1e3:.3f} ms")
        return launched(self, t, t0, wait)

    def _read_record(self, record: Any, var_vals: dict[str, int]) -> None:
        """After a checked launch (reading waits for the kernel: it is synchronous): raise the IndexError of a failed
        check, else keep the record, untouched and so still zero, for the next launch."""
        data = record.numpy()
        if data[0::2].any():
            err = self.spec.checks.error(data, self.spec.buffer_sizes(var_vals), var_vals)
            if err is not None:
                raise err
        self._records.append(record)

    def _record(self, size: int) -> Any:
        """A zeroed int64 buffer on this program's device for one launch's bounds-check record: a clean one left by
        an earlier launch (list pop/append are atomic, so concurrent launches each get their own), else a new one."""
        records = self.__dict__.setdefault("_records", [])
        try:
            return records.pop()
        except IndexError:
            from .ir.dtypes import dtypes
            from .memory import Buffer, BufferOptions
            return Buffer(self.device if self.device is not None else self.spec.device, size, dtypes.int64,
                          BufferOptions(zero=True))

    def __call__(self, *args: Any, **named: Any) -> float | None:
        """`program(buffers, vals, ...)` is `execute`; `program(x=bx, y=by, n=1024, wait=True)` launches by name: a
        Buffer per param, a value per var (no copies: the Buffers are used as they are), and execute's options
        (`global_size`, `local_size`, `wait`) where no param or var has that name."""
        if args or not named or named.keys() <= _EXECUTE_OPTIONS:
            return self.execute(*args, **named)
        buffers, vals, opts = self.bind(named)
        return self.execute(buffers, vals, **opts)

    def bind(self, named: dict[str, Any]) -> tuple[list[Any], list[Any], dict[str, Any]]:
        """(buffers in param order, vals in var order, execute's options) from arguments by name; a TypeError names
        what is missing or unknown. A plan or a framework binds once and launches with `execute` after."""
        spec = self.spec
        if (names := getattr(self, "_bind_names", None)) is None:  # computed once: a named launch is a hot path
            pnames, vnames = [p.name for p in spec.user_params], [v.name for v in spec.vars]
            names = self._bind_names = (pnames, vnames, frozenset(pnames) | frozenset(vnames))
        pnames, vnames, taken = names
        if len(named) == len(taken):  # exactly the params and vars (all present, so nothing else): no options
            try:
                return [named[n] for n in pnames], [named[n] for n in vnames], {}
            except KeyError:
                pass
        opts = {k: named[k] for k in _EXECUTE_OPTIONS if k in named and k not in taken}
        if extra := sorted(set(named) - taken - set(opts)):
            hint = "".join(did_you_mean(x, [*pnames, *vnames]) for x in extra)
            raise TypeError(f"{spec.name}: unexpected argument(s) {', '.join(extra)}{hint}; the kernel takes params "
                            f"{', '.join(pnames) or 'none'} and vars {', '.join(vnames) or 'none'}")
        if missing := [n for n in pnames + vnames if n not in named]:
            raise TypeError(f"{spec.name}: missing argument(s) {', '.join(missing)} (a Buffer per param, a value "
                            f"per var)")
        return [named[n] for n in pnames], [named[n] for n in vnames], opts

    def plan_record(self, handles: list, vals: list[int]) -> tuple[Callable, list[int]] | None:
        """The plan hook: for a `dk.Plan` launch already checked, `(replay, record)` where `replay(records, n)` runs
        `n` records packed in an int64 numpy array natively, in order; consecutive launches with the same `replay`
        are packed into one call. None (the default): the plan calls `_launch` for this launch."""
        return None

    @property
    def tier(self) -> str:
        """"quick" while this program runs its quick build (`Compiler.first_build`), else "final"."""
        return self.compiled.tier

    def upgrade(self) -> None:
        """Swap to the final build now (it is compiled here, unless cached) when this program runs its quick one;
        a no-op otherwise. A runtime that tiers calls it itself once the program has run enough (the CPU device:
        32 launches or ~1M estimated operations, docs/decisions.md); benchmarks call it before timing."""

    def _set_final(self, build: Callable[[], Program]) -> bool:
        """Device.compile's hook for a quick program: `build()` returns the Program of the final bytes, which this
        program adopts in `upgrade`. False (the default): this runtime does not swap, the device loads the final
        build at once."""
        return False

    def may_run_long(self, vals: list[int]) -> bool:
        """Whether a launch with these int vars (declaration order) may block long enough that Ctrl-C must not
        wait for it. When True and the caller is the main thread, `execute` runs `_launch` on a launcher thread and
        waits interruptibly (devicekit.interrupt): KeyboardInterrupt returns at once, the launch finishes in the
        background with its buffers kept alive. Default False: `_launch` runs on the calling thread."""
        return False

    @abstractmethod
    def _launch(self, handles: list, vals: list[int], var_vals: dict[str, int], global_size: tuple[int, ...] | None,
                local_size: tuple[int, ...] | None, wait: bool) -> float | None:
        """Launch natively. Everything was checked by `execute`."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} on {self.device.spec if self.device else self.spec.device}>"


RuntimeFactory = Callable[["CompiledSpec"], Program]


# launches (sets of Buffers and values) a Program's launch cache keeps; when full it is emptied. A training step
# launches each kernel with a few sets (a batch, its activations, parameters and gradients)
CACHED_LAUNCHES = 16
_EXECUTE_OPTIONS = frozenset({"global_size", "local_size", "wait"})
_SEQ = (list, tuple)  # buffers and vals the fast check takes as they are; anything else gets the full check's error
_NEW_LAUNCH = object.__new__
_LAUNCH = object()  # a launch-cache entry's call: `_launch` again with the entry's arguments
_HOW_TO_BUFFER = (": wrap an array with dk.from_numpy(arr) (Buffer.from_numpy: no copy on host devices) or copy it "
                  "with dk.Buffer(device, n, dtype).copyin(arr); or pass arrays by name to dk.run(kernel, x=arr, ...), "
                  "which copies them in and out")


def did_you_mean(name: str, choices: Sequence[str]) -> str:
    """" (did you mean 'x' for 'X'?)" when `name` is close to one of `choices` (case aside, or by difflib's
    ratio), else "": the hint an argument-name typo gets (`X=` for `x`, `ouy=` for `out`)."""
    import difflib
    if not isinstance(name, str):
        return ""
    folded = {c.lower(): c for c in choices}
    best = folded.get(name.lower()) or next(iter(difflib.get_close_matches(name.lower(), list(folded), 1, 0.6)), None)
    return f" (did you mean {folded.get(best, best)!r} for {name!r}?)" if best is not None else ""


def _check_aliasing(spec: ProgramSpec, buffers: Sequence[Any], needed: Sequence[int]) -> None:
    """A writable param may share no memory with another param: the kernel would read what it writes in an
    order no device defines (docs/ir.md, Memory order). Buffers and views are compared by base and byte range."""
    spans = []
    for p, buf, n in zip(spec.params, buffers, needed):
        start = buf.offset_bytes
        spans.append((p, buf.base, start, start + n * buf.dtype.nbytes))
    for a in range(len(spans)):
        pa, ba, sa, ea = spans[a]
        for pb, bb, sb, eb in spans[a + 1:]:
            if (pa.writable or pb.writable) and ba is bb and sa < eb and sb < ea:
                what = "the same buffer" if (sa, ea) == (sb, eb) else "overlapping memory"
                raise ValueError(f"{spec.name}: params {pa.name!r} and {pb.name!r} are {what} (bytes {max(sa, sb)}.."
                                 f"{min(ea, eb)} of one allocation) and {pa.name if pa.writable else pb.name!r} is "
                                 "writable: pass separate buffers")


def _check_int_vals(spec: ProgramSpec, vals: Any) -> None:
    """Var values are ints (python or numpy), never bools, floats or strings: int() would silently truncate 3.7. A
    float var (a hand-written kernel's `float alpha`) takes any real number, still not a bool or a string."""
    if not isinstance(vals, (list, tuple)):
        raise TypeError(f"{spec.name}: vals must be a list of ints in var order, got {type(vals).__name__}")
    for j, x in enumerate(vals):
        v = spec.vars[j] if j < len(spec.vars) else None
        if v is not None and v.scalar is not None:
            continue  # a k.scalar: its kind and range are its dtype's (program_spec.scalar_value, in check_vars)
        want = numbers.Real if v is not None and v.is_float else numbers.Integral
        is_bool_var = v is not None and v.dtype is not None and v.dtype.is_bool
        if (isinstance(x, bool) and not is_bool_var) or not isinstance(x, want):  # numpy bools are not Integral
            what = v.name if v is not None else f"#{j}"
            kind = "a number" if want is numbers.Real else "an int"
            raise TypeError(f"{spec.name}: var {what} must be {kind}, got {type(x).__name__} {x!r}")
