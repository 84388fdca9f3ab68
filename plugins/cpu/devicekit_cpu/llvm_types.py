"""LLVM IR spellings of devicekit dtypes and literals: shared by the renderer's walk (llvm_renderer) and its loop
passes (loop_passes), so neither imports the other for them. Pure text: imports no llvmlite."""

from __future__ import annotations

import struct

import numpy as np
from devicekit.ir.dtypes import DType

_SCALAR = {"bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "i8", "uint16": "i16",
           "uint32": "i32", "uint64": "i64", "float16": "half", "bfloat16": "bfloat", "float32": "float",
           "float64": "double"}
_SUFFIX = {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64"}


def lty(dt: DType) -> str:
    """LLVM type of a value (bool is i1)."""
    s = _SCALAR[dt.name]
    return s if dt.count == 1 else f"<{dt.count} x {s}>"


def mty(dt: DType) -> str:
    """LLVM type of a value in memory (bool is a byte)."""
    s = "i8" if dt.name == "bool" else _SCALAR[dt.name]
    return s if dt.count == 1 else f"<{dt.count} x {s}>"


def intrinsic_suffix(dt: DType) -> str:
    s = _SCALAR[dt.name]
    s = _SUFFIX.get(s, s)
    return s if dt.count == 1 else f"v{dt.count}{s}"


def const_literal(value, dt: DType) -> str:
    """An LLVM literal of scalar dtype dt."""
    if dt.is_bool:
        return "true" if value else "false"
    if dt.is_int:
        v = int(value) & ((1 << dt.bits) - 1)
        return str(v - (1 << dt.bits) if v >> (dt.bits - 1) else v)
    with np.errstate(over="ignore"):  # a literal past the type's range is +-inf, the defined rounding (no warning)
        if dt.name == "float16":
            return f"0xH{int(np.float16(value).view(np.uint16)):04X}"
        if dt.name == "bfloat16":
            from devicekit.ir.dtypes import f32_to_bf16
            return f"0xR{int(f32_to_bf16(np.array([value], np.float32))[0]):04X}"
        if dt.name == "float32":
            value = float(np.float32(value))
    return f"0x{struct.unpack('<Q', struct.pack('<d', float(value)))[0]:016X}"
