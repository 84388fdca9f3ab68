"""An f16 constant past 65504 is inf in f16 (naga refuses the literal, so it is rendered as an f32 inf converted):
the rounding is the defined result, not a numpy overflow RuntimeWarning in the user's run."""

from __future__ import annotations

import warnings

from devicekit.ir import dtypes
from devicekit_webgpu.renderer import WGSLRenderer


def test_an_f16_constant_past_its_range_renders_inf_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert WGSLRenderer().render_const(1048576.0, dtypes.float16) == "f16(bitcast<f32>(0x7f800000u))"
        assert WGSLRenderer().render_const(-1e6, dtypes.float16) == "f16(bitcast<f32>(0xff800000u))"
