"""OpenCL launches on a real platform (PoCL here): sizes checked before enqueueing (issue 30.5: PoCL died with SIGILL
on global_size=(1 << 40,), and ran nothing, silently, for local_size=(0,) or global_size=(-5,)); Ctrl-C interrupts a
kernel that never ends (30.6); the OpenCL spelling global_work_size= counts work-items (33)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

INC = "__kernel void inc(__global int *x) { x[get_global_id(0)] += 1; }"


@pytest.fixture
def inc(cl_device):
    import devicekit as dk
    prog = cl_device.program_from_source(INC, "inc", sizes={"x": 64})
    buf = dk.Buffer(cl_device, 64, "int32").copyin(np.zeros(64, np.int32))
    return prog, buf


@pytest.mark.parametrize("g,lo,limit", [
    ((-5,), None, r"global_size\[0\] = -5 is below 0"),
    ((4,), (0,), r"local_size\[0\] = 0 is below 1"),
    ((4,), (1 << 20,), r"local_size\[0\] = 1048576 exceeds OPENCL .* limit of \d+ work-items on axis 0"),
    ((1,), (64, 64, 64), r"262144 work-items per group; OPENCL .* runs at most \d+"),
    ((2.0,), None, r"global_size\[0\] must be an int, got float"),
    ((1, 1, 1, 1), None, "has 4 axes"),
    ("4", None, r"global_size(\[0\])? must be (a tuple of ints|an int)"),
])
def test_bad_sizes_are_one_error_naming_the_limit(inc, g, lo, limit):
    from devicekit.errors import LaunchError
    prog, buf = inc
    with pytest.raises(LaunchError, match=limit):
        prog.execute([buf], global_size=g, local_size=lo, wait=True)
    assert not buf.numpy().any()  # nothing ran
    prog.execute([buf], global_size=(64,), wait=True)  # the program still works
    assert (buf.numpy() == 1).all()


HUGE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import devicekit as dk
    d = dk.device("OPENCL")
    p = d.program_from_source("__kernel void inc(__global int *x) { x[get_global_id(0)] += 1; }", "inc",
                              sizes={"x": 64})
    b = dk.Buffer(d, 64, "int32").copyin(np.zeros(64, np.int32))
    out = []
    for g, lo in [((1 << 40,), None), ((65536, 65536), (1, 1)), ((1 << 62,), (1024,))]:
        try:
            p.execute([b], global_size=g, local_size=lo, wait=True)
            out.append("ran")
        except Exception as e:
            out.append(f"{type(e).__name__}: {e}")
    print(json.dumps(out))
""")


def test_huge_sizes_are_refused_not_a_crash(cl_device, run_py):
    """2^32 work-groups or more killed the process with SIGILL inside PoCL: in a child process, so a regression fails
    this test instead of the run."""
    r = run_py("-c", HUGE, timeout=120)
    assert r.returncode == 0, f"the launch killed the process (exit {r.returncode}): {r.stderr[-2000:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert all(o.startswith("LaunchError") for o in out), out
    if "Portable Computing Language" in cl_device.allocator.ctx.device.platform.name:
        assert "PoCL's limit" in out[0] and "4294967296 groups" in out[1], out


SPIN = textwrap.dedent("""
    import faulthandler, json, signal, sys, time
    faulthandler.dump_traceback_later(45, exit=True)  # a hang fails the test with every thread's stack, not silence
    # Ctrl-C as a user's Python has it: a parent that ignores SIGINT (a CI job started in the background, an xdist
    # worker) passes SIG_IGN through exec, and Python then installs no KeyboardInterrupt for it
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np
    import devicekit as dk
    from devicekit import interrupt
    d = dk.device("OPENCL")
    p = d.program_from_source("__kernel void spin(__global volatile int *x) { while (x[1] == 0) { x[0]++; } }",
                              "spin", sizes={"x": 4})
    b = dk.Buffer(d, 4, "int32").copyin(np.zeros(4, np.int32))
    ended = dk.Buffer(d, 4, "int32").copyin(np.array([0, 1, 0, 0], np.int32))
    p.execute([ended], global_size=(1,), wait=True)  # built and run once: the launch below starts at once, loaded or not
    print("running", flush=True)
    try:
        if sys.argv[1] == "wait=True":
            p.execute([b], global_size=(1,), wait=True)
        elif sys.argv[1] == "synchronize":
            p.execute([b], global_size=(1,))
            d.synchronize()
        else:
            p.execute([b], global_size=(1,)).wait()
        print(json.dumps({"finished": True}), flush=True)
    except KeyboardInterrupt:
        print(json.dumps({"caught": True, "pending": interrupt.pending()}), flush=True)
""")


