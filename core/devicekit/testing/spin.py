"""The long kernel that Ctrl-C checks interrupt: 2^38 multiply-adds at n=256, m=2^30 (minutes on any device).

One definition for the conformance kit's interrupt check, the interrupt tests and bench/interrupt_latency.py, which
run it in a child process and send SIGINT while it runs; at m=1 it is a quick launch that loads the program first.
"""

from __future__ import annotations

from devicekit import ir
from devicekit.ir import dtypes


def long_kernel(name: str = "dk_long") -> ir.Kernel:
    """out[i] = sum over r < m of x[i] * r: its run time grows with the var m, so one program is quick or minutes."""
    k = ir.KernelBuilder(name)
    n, m = k.var("n", 1, 1 << 20), k.var("m", 1, 1 << 30)
    x = k.param("x", dtypes.float32, n)
    o = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    r = k.range(m, "reduce")
    o[i] = (x[i] * r.cast(dtypes.float32)).sum(r)
    return k.build()
