"""The host's float32 multiply-add peak, measured rather than looked up: a JIT-compiled loop of independent vector
FMA chains (registers only, no memory), timed on one thread and on `threads` at once. bench/run.py reads its
compute-bound rows (matmul, the MLP) as a fraction of it, as it reads the streaming rows as a fraction of the copy
bandwidth: a bar that asks more of a peer-level kernel than the cores can do shows as such, on every host, without a
table of clock speeds (a KVM guest does not report its own, and AVX-512 code runs below the nominal one)."""

from __future__ import annotations

import ctypes
import functools
import threading
import time

from . import hostinfo, llvm_jit

SYMBOL = "dk_fma_peak"


def _shape() -> tuple[int, int]:
    """(float32 lanes a vector, independent chains): a vector of a sixteenth of the host's register file, at most 64
    bytes (the kernel library's rule: one AVX-512 register, one AVX2 register, two NEON ones), and chains filling
    three quarters of the file (24 of AVX-512's 32 registers, 12 of AVX2's 16: more than latency x FMA ports of
    any core, 4 x 2, and no spill)."""
    regs = hostinfo.vector_register_bytes() or 16 * 16
    vector = min(64, regs // 16)
    return vector // 4, regs * 3 // 4 // vector


def source(lanes: int, chains: int) -> str:
    """LLVM IR of `void dk_fma_peak(i64 n, float* out)`: n iterations of `chains` FMAs on <lanes x float> each
    (n >= 1), then the sum of every chain's lanes to *out (so that no chain is dead code)."""
    v = f"<{lanes} x float>"
    splat = lambda x: "<" + ", ".join([f"float {x}"] * lanes) + ">"  # noqa: E731
    init = [f"%a{c} = phi {v} [{splat(float(c + 1))}, %entry], [%b{c}, %loop]" for c in range(chains)]
    body = [f"%b{c} = call {v} @llvm.fma.v{lanes}f32({v} %a{c}, {v} {splat('0.5')}, {v} {splat('0.25')})"
            for c in range(chains)]
    # a -> a / 2 + 1/4 (constants exact in float32, no 1.0 that a combine could fold into an add): tends to 0.5
    sums = [f"%s0 = fadd {v} %b0, %b1"] + [f"%s{c - 1} = fadd {v} %s{c - 2}, %b{c}" for c in range(2, chains)]
    last = f"%s{chains - 2}"
    return "\n".join([
        f"declare {v} @llvm.fma.v{lanes}f32({v}, {v}, {v})",
        f"declare float @llvm.vector.reduce.fadd.v{lanes}f32(float, {v})",
        f"define void @{SYMBOL}(i64 %n, ptr %out) {{",
        "entry:", "  br label %loop", "loop:",
        "  %i = phi i64 [0, %entry], [%i1, %loop]", *(f"  {x}" for x in init), *(f"  {x}" for x in body),
        "  %i1 = add i64 %i, 1", "  %more = icmp ult i64 %i1, %n", "  br i1 %more, label %loop, label %exit",
        "exit:", *(f"  {x}" for x in sums),
        f"  %r = call float @llvm.vector.reduce.fadd.v{lanes}f32(float 0.0, {v} {last})",
        "  store float %r, ptr %out", "  ret void", "}", ""])


@functools.cache
def _function() -> tuple[object, ctypes._CFuncPtr, int]:
    """(the JIT library that owns the code, the ctypes function, flops an iteration)."""
    lanes, chains = _shape()
    lib, addr = llvm_jit.link_object(llvm_jit.emit_object(source(lanes, chains), 3), SYMBOL)
    fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(addr)  # the GIL is released
    return lib, fn, 2 * lanes * chains


def _run(barrier: threading.Barrier, fn: ctypes._CFuncPtr, n: int, out: int) -> None:
    barrier.wait()  # every thread starts with the others
    fn(n, out)


def peak(threads: int = 1, seconds: float = 0.2, rounds: int = 3) -> float:
    """FLOP/s of float32 multiply-adds on `threads` threads at once (each its own chains), the best of `rounds`
    runs of about `seconds` each. A busy machine lowers it: read it beside the load."""
    if threads < 1 or seconds <= 0 or rounds < 1:
        raise ValueError(f"peak needs threads >= 1, seconds > 0 and rounds >= 1, got {threads}, {seconds}, {rounds}")
    _, fn, per_iter = _function()
    out = (ctypes.c_float * threads)()
    t0 = time.perf_counter()
    fn(1 << 16, ctypes.addressof(out))  # calibrate: iterations for `seconds` on one thread
    n = max(1 << 16, int((1 << 16) * seconds / max(time.perf_counter() - t0, 1e-9)))
    best = 0.0
    for _ in range(rounds):
        barrier = threading.Barrier(threads + 1)
        workers = [threading.Thread(target=_run, args=(barrier, fn, n, ctypes.addressof(out) + 4 * i))
                   for i in range(threads)]
        for w in workers:
            w.start()
        barrier.wait()
        t0 = time.perf_counter()
        for w in workers:
            w.join()
        best = max(best, threads * n * per_iter / (time.perf_counter() - t0))
    return best
