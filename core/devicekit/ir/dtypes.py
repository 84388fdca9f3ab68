"""Data types of the kernel IR: scalars, and vectors of 2-16 lanes built from them.

A DType is a value (frozen, hashable, interned by name); `dtypes.float32.vec(4)` is a 4-lane vector.
`np` is the numpy dtype a buffer of this type is stored as: bfloat16 has no numpy type, so it is stored
as uint16 bits and converted through float32 (`to_numpy_values` / `from_numpy_values`).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

_VECS: dict[tuple[str, int], DType] = {}


@dataclass(frozen=True, eq=True)
class DType:
    name: str  # scalar name: "float32", "int8", ...
    itemsize: int  # bytes of one lane
    kind: str  # "b" bool, "i" signed, "u" unsigned, "f" float, "v" void
    count: int = 1  # lanes; 1 for scalars

    def __post_init__(self) -> None:
        # the hash, once: every hash-consed UOp key hashes its dtype, and the generated __hash__ (a tuple of the
        # fields, in Python) was a tenth of lowering. Deterministic (no str hash): it survives pickling
        object.__setattr__(self, "_hash", hash((zlib.crc32(self.name.encode()), self.itemsize, self.kind.encode()[0],
                                                self.count)))

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"dtypes.{self.name}" if self.count == 1 else f"dtypes.{self.name}.vec({self.count})"

    __str__ = __repr__

    # ---- structure
    def vec(self, n: int) -> DType:
        if self.count != 1:
            raise ValueError(f"{self} is already a vector; vectors of vectors are not allowed")
        if (v := _VECS.get((self.name, n))) is not None:  # one object per vector type: a hash-consed node's key
            return v  # compares its dtype by identity, never by the dataclass's field-by-field __eq__
        if not 2 <= n <= 16:
            raise ValueError(f"vector width must be 2..16 lanes, got {n}")
        return _VECS.setdefault((self.name, n), DType(self.name, self.itemsize, self.kind, n))

    def scalar(self) -> DType:
        return self if self.count == 1 else _BY_NAME[self.name]

    @property
    def nbytes(self) -> int:
        return self.itemsize * self.count

    # ---- classification
    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu" and self.kind != "v"

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "u"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def bits(self) -> int:
        return self.itemsize * 8

    # ---- numpy bridge
    @property
    def np(self) -> np.dtype:
        """The numpy dtype of one lane as stored in memory (bfloat16 -> uint16 bits)."""
        return np.dtype(_NP_STORAGE[self.name])

    @property
    def np_compute(self) -> np.dtype:
        """The numpy dtype values of this type are computed in (bfloat16 -> float32)."""
        return np.dtype("float32") if self.name == "bfloat16" else self.np

    def min(self) -> Any:
        if self.is_bool:
            return False
        if self.is_float:
            return -float("inf")
        return int(np.iinfo(self.np).min)

    def max(self) -> Any:
        if self.is_bool:
            return True
        if self.is_float:
            return float("inf")
        return int(np.iinfo(self.np).max)


_NP_STORAGE = {
    "bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "float16", "bfloat16": "uint16", "float32": "float32", "float64": "float64",
}


class dtypes:
    """The scalar dtypes; `dtypes.float32.vec(4)` for vectors."""

    void = DType("void", 0, "v")
    bool = DType("bool", 1, "b")
    int8 = DType("int8", 1, "i")
    int16 = DType("int16", 2, "i")
    int32 = DType("int32", 4, "i")
    int64 = DType("int64", 8, "i")
    uint8 = DType("uint8", 1, "u")
    uint16 = DType("uint16", 2, "u")
    uint32 = DType("uint32", 4, "u")
    uint64 = DType("uint64", 8, "u")
    float16 = DType("float16", 2, "f")
    bfloat16 = DType("bfloat16", 2, "f")
    float32 = DType("float32", 4, "f")
    float64 = DType("float64", 8, "f")
    # aliases
    half = float16
    float = float32
    double = float64
    int = int32
    index = int64  # the type of ranges, vars and indices

    @staticmethod
    def all() -> tuple[DType, ...]:
        return tuple(_BY_NAME[n] for n in _NP_STORAGE)

    @staticmethod
    def floats() -> tuple[DType, ...]:
        return tuple(d for d in dtypes.all() if d.is_float)

    @staticmethod
    def ints() -> tuple[DType, ...]:
        return tuple(d for d in dtypes.all() if d.is_int)

    @staticmethod
    def from_name(name: str) -> DType:
        try:
            return _BY_NAME[name]
        except KeyError:
            raise ValueError(f"unknown dtype {name!r}; known: {', '.join(_NP_STORAGE)}") from None

    @staticmethod
    def from_numpy(dt: Any) -> DType:
        """The DType of a numpy dtype (uint16 maps to uint16, never to bfloat16)."""
        name = np.dtype(dt).name
        if name not in _NP_STORAGE:
            raise TypeError(f"numpy dtype {name} has no devicekit dtype")
        return _BY_NAME[name]


_BY_NAME: dict[str, DType] = {
    d.name: d for d in vars(dtypes).values() if isinstance(d, DType) and d.name != "void"
}
_BY_NAME["void"] = dtypes.void

# promotion lattice for python scalars meeting typed values, and for mixed binary ops
_RANK = {n: i for i, n in enumerate(
    ["bool", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
     "float16", "bfloat16", "float32", "float64"])}


def least_upper(a: DType, b: DType) -> DType:
    """The dtype two operands promote to (the higher rank; vectors keep their lanes)."""
    if a == b:
        return a
    sa, sb = a.scalar(), b.scalar()
    s = sa if _RANK[sa.name] >= _RANK[sb.name] else sb
    count = max(a.count, b.count)
    return s.vec(count) if count > 1 else s


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """uint16 bfloat16 bits -> float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        rounded = np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)
    return rounded.astype(np.uint16)


