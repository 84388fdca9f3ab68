"""Launch plans: a sequence of launches captured once and replayed, with the argument checks done at capture.

`plan = dk.Plan(dev)`, `plan.add(program, x=bx, y=by, n=1024)` per launch (a var or a param given as a str is a plan
argument, bound at `run`: an int, or a Buffer), then `plan.run(t=5, x=batch)` as often as needed. The first run for
a set of plan arguments checks every launch as `execute` does (buffers, dtypes, devices, var bounds, sizes, aliasing)
and keeps what the native launch needs; later runs with the same arguments replay with no Python checks per launch: consecutive launches that the backend can
run natively (`Program.plan_record`: the CPU device's one-thread launches) in one native call, the others through
`Program._launch` (`CallBatcher`, which devicekit-ray's actor uses too). A kernel with run-time bounds checks (a
checked gather) still reads its check record after each launch.
"""

from __future__ import annotations

from typing import Any

from .memory import _FREES
from .runtime import Program

__all__ = ["CallBatcher", "Plan"]

_MAX_PREPARED = 64  # sets of plan-var values kept prepared (a wavefront pipeline binds a few; a sweep, many)


class CallBatcher:
    """The calls that replay a sequence of checked launches, in order: consecutive launches whose Program has a plan
    hook with the same `replay` are packed into one `replay(int64 records, n)` call, the others are one `_launch` (or
    any call given) each. The one place this packing lives: `Plan` on the driver and devicekit-ray's actor (which
    replays the records a RAY plan sends) both build their calls with it."""

    def __init__(self) -> None:
        self._calls: list[tuple[Any, tuple]] = []
        self._replay: Any = None
        self._records: list[int] = []
        self._count = 0

    def _flush(self) -> None:
        if self._count:
            import numpy as np
            self._calls.append((self._replay, (np.array(self._records, dtype=np.int64), self._count)))
        self._replay, self._records, self._count = None, [], 0

    def call(self, fn: Any, args: tuple) -> None:
        """Append `fn(*args)`, after every launch added before it."""
        self._flush()
        self._calls.append((fn, args))

    def launch(self, program: Program, handles: list[Any], vals: list[Any], var_vals: dict[str, Any], global_size: Any,
               local_size: Any, native: bool = True) -> None:
        """Append a launch already checked: packed when `native` and `program.plan_record` answers, else through
        `program._launch` (not waited for)."""
        rec = program.plan_record(handles, vals) if native else None
        if rec is None:
            self.call(program._launch, (handles, vals, var_vals, global_size, local_size, False))
            return
        replay, record = rec
        if self._replay is not replay:
            self._flush()
        self._replay = replay
        self._records.extend(record)
        self._count += 1

    def calls(self) -> list[tuple[Any, tuple]]:
        """The (fn, args) to run in order; the batcher is empty after."""
        self._flush()
        out, self._calls = self._calls, []
        return out


