"""Conformance: a renderer's declared buffer limit is refused at render time (issue 35: one place for limits).

CUDA declared `max_buffers = 1024` and nothing checked it: a kernel past it would have reached the driver. The core's
`Renderer.render` now checks `max_buffers` against `buffer_slots` for every renderer; a backend that renders through
its own `render` must keep that promise. On every renderer of the device under test that declares a limit: the
limit itself renders, one slot more is one KernelError naming `max_buffers`. Nothing runs: no device needed.
"""

from __future__ import annotations

import pytest

from .conformance import wide_kernel

pytestmark = pytest.mark.devicekit_conformance


UNLIMITED = 40  # buffers a renderer that declares no limit must render (a C function takes 127 parameters at least)


def test_a_kernel_past_max_buffers_is_refused_at_render(dk_target):
    """Every renderer of the device: its limit renders and one more is one KernelError naming `max_buffers`; one
    that declares none renders UNLIMITED buffers."""
    from devicekit.ir.uop import KernelError
    for renderer, _ in dk_target.compilers:
        limit = getattr(renderer, "max_buffers", None)
        if limit is None:
            renderer.render(wide_kernel(UNLIMITED, name="dk_conf_wide"))
            continue
        assert isinstance(limit, int) and limit >= 2, f"{type(renderer).__name__}.max_buffers = {limit!r}"
        renderer.render(wide_kernel(limit, name="dk_conf_wide"))  # the limit itself renders
        with pytest.raises(KernelError, match=r"max_buffers") as e:
            renderer.render(wide_kernel(limit + 1, name="dk_conf_wide"))
        assert f"{limit + 1} buffer slots" in str(e.value) and str(limit) in str(e.value), str(e.value)
