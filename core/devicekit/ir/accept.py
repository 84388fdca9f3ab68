"""What devicekit's entry points accept, in one place, and refusals that say what to pass instead.

- A kernel (`dk.run`, `Device.compile`, `Renderer.render`): an `ir.Kernel`, i.e. `ir.KernelBuilder(...).build()` or
  a library factory called with its arguments (`kernels.elementwise("a + b")`); `dk.run` also takes a Program.
- A dtype (`KernelBuilder.param`/`local`, `Buffer`): a devicekit DType (`dtypes.float32`), a numpy dtype or scalar
  type (`np.float32`, `np.dtype("int32")`), or its name (`"float32"`).
- Data for a buffer (`Buffer.copyin`, each array of `dk.run`): a numpy array of exactly the buffer's dtype, a
  buffer-protocol object, or Python numbers (a list, a tuple, a scalar), converted to the buffer's dtype. Floats are
  never truncated into an integer or bool buffer, and no array is silently cast (the error names the `astype`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import DType, dtypes


def a(word: str) -> str:
    """`word` with its indefinite article: "an int", "a float", "an ir.Kernel"."""
    w = word.lower()
    vowel = w[:1] in "aeiou" and not w.startswith(("uint", "uni", "use", "usi"))  # "a uint8", "a UnicodeError"
    return f"{'an' if vowel else 'a'} {word}"


def described(obj: Any) -> str:
    """What `obj` is, in words, for an error message: "an int (3)", "a KernelBuilder", "the function saxpy"."""
    from .builder import KernelBuilder
    if obj is None:
        return "None"
    if isinstance(obj, KernelBuilder):
        return f"a KernelBuilder (kernel {obj.name!r}, not built)"
    if callable(obj) and hasattr(obj, "__qualname__") and not isinstance(obj, type):
        return f"the function {obj.__qualname__}"
    if isinstance(obj, (bool, int, float, str)):
        return f"{a(type(obj).__name__)} ({obj!r:.40})"
    return a(type(obj).__name__)


def as_kernel(obj: Any, where: str) -> Any:
    """`obj` when it is a kernel (an ir.Kernel, or a plugin's own kernel object with a `key`), else a TypeError
    saying what to pass: `.build()` for a builder, a call for a factory."""
    from .builder import Kernel, KernelBuilder
    if isinstance(obj, Kernel) or hasattr(obj, "key"):  # a plugin's own kernel type has a content key too
        return obj
    if isinstance(obj, KernelBuilder):
        hint = f"call its .build() first: {where}(k.build(), ...)" if where == "dk.run" else \
            "call its .build() first and pass the ir.Kernel it returns"
        raise TypeError(f"{where}: got {described(obj)}; {hint}")
    if callable(obj) and hasattr(obj, "__qualname__") and not isinstance(obj, type):
        raise TypeError(f"{where}: got {described(obj)}, not a kernel; call it with its arguments "
                        f"({obj.__name__}(...)) and pass the ir.Kernel it returns")
    what = "an ir.Kernel (ir.KernelBuilder(...).build()) or a Program" if where == "dk.run" else \
        "an ir.Kernel (ir.KernelBuilder(...).build())"
    raise TypeError(f"{where}: expected {what}, got {described(obj)}")


def as_dtype(obj: Any, where: str) -> DType:
    """A devicekit DType from a DType, a numpy dtype or scalar type, or a dtype name."""
    if isinstance(obj, DType):
        return obj
    if isinstance(obj, str):
        try:
            return dtypes.from_name(obj)
        except ValueError as e:
            raise TypeError(f"{where}: {e}") from None
    try:
        np_dt = np.dtype(obj) if obj is not None else None
    except TypeError:
        np_dt = None
    if np_dt is not None:
        try:
            return dtypes.from_numpy(np_dt)
        except TypeError as e:
            raise TypeError(f"{where}: {e}; pass one of {', '.join(d.name for d in dtypes.all())}") from None
    raise TypeError(f"{where}: a dtype is a devicekit dtype (dtypes.float32), a numpy dtype (np.float32) or its name "
                    f"('float32'), got {described(obj)}")


def host_array(obj: Any, dtype: DType) -> np.ndarray:
    """`obj` as a numpy array for a buffer of `dtype` (the rule at the top of this module); not yet flattened or
    size-checked. bfloat16: float32 values or uint16 bits."""
    want = dtype.scalar()
    if isinstance(obj, np.ndarray):
        arr = obj
    elif isinstance(obj, (list, tuple, int, float, bool, np.generic)):
        natural = np.asarray(obj)
        if natural.dtype.kind in "fc" and (want.is_int or want.is_bool):
            raise TypeError(f"Python floats for {a(str(want.name))} buffer would be truncated: pass ints, or a numpy "
                            f"array of {want.np} (np.asarray(values).astype(np.{want.np}))")
        if natural.dtype.kind not in "biufc":
            raise TypeError(f"data must be numbers (a list, tuple or numpy array), got {described(obj)} holding "
                            f"{sorted({type(v).__name__ for v in np.ravel(natural)})}")
        arr = np.asarray(obj, dtype=dtype.np_compute)
    else:
        try:
            arr = np.asarray(memoryview(obj))
        except TypeError:
            raise TypeError(f"data is a numpy array, a buffer-protocol object or a list of numbers, got "
                            f"{described(obj)}") from None
    if want == dtypes.bfloat16:
        if arr.dtype not in (np.float32, np.uint16):
            raise TypeError(f"a bfloat16 buffer takes float32 values or uint16 bits, got {arr.dtype}: pass "
                            f"x.astype(np.float32)")
    elif arr.dtype != want.np:
        raise TypeError(f"dtype mismatch: buffer is {dtype} (numpy {want.np}), data is {arr.dtype}; pass "
                        f"x.astype(np.{want.np}) (devicekit never casts an array silently)")
    return arr
