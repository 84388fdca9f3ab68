"""The core pieces a queue-based runtime shares (issue 35: lean backends), tested without a device: a program's
checked launch sizes (work_sizes.CheckedSizes), the launch handle of an event (runtime.EventLaunch), the event wait
that Ctrl-C interrupts and whose driver wait raises (interrupt.wait_event), handles that are byte ranges of one
allocation (alloc.Region, RegionAllocator), a plugin parser's accepted words (settings.accepting), a probe's rank
by what it found (plugin.Availability.found), a device's limits over its language's (Renderer.set_limits) and a
hand-written kernel's argument list (render.signature.launch_args). Each was
OpenCL's own before; the OPENCL plugin's tests run them on a device."""

from __future__ import annotations

import pytest
from devicekit import interrupt, launch_sizes, settings
from devicekit.alloc import BufferOptions, Region, RegionAllocator
from devicekit.errors import LaunchError, SettingError
from devicekit.plugin import Availability
from devicekit.runtime import EventLaunch
from devicekit.work_sizes import CheckedSizes

LIMITS = launch_sizes.Limits(device="TOY", max_local=(8, 8, 1), max_group_items=16, max_total_groups=100)


def test_checked_sizes_give_groups_items_a_group_and_items_of_one_length():
    sizes = CheckedSizes("k", LIMITS)
    assert sizes((4, 2), (8,)) == ((4, 2), (8, 1), (32, 2))
    assert sizes((3,), None) == ((3,), (1,), (3,))  # no local size: one work-item a group
    assert sizes(None, None) == ((1,), (1,), (1,))


def test_checked_sizes_are_checked_again_when_they_change():
    sizes = CheckedSizes("k", LIMITS)
    first = sizes((4,), (8,))
    assert sizes((4,), (8,)) is first  # the same sizes: kept, not checked again
    with pytest.raises(LaunchError, match=r"k: local_size\[0\] = 9 exceeds TOY's limit of 8 work-items on axis 0"):
        sizes((4,), (9,))
    with pytest.raises(LaunchError, match=r"k: global_size=\(101,\) is 101 groups; TOY runs at most 100"):
        sizes((101,), (1,))
    with pytest.raises(LaunchError, match=r"global_size\[0\] = -1 is below 0"):
        sizes((-1,), None)
    assert sizes((4,), (8,)) == first


def test_checked_sizes_use_and_enforce_a_required_group_size():
    sizes = CheckedSizes("k", LIMITS, required=(4, 2, 1))
    assert sizes((3,), None) == ((3, 1), (4, 2), (12, 2))
    with pytest.raises(LaunchError, match=r"declares reqd_work_group_size\(4, 2, 1\); it was launched with local "
                                          r"size \(2, 2\)"):
        sizes((3,), (2, 2))


def test_an_event_launch_finishes_once_and_keeps_its_seconds():
    calls = []
    h = EventLaunch(lambda: calls.append(1) or 0.25)
    assert not h.done and calls == []
    assert h.wait() == 0.25 and h.wait() == 0.25 and h.done
    assert calls == [1]
    h = EventLaunch(lambda ctx, ev: calls.append((ctx, ev)) or 0.5, "ctx", "ev")  # OPENCL's: _timed(ctx, event)
    assert not h.done and repr(h) == "<Launch submitted>" and h.wait() == 0.5 and h.wait() == 0.5
    assert calls == [1, ("ctx", "ev")] and h.done and h._device is None


def test_wait_event_polls_then_raises_from_the_drivers_wait():
    """On the main thread `done()` is polled; the driver's wait (`block`) is still called once after, so a command
    that ended in error raises its error there."""
    polls, blocks = [], []

    def done():
        polls.append(1)
        return len(polls) >= 3

    def block():
        blocks.append(1)
        raise RuntimeError("CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST")
    with pytest.raises(RuntimeError, match="ERROR_FOR_EVENTS"):
        interrupt.wait_event(done, block)
    assert len(polls) == 3 and blocks == [1]


class _Toy(RegionAllocator):
    def _alloc(self, nbytes: int, options: BufferOptions) -> Region:
        return Region(bytearray(nbytes), 0, nbytes, self.index)

    def _free(self, handle: Region, nbytes: int, options: BufferOptions) -> None:
        pass

    def copyin(self, handle: Region, src: memoryview) -> None:
        self._own(handle)
        handle.mem[handle.offset:handle.offset + src.nbytes] = src

    def copyout(self, dest: memoryview, handle: Region) -> None:
        self._own(handle)
        dest[:] = handle.mem[handle.offset:handle.offset + dest.nbytes]


