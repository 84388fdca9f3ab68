"""Conformance: hand-written sources. On a device whose renderer reads source (`parse_source`), the kit's own
sources (testing/sources.py) run as written and match numpy: scalars of every type before, between and after the
buffers, vector buffers, the CPU's split arguments, a kernel with only scalars. This is where a runtime that ignores
`spec.arg_order()` or passes a scalar as the wrong ctypes type fails (generated kernels put every buffer first)."""

from __future__ import annotations

import numpy as np
import pytest

from .sources import CASE_NAMES, cases_for

pytestmark = pytest.mark.devicekit_conformance


def _source_renderer(target):
    for (renderer, _), pair in zip(target.compilers, target.pair_names):
        if callable(getattr(renderer, "parse_source", None)):
            return renderer, pair
    pytest.skip(f"{target.spec}: no compiler pair reads hand-written source (no parse_source)")


def _case(target, name):
    renderer, pair = _source_renderer(target)
    lang = getattr(renderer, "lang", "")
    cases = cases_for(lang)
    if cases is None:
        pytest.skip(f"the kit has no hand-written sources in {lang!r} (pair {pair}): add them to "
                    "devicekit/testing/sources.py")
    case = next(c for c in cases if c.name == name)
    if case.skip_if:
        pytest.skip(case.skip_if)
    return case


def _applicable(config) -> list[str]:
    """The case names for the device under test: those its source language has (OpenCL has no split arguments),
    all of them when the target cannot be built here (the fixtures then skip with the reason)."""
    spec = config.getoption("devicekit_device", None)
    if not spec:
        return list(CASE_NAMES)
    from .pytest_plugin import _known_device, _private_cache
    if _known_device(spec) is not None:
        return list(CASE_NAMES)  # the usage error comes from the kit's collection hook
    _private_cache(config)  # before anything compiles or builds a compiler: never the user's cache
    try:
        import devicekit as dk
        target = dk.target(spec)
    except Exception:  # noqa: BLE001 - the fixtures report why
        return list(CASE_NAMES)
    for renderer, _ in target.compilers:
        if callable(getattr(renderer, "parse_source", None)):
            cases = cases_for(getattr(renderer, "lang", ""))
            return list(CASE_NAMES) if cases is None else [c.name for c in cases if not c.skip_if]
    return list(CASE_NAMES)


def pytest_generate_tests(metafunc):
    if "name" in metafunc.fixturenames:
        metafunc.parametrize("name", _applicable(metafunc.config))


def test_handwritten_source_compiles(dk_compiles, name):
    """Reading the signature and compiling need no device: the spec lists every buffer and every scalar."""
    case = _case(dk_compiles, name)
    compiled = dk_compiles.program_from_source(case.src, case.entry, **case.options)
    assert isinstance(compiled.lib, bytes) and compiled.lib
    buffers = {k for k, v in case.inputs.items() if isinstance(v, np.ndarray)} | set(case.want)
    assert {p.name for p in compiled.spec.user_params} == buffers
    assert {v.name for v in compiled.spec.vars} == set(case.inputs) - buffers


def test_handwritten_source_matches_numpy(dk_device, name):
    import devicekit as dk
    case = _case(dk_device, name)
    prog = dk_device.program_from_source(case.src, case.entry, **case.options)
    got = dk.run(prog, **case.inputs)
    assert set(got) == set(case.want), f"{name}: outputs {sorted(got)}, want {sorted(case.want)}"
    for out, want in case.want.items():
        g = np.asarray(got[out]).reshape(-1)
        if case.exact or want.dtype.kind in "iub":
            np.testing.assert_array_equal(g, want, err_msg=f"{case.entry}: {out}")
        else:
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-6, err_msg=f"{case.entry}: {out}")
