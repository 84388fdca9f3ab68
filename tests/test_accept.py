"""ir.accept, the one place that says what an entry point accepts: each refusal's exact words (they tell the user
what to pass instead) and each acceptance. Written against the mutants mutmut left alive (docs/testing.md)."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import pytest
from devicekit import ir
from devicekit.ir.accept import a, as_dtype, as_kernel, described, host_array
from devicekit.ir.dtypes import dtypes


@pytest.mark.parametrize(("word", "want"), [("int", "an int"), ("Array", "an Array"), ("float", "a float"),
                                            ("uint8", "a uint8"), ("UnicodeError", "a UnicodeError"),
                                            ("useful", "a useful"), ("usize", "a usize"), ("umbrella", "an umbrella")])
def test_indefinite_article(word, want):
    assert a(word) == want


def test_described():
    assert described(None) == "None"
    assert described(object()) == "an object"
    assert described(functools.partial(print)) == "a partial"  # callable, but no __qualname__: not "the function"
    assert described(print) == "the function print"
    assert described(3) == "an int (3)"
    assert described(ir.KernelBuilder("kb")) == "a KernelBuilder (kernel 'kb', not built)"


def test_a_kernel_and_a_plugins_own_kernel_pass():
    k = ir.KernelBuilder("k")
    x = k.param("x", dtypes.float32, 4, writable=True)
    x[k.range(4, "global")] = 1.0
    built = k.build()
    assert as_kernel(built, "w") is built
    own = SimpleNamespace(key=b"content")  # a plugin's own kernel type: it has a content key
    assert as_kernel(own, "w") is own


def test_refusals_say_what_to_pass():
    kb = ir.KernelBuilder("kb")
    with pytest.raises(TypeError) as e:
        as_kernel(kb, "dk.run")
    assert str(e.value) == ("dk.run: got a KernelBuilder (kernel 'kb', not built); call its .build() first: "
                            "dk.run(k.build(), ...)")
    with pytest.raises(TypeError) as e:
        as_kernel(kb, "Device.compile")
    assert str(e.value) == ("Device.compile: got a KernelBuilder (kernel 'kb', not built); call its .build() first "
                            "and pass the ir.Kernel it returns")
    with pytest.raises(TypeError) as e:
        as_kernel(3, "dk.run")
    assert str(e.value) == "dk.run: expected an ir.Kernel (ir.KernelBuilder(...).build()) or a Program, got an int (3)"
    with pytest.raises(TypeError) as e:
        as_kernel(3, "render")
    assert str(e.value) == "render: expected an ir.Kernel (ir.KernelBuilder(...).build()), got an int (3)"
    with pytest.raises(TypeError, match=r"^render: expected an ir.Kernel .*, got a partial$"):
        as_kernel(functools.partial(print), "render")
    with pytest.raises(TypeError, match=r"got the function print, not a kernel; call it with its arguments \(print"):
        as_kernel(print, "render")


def test_dtypes_accepted_and_refused():
    assert as_dtype("float32", "w") is dtypes.float32 and as_dtype(np.int16, "w") is dtypes.int16
    with pytest.raises(TypeError) as e:
        as_dtype(None, "w")  # np.dtype(None) would be float64: None is refused
    assert str(e.value).endswith("got None")
    with pytest.raises(TypeError) as e:
        as_dtype(3.5, "w")
    assert str(e.value).endswith("got a float (3.5)")
    with pytest.raises(TypeError) as e:
        as_dtype(np.complex64, "w")
    assert str(e.value).endswith("; pass one of " + ", ".join(d.name for d in dtypes.all()))


def test_host_data():
    np.testing.assert_array_equal(host_array(bytearray(b"\x01\x02"), dtypes.uint8), [1, 2])  # buffer protocol
    np.testing.assert_array_equal(host_array([1, 2], dtypes.int32), np.array([1, 2], np.int32))
    with pytest.raises(TypeError) as e:
        host_array(["a", "b"], dtypes.int32)
    assert str(e.value) == "data must be numbers (a list, tuple or numpy array), got a list holding ['str_']"
    with pytest.raises(TypeError) as e:
        host_array(object(), dtypes.float32)
    assert str(e.value) == "data is a numpy array, a buffer-protocol object or a list of numbers, got an object"
    with pytest.raises(TypeError, match="Python floats for an int32 buffer would be truncated"):
        host_array([1.5], dtypes.int32)
    bf = host_array(np.zeros(2, np.float32), dtypes.bfloat16)
    assert bf.dtype == np.float32
    with pytest.raises(TypeError) as e:
        host_array(np.zeros(2), dtypes.bfloat16)
    assert str(e.value) == ("a bfloat16 buffer takes float32 values or uint16 bits, got float64: pass "
                            "x.astype(np.float32)")
    with pytest.raises(TypeError, match=r"dtype mismatch: buffer is .*; pass x.astype\(np.float32\)"):
        host_array(np.zeros(2), dtypes.float32)