def test_a_region_view_is_its_allocation_at_an_offset_and_another_ids_handle_is_refused():
    a, b = _Toy("TOY", 0), _Toy("TOY:1", 1)
    h = a.alloc(16)
    v = a.offset(a.offset(h, 8, 4), 4, 2)
    assert (v.mem is h.mem, v.offset, v.nbytes, v.index) == (True, 6, 4, 0)
    a.copyin(v, memoryview(bytes([1, 2, 3, 4])))
    out = bytearray(16)
    a.copyout(memoryview(out), h)
    assert list(out[6:10]) == [1, 2, 3, 4] and not any(out[:6]) and not any(out[10:])
    with pytest.raises(ValueError, match="TOY:1: the buffer belongs to device id 0 of this kind, not to this device"):
        b.copyin(v, memoryview(bytes(4)))


def test_a_plugin_parser_says_what_it_accepts(monkeypatch):
    monkeypatch.setattr(settings, "_settings", dict(settings._settings))  # forget the test's declaration afterwards
    @settings.accepting("an even number")
    def even(raw: str) -> int:
        if int(raw) % 2:
            raise ValueError("odd")
        return int(raw)
    settings.register("DKTEST_QUEUE_EVEN", even, 0, "a test variable", "dk-test-plugin")
    monkeypatch.setenv("DKTEST_QUEUE_EVEN", "3")
    with pytest.raises(SettingError, match=r"DKTEST_QUEUE_EVEN=.*3.* is not valid \(odd\): expected an even "
                                            r"number"):
        settings.get("DKTEST_QUEUE_EVEN")
    monkeypatch.setenv("DKTEST_QUEUE_EVEN", "4")
    assert settings.get("DKTEST_QUEUE_EVEN") == 4


def test_a_probe_ranks_a_gpu_above_the_cpu_device_and_a_software_device_below_it():
    """Availability.found, the probe answer of OPENCL and WEBGPU: installing PoCL or lavapipe never makes them the
    default device, a real GPU does."""
    import devicekit as dk
    cpu = next(d.priority for d in dk.devices() if d.kind == "CPU")
    gpu, software = Availability.found(gpu=True), Availability.found(gpu=False)
    assert gpu.ok and software.ok
    assert gpu.priority > cpu > software.priority > -100  # PYTHON, the reference, is -100


def test_a_devices_limits_replace_the_languages_and_local_max_is_cut_to_the_workgroup():
    """Renderer.set_limits, how OPENCL and WEBGPU renderers take a device's limits from its driver."""
    from devicekit.render.cstyle import CStyleRenderer

    class Toy(CStyleRenderer):
        local_max, local_total_max, shared_max, max_buffers = (256, 256, 64), 256, 16384, 8

    r = Toy()
    r.set_limits(local_max=(1024, 1024, 64), local_total_max=512, shared_max=65536)
    assert (r.local_max, r.local_total_max, r.shared_max, r.max_buffers) == ((512, 512, 64), 512, 65536, 8)
    assert (Toy.local_max, Toy.shared_max) == ((256, 256, 64), 16384)  # the language's defaults stay as they are
    r.set_limits(global_max=(7, 7, 7))
    assert r.capabilities.global_max == (7, 7, 7) and r.capabilities.local_max == (512, 512, 64)


def test_launch_args_follow_the_declaration_order_with_local_memory_sized_per_launch():
    """render.signature.launch_args, a hand-written kernel's argument list (OPENCL's runtime passes it to
    clSetKernelArg): buffers, vars and local memory interleaved as declared, local bytes from these var values."""
    pytest.importorskip("clang.cindex")
    pytest.importorskip("devicekit_opencl")
    from devicekit.compile.source_spec import read_source
    from devicekit.render.signature import launch_args
    src = "__kernel void k(__local float *tile, int n, __global float *x, float a, __local int *t2) { }"
    spec = read_source("devicekit_opencl.source:read_opencl", src, "k", device="OPENCL", lang="opencl",
                       sizes={"x": "n"}, shared_bytes={"tile": "n * 4", "t2": 64})
    made = launch_args(spec, {"n": 8, "a": 1.5}, buffer=lambda i: ("buffer", i), var=lambda j: ("var", j),
                       local=lambda nbytes: ("local", nbytes))
    assert made == [("local", 32), ("var", 0), ("buffer", 0), ("var", 1), ("local", 64)]
    assert launch_args(spec, {"n": 2, "a": 0.0}, str, str, lambda nbytes: nbytes)[0] == 8
