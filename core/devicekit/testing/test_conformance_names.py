"""Conformance: names. A kernel whose kernel, param, var (and, where the renderer has local memory, local array)
names come from `names.HOSTILE_NAMES` (keywords, header macros, builtins, qualifiers, every renderer's temporaries)
renders with the user's names kept in the signature, compiles, and on the device matches PYTHON with every pair."""

from __future__ import annotations

import pytest

from ..ir.dtypes import dtypes
from .conformance import check_against_reference
from .names import hostile_expected, hostile_kernel, name_sets
from .random_kernels import assert_matches

pytestmark = pytest.mark.devicekit_conformance

CASES = name_sets(5, rotations=(0,))[::4]  # a sample of the cases; tests/reliability runs them all on the CPU


def _local(target) -> bool:
    caps = target.compilers[0][0].capabilities
    return bool(caps.has_local and caps.gpu_indexing)


@pytest.mark.parametrize(("kname", "args"), CASES, ids=[k for k, _ in CASES])
def test_hostile_names_render_and_compile(dk_compiles, kname, args):
    kernel, _ = hostile_kernel(args, kname, local=_local(dk_compiles))
    for (renderer, compiler), pair in zip(dk_compiles.compilers, dk_compiles.pair_names):
        spec = renderer.render(kernel)
        assert spec.name == kname, f"pair {pair}: ProgramSpec.name {spec.name!r} is not the kernel's name"
        assert [p.name for p in spec.params] == [p.name for p in kernel.params], f"pair {pair}: param names changed"
        assert [v.name for v in spec.vars] == [v.name for v in kernel.vars], f"pair {pair}: var names changed"
        assert compiler.compile(spec).lib, f"pair {pair}: no bytes"


@pytest.mark.parametrize(("kname", "args"), CASES, ids=[k for k, _ in CASES])
def test_hostile_names_match_reference(dk_device, kname, args):
    local = _local(dk_device)
    kernel, inputs = hostile_kernel(args, kname, local=local)
    want = hostile_expected(args, inputs, local)  # numpy: independent of the reference and of dk.run
    for pair in dk_device.pair_names:
        got = check_against_reference(kernel, inputs, dk_device, f"{kname}{args} [{pair}]", pair)
        assert_matches(got[args[3]], want, dtypes.float32, f"{kname}{args} [{pair}] vs numpy")
