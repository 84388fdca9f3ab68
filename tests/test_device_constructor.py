"""`Device` has one constructor (issue 35): one pair given positionally, as vendors and tests have always written it,
or many through `pairs=` (the registry's form), each a real CPU device here; a mix of the two, or neither, is a
TypeError that names what was wrong. `Device.from_pairs` is an alias kept for plugins written against it."""

from __future__ import annotations

import numpy as np
import pytest
from devicekit import kernels
from devicekit.targets import Device


@pytest.fixture(scope="module")
def cpu():
    import devicekit as dk
    return dk.device("CPU")


def _saxpy_ok(dev: Device) -> bool:
    import devicekit as dk
    x, y = np.arange(16, dtype=np.float32), np.ones(16, np.float32)
    out = dk.run(kernels.elementwise("a * b + c"), device=dev, a=x, b=x, c=y, n=16)["out"]
    return bool(np.allclose(out, x * x + y))


def test_one_pair_positionally_as_before(cpu):
    r, c = cpu.pair("c")
    dev = Device("CPU", cpu.allocator, r, c, cpu.runtime)
    assert dev.pair_names == [c.name] and dev.compilers == [(r, c)] and dev.fallback_reason is None
    assert dev.runtime is cpu.runtime and dev.allocator is cpu.allocator
    assert _saxpy_ok(dev)


def test_many_pairs_by_keyword_with_names_and_reason(cpu):
    dev = Device(cpu.spec, cpu.allocator, runtime=cpu.runtime, pairs=cpu.compilers, pair_names=cpu.pair_names,
                 fallback_reason="a better pair was skipped")
    assert dev.pair_names == cpu.pair_names and dev.compilers == cpu.compilers
    assert dev.fallback_reason == "a better pair was skipped"
    assert dev.pair("c") == cpu.pair("c") and _saxpy_ok(dev)


def test_pair_names_default_to_each_compilers_name(cpu):
    dev = Device("CPU", cpu.allocator, runtime=cpu.runtime, pairs=[cpu.pair("c"), cpu.pair("llvm")])
    assert dev.pair_names == [cpu.pair("c")[1].name, cpu.pair("llvm")[1].name]


def test_the_registry_builds_its_devices_with_this_constructor(cpu, monkeypatch):
    """A fresh registry's CPU device, every pair and its fallback reason, comes through the keyword form: the alias
    the registry called before is made to fail here."""
    from devicekit import registry as reg_mod

    def refuse(*a, **k):
        raise AssertionError("the registry called Device.from_pairs")
    monkeypatch.setattr(Device, "from_pairs", classmethod(refuse))
    monkeypatch.setattr(reg_mod, "_registry", reg_mod.Registry())
    dev = reg_mod.device("CPU")
    assert type(dev) is Device and dev is not cpu
    assert dev.pair_names == cpu.pair_names and dev.fallback_reason == cpu.fallback_reason and _saxpy_ok(dev)


@pytest.mark.parametrize("call, words", [
    (lambda c, r, k: Device("CPU", c.allocator, r, k, c.runtime, pairs=[(r, k)]),
     "both a single pair (renderer and compiler) and pairs= were given"),
    (lambda c, r, k: Device("CPU", c.allocator, r, runtime=c.runtime, pairs=[(r, k)]),
     "both a single pair (renderer) and pairs= were given"),
    (lambda c, r, k: Device("CPU", c.allocator, runtime=c.runtime),
     "no compiler pair (renderer and compiler missing)"),
    (lambda c, r, k: Device("CPU", c.allocator, r, runtime=c.runtime), "no compiler pair (compiler missing)"),
    (lambda c, r, k: Device("CPU", c.allocator, r, k, c.runtime, pair_names=["c"]),
     "pair_names= was given without pairs="),
    (lambda c, r, k: Device("CPU", c.allocator, r, k), "no runtime"),
    (lambda c, r, k: Device("CPU", None, r, k, c.runtime), "no allocator"),
    (lambda c, r, k: Device("CPU", c.allocator, runtime=c.runtime, pairs=(r, k)),
     "pairs[0] must be a (renderer, compiler) tuple"),
    (lambda c, r, k: Device("CPU", c.allocator, runtime=c.runtime, pairs="c"),
     "pairs= must be a list of (renderer, compiler) tuples"),
])
def test_a_mix_or_neither_is_a_type_error_naming_what_was_wrong(cpu, call, words):
    r, k = cpu.pair("c")
    with pytest.raises(TypeError) as e:
        call(cpu, r, k)
    assert words in str(e.value) and "Device('CPU')" in str(e.value), str(e.value)


def test_names_and_pairs_of_different_lengths_are_refused(cpu):
    with pytest.raises(ValueError, match="2 compiler pairs but 1 names"):
        Device("CPU", cpu.allocator, runtime=cpu.runtime, pairs=cpu.compilers[:2], pair_names=["c"])


def test_from_pairs_is_an_alias_of_the_keyword_form(cpu):
    dev = Device.from_pairs("CPU", cpu.allocator, cpu.compilers, cpu.pair_names, cpu.runtime, "why")
    assert type(dev) is Device and dev.pair_names == cpu.pair_names and dev.fallback_reason == "why"
    assert _saxpy_ok(dev)
