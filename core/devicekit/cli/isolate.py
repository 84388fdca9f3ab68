"""`devicekit info --isolate`: every installed plugin imported and probed in a process of its own, with a time limit.

In-process loading cannot stop a plugin whose import hangs (Python cannot interrupt an import) or that ends the
process (`os._exit`, a signal, a crash in native code): the first `dk.devices()` of every program hangs or dies with
it. Here each entry point runs in `python -m devicekit.cli.isolate NAME`, which loads only that plugin, asks for its
kinds, probes them and lists their pairs, printing a progress line before each step (so a parent that has to kill it
knows where it stopped) and one JSON result at the end. The parent runs a few at a time, kills a child (its whole
process group) that outlives the timeout, and names the plugin that hung, exited (with the exit code) or was killed
(with the signal). Reads the environment it passes on to the children (DEVICEKIT_DISABLE_PLUGINS is honoured: a
disabled plugin is not run).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["DEFAULT_TIMEOUT", "check_plugins", "main", "run_one", "text_lines"]

DEFAULT_TIMEOUT = 20.0
PHASE = "@devicekit-isolate-phase "
RESULT = "@devicekit-isolate-result "
FATAL = ("hung", "exited", "killed")  # outcomes that would take a program using devicekit down with them


# ---------------------------------------------------------------- the child: one plugin


_OUT: int | None = None  # a copy of fd 1 taken before the plugin loads: it may replace or close sys.stdout


def _say(line: str) -> None:
    data = ("\n" + line + "\n").encode()  # a leading newline: the plugin may have left a line unfinished
    fd = _OUT if _OUT is not None else 1
    while data:
        data = data[os.write(fd, data):]


def child(name: str) -> int:
    """Load entry point `name` alone, then its kinds, probes and pairs; print progress and one JSON result."""
    import warnings

    global _OUT
    _OUT = os.dup(1)
    warnings.simplefilter("ignore")  # failures are in the result
    from .. import settings
    from ..registry import Registry
    from ..registry.probing import user_probe_timeout
    from ..spec import DeviceSpec

    _say(PHASE + "import")
    # the core's own settings with their defaults where bad (the parent reports those): what fails here is the plugin
    reg = Registry(only=name, strict=False, disabled=set(), trace=settings.get_or_default("DEVICEKIT_TRACE_PLUGINS"),
                   probe_timeout_s=user_probe_timeout(lenient=True))
    reg.plugins()
    _say(PHASE + "hook devicekit_device_kinds")
    kinds: dict[str, Any] = {}
    for kind, e in sorted(reg.kind_table().items()):
        _say(PHASE + f"probe of {kind}")
        a = reg.availability(e)
        kinds[kind] = {"available": a.ok, "reason": a.reason, "count": e.count if a.ok else 0,
                       "priority": e.priority}
        _say(PHASE + f"hook devicekit_compiler_pairs for {kind}")
        kinds[kind]["pairs"] = reg.pair_names(DeviceSpec(kind))
    recs = [r.to_dict() for r in reg.plugins() if r.name == name or r.name.startswith(name + "@")]
    _say(RESULT + json.dumps({"plugin": recs[0] if recs else None, "kinds": kinds}, default=str))
    _say(PHASE + "exit")
    return 0


# ---------------------------------------------------------------- the parent: all plugins


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def run_one(name: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Run the child for entry point `name`; what happened, in a dict (see check_plugins)."""
    import time

    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "devicekit.cli.isolate", name], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, errors="replace",
                         start_new_session=True)
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the child and anything it started
        except (ProcessLookupError, PermissionError):
            p.kill()
        out, err = p.communicate()
    seconds = time.perf_counter() - t0
    phase, result = None, None
    for line in out.splitlines():
        if (i := line.find(PHASE)) >= 0:
            phase = line[i + len(PHASE):]
        elif (i := line.find(RESULT)) >= 0:
            try:
                result = json.loads(line[i + len(RESULT):])
            except ValueError:
                result = None
    row: dict[str, Any] = {"name": name, "seconds": round(seconds, 3), "returncode": p.returncode, "phase": phase,
                           "stderr_tail": "\n".join(err.strip().splitlines()[-5:])}
    if result is not None and result.get("plugin"):
        rec = result["plugin"]
        row.update(outcome=rec["status"] if rec["status"] != "pending" else "failed", plugin=rec,
                   kinds=result["kinds"], distribution=rec["distribution"], version=rec["version"])
        if timed_out:
            row["note"] = (f"reported, then did not exit within {timeout:g}s (a non-daemon thread or an atexit "
                           "handler of the plugin keeps the process alive)")
        elif p.returncode != 0:
            row["note"] = f"reported, then exited with {_describe_rc(p.returncode)}"
        return row
    where = f"during {phase}" if phase and phase != "exit" else "before it started loading" if not phase else \
        "while exiting"
    if timed_out:
        row.update(outcome="hung", detail=f"did not finish {where} within {timeout:g}s; killed")
    elif p.returncode is not None and p.returncode < 0:
        row.update(outcome="killed", signal=_signal_name(-p.returncode),
                   detail=f"the process was killed by {_signal_name(-p.returncode)} {where}")
    else:
        row.update(outcome="exited", detail=f"the process exited with code {p.returncode} {where}, without a word "
                                            "to devicekit (os._exit or a native exit)")
    return row


