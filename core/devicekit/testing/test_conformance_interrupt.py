"""Conformance: Ctrl-C interrupts a kernel that never ends, on every device that runs kernels (issue 30.6).

A child process (devicekit.testing.spin's, the one bench/interrupt_latency.py times) launches an IR kernel of 2^38
multiply-adds (minutes on any device), prints "running", and gets a real SIGINT 1 s later: it must raise
KeyboardInterrupt, with `wait=True` and with `wait=False` then `wait()`, and the process must end on its own. A runtime that waits in native code (clWaitForEvents,
cuEventSynchronize, waitUntilCompleted) holds the signal until the kernel returns; devicekit.interrupt's `call` and
`wait_until` are how a runtime waits instead. Bounded: 60 s after the signal the child is killed and the check fails.
Skipped, with the reason, where a fresh process cannot make the device (a fake) or the device refuses so long a
kernel with a ValueError saying why (WebGPU on llvmpipe's loop limiter).
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading

import pytest

from devicekit.testing import spin

pytestmark = [pytest.mark.devicekit_conformance,
              pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]


# how long the child has, after "running", to say it refuses the launch before the SIGINT is sent: the launch reaches
# the device's wait within milliseconds of "running" (and a refusal is as quick), so 1 s still signals a kernel that
# runs; each second more is a second of a spinning kernel on every core, twice per kit run (2 s until the suite's time
# was cut)
REFUSAL_WAIT_S = 1.0


def _lines(p: subprocess.Popen) -> queue.SimpleQueue:
    """The child's stdout lines as they come (None at the end), read on a thread."""
    q: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:
        for line in p.stdout:
            q.put(line.strip())
        q.put(None)
    threading.Thread(target=read, daemon=True).start()
    return q


@pytest.mark.parametrize("how", spin.HOWS)
def test_ctrl_c_interrupts_a_kernel_that_never_ends(dk_device, how):
    p = spin.start_child(str(dk_device.spec), how)  # the child bench/interrupt_latency.py times, too
    try:
        lines = _lines(p)
        line = lines.get(timeout=300)
        if line and line.startswith("{") and "unavailable" in line:
            pytest.skip(f"{dk_device.spec} cannot be made in a fresh process: {json.loads(line)['unavailable']}")
        assert line == "running", p.stderr.read()[-2000:] if line is None else line
        try:  # a device that refuses so long a launch says so at once: no signal then
            rep = json.loads(lines.get(timeout=REFUSAL_WAIT_S) or "{}")
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
    if "refused" in rep and rep["refused"].startswith(("ValueError", "LaunchError", "DataRangeError")):
        pytest.skip(f"{dk_device.spec} refuses a kernel that long, saying why: {rep['refused'][:300]}")
    assert set(rep) == {"caught"}, f"{dk_device.spec} ({how}): {rep or 'nothing printed after SIGINT'}: {err[-2000:]}"
