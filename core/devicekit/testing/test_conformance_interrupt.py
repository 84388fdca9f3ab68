"""Conformance: Ctrl-C interrupts a kernel that never ends, on every device that runs kernels (issue 30.6).

A child process launches an IR kernel of 2^38 multiply-adds (minutes on any device), prints "running", and gets a
real SIGINT 2 s later: it must raise KeyboardInterrupt, with `wait=True` and with `wait=False` then
`wait()`, and the process must end on its own. A runtime that waits in native code (clWaitForEvents,
cuEventSynchronize, waitUntilCompleted) holds the signal until the kernel returns; devicekit.interrupt's `call` and
`wait_until` are how a runtime waits instead. Bounded: 60 s after the signal the child is killed and the check fails.
Skipped, with the reason, where a fresh process cannot make the device (a fake) or the device refuses so long a
kernel with a ValueError saying why (WebGPU on llvmpipe's loop limiter).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

pytestmark = [pytest.mark.devicekit_conformance,
              pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]

SPIN = textwrap.dedent("""
    import json, sys
    import numpy as np
    import devicekit as dk
    from devicekit.testing.spin import long_kernel
    try:
        dev = dk.device(sys.argv[1])
    except dk.DeviceKitError as e:  # a device made in-process only (a fake), or one gone since
        print(json.dumps({"unavailable": str(e)}), flush=True)
        sys.exit(0)
    prog = dev.compile(long_kernel("dk_conf_long"))
    bufs = [dk.Buffer(dev, 256, "float32").copyin(np.ones(256, np.float32)), dk.Buffer(dev, 256, "float32")]
    prog.execute(bufs, [256, 1], wait=True)  # loaded and run once: the signal comes during the long launch only
    print("running", flush=True)
    try:
        if sys.argv[2] == "wait=True":
            prog.execute(bufs, [256, 1 << 30], wait=True)
        else:
            prog.execute(bufs, [256, 1 << 30]).wait()
        print(json.dumps({"finished": True}), flush=True)
    except KeyboardInterrupt:
        print(json.dumps({"caught": True}), flush=True)
    except Exception as e:  # a device that refuses so long a kernel, saying why (WebGPU on llvmpipe)
        print(json.dumps({"refused": f"{type(e).__name__}: {e}"}), flush=True)
""")


def _lines(p: subprocess.Popen) -> queue.SimpleQueue:
    """The child's stdout lines as they come (None at the end), read on a thread."""
    q: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:
        for line in p.stdout:
            q.put(line.strip())
        q.put(None)
    threading.Thread(target=read, daemon=True).start()
    return q


@pytest.mark.parametrize("how", ["wait=True", "wait=False+wait()"])
def test_ctrl_c_interrupts_a_kernel_that_never_ends(dk_device, how):
    p = subprocess.Popen([sys.executable, "-c", SPIN, str(dk_device.spec), how], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        lines = _lines(p)
        line = lines.get(timeout=300)
        if line and line.startswith("{") and "unavailable" in line:
            pytest.skip(f"{dk_device.spec} cannot be made in a fresh process: {json.loads(line)['unavailable']}")
        assert line == "running", p.stderr.read()[-2000:] if line is None else line
        try:  # a device that refuses so long a launch says so at once: no signal then
            rep = json.loads(lines.get(timeout=2) or "{}")
        except queue.Empty:
            p.send_signal(signal.SIGINT)  # the kernel runs
            rep = json.loads(lines.get(timeout=60) or "{}")
        p.wait(timeout=60)
    except (subprocess.TimeoutExpired, queue.Empty):
        pytest.fail(f"{dk_device.spec} ({how}): Ctrl-C did not interrupt the kernel (the process still runs 60 s "
                    "after SIGINT)")
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    err = p.stderr.read()
    assert p.returncode == 0, err[-2000:]
    if "refused" in rep and rep["refused"].startswith(("ValueError", "LaunchError")):
        pytest.skip(f"{dk_device.spec} refuses a kernel that long, saying why: {rep['refused'][:300]}")
    assert rep == {"caught": True}, f"{dk_device.spec} ({how}): {rep or 'nothing printed after SIGINT'}: {err[-2000:]}"
