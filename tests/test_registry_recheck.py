"""A kind whose "unavailable" may change while a process runs (a Ray cluster started after the process listed
devices) declares `DeviceKind(recheck_after=seconds)`: the registry probes such an answer again when asked that many
seconds later, and `devicekit info` always probes it afresh. Available answers, answers of kinds that do not declare
it, and answers of a probe that raised are kept, as before (issue 35). A real registry, a real plugin whose probe's
answer is flipped by the test, a real TOY device built once the kind comes up."""

from __future__ import annotations

import math
import time
import types

import devicekit as dk
import numpy as np
import pytest
from devicekit.backend import Backend, Pair
from devicekit.errors import DeviceUnavailableError, PluginError
from devicekit.ir.dtypes import dtypes
from devicekit.memory import HostAllocator
from devicekit.plugin import Availability, DeviceKind
from devicekit.registry import Registry
from devicekit.render.program_spec import ParamSpec, VarSpec
from dkfix_toy.toylang import ToyCompiler, ToyKernel, ToyProgram, ToyRenderer, var

RECHECK = 0.6  # seconds: short, so each test waits under a second
N = var("n", 1, 1000)
SAXPY = ToyKernel("saxpy", (ParamSpec("x", dtypes.float32, N, False), ParamSpec("y", dtypes.float32, N, False),
                            ParamSpec("out", dtypes.float32, N, True)), (VarSpec("n", 1, 1000),),
                  "out[:n] = x[:n] * np.float32(2) + y[:n]\n")


class Switch:
    """A probe whose answer the test flips, counting its calls."""

    def __init__(self, up: bool = False, raises: bool = False):
        self.up, self.raises, self.calls = up, raises, 0

    def __call__(self) -> Availability:
        self.calls += 1
        if self.raises:
            raise RuntimeError("the driver's library is broken")
        return Availability.yes() if self.up else Availability.no("not up yet")


def _plugin(**kinds: tuple[Switch, float | None]) -> types.ModuleType:
    m = types.ModuleType("late_kinds")
    m.DEVICEKIT_API = (1, 0)
    m.DEVICEKIT_BACKEND = [Backend(kind, "a kind that comes up later", priority=-50, probe=sw, recheck_after=after,
                                   pairs=[Pair("toy", ToyRenderer, lambda s: ToyCompiler())],
                                   allocator=lambda s: HostAllocator(str(s)), runtime=lambda s: ToyProgram)
                           for kind, (sw, after) in kinds.items()]
    return m


@pytest.fixture
def reg(monkeypatch):
    from devicekit import registry as reg_mod
    r = Registry(entry_points=False, strict=False, disabled=set(), trace=False)
    monkeypatch.setattr(reg_mod, "_registry", r)
    return r


def _available(kind: str) -> bool:
    return next(d for d in dk.devices() if d.kind == kind).available


def _wait_past(since: float, seconds: float) -> None:
    time.sleep(max(0.0, since + seconds - time.monotonic()) + 0.05)


def test_an_unavailable_answer_is_probed_again_after_recheck_after_and_the_device_then_runs(reg):
    sw = Switch()
    reg.register_plugin(_plugin(LATE=(sw, RECHECK)))
    t0 = time.monotonic()
    assert not _available("LATE") and sw.calls == 1
    sw.up = True
    if time.monotonic() - t0 < RECHECK:  # within the period the answer stands (a stalled machine skips this check)
        assert not _available("LATE") and sw.calls == 1
    _wait_past(t0, RECHECK)
    assert _available("LATE") and sw.calls == 2
    x = np.arange(8, dtype=np.float32)
    out = dk.run(SAXPY, device="LATE", x=x, y=x, n=8)["out"]
    np.testing.assert_array_equal(out, x * 2 + x)
    _wait_past(time.monotonic(), RECHECK)
    assert _available("LATE") and sw.calls == 2  # an available answer is kept


def test_dk_device_asks_again_too_and_says_why_until_then(reg):
    sw = Switch()
    reg.register_plugin(_plugin(LATE=(sw, RECHECK)))
    t0 = time.monotonic()
    with pytest.raises(DeviceUnavailableError, match="not up yet"):
        dk.device("LATE")
    sw.up = True
    _wait_past(t0, RECHECK)
    assert dk.device("LATE").spec.kind == "LATE" and sw.calls == 2


def test_only_the_kind_that_declares_it_is_asked_again(reg):
    late, fixed = Switch(), Switch()
    reg.register_plugin(_plugin(LATE=(late, RECHECK), FIXED=(fixed, None)))
    t0 = time.monotonic()
    assert not _available("LATE") and not _available("FIXED")
    late.up = fixed.up = True
    _wait_past(t0, RECHECK)
    assert _available("LATE") and not _available("FIXED")  # FIXED's answer lasts the registry, as before
    assert (late.calls, fixed.calls) == (2, 1)


def test_a_probe_that_raised_is_not_asked_again(reg):
    """A failure is the plugin's: probing it every few seconds would only fail (or hang) again."""
    sw = Switch(raises=True)
    reg.register_plugin(_plugin(LATE=(sw, RECHECK)))
    with pytest.warns(Warning, match="driver's library is broken"):
        t0 = time.monotonic()
        assert not _available("LATE")
    sw.raises, sw.up = False, True
    _wait_past(t0, RECHECK)
    assert not _available("LATE") and sw.calls == 1


def test_devicekit_info_probes_a_rechecking_kind_afresh_however_recent_its_answer(reg):
    from devicekit.cli.info import report
    late, fixed = Switch(), Switch()
    reg.register_plugin(_plugin(LATE=(late, 3600.0), FIXED=(fixed, None)))
    assert not _available("LATE") and not _available("FIXED")
    late.up = fixed.up = True
    rep = report(reg, build=False)
    assert rep["kinds"]["LATE"]["available"] and rep["kinds"]["LATE"]["ids"] == ["LATE"]
    assert [d["spec"] for d in rep["devices"] if d["kind"] == "LATE" and d["available"]] == ["LATE"]
    assert late.calls == 2 and _available("LATE")


@pytest.mark.parametrize("value, error, words", [
    (0, ValueError, "recheck_after must be a number of seconds > 0"),
    (-1, ValueError, "recheck_after must be a number of seconds > 0"),
    (math.nan, ValueError, "recheck_after must be a number of seconds > 0"),
    (math.inf, ValueError, "recheck_after must be a number of seconds > 0"),
    ("5", TypeError, "recheck_after must be None or a number of seconds"),
    (True, TypeError, "recheck_after must be None or a number of seconds"),
])
def test_a_bad_recheck_after_is_refused_when_declared(value, error, words):
    with pytest.raises(error, match=words):
        DeviceKind("LATE", recheck_after=value)
    with pytest.raises(PluginError, match=f"Backend 'LATE': DeviceKind 'LATE': {words}"):
        Backend("LATE", recheck_after=value)
    assert DeviceKind("LATE", recheck_after=5).recheck_after == 5.0
