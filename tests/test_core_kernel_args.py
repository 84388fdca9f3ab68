"""devicekit.kernel_args.set_changed, device-free: a kernel object stand-in that records each argument set (the
driver's call is what costs); devicekit-opencl's per-thread kernel objects use it
(plugins/opencl/tests/test_opencl_launch_cache.py runs it on PoCL)."""

from __future__ import annotations

import pytest
from devicekit.kernel_args import set_changed


class Kernel:
    def __init__(self, fail_at: int | None = None):
        self.sets: list[tuple[int, object]] = []
        self.fail_at = fail_at

    def set_arg(self, i: int, value: object) -> None:
        if i == self.fail_at:
            raise RuntimeError(f"driver refused argument {i}")
        self.sets.append((i, value))


CONVERT = [lambda m: ("mem", m), int, float]


def test_only_the_changed_arguments_are_set_converted():
    k, last, mem = Kernel(), [None, None, None], object()
    set_changed(k.set_arg, last, [mem, 4, 1.5], CONVERT)
    assert k.sets == [(0, ("mem", mem)), (1, 4), (2, 1.5)] and last == [mem, 4, 1.5]
    k.sets.clear()
    set_changed(k.set_arg, last, [mem, 4, 1.5], CONVERT)  # the same object, an equal int, the same float object
    assert k.sets == []
    other = object()
    set_changed(k.set_arg, last, [other, 2 ** 2, 1.5], CONVERT)
    assert k.sets == [(0, ("mem", other))]


def test_an_equal_float_or_an_int_equal_to_a_float_is_set_again():
    k, last = Kernel(), [None, 0, 0.0]
    set_changed(k.set_arg, last, [None, 0.0, -0.0], CONVERT)  # 0 == 0.0 and 0.0 == -0.0, but not the same argument
    assert k.sets == [(1, 0), (2, -0.0)]
    assert last[1] == 0.0 and type(last[1]) is float


def test_a_set_that_raises_leaves_its_slot_to_be_set_again():
    k, last, mem = Kernel(), [None, None, None], object()
    set_changed(k.set_arg, last, [mem, 5, 2.0], CONVERT)
    k.fail_at = 1
    with pytest.raises(RuntimeError, match="argument 1"):
        set_changed(k.set_arg, last, [mem, 7, 2.0], CONVERT)
    assert last == [mem, None, 2.0]  # what the driver holds in slot 1 is not known now
    k.fail_at, k.sets = None, []
    set_changed(k.set_arg, last, [mem, 5, 2.0], CONVERT)
    assert k.sets == [(1, 5)]