class Plan:
    """A captured sequence of launches on one device, replayed by `run(**plan_args)`.

    A plan argument is named by a str where `add` takes a value: for a var (`n="n"`) it is an int given to `run`, for
    a param (`x="batch"`) a Buffer given to `run` (`plan.run(batch=buf, n=100)`), so a framework replays one Plan
    on a new batch, new activations or new parameters each step. The first run with a set of arguments checks every
    launch as `execute` does (for a Buffer: its device, dtype, size for those vars, aliasing, read-only, freed) and
    keeps the native calls; a run with the same set again (the same Buffers, by identity, and values) replays them
    with no check at all. The last 64 sets are kept; a `Buffer.free()` anywhere drops them (checked again)."""

    def __init__(self, device: Any = None):
        from .api import resolve_device
        self.device = resolve_device(device)
        self._steps: list[tuple[Program, list[Any], list[Any], dict[str, Any]]] = []
        self._prepared: dict[tuple, list[tuple[Any, tuple]]] = {}
        self._epoch = _FREES[0]
        self.plan_vars: tuple[str, ...] = ()  # every plan argument, vars and Buffers, in order of first use
        self.plan_buffers: frozenset[str] = frozenset()  # the plan arguments that are Buffers

    def _name(self, x: str, program: Program, what: str, buffer: bool) -> None:
        if not x.isidentifier():
            raise ValueError(f"Plan.add: plan argument {x!r} for {program.name}.{what} is not an identifier")
        if x in self.plan_vars and (x in self.plan_buffers) != buffer:
            kinds = ("a Buffer", "a var") if buffer else ("a var", "a Buffer")
            raise TypeError(f"Plan.add: plan argument {x!r} is {kinds[1]} elsewhere in this plan; here "
                            f"({program.name}.{what}) it would be {kinds[0]}: give it another name")
        if x not in self.plan_vars:
            self.plan_vars += (x,)
            if buffer:
                self.plan_buffers |= {x}

    def add(self, program: Program, **named: Any) -> Plan:
        """Append a launch of `program` with its arguments by name: per param a Buffer, or a str naming a plan
        argument (a Buffer given to `run`); per var an int, or a str naming a plan var given to `run`.
        `global_size`/`local_size` as in `execute`."""
        if not isinstance(program, Program):
            raise TypeError(f"Plan.add takes a Program (dev.compile(kernel)), got {type(program).__name__}")
        if program.device is not None and program.device is not self.device:
            raise ValueError(f"Plan.add: {program.name} runs on {program.device.spec}, the plan on {self.device.spec}")
        buffers, vals, opts = program.bind(named)
        if opts.pop("wait", None) is not None:
            raise TypeError("Plan.add: a plan launch does not wait; Plan.run(wait=True) waits for the whole plan")
        for p, x in zip(program.spec.user_params, buffers):
            if isinstance(x, str):
                self._name(x, program, p.name, True)
        for v, x in zip(program.spec.vars, vals):
            if isinstance(x, str):
                self._name(x, program, v.name, False)
        if not any(isinstance(x, str) for x in (*buffers, *vals)):
            program.check(buffers, vals)  # fully bound: checked now, at capture
        self._steps.append((program, buffers, vals, opts))
        self._prepared.clear()
        return self

    def __len__(self) -> int:
        return len(self._steps)

    def _prepare(self, key: tuple, keep: bool = True) -> list[tuple[Any, tuple]]:
        """Check every launch for these plan arguments (as execute does) and keep its native call."""
        env = dict(zip(self.plan_vars, key))
        batch = CallBatcher()
        for program, buffers, vals, opts in self._steps:
            buffers = [env[x] if isinstance(x, str) else x for x in buffers]
            vals = [env[x] if isinstance(x, str) else x for x in vals]
            var_vals = program.check(buffers, vals)
            if program.spec.checks is not None:  # its check record is read after each launch: execute does it
                batch.call(program.execute, (buffers, vals, opts.get("global_size"), opts.get("local_size")))
                continue
            g, loc = program.spec.launch_dims(var_vals)
            g = g if opts.get("global_size") is None else tuple(opts["global_size"])
            loc = loc if opts.get("local_size") is None else tuple(opts["local_size"])
            ordered = [var_vals[v.name] for v in program.spec.vars]
            handles = [b.handle for b in buffers]
            batch.launch(program, handles, ordered, var_vals, g, loc, native=not opts)
        calls = batch.calls()
        if keep:
            if len(self._prepared) >= _MAX_PREPARED:
                self._prepared.pop(next(iter(self._prepared)))
            self._prepared[key] = calls  # the key holds its Buffers: their ids are not reused while it is kept
        return calls

    def _refuse(self, given: dict[str, Any]) -> None:
        missing = [v for v in self.plan_vars if v not in given]
        extra = sorted(set(given) - set(self.plan_vars))
        hint = ""
        if extra:
            from .runtime import did_you_mean
            hint = "".join(did_you_mean(x, self.plan_vars) for x in extra)
        raise TypeError(f"Plan.run: {'missing plan var(s) ' + ', '.join(missing) if missing else ''}"
                        f"{'; ' if missing and extra else ''}"
                        f"{'unknown plan var(s) ' + ', '.join(extra) if extra else ''}{hint}"
                        f" (the plan's vars: {', '.join(self.plan_vars) or 'none'})")

    def run(self, wait: bool = False, **plan_args: Any) -> None:
        """Replay every launch, in order, with these plan arguments (a value per plan var, a Buffer per plan
        Buffer); `wait=True` waits for the device after."""
        if len(plan_args) != len(self.plan_vars):
            self._refuse(plan_args)
        try:
            key = tuple(map(plan_args.__getitem__, self.plan_vars))
        except KeyError:
            self._refuse(plan_args)
        if self._epoch != _FREES[0]:  # a Buffer was freed: every kept set is checked again
            self._prepared.clear()
            self._epoch = _FREES[0]
        try:
            calls = self._prepared.get(key)
        except TypeError:  # unhashable (an array where a Buffer goes): the check names it
            calls = self._prepare(key, keep=False)
        if calls is None:
            calls = self._prepare(key)
        for fn, args in calls:
            fn(*args)
        if wait:
            self.device.synchronize()

    def __repr__(self) -> str:
        return (f"<Plan on {self.device.spec}: {len(self._steps)} launches, plan arguments {list(self.plan_vars)}"
                f"{f' (Buffers: {sorted(self.plan_buffers)})' if self.plan_buffers else ''}>")
