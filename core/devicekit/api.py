"""The user's front door, above the registry: `dk.device`, `dk.target`, `dk.devices` (the process-wide registry's
lookups), `dk.run` (compile, copy in, launch, copy out in one call) and `resolve_device`, which turns a device name
into a Device for the contracts that accept either (`Buffer(device="CPU")`). The contracts below (memory, runtime,
targets, ...) never import this module at their top level; `devicekit/__init__` offers its names lazily."""

from __future__ import annotations

from typing import Any

from .registry import DeviceInfo, device, devices, register_plugin, target, unregister_plugin
from .spec import DeviceSpec
from .targets import Device

__all__ = ["DeviceInfo", "device", "devices", "register_plugin", "resolve_device", "run", "target",
           "unregister_plugin"]


def resolve_device(dev: Device | DeviceSpec | str | None) -> Device:
    """A Device as given, else the registry's device for a spec or name (None: the default device)."""
    if dev is None or isinstance(dev, (str, DeviceSpec)):
        return device(dev)
    return dev


_RUN_OPTIONS = ("device", "global_size", "local_size", "pair")
_PROGRAM_BUFFER: tuple[Any, Any] | None = None  # (Program, Buffer), imported on the first dk.run


def _load_types() -> tuple[Any, Any]:
    global _PROGRAM_BUFFER
    from .memory import Buffer
    from .runtime import Program
    _PROGRAM_BUFFER = (Program, Buffer)
    return _PROGRAM_BUFFER


def _run_names(program: Any) -> tuple | None:
    """(param names, var names, every name, writable param names) of a Program for dk.run's resident path: a
    launch whose arguments are exactly its params, all Buffers, and its vars goes straight to `execute` (which checks
    them); None when a param or var is named like one of dk.run's options (the full path sorts those out)."""
    spec = program.spec
    pn, vn = tuple(p.name for p in spec.user_params), tuple(v.name for v in spec.vars)
    names = frozenset(pn) | frozenset(vn)
    out = None if names & set(_RUN_OPTIONS) else (pn, vn, names, tuple(p.name for p in spec.user_params if p.writable))
    program._run_names = out
    return out


_LAUNCH_KEYWORDS: dict[type, frozenset[str]] = {}


def _launch_keywords(program: Any) -> frozenset[str]:
    """The keyword-only launch options a Program's `execute` takes beyond the core's (OpenCL's
    `global_work_size=` / `local_work_size=`, in work-items): dk.run passes them through as `__call__` does."""
    cls = type(program)
    kw = _LAUNCH_KEYWORDS.get(cls)
    if kw is None:
        import inspect
        try:
            params = inspect.signature(cls.execute).parameters.values()
        except (TypeError, ValueError):
            params = ()
        kw = _LAUNCH_KEYWORDS[cls] = frozenset(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)
    return kw


