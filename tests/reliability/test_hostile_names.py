"""Hostile user names (issue 11, item 4): any ASCII identifier works as a kernel, param, var or local name on every
renderer, matching PYTHON; anything else is refused by the builder with one clear error. CI runs every hostile name
(2 in 5 of them also as a kernel's name, see names.name_sets) on both CPU pairs; DEVICEKIT_SLOW=1 every name in
every role and argument position."""

from __future__ import annotations

import re

import devicekit as dk
import pytest
from devicekit import ir, kernels, settings
from devicekit.ir import names as irnames
from devicekit.ir.dtypes import dtypes
from devicekit.testing.conformance import check_against_reference
from devicekit.testing.names import HOSTILE_NAMES, INVALID_NAMES, hostile_expected, hostile_kernel, name_sets
from devicekit.testing.random_kernels import assert_matches

SLOW = settings.get("DEVICEKIT_SLOW")
CASES = name_sets(4, rotations=None if SLOW else (0, 2))


@pytest.fixture(scope="module")
def cpu():
    return dk.device("CPU")


def test_the_list_holds_the_issue_names_and_valid_identifiers():
    for n in ("ridx0", "alu0", "acc1", "INFINITY", "HUGE_VAL", "t1", "entry", "loop0", "int", "for", "sqrtf",
              "_Float16", "local", "global"):
        assert n in HOSTILE_NAMES
    assert len(set(HOSTILE_NAMES)) == len(HOSTILE_NAMES) > 250
    for n in HOSTILE_NAMES:
        assert irnames.check(n, "name") == n


@pytest.mark.parametrize(("kname", "args"), CASES, ids=[f"{k}-{'-'.join(a)}" for k, a in CASES])
def test_hostile_names_run_like_python_on_both_cpu_pairs(cpu, kname, args):
    kernel, inputs = hostile_kernel(args, kname)
    want = hostile_expected(args, inputs)  # numpy, not dk.run: both sides of check_against_reference go through it
    for pair in cpu.pair_names:
        got = check_against_reference(kernel, inputs, cpu, f"{kname}{args} [{pair}]", pair)
        assert_matches(got[args[3]], want, dtypes.float32, f"{kname}{args} [{pair}] vs numpy")


@pytest.mark.parametrize("bad", INVALID_NAMES, ids=repr)
@pytest.mark.parametrize("role", ["kernel", "param", "var", "local"])
def test_invalid_names_get_one_clear_error(bad, role):
    k = ir.KernelBuilder("k")
    make = {"kernel": lambda: ir.KernelBuilder(bad), "param": lambda: k.param(bad, dtypes.float32, 4),
            "var": lambda: k.var(bad, 0, 4), "local": lambda: k.local(bad, dtypes.float32, 4)}[role]
    if bad in irnames.LOWERING_VARS and role == "kernel":
        assert make().name == bad  # a kernel may be named core_start: only vars meet the lowering's names
        return
    with pytest.raises((ValueError, TypeError)) as e:
        make()
    msg = str(e.value)
    assert repr(bad) in msg and f"{role} name" in msg, msg
    assert "ASCII identifier" in msg or "reserved" in msg, msg


def test_non_ascii_is_refused_before_any_renderer_sees_it():
    with pytest.raises(ValueError, match="non-ASCII") as e:
        ir.KernelBuilder("k").param("naïve", dtypes.float32, 4)
    assert "ASCII identifier ([A-Za-z_][A-Za-z0-9_]*, at most 128 characters)" in str(e.value)


def test_duplicate_names_still_refused_across_roles():
    k = ir.KernelBuilder("k")
    k.var("int", 0, 4)
    with pytest.raises(ValueError, match="'int' is already used"):
        k.param("int", dtypes.float32, 4)


def _user_identifiers(src: str) -> set[str]:
    return set(re.findall(rf"(?<![A-Za-z0-9_.]){re.escape(irnames.USER_PREFIX)}\w*", src))


def _renderers():
    out = []
    for kind in ("CPU", "CUDA", "METAL"):  # every renderer of generated source that renders here
        try:
            t = dk.target(kind)
        except dk.DeviceKitError:
            continue
        out += [(f"{kind}/{pair}", r) for (r, _), pair in zip(t.compilers, t.pair_names)]
    return out


@pytest.mark.parametrize("name", sorted(kernels.all_kernels()))
def test_no_renderer_emits_the_user_prefix_for_its_own_names(name):
    """The by-construction half: every `dku_` identifier in any rendered source is a mangled user name."""
    kernel = kernels.all_kernels()[name]()
    users = {irnames.mangle(n) for n in [kernel.name, *(p.name for p in kernel.params),
                                         *(v.name for v in kernel.vars)]}
    rs = _renderers()
    assert any(p.startswith("CPU/") for p, _ in rs)
    for pair, renderer in rs:
        spec = renderer.render(kernel)
        assert _user_identifiers(spec.src) <= users, (pair, _user_identifiers(spec.src) - users)
        assert spec.entry == irnames.mangle(kernel.name) and spec.name == kernel.name, pair


def test_spec_keeps_the_users_names_and_run_passes_them(cpu):
    kernel, inputs = hostile_kernel(["for", "INFINITY", "int", "alu0"], "sqrtf")
    for (renderer, _), pair in zip(cpu.compilers, cpu.pair_names):
        spec = renderer.render(kernel)
        assert [p.name for p in spec.params] == ["INFINITY", "int", "alu0"] and [v.name for v in spec.vars] == ["for"]
        assert spec.name == "sqrtf" and spec.entry == "dku_sqrtf", pair
        assert "dku_INFINITY" in spec.src and "dku_alu0" in spec.src, pair
    got = dk.run(kernel, device="CPU", **inputs)
    assert set(got) == {"alu0"}
    assert_matches(got["alu0"], hostile_expected(["for", "INFINITY", "int", "alu0"], inputs), dtypes.float32, "alu0")


def test_handwritten_sources_keep_their_names(cpu):
    """program_from_source looks up the symbol the user wrote: no mangling of hand-written code."""
    import numpy as np
    from devicekit.memory import Buffer
    src = "void scale(const float *restrict x, float *restrict y, long long n) " \
          "{ for (long long i = 0; i < n; i++) y[i] = 2 * x[i]; }"
    prog = cpu.program_from_source(src, "scale", sizes={"x": "n", "y": "n"})
    assert prog.spec.entry == "scale" and prog.spec.symbol == ""
    x = Buffer(cpu, 4, dtypes.float32).copyin(np.arange(4, dtype=np.float32))
    y = Buffer(cpu, 4, dtypes.float32)
    prog.execute([x, y], [4])
    np.testing.assert_array_equal(y.numpy(), 2 * np.arange(4))
