"""The `devicekit` command: `info [--json] [--isolate [--timeout S]]`, `devices [--json]`, `cache info|clear
[--json]`, `bench [--device X] [--quick] [--plot out.png] [--json]`, `compile FILE.py:KERNEL [--device X]
[--show source|ir|asm]`.

Exit codes: 0 ok; 1 a requested thing failed (a bad setting, for commands other than `info`); 2 usage error. `info`
is the diagnostic: it exits 0 even when plugins are broken or settings are bad, except under
DEVICEKIT_STRICT_PLUGINS=1, where a failed plugin makes it exit 1, and with `--isolate`, where a plugin that hangs or
ends its process makes it exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _cmd_info(args: argparse.Namespace) -> int:
    from .info import cmd_info
    return cmd_info(args)


def cmd_devices(args: argparse.Namespace) -> int:
    """Every device id; the default one (DEVICEKIT_DEVICE, else the kind of highest priority) marked with `*`.
    A DEVICEKIT_DEVICE that names no available device is a warning on stderr (the listing is still right)."""
    from ..errors import PluginError
    from ..registry import get_registry
    from ..registry.records import short_reason

    try:
        reg = get_registry()
        infos = reg.devices()
    except PluginError as e:
        print(f"devicekit: {e}", file=sys.stderr)
        return EXIT_FAILED
    default, origin, problem = reg.default_device()
    default_str = str(default) if default is not None and problem is None else None
    if args.json:
        _print_json([{**d.to_dict(), "default": d.spec == default_str} for d in infos])
    else:
        if not infos:
            print("no devices: no devicekit plugin is installed (pip install devicekit-cpu)")
        for d in infos:
            dist = f"{d.distribution} {d.version or ''}".strip() if d.distribution else d.plugin
            mark = "*" if d.spec == default_str else " "
            example = "  (an example device, not hardware)" if d.example else ""
            if d.available:
                print(f"{mark} {d.spec:<10} available    {dist:<26} pairs: {', '.join(d.pair_names) or '-'}{example}")
            else:  # the first clause of the reason; `devicekit info` has all of it
                print(f"{mark} {d.spec:<10} unavailable  {dist:<26} {short_reason(d.reason)}{example}")
        if default_str is not None:
            print(f"* the default device (from {origin})")
    if problem is not None:
        print(f"devicekit: warning: no default device: {problem}", file=sys.stderr)
    return EXIT_OK


def cmd_cache(args: argparse.Namespace) -> int:
    from ..compile.cache import cache_clear, cache_info

    try:
        if args.action == "clear":
            n = cache_clear()
            info = cache_info()
            if args.json:
                _print_json({"removed": n, **info})
            else:
                print(f"removed {n} entries from {info['dir']}"
                      + (f" and {info['stale_tmp_removed']} stale temp files" if info.get("stale_tmp_removed") else ""))
            if str(info["state"]).startswith("refused"):
                print(f"devicekit: the disk cache is not in use: {info['state']}", file=sys.stderr)
                return EXIT_FAILED
            return EXIT_OK
        info = cache_info()
    except OSError as e:
        print(f"devicekit: cache {args.action} failed: {e}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        _print_json(info)
    else:
        print(f"dir:      {info['dir']}")
        print(f"state:    {info['state']}")
        print(f"entries:  {info['entries']}")
        print(f"size:     {_fmt_bytes(info['bytes'])} (cap {_fmt_bytes(info['max_bytes'])})")
        if "tmp_files" in info:
            print(f"temp files: {info['tmp_files']} ({info['stale_tmp_files']} stale: left by killed writers, removed "
                  "when the cache opens and by `cache clear`)")
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from ..bench import machine as bench_machine
    from ..bench.definition import cases, run_bench
    from ..bench.numba_versions import unavailable as numba_unavailable
    from ..bench.report import Progress, check_plot_path, format_table, plot
    from ..errors import DeviceKitError
    from ..registry import devices

    if args.plot:  # fail before spending a minute benchmarking
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("devicekit bench --plot needs matplotlib: pip install 'devicekit[bench]' (or pip install "
                  "matplotlib)", file=sys.stderr)
            return EXIT_FAILED
        if (problem := check_plot_path(args.plot)) is not None:
            print(f"devicekit bench --plot: {problem}", file=sys.stderr)
            return EXIT_FAILED
    try:
        infos = devices()
        if args.device:
            want = str(_parse_spec(args.device))
            row = next((d for d in infos if d.spec == want), None)
            if row is None:
                from ..registry import device
                device(want)  # raises the registry's message: which devices exist, why one is missing
            if not row.available:  # once, not once per kernel
                from ..registry.records import short_reason
                print(f"devicekit bench: {want} is not available here: {short_reason(row.reason)} (the full reason: "
                      "`devicekit info`)", file=sys.stderr)
                return EXIT_FAILED
            specs = [want]
        else:
            specs = [d.spec for d in infos if d.available and not d.example]  # example devices: --device X
    except (DeviceKitError, ValueError) as e:
        print(f"devicekit bench: {e}", file=sys.stderr)
        return EXIT_FAILED
    if not specs:
        print("devicekit bench: no device is available (see `devicekit info`)", file=sys.stderr)
        return EXIT_FAILED
    numba_note = "--no-numba" if args.no_numba else numba_unavailable()
    if (busy := bench_machine.busy_warning()) is not None:
        print(f"devicekit bench: {busy}", file=sys.stderr)
    progress = Progress(len(cases(args.quick)) * len(specs), plain=True if args.no_progress_bar else None)
    try:
        results = run_bench(specs, quick=args.quick, progress=None if args.json else progress,
                            numba=numba_note is None)
    finally:
        progress.close()
    if args.json:
        _print_json([r.to_dict() for r in results])
    else:
        print(bench_machine.describe())  # after the run: numba's OpenMP pool is loaded by then
        print(format_table(results, numba_note))
        if not args.device:  # what each accelerator column ran on (OPENCL, WEBGPU), or why it is absent
            from ..bench.devices import notes
            print("\n".join(notes(infos)))
        if (busy := bench_machine.busy_warning()) is not None:
            print(busy)
    if args.plot:
        plot(results, args.plot)
        if not args.json:
            print(f"plot written to {args.plot}")
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def _parse_spec(text: str):
    from ..spec import DeviceSpec
    return DeviceSpec.parse(text)


def cmd_compile(args: argparse.Namespace) -> int:
    from ..errors import CompileError, DeviceKitError
    from ..inspect_kernel import KernelLoadError, NoDisassembly, load_kernel, show
    from ..registry import get_registry

    try:
        kernel = load_kernel(args.kernel)
    except KernelLoadError as e:
        print(f"devicekit compile: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        device = args.device or str(get_registry().default_spec())
        pair = int(args.pair) if args.pair is not None and args.pair.lstrip("-").isdigit() else args.pair
        text = show(kernel, device, args.show, pair)
    except CompileError as e:
        print(f"devicekit compile: {device}: {e}", file=sys.stderr)
        return EXIT_FAILED
    except (DeviceKitError, NoDisassembly, KeyError, IndexError, ValueError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"devicekit compile: {msg}", file=sys.stderr)
        return EXIT_FAILED
    print(text.rstrip("\n"))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="devicekit", description="devicekit: devices, plugins and the compile cache")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    pi = sub.add_parser("info", help="plugins, device kinds, compiler pairs, failures and the cache")
    pi.add_argument("--json", action="store_true", help="machine-readable output")
    pi.add_argument("--isolate", action="store_true",
                    help="first import and probe each plugin in a process of its own, naming any that hangs or "
                         "ends its process (those are left out of the rest of the report)")
    pi.add_argument("--timeout", type=float, default=None, metavar="S",
                    help="seconds each plugin may take under --isolate (default 20)")
    pi.set_defaults(func=_cmd_info)
    pd = sub.add_parser("devices", help="every known device id and whether it is available")
    pd.add_argument("--json", action="store_true", help="machine-readable output")
    pd.set_defaults(func=cmd_devices)
    pc = sub.add_parser("cache", help="the disk compile cache")
    pc.add_argument("action", choices=["info", "clear"])
    pc.add_argument("--json", action="store_true", help="machine-readable output")
    pc.set_defaults(func=cmd_cache)
    pb = sub.add_parser("bench", help="time the standard kernels on each available device against numpy")
    pb.add_argument("--device", metavar="X", help="only this device (default: every available one)")
    pb.add_argument("--quick", action="store_true", help="small sizes: a smoke run in seconds")
    pb.add_argument("--plot", metavar="OUT.png", help="also write a bar chart (needs matplotlib)")
    pb.add_argument("--json", action="store_true", help="machine-readable output")
    pb.add_argument("--no-progress-bar", action="store_true", help="plain progress lines even on a terminal")
    pb.add_argument("--no-numba", action="store_true", help="leave out the numba column (saves numba's compiles)")
    pb.set_defaults(func=cmd_bench)
    pk = sub.add_parser("compile", help="show the source, linear IR or assembly of a kernel for a device")
    pk.add_argument("kernel", metavar="FILE.py:KERNEL", help="an ir.Kernel, or a zero-argument function returning one")
    pk.add_argument("--device", metavar="X", help="the device kind (default: the default device); need not run here")
    pk.add_argument("--show", choices=["source", "ir", "asm"], default="source", help="the stage (default source)")
    pk.add_argument("--pair", metavar="NAME", help="a compiler pair by name or index (default: the best)")
    pk.set_defaults(func=cmd_compile)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on usage errors, 0 on --help
        return int(e.code or 0)
    if getattr(args, "timeout", None) is not None and not args.timeout > 0:
        parser.print_usage(sys.stderr)
        print("devicekit: --timeout must be a number of seconds > 0", file=sys.stderr)
        return EXIT_USAGE
    if getattr(args, "isolate", False) and args.timeout is None:
        from .isolate import DEFAULT_TIMEOUT
        args.timeout = DEFAULT_TIMEOUT
    with warnings.catch_warnings():
        # failures are reported in the output itself; don't repeat them as warnings
        from ..errors import SettingError
        from ..registry import PluginWarning
        warnings.simplefilter("ignore", PluginWarning)
        try:
            return args.func(args)
        except SettingError as e:  # a DEVICEKIT_* variable with a bad value: the message names it
            print(f"devicekit: {e}", file=sys.stderr)
            return EXIT_FAILED
        except BrokenPipeError:  # `devicekit compile ... | head`: the reader left, nothing more to say
            sys.stderr.close()
            return EXIT_OK
