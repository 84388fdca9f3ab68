"""The upgrade thread (devicekit_cpu/upgrade.py) across fork: a child forked while its parent's final build was queued
has no upgrade thread; asked for the final build, it makes it itself instead of waiting forever for a thread that is
not there."""

from __future__ import annotations

import os
import threading

import devicekit as dk
import numpy as np
import pytest
from devicekit import kernels
from devicekit.compile.cache import CompileCache
from devicekit.targets import Device
from devicekit_cpu.llvm_compiler import LLVMCompiler
from devicekit_cpu.runtime import TIER_LAUNCHES


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_the_build_was_queued_builds_it_itself(tmp_path):
    cpu = dk.device("CPU")
    comp = LLVMCompiler()
    comp.cache = CompileCache(tmp_path / "cache", disk=False)
    dev = Device("CPU", cpu.allocator, cpu.pair("llvm")[0], comp, cpu.runtime)
    prog = dev.compile(kernels.elementwise("a * b + c * 0.75", name="upgrade_fork"))
    assert prog.tier == "quick"
    gate, started = threading.Event(), threading.Event()
    build = prog._quick.build

    def gated():
        started.set()
        gate.wait(30)
        return build()
    prog._quick.build = gated
    n = 256
    bufs = [dk.Buffer(dev, n, "float32").copyin(np.full(n, x, np.float32)) for x in (2.0, 3.0, 4.0)]
    bufs.append(dk.Buffer(dev, n, "float32"))
    for _ in range(TIER_LAUNCHES):
        prog.execute(bufs, [n], wait=True)
    assert started.wait(30) and prog.tier == "quick"  # the parent's upgrade thread holds it at the gate
    pid = os.fork()
    if pid == 0:  # the child: no upgrade thread; the gate (its own copy) is opened here
        code = 1
        try:
            import signal
            signal.alarm(60)  # a child stuck on a lock its parent's thread held dies, and the test fails
            gate.set()
            prog.upgrade()
            prog.execute(bufs, [n], wait=True)
            ok = prog.tier == "final" and (bufs[3].numpy() == np.float32(2 * 3 + 4 * 0.75)).all()
            code = 0 if ok else 2
        finally:
            os._exit(code)
    gate.set()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    prog.upgrade()
    assert prog.tier == "final"
