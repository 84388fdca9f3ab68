"""Ctrl-C while a kernel runs on the CPU device: a real SIGINT to a subprocess returns control (KeyboardInterrupt)
while the kernel still runs, for an infinite loop in hand-written C and for a long IR kernel; the kernel goes on in
the background and its buffers stay alive until it returns. Every subprocess is bounded by a timeout (a hang guard,
not a speed target: the latency is measured by bench/interrupt_latency.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

LONG_KERNELS = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import devicekit as dk
    from devicekit import interrupt
    from devicekit.testing.spin import long_kernel
    cpu = dk.device("CPU")
    what = sys.argv[1]
    if what == "infinite loop in C":
        prog = cpu.program_from_source("void spin(int *out) { volatile int x = 0; for (;;) { x++; } out[0] = x; }",
                                       "spin")
        bufs, vals = [dk.Buffer(cpu, 1, "int32")], []
    else:  # an IR kernel of 2**38 multiply-adds: minutes
        prog = cpu.compile(long_kernel("long_ir"))
        bufs, vals = [dk.Buffer(cpu, 256, "float32").copyin(np.ones(256, np.float32)),
                      dk.Buffer(cpu, 256, "float32")], [256, 1 << 30]
    print("running", flush=True)
    try:
        prog.execute(bufs, vals, wait=True)
        print(json.dumps({"finished": True}), flush=True)
    except KeyboardInterrupt:
        print(json.dumps({"caught": time.monotonic(), "pending": interrupt.pending()}), flush=True)
""")


@pytest.mark.parametrize("what", ["infinite loop in C", "long IR kernel"])
def test_ctrl_c_returns_while_a_kernel_runs(what):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    p = subprocess.Popen([sys.executable, "-c", LONG_KERNELS, what], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "running", p.stderr.read() if p.poll() is not None else ""
        time.sleep(0.3)  # the kernel is well inside its loop
        sent = time.monotonic()  # CLOCK_MONOTONIC: one clock for both processes
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)  # the process also ends: the abandoned kernel does not keep it alive
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"{what}: Ctrl-C did not return control (the process still runs 20 s later)")
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err[-2000:]
    rep = json.loads(out.strip().splitlines()[-1])
    assert "caught" in rep, f"{what}: the kernel finished instead of being interrupted: {rep}"
    latency = rep["caught"] - sent
    print(f"{what}: KeyboardInterrupt {latency * 1e3:.2f} ms after SIGINT")  # figures: bench/interrupt_latency.py
    assert latency < 10, f"{what}: KeyboardInterrupt came {latency:.1f} s after SIGINT: it waited for something"
    assert rep["pending"] == 1  # the kernel goes on in the background: the interrupt did not wait for it


KEEPALIVE = textwrap.dedent("""
    import gc, json, os, signal, threading
    import numpy as np
    import devicekit as dk
    from devicekit import interrupt
    cpu = dk.device("CPU")
    src = '''
    void waiter(int out[1024], int scratch[1024], volatile int go[16]) {
        while (!go[0]) { }
        for (int j = 0; j < 1024; j++) { out[j] = 42; scratch[j] = 42; }
    }'''
    prog = cpu.program_from_source(src, "waiter")
    out, scratch, go = (dk.Buffer(cpu, n, "int32") for n in (1024, 1024, 16))
    for b in (out, scratch, go):
        b.copyin(np.zeros(b.size, np.int32))
    probe = dk.Buffer(cpu, 1024, "int32").allocate()  # control: a freed buffer's memory goes to the next one
    probe_ptr = probe.handle.ptr
    del probe
    gc.collect()
    reused = dk.Buffer(cpu, 1024, "int32").allocate()
    lru_reuses = reused.handle.ptr == probe_ptr
    del reused
    gc.collect()
    scratch_ptr = scratch.handle.ptr
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()  # a real SIGINT, while the kernel waits
    try:
        prog.execute([out, scratch, go], wait=True)
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    still_running = interrupt.pending()
    del scratch  # the caller lets go of a buffer the kernel is about to write
    gc.collect()
    new = dk.Buffer(cpu, 1024, "int32").copyin(np.full(1024, 7, np.int32))
    got_scratch_memory = new.handle.ptr == scratch_ptr
    go.copyin(np.ones(16, np.int32))  # let the kernel finish
    done = interrupt.wait_pending(30)
    print(json.dumps({"interrupted": interrupted, "still_running": still_running, "lru_reuses": lru_reuses,
                      "got_scratch_memory": got_scratch_memory, "done": done,
                      "new_intact": bool((new.numpy() == 7).all()), "out": int(out.numpy()[0])}))
""")


def test_interrupted_kernel_keeps_its_buffers_alive_until_it_returns(isolated):
    try:
        rc, out = isolated.run(KEEPALIVE, timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("the interrupted kernel or its wait hung")
    assert rc == 0, out[-2000:]
    rep = json.loads(out.strip().splitlines()[-1])
    assert rep["interrupted"] and rep["still_running"] == 1
    assert rep["lru_reuses"]  # without the keepalive the freed scratch memory would be handed out again...
    assert not rep["got_scratch_memory"]  # ...but it is still the kernel's
    assert rep["done"] and rep["new_intact"] and rep["out"] == 42  # the kernel finished, in the background


def test_short_launches_stay_on_the_calling_thread(isolated):
    """Only launches that may run long pay the handoff: 1000 small launches start no launcher thread."""
    code = textwrap.dedent("""
        import json, threading
        import numpy as np
        import devicekit as dk
        from devicekit import kernels
        cpu = dk.device("CPU")
        p = cpu.compile(kernels.elementwise("a * b + c"))
        bufs = [dk.Buffer(cpu, 64, "float32").copyin(np.ones(64, np.float32)) for _ in range(4)]
        for _ in range(1000):
            p.execute(bufs, [64])
        small = sum(t.name == "devicekit-launcher" for t in threading.enumerate())
        big = [dk.Buffer(cpu, 1 << 23, "float32").copyin(np.ones(1 << 23, np.float32)) for _ in range(4)]
        p.execute(big, [1 << 23], wait=True)
        launched = sum(t.name == "devicekit-launcher" for t in threading.enumerate())
        print(json.dumps({"small": small, "big": launched, "ok": bool((big[3].numpy() == 2).all()),
                          "may_long": [p.may_run_long([64]), p.may_run_long([1 << 23])]}))
    """)
    rc, out = isolated.run(code, timeout=120)
    assert rc == 0, out[-2000:]
    rep = json.loads(out.strip().splitlines()[-1])
    assert rep == {"small": 0, "big": 1, "ok": True, "may_long": [False, True]}