def _describe_rc(rc: int) -> str:
    return f"signal {_signal_name(-rc)}" if rc < 0 else f"code {rc}"


def check_plugins(timeout: float = DEFAULT_TIMEOUT, jobs: int | None = None) -> list[dict[str, Any]]:
    """One row per installed entry point, in name order: name, outcome (loaded | failed | blocked | hung | exited |
    killed), phase reached, seconds, and the plugin's record and kinds when the child reported."""
    from ..registry.loading import disabled_from_env, entry_points, ep_distribution

    disabled = {d.lower() for d in disabled_from_env()}
    eps, seen = [], set()
    for ep in entry_points():
        if ep.name not in seen:
            seen.add(ep.name)
            eps.append(ep)
    rows: dict[str, dict[str, Any]] = {}
    todo = []
    for ep in eps:
        dname, dver = ep_distribution(ep)
        if ep.name.lower() in disabled:
            rows[ep.name] = {"name": ep.name, "outcome": "blocked", "distribution": dname, "version": dver,
                             "detail": "disabled by DEVICEKIT_DISABLE_PLUGINS; not run"}
        else:
            todo.append((ep.name, dname, dver))
    workers = max(1, jobs or min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        for (name, dname, dver), row in zip(todo, pool.map(lambda t: run_one(t[0], timeout), todo)):
            row.setdefault("distribution", dname)
            row.setdefault("version", dver)
            rows[name] = row
    return [rows[ep.name] for ep in eps]


def text_lines(rows: list[dict[str, Any]], timeout: float) -> list[str]:
    out = [f"plugins, each imported and probed in a process of its own (timeout {timeout:g}s):"]
    for r in rows:
        dist = f"{r['distribution']} {r.get('version') or ''}".strip() if r.get("distribution") else "-"
        head = f"  {r['name']:<12} {r['outcome'].upper() if r['outcome'] in FATAL else r['outcome']:<8} {dist:<28}"
        if r["outcome"] in FATAL:
            out.append(f"{head} {r['detail']}")
            if r.get("stderr_tail"):
                out.extend(f"      stderr: {line}" for line in r["stderr_tail"].splitlines())
            continue
        if r["outcome"] == "blocked":
            out.append(f"{head} {r['detail']}")
            continue
        kinds = ", ".join(f"{k} ({'available' if v['available'] else 'unavailable: ' + v['reason']})"
                          for k, v in r.get("kinds", {}).items()) or "-"
        out.append(f"{head} {r['seconds'] * 1e3:.0f} ms  kinds: {kinds}")
        for f in r.get("plugin", {}).get("failures", []):
            out.append(f"      FAILED at {f['phase']}: {f['exception']}: {f['message']}")
        if r.get("note"):
            out.append(f"      note: {r['note']}")
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m devicekit.cli.isolate ENTRY_POINT_NAME (run by `devicekit info --isolate`)",
              file=sys.stderr)
        return 2
    return child(argv[0])


if __name__ == "__main__":
    sys.exit(main())
