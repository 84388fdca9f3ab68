"""One child process for Ctrl-C checks (issue 35): the conformance kit's interrupt check and
bench/interrupt_latency.py both start devicekit.testing.spin's child (`spin.start_child`) and read its report; a
second, private child script in either is caught here (its launches do not pass through `start_child`)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import devicekit as dk
import pytest
from devicekit.testing import spin, test_conformance_interrupt

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench" / "interrupt_latency.py"


@pytest.fixture
def started(monkeypatch) -> list:
    """The (spec, how) of every child started through spin.start_child, which still starts it."""
    calls, real = [], spin.start_child

    def record(spec: str, how: str):
        calls.append((spec, how))
        return real(spec, how)
    monkeypatch.setattr(spin, "start_child", record)
    return calls


def test_the_bench_times_the_shared_child(started):
    mod_spec = importlib.util.spec_from_file_location("interrupt_latency", BENCH)
    bench = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(bench)
    latency = bench.once("CPU", "wait=False+wait()")
    assert started == [("CPU", "wait=False+wait()")], "bench/interrupt_latency.py starts a child of its own"
    assert latency is not None and latency >= 0, "the shared child reported no KeyboardInterrupt to the bench"


def test_the_kit_signals_the_shared_child(started):
    test_conformance_interrupt.test_ctrl_c_interrupts_a_kernel_that_never_ends(dk.device("CPU"), "wait=True")
    assert started == [("CPU", "wait=True")], "the kit's interrupt check starts a child of its own"


def test_the_child_says_how_it_is_called():
    with pytest.raises(ValueError, match="how= is one of wait=True, wait=False"):
        spin.start_child("CPU", "wait=maybe")
