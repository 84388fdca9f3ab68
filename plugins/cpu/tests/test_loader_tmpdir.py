"""The loader writes each shared object in a dir under devicekit's one temp root (compile.subproc.temp_root), like
the compilers (issue 35): the dir is gone once the kernel is loaded, and one a crashed process left there is swept
by the next load, so nothing stays in the system temp dir."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.compile import subproc
from devicekit.ir import dtypes

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads Linux's /proc/self/maps")


def _kernel(name: str) -> ir.Kernel:
    k = ir.KernelBuilder(name)
    n = k.var("n", 1, 1 << 20)
    x, o = k.param("x", dtypes.float32, n), k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    o[i] = x[i] + 1.0
    return k.build()


def _mapped_from(root: str) -> set[str]:
    """Paths of files mapped into this process from under `root` (a removed file shows as "PATH (deleted)")."""
    with open("/proc/self/maps") as f:
        return {line.split(None, 5)[5].strip().removesuffix(" (deleted)") for line in f
                if len(line.split(None, 5)) == 6 and root in line}


def test_a_loaded_shared_object_was_written_under_the_temp_root_and_its_dir_is_gone(cpu, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # a private system temp dir: other processes use theirs
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(tmp_path / "cache"))
    root = subproc.temp_root()
    assert root == str(tmp_path / f"devicekit-{os.getuid()}")
    ns = subproc._pidns()
    dead = subprocess.Popen(["/bin/true"])
    dead.wait()
    crashed = os.path.join(root, f"devicekit_so_{ns}-{dead.pid}-deadbeef")  # what a load killed mid-way leaves
    os.makedirs(crashed)
    with open(os.path.join(crashed, f"k{dead.pid}_1.so"), "wb") as f:
        f.write(b"\x7fELF")
    prog = cpu.compile(_kernel(f"loader_root_{time.time_ns()}"), pair="c")
    np.testing.assert_array_equal(dk.run(prog, x=np.arange(4, dtype=np.float32), n=4)["out"], [1, 2, 3, 4])
    (so,) = {p for p in _mapped_from(str(tmp_path)) if os.path.basename(p).startswith(f"k{os.getpid()}_")}
    d = os.path.dirname(so)
    assert os.path.dirname(d) == root, f"the loader wrote {so} outside devicekit's temp root {root}"
    assert os.path.basename(d).startswith(f"devicekit_so_{ns}-{os.getpid()}-")
    assert not os.path.exists(d), "the loader's dir outlived the load"
    assert not os.path.exists(crashed), "a dead process's loader dir was not swept"
    assert set(os.listdir(tmp_path)) <= {os.path.basename(root), "cache"}  # nothing of the loader's beside the root
    assert os.listdir(root) == []
