"""A C file that is a whole program (PolyBench/C: a `static void kernel_*`, then a main calling functions of
another file, polybench.c, that is not compiled here) runs its entry as written: main is made static and, unused,
leaves no undefined symbol for the loader (it failed dlopen with "undefined symbol: polybench_alloc_data")."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit.errors import CompileError

SRC = """
#include <stdlib.h>
void *helper_from_another_file(unsigned long n);   /* defined in a file the program links, not here */
extern double counter_from_another_file;

static void kernel_scale(int n, double alpha, double x[8]) {
  for (int i = 0; i < n; i++) x[i] *= alpha;
}

int main(int argc, char **argv) {
  double *x = helper_from_another_file(8 * sizeof(double));
  counter_from_another_file += 1;
  kernel_scale(8, 2.0, x);
  return 0;
}
"""


def test_whole_program_entry_runs_without_the_other_file():
    prog = dk.device("CPU").program_from_source(SRC, "kernel_scale")
    x = np.arange(8, dtype=np.float64)
    assert np.array_equal(dk.run(prog, n=8, alpha=2.0, x=x)["x"], 2.0 * x)


def test_entry_main_is_left_alone():
    src = "int main(int n, double *x) { for (int i = 0; i < n; i++) x[i] += 1; return 0; }"
    with pytest.raises(CompileError, match="main") as e:  # a kernel returns void: named main, not a renamed symbol
        dk.device("CPU").program_from_source(src, "main")
    assert "__dk_host_main" not in str(e.value)
