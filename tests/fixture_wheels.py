"""Wheels of the test fixture distributions, built once per content and shared by pytest-xdist workers: the build
runs on a copy of the sources in a temp dir (no build/ or .egg-info left in the source tree), offline (no build
isolation: the test venv's setuptools), under a file lock, and lands in the cache by an atomic rename."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

_SKIP = shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "dist")


def content_hash(dirs: list[Path], root: Path) -> str:
    """A hash of every source file of `dirs` (paths relative to `root`), build leftovers excluded."""
    h = hashlib.sha256()
    for d in dirs:
        for f in sorted(d.rglob("*")):
            rel = f.relative_to(root)
            if f.is_file() and not any(p in ("__pycache__", "build", "dist") or p.endswith(".egg-info")
                                       for p in rel.parts):
                h.update(str(rel).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # another worker building the same wheels waits here, then finds them
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build_wheels(dirs: list[Path], root: Path, cache: Path, scratch: Path) -> Path:
    """The directory holding one wheel per distribution of `dirs`: `cache/<content hash>`, built when missing."""
    cache.mkdir(parents=True, exist_ok=True)
    key = content_hash(dirs, root)
    dest = cache / key
    if list(dest.glob("*.whl")):
        return dest
    with _locked(cache / f"{key}.lock"):
        if list(dest.glob("*.whl")):
            return dest
        src = scratch / "src"
        for d in dirs:
            shutil.copytree(d, src / d.relative_to(root), ignore=_SKIP)
        out = scratch / "wheels"
        p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "--no-index", "-w", str(out), *(str(src / d.relative_to(root)) for d in dirs)],
                           capture_output=True, text=True, timeout=300, check=False, cwd=scratch)
        assert p.returncode == 0, f"building fixture wheels failed:\n{p.stdout}\n{p.stderr}"
        shutil.rmtree(dest, ignore_errors=True)  # a dir without wheels: an earlier build that did not finish
        tmp = cache / f"{key}.tmp{os.getpid()}"
        shutil.move(str(out), str(tmp))
        os.replace(tmp, dest)
    return dest


def run_dir(tmp_path_factory) -> Path:
    """The base temp dir of this pytest run, shared by its xdist workers (each worker's own is a folder in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def worker_dir(root: Path) -> Path:
    """This worker's own folder in a venv the workers share: its side-effect markers, compile cache and cwd."""
    own = root / f"worker-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    own.mkdir(exist_ok=True)
    return own


def layered_venv(tmp_path_factory, wheel_cache: Path | None, dirs: list[Path], root: Path, name: str) -> Path:
    """A venv layered on the test venv (devicekit importable) with the wheels of `dirs` installed --no-deps: built
    once per test run under a file lock and shared by the xdist workers (each built its own: 8-10 s each on a
    loaded 2-core machine). The wheels go to `wheel_cache` (pytest's cache), else next to the venv."""
    shared = run_dir(tmp_path_factory)
    venv = shared / name
    with _locked(shared / f"{name}.lock"):
        if (venv / ".complete").exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)  # a venv without the mark: a build that did not finish
        wheels = build_wheels(dirs, root, wheel_cache or shared / f"{name}-wheels", tmp_path_factory.mktemp(f"{name}-build"))
        subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip",
                        "--system-site-packages", str(venv)], check=True, timeout=120)
        # --system-site-packages reaches the base interpreter, not the test venv: layer the test venv's site-packages
        # (and its .pth files: the editable devicekit) under the new one
        purelib = subprocess.run([str(venv / "bin" / "python"), "-c",
                                  "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        Path(purelib, "_devicekit_test_parent.pth").write_text(
            f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--prefix",
                            str(venv), *map(str, sorted(wheels.glob("*.whl")))], capture_output=True, check=False,
                           text=True, timeout=300)
        assert p.returncode == 0, f"installing the wheels of {name} failed:\n{p.stdout}\n{p.stderr}"
        (venv / ".complete").touch()
    return venv
