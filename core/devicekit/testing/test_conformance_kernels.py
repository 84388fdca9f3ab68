"""Conformance: kernels. Every kernel of `devicekit.kernels.all_kernels()` renders and compiles with every compiler
pair of the target (also where the device cannot run), and on the device matches the PYTHON reference with every
pair; one compiled program serves several sizes; a sample of random kernels matches too."""

from __future__ import annotations

import numpy as np
import pytest

from devicekit import kernels

from .conformance import check_against_reference, dtype_pool, writable_dtypes
from .expected import library_expected
from .random_kernels import assert_matches, random_kernel

pytestmark = pytest.mark.devicekit_conformance

KERNELS = sorted(kernels.all_kernels())


@pytest.mark.parametrize("name", KERNELS)
def test_render(dk_target, dk_spec, name):
    """Rendering needs no hardware: it runs for every kind, also where the device cannot."""
    kernel = kernels.all_kernels()[name]()
    for (renderer, _), pair in zip(dk_target.compilers, dk_target.pair_names):
        spec = renderer.render(kernel)
        assert spec.device == dk_spec.kind, f"pair {pair}: ProgramSpec.device {spec.device!r}"
        assert spec.src.strip(), f"pair {pair}: empty source"
        assert [p.name for p in spec.user_params] == [p.name for p in kernel.params], f"pair {pair}: params reordered"
        assert [v.name for v in spec.vars] == [v.name for v in kernel.vars], f"pair {pair}: vars reordered"
        assert renderer.render(kernel).src == spec.src, f"pair {pair}: rendering is not deterministic"


@pytest.mark.parametrize("name", KERNELS)
def test_compile(dk_compiles, name):
    """Compiling needs the toolchain, not the device (CUDA compiles here without a GPU)."""
    kernel = kernels.all_kernels()[name]()
    for (renderer, compiler), pair in zip(dk_compiles.compilers, dk_compiles.pair_names):
        compiled = compiler.compile(renderer.render(kernel))
        assert isinstance(compiled.lib, bytes) and compiled.lib, f"pair {pair}: no bytes"
        assert compiled.compiler_id == compiler.identity()
        assert compiler.compile(renderer.render(kernel)).lib == compiled.lib, f"pair {pair}: cached bytes differ"


@pytest.mark.parametrize("name", KERNELS)
def test_library_kernel_matches_reference(dk_device, name):
    """Against the PYTHON reference and against plain numpy (`expected.library_expected`): on PYTHON itself the
    reference alone would be compared with itself."""
    kernel = kernels.all_kernels()[name]()
    inputs = kernels.example_inputs(name, seed=1)
    want = library_expected(name, inputs)
    for pair in dk_device.pair_names:
        got = check_against_reference(kernel, inputs, dk_device, f"{name} [{pair}]", pair)
        for out, dt in writable_dtypes(kernel).items():
            assert_matches(np.asarray(got[out]).reshape(-1), want[out], dt, f"{name} [{pair}] {out} vs numpy")


def test_one_program_serves_several_sizes(dk_device):
    import devicekit as dk
    from devicekit.ir.dtypes import dtypes

    program = dk_device.compile(kernels.elementwise("a * b + c", name="dk_conf_sizes"))
    assert dk_device.compile(kernels.elementwise("a * b + c", name="dk_conf_sizes")) is program, \
        "Device.compile memoizes per kernel"
    rng = np.random.default_rng(3)
    for n in (1, 17, 1000, 4097):
        a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
        bufs = [dk.Buffer(dk_device, n, dtypes.float32).copyin(x) for x in (a, b, c)]
        out = dk.Buffer(dk_device, n, dtypes.float32)
        program.execute([*bufs, out], [n], wait=True)
        np.testing.assert_allclose(out.numpy(), a * b + c, rtol=1e-5, atol=1e-6, err_msg=f"n={n}")


def test_scalar_params_match_reference(dk_device):
    """k.scalar params of every dtype the renderer supports (bool always), each used in an expression, at both ends
    of the int types and at floats no narrower type holds: the runtime passes each as its wire dtype
    (`VarSpec.dtype`, docs/ir.md: Scalar params) and the result is the reference's, with every pair."""
    from devicekit import ir
    values = {"bool": True, "int8": -128, "int16": 32767, "int32": -2**31, "int64": 2**62 + 7, "uint8": 255,
              "uint16": 65535, "uint32": 2**32 - 1, "uint64": 2**64 - 3, "float16": 1.3, "bfloat16": -2.7,
              "float32": 0.1, "float64": 1 / 3}
    for (renderer, _), pair in zip(dk_device.compilers, dk_device.pair_names):
        dts = [d for d in dtype_pool(renderer) if d.name in values]
        k = ir.KernelBuilder("dk_conf_scalars")  # one output a dtype, no inputs: 27 buffer slots fit Metal's 31
        n = k.var("n", 1, 64)
        i = k.range(n, "global")
        inputs: dict = {"n": 9}
        for dt in dts:
            s = k.scalar(f"s_{dt.name}", dt)
            o = k.param(f"o_{dt.name}", dt, n, writable=True)
            x = (i % 2).ne(0) if dt.is_bool else (i - 4).cast(dt)
            o[i] = x ^ s if dt.is_bool else x * s + s
            inputs[f"s_{dt.name}"] = values[dt.name]
        got = check_against_reference(k.build(), inputs, dk_device, f"scalars [{pair}]", pair)
        for dt in dts:  # and against numpy: the reference compared with itself catches nothing on PYTHON
            assert_matches(got[f"o_{dt.name}"], _scalar_expected(dt, values[dt.name], 9), dt, f"o_{dt.name} [{pair}]")


def _scalar_expected(dt, value, n: int) -> np.ndarray:
    """o[i] = x * s + s with x = (i - 4) cast to dt (x ^ s for bool), in numpy: integers wrap, half and bfloat16
    round through float32 after each op (docs/ir.md)."""
    from devicekit.ir.dtypes import bf16_to_f32, dtypes, f32_to_bf16
    i = np.arange(n)
    if dt.is_bool:
        return ((i % 2) != 0) ^ bool(value)
    if dt == dtypes.bfloat16:
        rnd = lambda v: bf16_to_f32(f32_to_bf16(np.asarray(v, np.float32)))
        s, x = rnd(value), rnd(i - 4)
        return rnd(rnd(x * s) + s)
    if dt.is_float:
        s, x = dt.np.type(value), (i - 4).astype(dt.np)
        return x * s + s
    with np.errstate(over="ignore"):
        s = np.array([value]).astype(np.uint64 if dt.is_unsigned else np.int64).astype(dt.np)
        x = (i - 4).astype(np.int64).astype(dt.np)
        return (x * s + s).astype(dt.np)


def test_random_kernels_match_reference(dk_device, dk_seeds):
    """Each compiler pair, with random kernels over the dtypes its renderer supports."""
    if not dk_seeds:
        pytest.skip("--devicekit-seeds=0")
    failures = []
    for (renderer, _), pair in zip(dk_device.compilers, dk_device.pair_names):
        pool = dtype_pool(renderer)
        for seed in dk_seeds:
            rk = random_kernel(seed, pool=pool)
            try:
                check_against_reference(rk.kernel, rk.inputs, dk_device, f"random_kernel({seed}) [{pair}]", pair)
            except AssertionError as e:
                failures.append(f"seed {seed}, pair {pair}: {e}")
    assert not failures, "\n".join(failures)
