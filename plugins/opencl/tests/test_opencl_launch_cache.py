"""OpenCL under the core's launch cache (Program.prepare_launch: a cached launch has its own kernel object, arguments
set once) and the per-thread kernel's changed-arguments-only set (`_set_changed`): each set of Buffers writes its
own output, a new set or a new n or a view at another offset is set where it changed, a freed Buffer is refused.
A prepared kernel that shared the program's kernel object, or a skipped clSetKernelArg, writes the wrong output."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import kernels
from devicekit.errors import FreedBufferError
from devicekit.ir.dtypes import dtypes


@pytest.fixture(scope="module")
def fma(cl_device):
    return cl_device.compile(kernels.elementwise("a * b + c", name="cl_cache_fma"))


def _set(dev, a, n=16):
    return [dk.Buffer(dev, n, dtypes.float32).copyin(np.full(n, x, np.float32)) for x in (a, 3, 1, 0)]


def test_cached_sets_each_write_their_own_output(fma, cl_device):
    sets = [_set(cl_device, a) for a in (2, 5, 7)]
    for _ in range(4):  # from the second round every launch is a cache hit with its own prepared kernel
        for s in sets:
            s[3].copyin(np.zeros(16, np.float32))
            fma.execute(s, [16])
        for s, a in zip(sets, (2, 5, 7)):
            np.testing.assert_array_equal(s[3].numpy(), np.full(16, 3 * a + 1, np.float32))
    assert fma._entry(sets[0], [16])[1] is not fma._entry(sets[1], [16])[1]


def test_new_buffers_new_n_and_views_are_set_where_they_changed(fma, cl_device):
    """Launches the cache does not know (new Buffers every time, a new n, a view at another offset): the program's
    own kernel object sets only the arguments that changed since its last launch, and must set those."""
    for a in (2, 4, 6):
        s = _set(cl_device, a)
        fma.execute(s, [16], wait=True)
        np.testing.assert_array_equal(s[3].numpy(), np.full(16, 3 * a + 1, np.float32))
    s = _set(cl_device, 9, 32)
    s[3].copyin(np.zeros(32, np.float32))
    fma.execute(s, [8], wait=True)  # n 16 -> 8: only the first 8 written
    np.testing.assert_array_equal(s[3].numpy(), np.r_[np.full(8, 28), np.zeros(24)].astype(np.float32))
    base = dk.Buffer(cl_device, 48, dtypes.float32).copyin(np.zeros(48, np.float32))
    for off in (0, 16, 32):  # the out param at three byte offsets of one allocation: the offset argument changes
        fma.execute([*s[:3], base.view(16, offset=off)], [16], wait=True)
    np.testing.assert_array_equal(base.numpy(), np.full(48, 28, np.float32))


def test_a_freed_buffer_is_refused_after_its_launch_was_prepared(fma, cl_device):
    s = _set(cl_device, 2)
    for _ in range(3):
        fma.execute(s, [16], wait=True)
    assert callable(fma._entry(s, [16])[1]), "the repeated launch was not prepared"
    s[1].free()
    with pytest.raises(FreedBufferError, match="param 'b' is .* it was freed"):
        fma.execute(s, [16])
