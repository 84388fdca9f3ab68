"""devicekit.platforms (which of a driver's platforms and devices become a kind's ids) and devicekit.per_index (one
context per id), device-free: platforms and devices are plain records with the attributes a driver's objects have
(name, version; a device's type), the smoke check a function of them. devicekit-opencl runs the same code on PoCL
(plugins/opencl/tests/test_opencl_platform_choice.py, test_opencl_plugin.py)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest
from devicekit.per_index import per_index
from devicekit.platforms import (
    Selection,
    Unavailable,
    choose_platform,
    device_choice,
    first_error_line,
    platform_choice,
    probe,
)
from devicekit.plugin import GPU_PRIORITY, SOFTWARE_PRIORITY


@dataclass(frozen=True)
class Dev:
    name: str
    type: str = "cpu"


@dataclass(frozen=True)
class Plat:
    name: str
    devices: tuple = field(default=())
    version: str = "1.0"
    broken: str | None = None  # why its smoke check fails, None when it passes


def choose(want, plats):
    return choose_platform(want, plats, api="TestCL", var="DK_TEST_PLATFORM", devices_of=lambda p: list(p.devices),
                           type_of=lambda d: d.type, failure=lambda p, d: p.broken,
                           describe=lambda p: f"{p.name} ({p.version})")


CPU = Plat("Portable CPU", (Dev("pthread"),))
GPU = Plat("Vendor GPU", (Dev("gpu0", "gpu"), Dev("gpu1", "gpu")))
OLD = Plat("Old CPU", (Dev("pthread"),), "0.9", broken="unknown target CPU 'generic'")
EMPTY = Plat("Empty")


def test_device_choice_takes_a_type_or_distinct_indices():
    assert device_choice(" GPU ") == ("gpu", ())
    assert device_choice("all") == ("all", ())
    assert device_choice("0, 2") == ("index", (0, 2))
    for bad, why in (("x,y", "not a device type"), ("0,0", "distinct"), ("", "not a device type"),
                     ("12345", "out of range"), ("-1", "not a device type"), ("٣", "not a device type")):
        with pytest.raises(ValueError, match=why):
            device_choice(bad)
    assert "0,2" in device_choice.accepts


def test_platform_choice_takes_an_index_or_a_bounded_name_part():
    assert platform_choice(" pocl ") == " pocl "  # kept as written: choose_platform strips and matches it
    assert platform_choice("12") == "12"
    with pytest.raises(ValueError, match="not a platform index"):
        platform_choice("٣")  # a digit, not an ASCII one
    with pytest.raises(ValueError, match="longer than any platform name"):
        platform_choice("x" * 257)


def test_a_platform_with_a_gpu_comes_first_else_the_first_with_a_device():
    assert choose(None, [EMPTY, CPU, GPU]) == (GPU, list(GPU.devices))
    assert choose(None, [EMPTY, CPU, Plat("Other CPU", (Dev("c"),))])[0] is CPU


def test_a_platform_that_fails_its_smoke_check_is_passed_over_and_none_left_says_each_reason():
    assert choose(None, [OLD, CPU])[0] is CPU
    with pytest.raises(Unavailable) as e:
        choose(None, [OLD, Plat("Other", (Dev("c"),), "2.0", broken="no compiler")])
    assert str(e.value) == ("no TestCL platform here can build a kernel: Old CPU (0.9): unknown target CPU "
                            "'generic'; Other (2.0): no compiler")
    with pytest.raises(Unavailable, match=r"no TestCL platform has a device \(platforms: 0: Empty\)"):
        choose(None, [EMPTY])


def test_a_named_platform_by_index_or_name_part():
    assert choose("1", [CPU, GPU])[0] is GPU
    assert choose(" vendor ", [CPU, GPU])[0] is GPU  # a part of its name, any case
    assert choose("0", [CPU, GPU])[0] is CPU  # named: no GPU preference
    with pytest.raises(Unavailable, match=r"DK_TEST_PLATFORM=2: there are 2 platforms \(0: Portable CPU, 1: Vendor"):
        choose("2", [CPU, GPU])
    with pytest.raises(Unavailable, match="DK_TEST_PLATFORM='nvidia' matches no platform"):
        choose("nvidia", [CPU, GPU])
    with pytest.raises(Unavailable, match="DK_TEST_PLATFORM='old': Old CPU cannot build a kernel here: unknown target"):
        choose("old", [CPU, OLD])


def test_selection_keeps_the_chosen_devices():
    devs = [Dev("c0"), Dev("g0", "gpu"), Dev("c1")]
    sel = Selection.of(GPU, devs, ("index", (2, 0)), lambda d: d.type, api="TestCL", var="DK_TEST_DEVICE")
    assert sel.devices == (devs[2], devs[0])  # in the order the indices are given
    assert Selection.of(GPU, devs, ("cpu", ()), lambda d: d.type, api="TestCL", var="V").devices == (devs[0], devs[2])
    assert Selection.of(GPU, devs, ("all", ()), lambda d: d.type, api="TestCL", var="V").devices == tuple(devs)
    with pytest.raises(Unavailable, match="DK_TEST_DEVICE: Vendor GPU has 3 devices, no device 3"):
        Selection.of(GPU, devs, ("index", (1, 3)), lambda d: d.type, api="TestCL", var="DK_TEST_DEVICE")
    with pytest.raises(Unavailable, match=r"TestCL platform Vendor GPU has no device of type accelerator \(V\)"):
        Selection.of(GPU, devs, ("accelerator", ()), lambda d: d.type, api="TestCL", var="V")


def test_selection_names_the_missing_id():
    sel = Selection(GPU, GPU.devices)
    assert sel.device("TESTCL", 1) is GPU.devices[1]
    for bad in (2, -1):
        with pytest.raises(Unavailable, match=rf"TESTCL:{bad} does not exist: Vendor GPU \(1.0\) has 2 device"):
            sel.device("TESTCL", bad)


def test_probe_ranks_by_what_it_found_and_says_why_none():
    def gpu(d):
        return d.type == "gpu"
    assert probe(lambda: GPU.devices, gpu).priority == GPU_PRIORITY
    assert probe(lambda: [*CPU.devices, *GPU.devices], gpu).priority == GPU_PRIORITY
    cpu = probe(lambda: CPU.devices, gpu)
    assert cpu.ok and cpu.priority == SOFTWARE_PRIORITY  # a software driver stays below the CPU device

    def none():
        raise Unavailable("no TestCL platform found: install a driver")
    assert not probe(none, gpu).ok and probe(none, gpu).reason == "no TestCL platform found: install a driver"


def test_first_error_line_of_a_log():
    assert first_error_line("warning: x\n  error: unknown target CPU\nmore", "?") == "error: unknown target CPU"
    assert first_error_line("\n  just this \n", "?") == "just this"
    assert first_error_line("", "fallback") == "fallback"
    assert len(first_error_line("error " * 100, "?")) == 200


def test_per_index_makes_one_object_per_index_once():
    calls: list[int] = []

    @per_index
    def get(index: int) -> object:
        calls.append(index)
        time.sleep(0.01)  # two threads asking at once both reach here without the lock
        return object()

    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(get(0))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [0] and all(g is got[0] for g in got)
    assert get(1) is not got[0] and get(1) is get(1) and calls == [0, 1]
    assert get.__name__ == "get" and set(get.made) == {0, 1}


def test_per_index_keeps_nothing_when_make_raises():
    tries: list[int] = []

    @per_index
    def get(index: int) -> int:
        tries.append(index)
        if len(tries) == 1:
            raise Unavailable("not yet")
        return index * 10

    with pytest.raises(Unavailable, match="not yet"):
        get(3)
    assert get(3) == 30 and tries == [3, 3]


def test_programs_in_makes_the_context_first_then_programs_in_it():
    from devicekit.per_index import programs_in
    from devicekit.spec import DeviceSpec

    made: list[int] = []

    def context(index: int) -> str:
        made.append(index)
        if index == 9:
            raise Unavailable("TESTCL:9 does not exist")
        return f"ctx{index}"

    factory = programs_in(context, lambda compiled, ctx: (compiled, ctx))
    make = factory(DeviceSpec("TESTCL", 1))
    assert made == [1]  # at once: a missing device fails before any program
    assert make("a") == ("a", "ctx1") and make("b") == ("b", "ctx1") and made == [1]
    with pytest.raises(Unavailable, match="TESTCL:9 does not exist"):
        factory(DeviceSpec("TESTCL", 9))
