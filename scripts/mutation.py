"""Mutation testing (mutmut) of the code whose job is to check or compare (issue 38): each target module is mutated
in a scratch copy of the repository (src/devicekit: mutmut imports the mutants from mutants/src) and the tests that
guard it run against every mutant. Prints killed / survived per module and the survivors' names.

    .venv/bin/python scripts/mutation.py --sample          # the fixed CI sample (the comparator), < 60 s
    .venv/bin/python scripts/mutation.py [module ...]      # full runs (DEVICEKIT_SLOW=1 in the suite runs them all)
    .venv/bin/python scripts/mutation.py --show NAME       # a surviving mutant's diff

Modules and their guards are TARGETS below; a new check module comes with its entry.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTMUT = [sys.executable, "-m", "mutmut"]

# module (under core/devicekit) -> the tests that guard it
TARGETS = {
    "testing/random_kernels.py": ["tests/test_comparator.py"],
    "ir/accept.py": ["tests/test_accept.py", "tests/test_entry_point_errors.py", "tests/ir/test_builder.py",
                     "tests/test_short_messages.py"],
    "ir/verify.py": ["tests/ir/test_verify_mutants.py", "tests/ir/test_verifier.py", "tests/ir/test_builder.py",
                     "tests/reliability/test_memory_order.py"],
    "signature.py": ["tests/test_signature_checks.py", "tests/test_runtime.py", "tests/test_memory.py"],
    "compile/cache.py": ["tests/test_cache.py", "tests/test_cache_entry.py"],
}
# a module whose checking part is some of its functions: only their mutants (issue 38: "the compile-cache key and MAC";
# the cache's directory handling is guarded by tests/test_cache.py and docs/reliability.md's threat rows)
SCOPE = {
    "compile/cache.py": ["devicekit.compile.cache.xǁCacheKeyǁ*", "devicekit.compile.cache.x__mac__mutmut_*",
                         "devicekit.compile.cache.x_encode_entry__mutmut_*",
                         "devicekit.compile.cache.x_decode_entry__mutmut_*"],
}
# the CI sample: the comparator's mutants (a fixed set: every mutant of assert_matches, the mask it is built on and
# tolerance)
SAMPLE = ("testing/random_kernels.py", ["devicekit.testing.random_kernels.x_assert_matches__mutmut_*",
                                        "devicekit.testing.random_kernels.x__mismatches__mutmut_*",
                                        "devicekit.testing.random_kernels.x__as_f64__mutmut_*",
                                        "devicekit.testing.random_kernels.x_tolerance__mutmut_*"])

PYPROJECT = """[tool.mutmut]
source_paths = ["src/devicekit"]
only_mutate = ["src/devicekit/{module}"]
pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "--import-mode=importlib", "-p", "no:xdist"]
pytest_add_cli_args_test_selection = {tests}
also_copy = ["conftest.py", "tests"]
use_git_change_detection = false
track_dependencies = false
timeout_multiplier = {multiplier}
timeout_constant = {constant}
# each mutant runs in a fork of a server that only collected the tests: a fork of a process that ran them (mutmut's
# default, "fork") holds no OpenCL driver threads (PoCL's), and its first OpenCL launch waits for them forever
process_isolation = "forkserver"