def to_numpy_values(stored: np.ndarray, dt: DType) -> np.ndarray:
    """Stored buffer contents -> values a user reads (bfloat16 bits become float32)."""
    return bf16_to_f32(stored) if dt.scalar() == dtypes.bfloat16 else stored


def from_numpy_values(values: Any, dt: DType) -> np.ndarray:
    """User values -> the array stored in a buffer of dtype dt."""
    if dt.scalar() == dtypes.bfloat16:
        arr = np.asarray(values)
        return arr.astype(np.uint16) if arr.dtype == np.uint16 else f32_to_bf16(arr.astype(np.float32))
    return np.asarray(values, dtype=dt.np)


# significand bits (with the implicit one) and exponent of the smallest normal number of each float dtype
_FLOAT_FORMAT = {"float16": (11, -14), "bfloat16": (8, -126), "float32": (24, -126), "float64": (53, -1022)}


def round_float(x: float, dt: DType) -> float:
    """`x` rounded to the nearest `dt` value, ties to even, in one rounding (float64 -> bfloat16 directly, not
    through float32), as a Python float; a finite x past the largest finite value becomes inf (the caller decides
    whether that is an error)."""
    mant, emin = _FLOAT_FORMAT[dt.scalar().name]
    if mant == 53 or x == 0 or not math.isfinite(x):
        return float(x)
    e = math.frexp(x)[1] - 1  # x = 1.f * 2**e
    q = max(e, emin) - (mant - 1)  # the spacing of dt's values around x is 2**q (subnormals below emin)
    r = math.ldexp(round(math.ldexp(x, -q)), q)  # exact scalings; round() is ties-to-even
    if abs(r) > largest_float(dt):
        return math.copysign(math.inf, x)
    return math.copysign(r, x) if r == 0 else r


def largest_float(dt: DType) -> float:
    """The largest finite value of float dtype `dt`."""
    mant, _ = _FLOAT_FORMAT[dt.scalar().name]
    return math.ldexp(2 ** mant - 1, _max_exp(dt) - (mant - 1))


def _max_exp(dt: DType) -> int:
    return {"float16": 15, "bfloat16": 127, "float32": 127, "float64": 1023}[dt.scalar().name]


def scalar_wire(dt: DType) -> DType:
    """The dtype a k.scalar of dtype `dt` is passed to a kernel as: every runtime's ABI passes these (OpenCL C has
    no bool kernel arguments, and half/bfloat16 arguments need extensions): bool as uint8, float16 and bfloat16 as
    float32 (the launch rounds the value to `dt` first, so the kernel's conversion back is exact)."""
    return {"bool": dtypes.uint8, "float16": dtypes.float32, "bfloat16": dtypes.float32}.get(dt.name, dt)
