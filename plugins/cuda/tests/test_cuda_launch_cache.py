"""CUDA under the core's launch cache (Program.prepare_launch: a cached launch's grid, block and arguments made
once) and the remembered size check (`_dims`), on the fake driver: each set of Buffers is launched with its own
pointers, a new n gets its own grid, a freed Buffer is refused. A prepared call holding another set's arguments, or
sizes remembered past a change of n, launch the wrong pointers or grid (the fake records every launch)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cuda_fake_pycuda as fake
import devicekit as dk
from cuda_host_emu import CXX, host_compile_many
from devicekit import kernels
from devicekit.errors import FreedBufferError
from devicekit.ir.dtypes import dtypes
from devicekit.spec import DeviceSpec
from devicekit.targets import Device
from devicekit_cuda import context, plugin, toolchain

pytestmark = pytest.mark.skipif(CXX is None or toolchain.nvrtc()[0] is None,
                                reason="needs a host C++ compiler and NVRTC")
KERNEL = kernels.elementwise("a * b + c", name="cuda_cache_fma")
_hosts: dict = {}


@pytest.fixture
def dev(monkeypatch):
    fake.install(monkeypatch)
    monkeypatch.setattr(context, "_contexts", {})
    if not _hosts:
        _hosts.update(host_compile_many([KERNEL]))
    monkeypatch.setattr(fake, "KERNELS", _hosts)
    monkeypatch.setenv("DEVICEKIT_CUDA_ARCH", "sm_90")
    spec = DeviceSpec("CUDA", 0)
    return Device(spec, *plugin.DEVICEKIT_BACKEND.pieces(spec, "nvrtc"))


def _set(dev, a, n=16):
    return [dk.Buffer(dev, n, dtypes.float32).copyin(np.full(n, x, np.float32)) for x in (a, 3, 1, 0)]


def _launches():
    return [c for c in fake.calls if c[0] == "launch"]


def test_cached_sets_launch_with_their_own_pointers_and_grid(dev):
    prog = dev.compile(KERNEL)
    sets = [_set(dev, a) for a in (2, 5)]
    for _ in range(3):
        for s in sets:
            prog.execute(s, [16])
    assert callable(prog._entry(sets[0], [16])[1]), "the repeated launch was not prepared"
    got = _launches()[-2:]
    assert [c[4][:4] for c in got] == [tuple(int(b.handle) for b in s) for s in sets]
    for s, a in zip(sets, (2, 5)):
        np.testing.assert_array_equal(s[3].numpy(), np.full(16, 3 * a + 1, np.float32))
    big = _set(dev, 2, 4096)
    prog.execute(big, [4096], wait=True)
    prog.execute(sets[0], [16])
    grids = [c[2] for c in _launches()[-2:]]
    assert grids[0] != grids[1] and grids[1] == got[0][2], grids  # the size check is per launch's sizes
    np.testing.assert_array_equal(big[3].numpy(), np.full(4096, 7, np.float32))


def test_a_timed_cached_launch_and_a_freed_buffer(dev):
    prog = dev.compile(KERNEL)
    s = _set(dev, 2)
    for _ in range(3):
        t = prog.execute(s, [16], wait=True)
    assert isinstance(t, float) and t >= 0
    s[2].free()
    with pytest.raises(FreedBufferError, match="param 'c' is .* it was freed"):
        prog.execute(s, [16])