[tool.pytest.ini_options]
markers = ["slow: long-running test", "gpu: needs a GPU device", "macos: needs macOS"]
"""


# The per-mutant wall-clock limit: a mutant's tests are stopped after MUTANT_WALL_FACTOR x the clean run's time of the
# slowest mutant's tests + MUTANT_WALL_S seconds (SIGXCPU, which mutmut records as "timeout"). A stopped mutant counts
# as killed, as mutmut and every mutation tool count it: a mutant that makes the tests hang is one a test run notices.
# The harness enforces it itself (Watchdog): mutmut 3.8's own wall timer did not fire for mutants whose test process
# waited on a lock with no CPU used (its CPU limit cannot fire then), and each held the run unbounded (7+ minutes).
MUTANT_WALL_FACTOR = 2.0
MUTANT_WALL_S = 60.0


class Watchdog:
    """Stops mutmut's per-mutant test processes that run past the limit. With process_isolation = "forkserver" they
    are the grandchildren of `mutmut run` that run mutmut's own code (forks of its fork server; a compiler a test
    starts has another command line). Reads /proc (Linux); elsewhere mutmut's own timers are the only limit."""

    def __init__(self, parent: int, work: Path, wall_s: float, factor: float = MUTANT_WALL_FACTOR):
        self.parent, self.work, self.wall_s, self.factor = parent, work, wall_s, factor
        self.seen: dict[int, float] = {}  # pid -> first seen
        self.stopped: set[int] = set()
        self.limit: float | None = None  # known once mutmut's clean-run stats are written

    def _limit(self) -> float | None:
        try:
            stats = json.loads((self.work / "mutants" / "mutmut-stats.json").read_text())
        except (OSError, ValueError):
            return None  # still measuring: the stats run is a child of mutmut, never stopped
        durations = stats.get("duration_by_test", {})
        slowest = max((sum(durations.get(t, 0.0) for t in tests)
                       for tests in stats.get("tests_by_mangled_function_name", {}).values()), default=0.0)
        return self.factor * slowest + self.wall_s

    @staticmethod
    def _procs() -> dict[int, tuple[int, bytes]]:
        out = {}
        for d in Path("/proc").glob("[0-9]*"):
            try:
                stat = (d / "stat").read_text()
                out[int(d.name)] = (int(stat[stat.rindex(")") + 2:].split()[1]), (d / "cmdline").read_bytes())
            except (OSError, ValueError, IndexError):
                continue
        return out

    def workers(self) -> list[int]:
        """mutmut's per-mutant processes: grandchildren of `mutmut run` running mutmut (not a compiler's exec)."""
        procs = self._procs()
        return [pid for pid, (ppid, cmd) in procs.items()
                if procs.get(ppid, (0, b""))[0] == self.parent and b"mutmut" in cmd]

    def poll(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self.limit is None and (limit := self._limit()) is not None:
            self.limit = limit
        if self.limit is None:
            return
        self.seen = {pid: self.seen.get(pid, now) for pid in self.workers()}
        for pid, t0 in self.seen.items():
            if now - t0 > self.limit and pid not in self.stopped:
                try:
                    os.kill(pid, signal.SIGXCPU)
                    self.stopped.add(pid)
                except ProcessLookupError:
                    pass


def workdir(module: str, wall_s: float = MUTANT_WALL_S) -> Path:
    """A scratch copy: src/devicekit (the package), tests/, conftest.py and a pyproject.toml naming the target."""
    work = Path(tempfile.mkdtemp(prefix="devicekit-mutation-"))
    shutil.copytree(ROOT / "core" / "devicekit", work / "src" / "devicekit",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy2(ROOT / "conftest.py", work / "conftest.py")
    tests = "[" + ", ".join(f'"{t}"' for t in TARGETS[module]) + "]"
    # mutmut's wall limit is (clean time + constant) x multiplier
    (work / "pyproject.toml").write_text(PYPROJECT.format(module=module, tests=tests, multiplier=MUTANT_WALL_FACTOR,
                                                          constant=wall_s / MUTANT_WALL_FACTOR))
    return work


def run(module: str, names: list[str] | None = None, jobs: int = 2, keep: bool = False,
        wall_s: float = MUTANT_WALL_S) -> dict[str, list[str]]:
    work = workdir(module, wall_s)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    env["DEVICEKIT_CACHE_DIR"] = str(work / "dk-cache")
    try:
        with open(work / "mutmut-run.log", "w+") as log:
            p = subprocess.Popen([*MUTMUT, "run", "--max-children", str(jobs), *(names or [])], cwd=work, env=env,
                                 stdout=log, stderr=subprocess.STDOUT, text=True)
            dog = Watchdog(p.pid, work, wall_s)
            while p.poll() is None:
                dog.poll()
                time.sleep(1.0)
            log.seek(0)
            text = log.read()
        if p.returncode != 0:
            raise RuntimeError(f"mutmut run failed for {module} (exit {p.returncode}):\n{text[-6000:]}")
        if dog.stopped:
            print(f"{module}: {len(dog.stopped)} mutant(s) stopped at the per-mutant wall-clock limit ({dog.limit:.0f} s; "
                  "counted killed: timeout)", file=sys.stderr)
        r = subprocess.run([*MUTMUT, "results", "--all", "true"], cwd=work, env=env, capture_output=True, text=True,
                           check=False)
        out: dict[str, list[str]] = {}
        for line in r.stdout.splitlines():
            m = re.match(r"\s*(\S+__mutmut_\d+): (.+)$", line)
            if m and (not names or any(Path(m.group(1)).match(n) or re.fullmatch(n.replace("*", ".*"), m.group(1))
                                       for n in names)):
                out.setdefault(m.group(2).strip(), []).append(m.group(1))
        return out
    finally:
        if keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def score(results: dict[str, list[str]]) -> tuple[int, int, float]:
    killed = sum(len(v) for k, v in results.items() if k in ("killed", "timeout", "segfault"))
    total = sum(len(v) for k, v in results.items() if k not in ("skipped", "not checked"))
    return killed, total, (100.0 * killed / total if total else 100.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help=f"modules under core/devicekit (default: all of {sorted(TARGETS)})")
    ap.add_argument("--sample", action="store_true", help="the fixed CI sample only")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the scratch copy (to inspect mutants)")
    ap.add_argument("--mutants", nargs="+", metavar="NAME",
                    help="only these mutants (full names or globs: devicekit.ir.verify.x__check_races__mutmut_*)")
    ap.add_argument("--min-score", type=float, default=0.0, help="exit 1 below this percentage killed")
    ap.add_argument("--mutant-wall-s", type=float, default=MUTANT_WALL_S,
                    help=f"a mutant's tests are stopped (counted killed: timeout) after {MUTANT_WALL_FACTOR:g} x their "
                         "clean time + this many seconds")
    args = ap.parse_args(argv)
    plan = [(SAMPLE[0], SAMPLE[1])] if args.sample else [(m, args.mutants or SCOPE.get(m))
                                                         for m in (args.modules or TARGETS)]
    worst = 100.0
    for module, names in plan:
        res = run(module, names, args.jobs, args.keep, args.mutant_wall_s)
        killed, total, pct = score(res)
        worst = min(worst, pct)
        scope = "  [sample]" if args.sample else "" if not names else f"  [{len(names)} mutants named]" \
            if len(names) > 8 else "  [scope: " + ", ".join(n.rsplit(".", 1)[-1] for n in names) + "]"
        print(f"{module}: {killed}/{total} killed ({pct:.1f}%)" + scope)
        for status, ms in sorted(res.items()):
            if status not in ("killed",):
                for m in ms:
                    print(f"  {status}: {m}")
    return 0 if worst >= args.min_score else 1


if __name__ == "__main__":
    sys.exit(main())
