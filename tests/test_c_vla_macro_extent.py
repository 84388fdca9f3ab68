"""A C99 variable-length array param written through a macro (PolyBench/C's `DATA_TYPE POLYBENCH_2D(A,N,N,n,n)`
with -DPOLYBENCH_USE_C99_PROTO expands to `double A[n + 0][n + 0]`) has its size read from the expanded type, so a
short buffer is refused at launch; it was read as unstated (unchecked), and a 5-element buffer ran and corrupted the
heap (a segfault later)."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest

SRC = """
#define PAD 0
#define ARR_2D(var, d1, d2) var[d1 + PAD][d2 + PAD]
void scale(int ni, int nj, double ARR_2D(C, ni, nj)) {
  for (int i = 0; i < ni; i++) for (int j = 0; j < nj; j++) C[i][j] *= 2;
}
"""


def test_macro_vla_extent_is_checked():
    prog = dk.device("CPU").program_from_source(SRC, "scale")
    c = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert np.array_equal(dk.run(prog, ni=3, nj=4, C=c)["C"].reshape(3, 4), 2 * c)
    with pytest.raises(ValueError, match="needs 12 elements"):
        dk.run(prog, ni=3, nj=4, C=np.zeros(5))


def test_written_vla_extent_still_read():
    prog = dk.device("CPU").program_from_source("void k(int n, int m, double A[n][m]) { A[0][0] = 1; }", "k")
    with pytest.raises(ValueError, match="needs 6 elements"):
        dk.run(prog, n=2, m=3, A=np.zeros(5))
