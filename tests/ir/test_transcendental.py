"""The arithmetic exp2/log2/sin that lowering uses for renderers without them: special values and tolerances."""

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes, transcendental
from devicekit.testing.random_kernels import assert_matches

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.inf, -np.inf, np.nan, 1e-40, 3e-39, 127.9, 128.0, -149.5, -160.0,
           1000.0, -1000.0, 3.14159, 1e4, -1e4, 0.1, 7.5, -7.5]


def run_decomposed(fn, x: np.ndarray, dt):
    k = ir.KernelBuilder("t")
    n = k.var("n", 1)
    a = k.param("a", dt, n)
    out = k.param("out", dt, n, writable=True)
    i = k.range(n, "global")
    out[i] = fn(a[i])
    return dk.run(k.build(), device="PYTHON", a=x, n=x.size)["out"]


@pytest.mark.parametrize("dt, npdt", [(dtypes.float32, np.float32), (dtypes.float64, np.float64)])
@pytest.mark.parametrize("name, ref, domain", [("exp2", np.exp2, (-160, 130)), ("log2", np.log2, (-2, 1e6)),
                                               ("sin", np.sin, (-1e4, 1e4))])
def test_decomposition_matches_numpy(dt, npdt, name, ref, domain):
    rng = np.random.default_rng(1)
    x = np.concatenate([np.array(SPECIAL), rng.uniform(*domain, 4000), rng.standard_normal(1000)]).astype(npdt)
    if name == "log2":
        x = np.concatenate([x, np.abs(rng.standard_normal(1000)) * 1e-30, [1e-45, 1e-310]]).astype(npdt)
    got = run_decomposed(getattr(transcendental, name), x, dt)
    with np.errstate(all="ignore"):
        want = ref(x)
    assert_matches(got, want, dt, f"{name} {dt}")


def test_half_types_go_through_float32():
    x = np.array([0.0, 1.5, -3.0, 10.0], np.float16)
    got = run_decomposed(transcendental.exp2, x, dtypes.float16)
    assert_matches(got, np.exp2(x), dtypes.float16, "exp2 f16")
