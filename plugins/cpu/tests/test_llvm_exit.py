"""An interpreter exits between LLVM calls only (llvm_jit._hold_at_exit): a daemon thread still inside LLVM while
the process ran its C++ static destructors crashed it after the script's last line (SIGSEGV or SIGBUS, ~1 run in 75
under load: the spin pool's build, started by the script's first split launch, was still emitting its code)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "DEVICEKIT_CACHE_DIR": str(tmp_path / "cache")})


def test_exit_waits_for_the_llvm_call_in_flight(tmp_path):
    """A daemon thread holds llvm_jit.LOCK (as every LLVM call does) while the main thread returns: the process ends
    only once that call is done (its marker written), and nothing after it enters LLVM."""
    marker = tmp_path / "done"
    p = _run(f"""
        import threading, time
        from devicekit_cpu import llvm_jit
        inside = threading.Event()
        def in_llvm():
            with llvm_jit.LOCK:
                inside.set()
                time.sleep(0.5)
                open({str(marker)!r}, "w").write("done")
        threading.Thread(target=in_llvm, daemon=True).start()
        inside.wait()
        print("main returns", flush=True)
    """, tmp_path)
    assert p.returncode == 0, p.stderr
    assert marker.read_text() == "done"


def test_a_first_split_launch_right_before_exit_ends_cleanly(tmp_path):
    """The crash's script: small launches, then one split launch (which starts the spin pool's build on a thread)
    as the last thing before exit; ten runs, each ends with status 0."""
    code = """
        import numpy as np
        import devicekit as dk
        from devicekit import kernels
        cpu = dk.device("CPU")
        p = cpu.compile(kernels.elementwise("a * b + c"))
        big = [dk.Buffer(cpu, 1 << 22, "float32").copyin(np.ones(1 << 22, np.float32)) for _ in range(4)]
        p.execute(big, [1 << 22], wait=True)
        print(float(big[3].numpy()[0]))
    """
    for _ in range(10):
        p = _run(code, tmp_path)
        assert p.returncode == 0 and p.stdout.strip() == "2.0", (p.returncode, p.stderr[-2000:])
