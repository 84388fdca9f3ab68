"""Conformance: the launch cache. `Program.execute` keeps the sets of Buffers and values it accepted (up to 16 a
Program) and launches them again with no check, through the backend's bound record, its `prepare_launch` call or
`_launch`. For a Program made through each door (`dev.compile`, the seed's `runtime(compile(render(k)))`,
`program_from_source`): sets launched in turn each run with their own Buffers; a Buffer freed after its launch was
cached, or whose base was, is refused (FreedBufferError) and nothing runs; a new Buffer of another dtype, perhaps
given the freed one's allocation, is checked for itself (TypeError). A cache keyed by the allocator's handle or by
id(), or not told of a free, launches these."""

from __future__ import annotations

import numpy as np
import pytest

from devicekit.errors import FreedBufferError
from devicekit.ir.dtypes import dtypes

from .test_conformance_doors import N, _bufs, _right, door_program

pytestmark = pytest.mark.devicekit_conformance


@pytest.fixture(params=["compile", "seed", "source"])
def door(request, dk_device):
    """(door name, Program of out = a * b + c made through it), as test_conformance_doors makes them."""
    return request.param, door_program(dk_device, request.param, "dk_conf_cache")


def _other(dk_device):
    bufs, _ = _bufs(dk_device)
    bufs[0].copyin(np.full(N, 2, np.float32))
    return bufs, 2 * bufs[1].numpy() + bufs[2].numpy()


def test_cached_sets_run_with_their_own_buffers_and_a_freed_one_is_refused(door, dk_device):
    name, prog = door
    bufs, want = _bufs(dk_device)
    other, want2 = _other(dk_device)
    for _ in range(3):  # from the second round on, every launch is one the cache holds
        _right(prog, bufs, want)
        _right(prog, other, want2)
    kept = other[3].numpy().copy()
    other[3].free()
    with pytest.raises(FreedBufferError):
        prog.execute(other, [N])
    other[0].free()
    with pytest.raises(FreedBufferError):
        prog.execute([other[0], *bufs[1:]], [N])
    assert kept.shape == (N,), name
    _right(prog, bufs, want)  # the other set still runs


def test_a_view_whose_base_was_freed_after_caching_is_refused(door, dk_device):
    """(Where the allocator makes views: elsewhere there is nothing to check.)"""
    import devicekit as dk
    _, prog = door
    if dk_device.allocator.supports("offset"):
        bufs, want = _bufs(dk_device)
        base = dk.Buffer(dk_device, 2 * N, dtypes.float32).copyin(np.zeros(2 * N, np.float32))
        out = base.view(N, offset=N)
        for _ in range(3):
            _right(prog, [*bufs[:3], out], want)
        base.free()
        with pytest.raises(FreedBufferError):
            prog.execute([*bufs[:3], out], [N])


def test_a_new_buffer_after_a_freed_cached_one_is_checked_for_itself(door, dk_device):
    import devicekit as dk
    _, prog = door
    bufs, want = _bufs(dk_device)
    for _ in range(3):
        _right(prog, bufs, want)
    bufs[0].free()
    same_bytes = dk.Buffer(dk_device, N, dtypes.int32)  # its allocator may hand it the freed float32 allocation
    same_bytes.copyin(np.zeros(N, np.int32))
    with pytest.raises(TypeError):
        prog.execute([same_bytes, *bufs[1:]], [N])
