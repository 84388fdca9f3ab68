"""Read a cubin (an NVIDIA CUDA ELF) without a GPU: its target arch and the kernels it defines."""

from __future__ import annotations

import struct
from dataclasses import dataclass

EM_CUDA = 190
SHT_SYMTAB = 2
STT_FUNC = 2


@dataclass(frozen=True)
class CubinInfo:
    arch: str  # "sm_90"
    functions: tuple[str, ...]  # names of the FUNC symbols (the kernels)
    abi_version: int


def inspect(lib: bytes) -> CubinInfo:
    """Parse the ELF header and symbol table; ValueError when `lib` is not a 64-bit little-endian CUDA ELF."""
    if lib[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    if lib[4] != 2 or lib[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF")
    machine = struct.unpack_from("<H", lib, 18)[0]
    if machine != EM_CUDA:
        raise ValueError(f"ELF machine {machine} is not EM_CUDA ({EM_CUDA})")
    flags = struct.unpack_from("<I", lib, 48)[0]
    shoff = struct.unpack_from("<Q", lib, 40)[0]
    shentsize, shnum = struct.unpack_from("<HH", lib, 58)
    sections = [struct.unpack_from("<IIQQQQIIQQ", lib, shoff + i * shentsize) for i in range(shnum)]
    funcs: list[str] = []
    for _name, stype, _fl, _addr, off, size, link, _info, _align, entsize in sections:
        if stype != SHT_SYMTAB:
            continue
        stroff = sections[link][4]
        for k in range(size // (entsize or 24)):
            st_name, st_info = struct.unpack_from("<IB", lib, off + k * (entsize or 24))
            if st_info & 0xF == STT_FUNC:
                end = lib.index(b"\0", stroff + st_name)
                funcs.append(lib[stroff + st_name:end].decode())
    return CubinInfo(f"sm_{(flags >> 8) & 0xFF}", tuple(funcs), lib[8])