@pytest.mark.parametrize("how", ["wait=True", "wait=False+wait()", "synchronize"])
def test_ctrl_c_interrupts_a_kernel_that_never_ends(cl_device, how, child_env):
    """A real SIGINT to a process waiting for a PoCL kernel that never ends gives KeyboardInterrupt (clWaitForEvents
    held it for good), the kernel is counted as still running, and the process ends. Bounded by a 60 s guard."""
    env = child_env
    p = subprocess.Popen([sys.executable, "-c", SPIN, how], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "running", p.stderr.read() if p.poll() is not None else ""
        import time
        time.sleep(1.0)  # well inside the loop (the launch path was built and run once before)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"{how}: Ctrl-C did not interrupt the kernel (the process still runs 60 s later)")
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err[-2000:]
    assert json.loads(out.strip().splitlines()[-1]) == {"caught": True, "pending": 1}


def test_global_work_size_counts_work_items(inc):
    """OpenCL's spelling: global_work_size=(16,) with local_work_size=(4,) is 16 work-items (4 groups); devicekit's
    global_size=(16,) with local_size=(4,) is 16 groups, 64 work-items."""
    prog, buf = inc
    prog.execute([buf], global_work_size=(16,), local_work_size=(4,), wait=True)
    assert buf.numpy().tolist() == [1] * 16 + [0] * 48
    prog(x=buf, global_work_size=8, wait=True)  # by name; a group of one work-item
    assert buf.numpy().tolist() == [2] * 8 + [1] * 8 + [0] * 48
    prog(x=buf, global_size=(16,), local_size=(4,), wait=True)
    assert buf.numpy().tolist() == [3] * 8 + [2] * 8 + [1] * 48


def test_global_work_size_errors(inc):
    from devicekit.errors import LaunchError
    prog, buf = inc
    with pytest.raises(LaunchError, match=r"global_work_size\[0\] = 10 is not a multiple of local_work_size\[0\] = 4: "
                                          "round it up to 12"):
        prog.execute([buf], global_work_size=(10,), local_work_size=(4,))
    with pytest.raises(LaunchError, match="not both"):
        prog(x=buf, global_work_size=(8,), global_size=(8,))
    with pytest.raises(LaunchError, match=r"global_work_size\[0\] = -8 is below 0"):
        prog(x=buf, global_work_size=(-8,))
    assert not buf.numpy().any()


def test_a_param_named_global_work_size_is_a_param(cl_device):
    """A kernel may name a param global_work_size: by name it is the param, not the option."""
    import devicekit as dk
    src = "__kernel void k(__global int *global_work_size) { global_work_size[get_global_id(0)] = 7; }"
    prog = cl_device.program_from_source(src, "k", sizes={"global_work_size": 4})
    buf = dk.Buffer(cl_device, 4, "int32").copyin(np.zeros(4, np.int32))
    prog(global_work_size=buf, global_size=(4,), wait=True)
    assert buf.numpy().tolist() == [7] * 4


# a Ctrl-C that lands while the enqueue itself runs (a driver's lazy build can take seconds on a loaded machine):
# Python raises it at the next Python call after the enqueue returned, before any wait began
DURING_ENQUEUE = SPIN.replace('print("running", flush=True)\n', """\
import signal
import pyopencl as cl
real = cl.enqueue_nd_range_kernel
def enqueue_then_ctrl_c(*a, **k):
    ev = real(*a, **k)
    signal.raise_signal(signal.SIGINT)
    return ev
cl.enqueue_nd_range_kernel = enqueue_then_ctrl_c
print("running", flush=True)
""")


@pytest.mark.parametrize("how", ["wait=True", "wait=False+wait()"])
def test_ctrl_c_during_the_enqueue_counts_the_running_kernel(cl_device, how, child_env):
    """The kernel was enqueued when the KeyboardInterrupt came: it is counted as running (pending 1) and the process
    ends; uncounted, it was waited for at exit, forever (the CI run that hung 60 s in the test above, under load)."""
    assert "print(\"running\"" in DURING_ENQUEUE and "enqueue_then_ctrl_c" in DURING_ENQUEUE
    env = child_env
    try:
        r = subprocess.run([sys.executable, "-c", DURING_ENQUEUE, how], capture_output=True, text=True, env=env,
                           timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{how}: the process still runs 60 s after a Ctrl-C during the enqueue")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"caught": True, "pending": 1}