def run(kernel: Any, device: Any = None, /, **named: Any) -> dict[str, Any]:
    """Compile `kernel` for `device` (a Device, a spec string, or None for the default), run it once and return
    every writable param as a numpy array, by name.

    `kernel` is an ir.Kernel, or a Program (e.g. from `dev.program_from_source`: it runs where it was loaded).
    Named arguments: one numpy array per param (dtype and size checked; writable params may be omitted when their
    size is known: they are allocated zeroed, sized from the vars), or a Buffer on the device (used as it is, no
    copy; a writable one comes back as that Buffer, still on the device), and one value per var (an int; a float
    var takes a number) and per scalar (k.scalar: a value of its dtype's kind, `alpha=1.5`). `global_size`/
    `local_size` are the launch dims when the program does not compute them itself (a hand-written GPU kernel),
    and a device's own launch options go through as its `execute` takes them (OpenCL's `global_work_size=` /
    `local_work_size=`, in work-items);
    `pair` picks the device's compiler pair (a name or an index), as `Device.compile` does. Arrays passed in are
    never modified. A returned array has the shape of the array passed for it when the sizes agree, else it is flat.

    A kernel's param or var may be named `device`, `global_size`, `local_size` or `pair` (any identifier is valid):
    then that keyword is the argument, and the device goes second, positionally: `run(k, "CPU", device=arr)`.
    """
    Program, Buffer = _PROGRAM_BUFFER or _load_types()
    if isinstance(kernel, Program):  # every argument a Buffer of its params or a value of its vars: launch them
        quick = kernel._run_names if "_run_names" in kernel.__dict__ else _run_names(kernel)
        if quick is not None and len(named) == len(quick[2]):
            try:
                buffers = [named[n] for n in quick[0]]
                vals = [named[n] for n in quick[1]]
            except KeyError:
                buffers = None
            if buffers is not None and all(type(b) is Buffer for b in buffers):
                kernel.execute(buffers, vals, wait=True)
                return {n: named[n] for n in quick[3]}

    import numpy as np

    from .ir.accept import as_kernel, host_array
    from .memory import BufferOptions

    own = getattr(kernel, "spec", kernel)  # a Program's spec, or the ir.Kernel: the names its arguments have
    taken = {p.name for p in getattr(own, "params", ())} | {v.name for v in getattr(own, "vars", ())}
    opts = {k: named.pop(k) for k in _RUN_OPTIONS if k in named and k not in taken}
    if "device" in opts:
        if device is not None:
            raise TypeError("run() got the device twice (positionally and as device=)")
        device = opts["device"]
    global_size, local_size = opts.get("global_size"), opts.get("local_size")
    if device is None:  # resident Buffers say where to run
        device = next((x.device for x in named.values() if isinstance(x, Buffer)), None)

    if isinstance(kernel, Program):
        if opts.get("pair") is not None:
            raise TypeError(f"{kernel.name}: pair= is for compiling an ir.Kernel; this Program is already compiled")
        program = kernel  # it runs where it was loaded: its buffers go to its device
        home = getattr(program, "home", None)  # the DeviceSpec a runtime loaded it on (RAY:1, ACME), when it says
        dev = program.device or resolve_device(device if device is not None else home or program._kind() or None)
    else:
        kernel = as_kernel(kernel, "dk.run")  # before the device: a forgotten .build() is the error to show
        dev = resolve_device(device)
        from . import settings
        if settings.get("DEVICEKIT_SEARCH") and all(v.name in named for v in kernel.vars):
            from .tile_search import search  # times the optimizer's tiles once per kernel, device and var values
            program = search(kernel, dev, pair=opts.get("pair"), **{v.name: named[v.name] for v in kernel.vars})
        else:
            program = dev.compile(kernel, pair=opts.get("pair"))
    spec = program.spec
    pnames, vnames = [p.name for p in spec.user_params], [v.name for v in spec.vars]
    launch = {}
    if (extra := set(named) - set(pnames) - set(vnames)) and (kw := _launch_keywords(program) & extra):
        launch = {k: named.pop(k) for k in kw}  # a device's own spelling of the launch sizes
    if extra := sorted(set(named) - set(pnames) - set(vnames)):
        from .runtime import did_you_mean
        hint = "".join(did_you_mean(x, [*pnames, *vnames]) for x in extra)
        raise TypeError(f"{spec.name}: unexpected argument(s) {', '.join(extra)}{hint}; the kernel takes params "
                        f"{', '.join(pnames) or 'none'} and vars {', '.join(vnames) or 'none'}")
    if missing := [v.name for v in spec.vars if v.name not in named and v.scalar is None]:
        kind = "" if any(v.is_float for v in spec.vars) else "int "
        raise TypeError(f"{spec.name}: missing {kind}var(s) {', '.join(missing)}")
    if missing := [f"{v.name} ({v.scalar.name})" for v in spec.vars if v.name not in named and v.scalar is not None]:
        raise TypeError(f"{spec.name}: missing scalar(s) {', '.join(missing)}: a k.scalar takes its value at every "
                        f"launch")
    vals = []
    for v in spec.vars:
        x = named[v.name]
        if v.scalar is not None:  # checked and rounded to its dtype by check_vars (program_spec.scalar_value)
            vals.append(x)
            continue
        if v.is_float:
            if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
                raise TypeError(f"{spec.name}: var {v.name!r} must be a number, got {type(x).__name__}")
            vals.append(float(x))
            continue
        if v.dtype is not None and v.dtype.is_bool:
            ok = isinstance(x, (int, np.integer, np.bool_))
        else:
            ok = not isinstance(x, bool) and isinstance(x, (int, np.integer))
        if not ok:
            raise TypeError(f"{spec.name}: var {v.name!r} must be an int, got {type(x).__name__}")
        vals.append(int(x))
    var_vals = spec.check_vars(vals)
    sizes = spec.buffer_sizes(var_vals)
    buffers, shapes, kept = [], {}, {}
    from .ir.uop import sym_eval
    declared = {p.name: tuple(sym_eval(d, var_vals) for d in shp)  # a k.param(shape=...) shapes its output
                for p, shp in zip(spec.user_params, getattr(own, "shapes", ())) if shp is not None}
    for p, n in zip(spec.user_params, sizes):
        if isinstance(named.get(p.name), Buffer):
            buf = named[p.name]  # resident data: used as it is (execute checks its device, dtype and size)
            kept[p.name] = buf
        elif p.name in named:
            try:  # the data rule of Buffer.copyin (ir/accept.py): lists and scalars of the param's dtype too
                arr = host_array(named[p.name], p.dtype)
            except TypeError as e:
                raise TypeError(f"{spec.name}: param {p.name!r}: {e}") from None
            lanes = p.dtype.count
            if arr.size % lanes:
                raise ValueError(f"{spec.name}: param {p.name!r} is {p.dtype}; {arr.size} scalars is not a whole "
                                 f"number of {lanes}-lane elements")
            try:
                buf = Buffer(dev, arr.size // lanes, p.dtype).copyin(arr)
            except (TypeError, ValueError) as e:
                raise type(e)(f"{spec.name}: param {p.name!r}: {e}") from None
            shapes[p.name] = arr.shape
        elif p.writable and not (spec.get_meta("from_source") and isinstance(p.size, int) and p.size == 0):
            buf = Buffer(dev, n, p.dtype, BufferOptions(zero=True))
        elif p.writable:
            raise TypeError(f"{spec.name}: pass an array for param {p.name!r}: its size is not known (a hand-written "
                            f"kernel states it with sizes={{{p.name!r}: ...}} at program_from_source)")
        else:
            raise TypeError(f"{spec.name}: missing input array for param {p.name!r} ({p.dtype}, {n} elements)")
        buffers.append(buf)
    program.execute(buffers, vals, global_size=global_size, local_size=local_size, wait=True, **launch)
    out = {}
    for p, buf in zip(spec.user_params, buffers):
        if p.writable and p.name in kept:
            out[p.name] = buf  # it stays on the device: no copy out
        elif p.writable:
            a = buf.numpy()
            shape = shapes.get(p.name) or declared.get(p.name)
            out[p.name] = a.reshape(shape) if shape is not None and int(np.prod(shape)) == a.size else a
    return out
