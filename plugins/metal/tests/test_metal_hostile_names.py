"""Hostile user names on Metal (issue 11, item 4): kernels whose kernel, buffer, var and threadgroup-array names are
MSL keywords, address spaces (device, constant, threadgroup), types (float4, half), metal:: functions, macros or the
renderers' temporaries render to MSL that libclang accepts, and run under the host emulation like PYTHON.
CI: a sample of devicekit.testing.names.name_sets(); DEVICEKIT_SLOW=1: every case."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import settings
from devicekit.ir.dtypes import from_numpy_values
from devicekit.ir.names import mangle
from devicekit.testing.names import hostile_kernel, name_sets
from devicekit.testing.random_kernels import assert_matches
from devicekit_metal.hostcheck import HostKernel, cxx, libclang_available, syntax_check
from devicekit_metal.renderer import MetalRenderer

SLOW = settings.get("DEVICEKIT_SLOW")
CASES = [(kname, args, i % 2 == 1) for i, (kname, args) in enumerate(name_sets(5, None if SLOW else (0, 1, 2)))]


def test_hostile_names_render_to_valid_msl():
    for kname, args, local in CASES if SLOW else CASES[::3]:  # libclang takes ~0.2 s a source: a third in CI
        kernel, _ = hostile_kernel(args, kname, local=local)
        spec = MetalRenderer().render(kernel)
        assert spec.entry == mangle(kname) and f"kernel void {spec.entry}(" in spec.src
        assert [p.name for p in spec.params] == [p.name for p in kernel.params]
        if libclang_available() is None:
            assert not syntax_check(spec.src), spec.src


@pytest.mark.parametrize("case", range(0, len(CASES), 1 if SLOW else 31))
def test_hostile_names_run_like_python_under_host_emulation(case, tmp_path):
    if cxx() is None:
        pytest.skip("no C++ compiler for the host emulation")
    kname, args, local = CASES[case]
    kernel, inputs = hostile_kernel(args, kname, local=local)
    spec = MetalRenderer().render(kernel)
    want = dk.run(kernel, "PYTHON", **inputs)
    arrays = [np.ascontiguousarray(from_numpy_values(np.asarray(inputs[p.name]), p.dtype)) for p in spec.params]
    HostKernel(spec, MetalRenderer(), workdir=str(tmp_path)).run(arrays, [inputs[v.name] for v in spec.vars])
    for p, got in zip(spec.params, arrays):
        if p.writable:
            assert_matches(got, np.asarray(want[p.name]).reshape(-1), p.dtype, f"{kname}{args}.{p.name}")
