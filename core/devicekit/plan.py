"""Launch plans: a sequence of launches captured once and replayed, with the argument checks done at capture.

`plan = dk.Plan(dev)`, `plan.add(program, x=bx, y=by, n=1024)` per launch (a var given as a str is a plan var, bound
at `run`), then `plan.run(t=5)` as often as needed. The first run for a set of plan-var values checks every launch
as `execute` does (buffers, dtypes, devices, var bounds, sizes, aliasing) and keeps what the native launch needs;
later runs with the same values replay with no Python checks per launch: consecutive launches that the backend can
run natively (`Program.plan_record`: the CPU device's one-thread launches) in one native call, the others through
`Program._launch` (`CallBatcher`, which devicekit-ray's actor uses too). A kernel with run-time bounds checks (a
checked gather) still reads its check record after each launch.
"""

from __future__ import annotations

from typing import Any

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
    """A captured sequence of launches on one device, replayed by `run(**plan_vars)`."""

    def __init__(self, device: Any = None):
        from .api import resolve_device
        self.device = resolve_device(device)
        self._steps: list[tuple[Program, list[Any], list[Any], dict[str, Any]]] = []
        self._prepared: dict[tuple, list[tuple[Any, tuple]]] = {}
        self.plan_vars: tuple[str, ...] = ()

    def add(self, program: Program, **named: Any) -> Plan:
        """Append a launch of `program` with its arguments by name: a Buffer per param; per var an int, or a str
        naming a plan var given to `run`. `global_size`/`local_size` as in `execute`."""
        if not isinstance(program, Program):
            raise TypeError(f"Plan.add takes a Program (dev.compile(kernel)), got {type(program).__name__}")
        if program.device is not None and program.device is not self.device:
            raise ValueError(f"Plan.add: {program.name} runs on {program.device.spec}, the plan on {self.device.spec}")
        buffers, vals, opts = program.bind(named)
        if opts.pop("wait", None) is not None:
            raise TypeError("Plan.add: a plan launch does not wait; Plan.run(wait=True) waits for the whole plan")
        for v, x in zip(program.spec.vars, vals):
            if isinstance(x, str):
                if not x.isidentifier():
                    raise ValueError(f"Plan.add: plan var {x!r} for {program.name}.{v.name} is not an identifier")
                if x not in self.plan_vars:
                    self.plan_vars += (x,)
        if not any(isinstance(x, str) for x in vals):
            program.check(buffers, vals)  # fully bound: checked now, at capture
        self._steps.append((program, buffers, vals, opts))
        self._prepared.clear()
        return self

    def __len__(self) -> int:
        return len(self._steps)

    def _prepare(self, key: tuple) -> list[tuple[Any, tuple]]:
        """Check every launch for these plan-var values (as execute does) and keep its native call."""
        env = dict(zip(self.plan_vars, key))
        batch = CallBatcher()
        for program, buffers, vals, opts in self._steps:
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
        if len(self._prepared) >= _MAX_PREPARED:
            self._prepared.pop(next(iter(self._prepared)))
        self._prepared[key] = calls
        return calls

    def run(self, wait: bool = False, **plan_vars: Any) -> None:
        """Replay every launch, in order, with these plan-var values; `wait=True` waits for the device after."""
        if set(plan_vars) != set(self.plan_vars):
            missing = [v for v in self.plan_vars if v not in plan_vars]
            extra = sorted(set(plan_vars) - set(self.plan_vars))
            raise TypeError(f"Plan.run: {'missing plan var(s) ' + ', '.join(missing) if missing else ''}"
                            f"{'; ' if missing and extra else ''}"
                            f"{'unknown plan var(s) ' + ', '.join(extra) if extra else ''}"
                            f" (the plan's vars: {', '.join(self.plan_vars) or 'none'})")
        key = tuple(plan_vars[v] for v in self.plan_vars)
        calls = self._prepared.get(key)
        if calls is None:
            calls = self._prepare(key)
        for fn, args in calls:
            fn(*args)
        if wait:
            self.device.synchronize()

    def __repr__(self) -> str:
        return f"<Plan on {self.device.spec}: {len(self._steps)} launches, plan vars {list(self.plan_vars)}>"
