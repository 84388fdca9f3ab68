"""Conformance: a renderer's declared buffer limit is refused at render time (issue 35: one place for limits).

CUDA declared `max_buffers = 1024` and nothing checked it: a kernel past it would have reached the driver. The core's
`Renderer.render` now checks `max_buffers` against `buffer_slots` for every renderer; a backend that renders through
its own `render` must keep that promise. On every renderer of the device under test that declares a limit: the
limit itself renders, one slot more is one KernelError naming `max_buffers`. Nothing runs: no device needed.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.devicekit_conformance


def _wide(nbuf: int):
    """out = the sum of nbuf - 1 inputs: nbuf buffer params, in bounds (no bounds-check record)."""
    from devicekit import ir
    from devicekit.ir import dtypes
    k = ir.KernelBuilder("dk_conf_wide")
    bufs = [k.param(f"b{j}", dtypes.float32, size=4, writable=j == 0) for j in range(nbuf)]
    i = k.range(4, kind="global")
    total = bufs[1][i] if nbuf > 1 else 0.0
    for b in bufs[2:]:
        total = total + b[i]
    bufs[0][i] = total
    return k.build()


UNLIMITED = 40  # buffers a renderer that declares no limit must render (a C function takes 127 parameters at least)


def test_a_kernel_past_max_buffers_is_refused_at_render(dk_target):
    """Every renderer of the device: its limit renders and one more is one KernelError naming `max_buffers`; one
    that declares none renders UNLIMITED buffers."""
    from devicekit.ir.uop import KernelError
    for renderer, _ in dk_target.compilers:
        limit = getattr(renderer, "max_buffers", None)
        if limit is None:
            renderer.render(_wide(UNLIMITED))
            continue
        assert isinstance(limit, int) and limit >= 2, f"{type(renderer).__name__}.max_buffers = {limit!r}"
        renderer.render(_wide(limit))  # the limit itself renders
        with pytest.raises(KernelError, match=r"max_buffers") as e:
            renderer.render(_wide(limit + 1))
        assert f"{limit + 1} buffer slots" in str(e.value) and str(limit) in str(e.value), str(e.value)
