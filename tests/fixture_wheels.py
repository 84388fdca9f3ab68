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
