"""One rule for what the entry points accept (ir/accept.py), and every refusal says what to pass instead: a
forgotten .build(), an uncalled kernel factory, Python lists and scalars into dk.run (as Buffer.copyin takes them),
numpy dtypes and dtype names in KernelBuilder.param like Buffer, and "an int", never "a int"."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir, kernels
from devicekit.ir import dtypes
from devicekit.ir.accept import a, described


def _builder() -> ir.KernelBuilder:
    k = ir.KernelBuilder("twice")
    n = k.var("n", 1, 1 << 20)
    x = k.param("x", dtypes.float32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[i] * 2.0
    return k


def test_a_forgotten_build_says_call_build():
    k = _builder()
    with pytest.raises(TypeError, match=r"dk.run: got a KernelBuilder \(kernel 'twice', not built\); call its "
                                        r"\.build\(\) first"):
        dk.run(k, "PYTHON", x=np.ones(4, np.float32), n=4)
    with pytest.raises(TypeError, match=r"call its \.build\(\) first"):
        dk.device("PYTHON").compile(k)


def test_an_uncalled_factory_says_call_it():
    with pytest.raises(TypeError, match=r"got the function elementwise, not a kernel; call it with its arguments "
                                        r"\(elementwise\(\.\.\.\)\)"):
        dk.run(kernels.elementwise, "PYTHON", a=np.ones(2, np.float32))
    with pytest.raises(TypeError, match=r"expected an ir.Kernel .* or a Program, got an int \(3\)"):
        dk.run(3, "PYTHON")


def test_dk_run_takes_lists_and_scalars_like_copyin():
    kernel = _builder().build()
    got = dk.run(kernel, "PYTHON", x=[1, 2.5, 3], n=3)["out"]
    assert got.dtype == np.float32 and got.tolist() == [2.0, 5.0, 6.0]
    buf = dk.Buffer("PYTHON", 3, dtypes.float32).copyin([1, 2.5, 3])
    assert buf.numpy().tolist() == [1.0, 2.5, 3.0]
    assert dk.run(kernel, "PYTHON", x=4.0, n=1)["out"].tolist() == [8.0]


def test_no_silent_casts_and_each_refusal_names_the_fix():
    kernel = _builder().build()
    with pytest.raises(TypeError, match=r"param 'x': dtype mismatch: .* data is float64; pass x\.astype\(np\.float32\)"):
        dk.run(kernel, "PYTHON", x=np.ones(3), n=3)
    ints = kernels.elementwise("a + b", dtype=dtypes.int32)
    with pytest.raises(TypeError, match=r"param 'a': Python floats for an int32 buffer would be truncated: pass ints"):
        dk.run(ints, "PYTHON", a=[1.5, 2], b=[1, 2], n=2)
    with pytest.raises(TypeError, match="Python floats for an int32 buffer"):
        dk.Buffer("PYTHON", 2, dtypes.int32).copyin([1.5, 2])
    with pytest.raises(TypeError, match="data must be numbers"):
        dk.Buffer("PYTHON", 2, dtypes.int32).copyin(["a", "b"])


@pytest.mark.parametrize("dt", [dtypes.int16, np.int16, np.dtype("int16"), "int16"])
def test_param_takes_every_dtype_spelling_buffer_takes(dt):
    k = ir.KernelBuilder("spell")
    x = k.param("x", dt, 4, writable=True)
    x[0] = 1
    assert k.build().params[0].dtype == dtypes.int16
    assert dk.Buffer("PYTHON", 4, dt).dtype == dtypes.int16


def test_bad_dtypes_say_what_a_dtype_is():
    k = ir.KernelBuilder("bad")
    with pytest.raises(TypeError, match=r"param x: a dtype is a devicekit dtype \(dtypes.float32\), a numpy dtype"):
        k.param("x", object(), 4)
    with pytest.raises(TypeError, match="param y: unknown dtype 'floaty'; known: bool"):
        k.param("y", "floaty", 4)
    with pytest.raises(TypeError, match="param z: .* a param is an array of scalars: pass dtypes.float32"):
        k.param("z", dtypes.float32.vec(4), 4)
    with pytest.raises(TypeError, match="Buffer: numpy dtype complex64 has no devicekit dtype; pass one of"):
        dk.Buffer("PYTHON", 3, np.complex64)


def test_articles():
    assert [a(w) for w in ("int", "float", "ir.Kernel", "uint8")] == ["an int", "a float", "an ir.Kernel", "a uint8"]
    assert described(3) == "an int (3)" and described(None) == "None"
