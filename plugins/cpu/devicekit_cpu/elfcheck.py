"""A structural check of ELF bytes before they reach llvmlite's JIT linker or dlopen.

Neither of those is written for hostile or damaged input: LLVM's object reader aborts the process on some malformed
objects, and the dynamic loader maps segments past the end of a truncated file (SIGBUS on first touch) and writes
relocations wherever r_offset points (SIGSEGV). The compile cache checksums its entries, so this is the defence for
bytes that did not come from our compiler (a CompiledSpec built by hand, a copied cache file, a bad disk).

`check(lib, name, shared)` raises MalformedObjectError naming the program and the first problem found, else
returns None. It checks, with `struct` only:

* the ELF header: magic, class (pointer size), byte order, version and machine of this host, the file type
  (ET_REL object code for the JIT, ET_DYN for dlopen), header sizes;
* the section header table: in the file, every section's bytes in the file, names and links in range, symbol tables
  (entry size, string table, name offsets, section indices, values), relocation sections (symbol indices, offsets
  inside the section they patch, relocation types the JIT implements), .eh_frame record structure;
* for a shared object, what the dynamic loader reads: PT_LOAD segments (in the file, ordered, aligned, a sane span),
  PT_DYNAMIC (in bounds, in a loaded segment, NUL-terminated) and every table it points to (string and symbol
  tables, hash tables, relocations, version tables, init/fini arrays), notes, and the relocations themselves
  (symbol indices, types, targets inside a writable segment, resolver/initializer addresses inside executable code).

It is a sanity check for damage, not a verifier of hostile code: bytes that parse can still compute garbage.
"""

from __future__ import annotations

import platform
import struct
import sys

from devicekit.errors import CompileError

__all__ = ["MalformedObjectError", "check", "host_machine"]


class MalformedObjectError(CompileError, RuntimeError):
    """Compiled bytes that would crash the loader: truncated, damaged, or built for another host."""


ET_REL, ET_DYN = 1, 3
SHT_NULL, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_HASH, SHT_DYNAMIC, SHT_NOTE, SHT_NOBITS, SHT_REL, SHT_DYNSYM = \
    0, 2, 3, 4, 5, 6, 7, 8, 9, 11
SHT_GROUP, SHT_SYMTAB_SHNDX = 17, 18
SHN_LORESERVE, SHN_XINDEX = 0xFF00, 0xFFFF
PT_LOAD, PT_DYNAMIC, PT_NOTE, PT_TLS, PT_GNU_RELRO, PT_GNU_PROPERTY = 1, 2, 4, 7, 0x6474E552, 0x6474E553
PF_X, PF_W = 1, 2
SHF_ALLOC, SHF_TLS = 2, 0x400

DT_NULL, DT_NEEDED, DT_PLTRELSZ, DT_PLTGOT, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_RELA, DT_RELASZ, DT_RELAENT, DT_STRSZ, \
    DT_SYMENT, DT_INIT, DT_FINI, DT_SONAME, DT_RPATH = range(16)
DT_REL, DT_RELSZ, DT_RELENT, DT_PLTREL, DT_TEXTREL, DT_JMPREL = 17, 18, 19, 20, 22, 23
DT_INIT_ARRAY, DT_FINI_ARRAY, DT_INIT_ARRAYSZ, DT_FINI_ARRAYSZ, DT_RUNPATH, DT_FLAGS = 25, 26, 27, 28, 29, 30
DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ, DT_RELRSZ, DT_RELR, DT_RELRENT = 32, 33, 35, 36, 37
DT_RELACOUNT, DT_RELCOUNT = 0x6FFFFFF9, 0x6FFFFFFA
DT_GNU_HASH, DT_VERSYM, DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = \
    0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
DF_TEXTREL = 4

EM_386, EM_ARM, EM_X86_64, EM_AARCH64, EM_RISCV, EM_PPC64, EM_S390, EM_LOONGARCH = 3, 40, 62, 183, 243, 21, 22, 258
_MACHINES = {"x86_64": EM_X86_64, "amd64": EM_X86_64, "aarch64": EM_AARCH64, "arm64": EM_AARCH64,
             "riscv64": EM_RISCV, "ppc64le": EM_PPC64, "ppc64": EM_PPC64, "s390x": EM_S390,
             "loongarch64": EM_LOONGARCH, "i386": EM_386, "i686": EM_386, "armv7l": EM_ARM}

# relocation types the dynamic loader applies in a shared object (x86-64, aarch64); others: not checked
_DYN_RELOCS = {EM_X86_64: {0, 1, 6, 7, 8, 16, 17, 18, 36, 37},  # NONE 64 GLOB_DAT JUMP_SLOT RELATIVE DTPMOD64
               # DTPOFF64 TPOFF64 TLSDESC IRELATIVE
               EM_AARCH64: {0, 257, 1025, 1026, 1027, 1028, 1029, 1030, 1031, 1032}}
_RELATIVE = {EM_X86_64: 8, EM_AARCH64: 1027}
_IRELATIVE = {EM_X86_64: 37, EM_AARCH64: 1032}
# relocation types LLVM's x86-64 JIT linkers implement in object code (RuntimeDyld aborts on the others):
# NONE 64 PC32 GOT32 PLT32 GOTPCREL 32 32S 16 PC16 8 PC8 TLSGD TLSLD DTPOFF32 GOTTPOFF TPOFF32 PC64 GOTOFF64 GOTPC32
# GOT64 GOTPCREL64 GOTPC64 GOTPLT64 GOTPCRELX REX_GOTPCRELX
_OBJ_RELOCS = {EM_X86_64: {0, 1, 2, 3, 4, 9, 10, 11, 12, 13, 14, 15, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
                           41, 42}}
_RELOC_WIDTH = {EM_X86_64: {1: 8, 24: 8, 25: 8, 27: 8, 28: 8, 29: 8, 30: 8, 12: 2, 13: 2, 14: 1, 15: 1}}

MAX_SPAN = 1 << 30  # a kernel's shared object maps a few pages; a damaged header can ask for terabytes


def host_machine() -> int | None:
    """The ELF e_machine of this host, or None where unknown (then the machine is not checked)."""
    return _MACHINES.get(platform.machine().lower())


class _Bad(Exception):
    pass


def _pow2ok(a: int) -> bool:
    return a == 0 or a & (a - 1) == 0


class _Elf:
    def __init__(self, b: bytes, shared: bool):
        self.b, self.n, self.shared = b, len(b), shared
        if self.n < 16 or b[:4] != b"\x7fELF":
            raise _Bad(f"no ELF magic (starts {b[:4]!r}, {self.n} bytes)")
        cls, data, ver = b[4], b[5], b[6]
        want_cls = 2 if struct.calcsize("P") == 8 else 1
        if cls != want_cls:
            raise _Bad(f"ELF class {cls} (ELF{32 if cls == 1 else 64 if cls == 2 else '?'}), this host is "
                       f"ELF{64 if want_cls == 2 else 32}")
        want_data = 1 if sys.byteorder == "little" else 2
        if data != want_data:
            raise _Bad(f"byte order {data} ({'little' if data == 1 else 'big' if data == 2 else '?'}-endian), this "
                       f"host is {sys.byteorder}-endian")
        if ver != 1:
            raise _Bad(f"EI_VERSION {ver}, expected 1")
        self.is64 = cls == 2
        e = "<" if data == 1 else ">"
        self.e = e
        if self.is64:
            self.ehdr, self.phdr, self.shdr = e + "16sHHIQQQIHHHHHH", e + "IIQQQQQQ", e + "IIQQQQIIQQ"
            self.sym, self.rela, self.rel, self.dyn, self.word = e + "IBBHQQ", e + "QQq", e + "QQ", e + "qQ", e + "Q"
        else:
            self.ehdr, self.phdr, self.shdr = e + "16sHHIIIIIHHHHHH", e + "IIIIIIII", e + "IIIIIIIIII"
            self.sym, self.rela, self.rel, self.dyn, self.word = e + "IIIBBH", e + "IIi", e + "II", e + "iI", e + "I"
        self.symsz, self.relasz, self.relsz = (struct.calcsize(f) for f in (self.sym, self.rela, self.rel))
        self.ptrsz = 8 if self.is64 else 4
        ehsz = struct.calcsize(self.ehdr)
        if self.n < ehsz:
            raise _Bad(f"{self.n} bytes, shorter than the {ehsz}-byte ELF header")
        (_, self.type, self.machine, version, _entry, self.phoff, self.shoff, _flags, ehsize, self.phentsize,
         self.phnum, self.shentsize, self.shnum, self.shstrndx) = struct.unpack_from(self.ehdr, b, 0)
        want_type = ET_DYN if shared else ET_REL
        if self.type != want_type:
            raise _Bad(f"ELF type {self.type}, expected {want_type} ({'shared object' if shared else 'object file'})")
        hm = host_machine()
        if hm is not None and self.machine != hm:
            raise _Bad(f"built for ELF machine {self.machine}, this host ({platform.machine()}) is {hm}")
        if version != 1:
            raise _Bad(f"e_version {version}, expected 1")
        if ehsize != ehsz:
            raise _Bad(f"e_ehsize {ehsize}, expected {ehsz}")

    # ---------------------------------------------------------------- helpers
    def span(self, off: int, size: int, what: str) -> None:
        if off < 0 or size < 0 or off + size > self.n:
            raise _Bad(f"{what}: bytes [{off:#x}, {off + size:#x}) are outside the {self.n}-byte file")

    def table(self, off: int, count: int, entsize: int, fmt: str, what: str):
        if entsize != struct.calcsize(fmt):
            raise _Bad(f"{what}: entry size {entsize}, expected {struct.calcsize(fmt)}")
        if count > self.n // max(entsize, 1):
            raise _Bad(f"{what}: {count} entries cannot fit in a {self.n}-byte file")
        self.span(off, count * entsize, what)
        return list(struct.iter_unpack(fmt, self.b[off:off + count * entsize])) if count else []

    def cstr(self, tab_off: int, tab_size: int, idx: int, what: str) -> bytes:
        if idx >= tab_size:
            raise _Bad(f"{what}: string offset {idx} past the end of its {tab_size}-byte string table")
        end = self.b.find(b"\0", tab_off + idx, tab_off + tab_size)
        if end < 0:
            raise _Bad(f"{what}: string at offset {idx} is not NUL-terminated inside its string table")
        return self.b[tab_off + idx:end]

    def sym_fields(self, s):
        """(name, info, other, shndx, value, size) for either class."""
        if self.is64:
            return s
        name, value, size, info, other, shndx = s
        return name, info, other, shndx, value, size

    def rel_fields(self, r):
        """(offset, sym, type, addend or None)."""
        info = r[1]
        sym, typ = (info >> 32, info & 0xFFFFFFFF) if self.is64 else (info >> 8, info & 0xFF)
        return r[0], sym, typ, (r[2] if len(r) > 2 else None)

    # ---------------------------------------------------------------- sections
    def check_sections(self) -> None:
        if self.shoff == 0:
            if self.shnum or not self.shared:
                raise _Bad("no section header table" if not self.shared else "e_shnum set without a table")
            self.sections = []
            return
        if self.shnum == 0 or self.shstrndx == SHN_XINDEX:
            raise _Bad("extended section numbering (e_shnum 0 / e_shstrndx SHN_XINDEX) is not supported")
        shs = self.table(self.shoff, self.shnum, self.shentsize, self.shdr, "section header table")
        keys = ("name", "type", "flags", "addr", "offset", "size", "link", "info", "align", "entsize")
        secs = [dict(zip(keys, s)) for s in shs]  # the same field order in ELF32 and ELF64
        self.sections = secs
        if secs[0]["type"] != SHT_NULL:
            raise _Bad(f"section 0 has type {secs[0]['type']}, expected SHT_NULL")
        if not 0 < self.shstrndx < self.shnum or secs[self.shstrndx]["type"] != SHT_STRTAB:
            raise _Bad(f"e_shstrndx {self.shstrndx} is not a string table section (of {self.shnum})")
        for i, s in enumerate(secs):
            what = f"section {i}"
            if s["type"] != SHT_NOBITS:
                self.span(s["offset"], s["size"], what)
            if not _pow2ok(s["align"]):
                raise _Bad(f"{what}: alignment {s['align']} is not a power of two")
            if not self.shared and s["flags"] & SHF_TLS:
                raise _Bad(f"{what}: a thread-local (SHF_TLS) section, which the JIT linker cannot allocate")
            if s["link"] >= self.shnum:
                raise _Bad(f"{what}: sh_link {s['link']} is not a section (there are {self.shnum})")
        st = secs[self.shstrndx]
        for i, s in enumerate(secs):
            s["sname"] = self.cstr(st["offset"], st["size"], s["name"], f"section {i} name")
        self.symtabs: dict[int, list] = {}
        for i, s in enumerate(secs):
            if s["type"] in (SHT_SYMTAB, SHT_DYNSYM):
                self.check_symtab(i, s)
        for i, s in enumerate(secs):
            what = f"section {i} ({s['sname'].decode(errors='replace')})"
            if s["type"] in (SHT_RELA, SHT_REL):
                self.check_relsec(i, s, what)
            elif s["type"] == SHT_GROUP:
                if s["size"] % 4 or s["entsize"] != 4:
                    raise _Bad(f"{what}: a group section of {s['size']} bytes, entry size {s['entsize']}")
                for (x,) in struct.iter_unpack(self.e + "I", self.b[s["offset"] + 4:s["offset"] + s["size"]]):
                    if not 0 < x < self.shnum:
                        raise _Bad(f"{what}: member section {x} out of range")
            elif s["type"] == SHT_SYMTAB_SHNDX:
                raise _Bad(f"{what}: extended symbol section indices (SHT_SYMTAB_SHNDX) are not supported")
            if s["sname"] == b".eh_frame" and s["type"] != SHT_NOBITS:
                self.check_eh_frame(s["offset"], s["size"], what)

    def check_symtab(self, i: int, s: dict) -> None:
        what = f"symbol table section {i}"
        if s["entsize"] != self.symsz or s["size"] % self.symsz:
            raise _Bad(f"{what}: {s['size']} bytes with entry size {s['entsize']}, expected entries of {self.symsz}")
        strs = self.sections[s["link"]]
        if strs["type"] != SHT_STRTAB:
            raise _Bad(f"{what}: sh_link {s['link']} is not a string table")
        syms = [self.sym_fields(x) for x in self.table(s["offset"], s["size"] // self.symsz, self.symsz, self.sym,
                                                         what)]
        for j, (name, _info, _other, shndx, value, size) in enumerate(syms):
            self.cstr(strs["offset"], strs["size"], name, f"{what} symbol {j} name")
            if shndx == SHN_XINDEX or (shndx >= self.shnum and shndx < SHN_LORESERVE):
                raise _Bad(f"{what} symbol {j}: section index {shndx} out of range (there are {self.shnum})")
            if not self.shared and 0 < shndx < self.shnum:
                sec = self.sections[shndx]
                if value > sec["size"] or value + size > sec["size"] and sec["size"]:
                    raise _Bad(f"{what} symbol {j}: [{value:#x}, +{size:#x}) is outside its section {shndx} "
                               f"({sec['size']:#x} bytes)")
        self.symtabs[i] = syms

    def check_relsec(self, i: int, s: dict, what: str) -> None:
        rela = s["type"] == SHT_RELA
        fmt, esz = (self.rela, self.relasz) if rela else (self.rel, self.relsz)
        if s["entsize"] != esz or s["size"] % esz:
            raise _Bad(f"{what}: {s['size']} bytes with entry size {s['entsize']}, expected entries of {esz}")
        link = s["link"]
        if link == 0 and self.shared:
            nsyms = 0
        elif link not in self.symtabs:
            raise _Bad(f"{what}: sh_link {link} is not a symbol table")
        else:
            nsyms = len(self.symtabs[link])
        if not 0 <= s["info"] < self.shnum:
            raise _Bad(f"{what}: sh_info {s['info']} is not a section")
        relocs = [self.rel_fields(r) for r in self.table(s["offset"], s["size"] // esz, esz, fmt, what)]
        if self.shared:
            return  # the loader reads relocations through PT_DYNAMIC: checked there
        if s["info"] == 0:
            raise _Bad(f"{what}: sh_info 0, no section to relocate")
        target = self.sections[s["info"]]
        # an addend is an offset inside the object (a section symbol + addend, or -4 for a PC-relative call):
        # LLVM's RuntimeDyld asserts (aborts) when a 32-bit fixup does not fit, so one past the object is damage
        size_all = sum(x["size"] for x in self.sections)
        max_addend = size_all + 4096
        known, width = _OBJ_RELOCS.get(self.machine), _RELOC_WIDTH.get(self.machine, {})
        for j, (off, sym, typ, _add) in enumerate(relocs):
            if sym >= max(nsyms, 1):
                raise _Bad(f"{what} relocation {j}: symbol {sym} out of range ({nsyms} symbols)")
            if known is not None and typ not in known:
                raise _Bad(f"{what} relocation {j}: type {typ} is not one the JIT linker implements")
            if off + width.get(typ, 4) > target["size"]:
                raise _Bad(f"{what} relocation {j}: offset {off:#x} is outside section {s['info']} "
                           f"({target['size']:#x} bytes)")
            add = _add or 0
            if self.machine == EM_X86_64 and typ == 2 and target["type"] != SHT_NOBITS:
                # RuntimeDyld adds the 32 bits already at the fixup to a PC32 addend (REL compatibility)
                add += struct.unpack_from(self.e + "i", self.b, target["offset"] + off)[0]
            if abs(add) > max_addend:
                raise _Bad(f"{what} relocation {j}: addend {add:#x} reaches outside the {size_all:#x}-byte object")

    def check_eh_frame(self, off: int, size: int, what: str) -> None:
        """The CIE/FDE record chain: each length inside the section, each FDE pointing back at a CIE."""
        p, end, cies = off, off + size, set()
        while p < end:
            if p + 4 > end:
                raise _Bad(f"{what}: a truncated record length at {p - off:#x}")
            (ln,) = struct.unpack_from(self.e + "I", self.b, p)
            if ln == 0:
                return  # terminator
            hdr = 4
            if ln == 0xFFFFFFFF:
                if p + 12 > end:
                    raise _Bad(f"{what}: a truncated 64-bit record length at {p - off:#x}")
                (ln,) = struct.unpack_from(self.e + "Q", self.b, p + 4)
                hdr = 12
            body = p + hdr
            if ln < 4 or body + ln > end:
                raise _Bad(f"{what}: record at {p - off:#x} of length {ln} runs past the section end")
            (cid,) = struct.unpack_from(self.e + "I", self.b, body)
            if cid == 0:
                cies.add(p)
            elif body - cid not in cies:
                raise _Bad(f"{what}: FDE at {p - off:#x} points at {body - cid - off:#x}, which is not a CIE")
            p = body + ln

    # ---------------------------------------------------------------- segments (shared objects)
    def check_segments(self) -> None:
        if self.phnum == 0:
            raise _Bad("a shared object without program headers")
        phs = self.table(self.phoff, self.phnum, self.phentsize, self.phdr, "program header table")
        keys64 = ("type", "flags", "offset", "vaddr", "paddr", "filesz", "memsz", "align")
        keys32 = ("type", "offset", "vaddr", "paddr", "filesz", "memsz", "flags", "align")
        segs = [dict(zip(keys64 if self.is64 else keys32, p)) for p in phs]
        loads = []
        for i, p in enumerate(segs):
            what = f"segment {i} (type {p['type']:#x})"
            self.span(p["offset"], p["filesz"], what)
            if p["type"] in (PT_LOAD, PT_TLS) and p["filesz"] > p["memsz"]:
                raise _Bad(f"{what}: file size {p['filesz']:#x} > memory size {p['memsz']:#x}")
            if not _pow2ok(p["align"]):
                raise _Bad(f"{what}: alignment {p['align']:#x} is not a power of two")
            if p["type"] == PT_LOAD:
                if p["align"] > 1 and (p["vaddr"] - p["offset"]) % p["align"]:
                    raise _Bad(f"{what}: address {p['vaddr']:#x} and offset {p['offset']:#x} disagree modulo the "
                               f"alignment {p['align']:#x}")
                if loads and p["vaddr"] < loads[-1]["vaddr"] + loads[-1]["memsz"]:
                    raise _Bad(f"{what}: loadable segments overlap or are out of address order")
                loads.append(p)
        if not loads:
            raise _Bad("no loadable (PT_LOAD) segment")
        if loads[-1]["vaddr"] + loads[-1]["memsz"] - loads[0]["vaddr"] > MAX_SPAN:
            raise _Bad(f"the loadable segments span {loads[-1]['vaddr'] + loads[-1]['memsz'] - loads[0]['vaddr']:#x}"
                       f" bytes of address space")
        self.loads = loads
        dyns = [p for p in segs if p["type"] == PT_DYNAMIC]
        if len(dyns) != 1:
            raise _Bad(f"{len(dyns)} PT_DYNAMIC segments, expected 1")
        for i, p in enumerate(segs):
            if p["type"] in (PT_DYNAMIC, PT_NOTE, PT_GNU_RELRO, PT_GNU_PROPERTY, PT_TLS) and p["memsz"]:
                self.in_load(p["vaddr"], p["memsz"] if p["type"] != PT_TLS else p["filesz"],
                             f"segment {i} (type {p['type']:#x})", filebacked=p["type"] != PT_GNU_RELRO)
            if p["type"] in (PT_NOTE, PT_GNU_PROPERTY):
                self.check_notes(p["offset"], p["filesz"], f"note segment {i}")
        self.check_dynamic(dyns[0])

    def in_load(self, vaddr: int, size: int, what: str, filebacked: bool = True, flag: int = 0) -> int:
        """The file offset of [vaddr, vaddr+size), which must lie in one PT_LOAD (in its file bytes if
        `filebacked`, with permission `flag`)."""
        for p in self.loads:
            lim = p["filesz"] if filebacked else p["memsz"]
            if p["vaddr"] <= vaddr and vaddr + size <= p["vaddr"] + lim and (p["flags"] & flag) == flag:
                off = p["offset"] + vaddr - p["vaddr"]
                if filebacked:
                    self.span(off, size, what)
                return off
        perm = {PF_X: "an executable ", PF_W: "a writable "}.get(flag, "a ")
        raise _Bad(f"{what}: addresses [{vaddr:#x}, {vaddr + size:#x}) are not inside {perm}loaded segment"
                   f"{' (file bytes)' if filebacked else ''}")

    def check_notes(self, off: int, size: int, what: str) -> None:
        p, end = off, off + size
        while p + 12 <= end:
            namesz, descsz, _ = struct.unpack_from(self.e + "III", self.b, p)
            p += 12 + ((namesz + 3) & ~3) + ((descsz + 3) & ~3)
            if p > end:
                raise _Bad(f"{what}: a note runs past the end of its segment")

    def check_dynamic(self, d: dict) -> None:
        dsz = struct.calcsize(self.dyn)
        ents = self.table(d["offset"], d["filesz"] // dsz, dsz, self.dyn, "dynamic segment")
        self.in_load(d["vaddr"], d["filesz"], "dynamic segment")
        tags: dict[int, int] = {}
        needed: list[int] = []
        for tag, val in ents:
            if tag == DT_NULL:
                break
            if tag in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH):
                needed.append(val)
            elif tag in tags:
                raise _Bad(f"dynamic segment: tag {tag:#x} appears twice")
            tags[tag] = val
        else:
            raise _Bad("dynamic segment: no DT_NULL terminator inside the segment")
        t = tags.get
        # glibc dereferences these companions without checking that they exist (a NULL l_info entry: SIGSEGV)
        for tag, needs in ((DT_RELA, (DT_RELASZ, DT_RELAENT)), (DT_REL, (DT_RELSZ, DT_RELENT)),
                           (DT_RELR, (DT_RELRSZ, DT_RELRENT)), (DT_JMPREL, (DT_PLTREL, DT_PLTRELSZ)),
                           (DT_PLTREL, (DT_JMPREL, DT_PLTRELSZ)), (DT_INIT_ARRAY, (DT_INIT_ARRAYSZ,)),
                           (DT_FINI_ARRAY, (DT_FINI_ARRAYSZ,)), (DT_PREINIT_ARRAY, (DT_PREINIT_ARRAYSZ,))):
            if tag in tags and (missing := [n for n in needs if n not in tags]):
                raise _Bad(f"dynamic segment: tag {tag:#x} without tag(s) {', '.join(f'{n:#x}' for n in missing)}")
        if DT_STRTAB not in tags or DT_STRSZ not in tags or DT_SYMTAB not in tags:
            raise _Bad("dynamic segment: DT_STRTAB, DT_STRSZ or DT_SYMTAB is missing")
        stroff = self.in_load(t(DT_STRTAB), t(DT_STRSZ), "dynamic string table (DT_STRTAB/DT_STRSZ)")
        strsz = t(DT_STRSZ)
        for v in needed:
            self.cstr(stroff, strsz, v, "a DT_NEEDED/DT_SONAME/DT_RPATH name")
        if t(DT_SYMENT, self.symsz) != self.symsz:
            raise _Bad(f"DT_SYMENT {t(DT_SYMENT)}, expected {self.symsz}")
        nsyms = self.count_symbols(t(DT_HASH), t(DT_GNU_HASH))
        symoff = self.in_load(t(DT_SYMTAB), nsyms * self.symsz, "dynamic symbol table (DT_SYMTAB)")
        syms = [self.sym_fields(s) for s in self.table(symoff, nsyms, self.symsz, self.sym, "dynamic symbol table")]
        for j, (name, info, _other, shndx, value, size) in enumerate(syms):
            self.cstr(stroff, strsz, name, f"dynamic symbol {j} name")
            if shndx != 0 and shndx < SHN_LORESERVE and info & 0xF in (1, 2):  # defined OBJECT / FUNC
                self.in_load(value, size, f"dynamic symbol {j} ({self.cstr(stroff, strsz, name, '').decode()})",
                             filebacked=False, flag=PF_X if info & 0xF == 2 else 0)
        maxver = self.check_versions(tags, stroff, strsz)
        if DT_VERSYM in tags:
            voff = self.in_load(t(DT_VERSYM), 2 * nsyms, "symbol version table (DT_VERSYM)")
            for j, (v,) in enumerate(struct.iter_unpack(self.e + "H", self.b[voff:voff + 2 * nsyms])):
                if (v & 0x7FFF) > max(maxver, 1):
                    raise _Bad(f"symbol version table: symbol {j} has version index {v & 0x7FFF}, the highest "
                               f"defined is {maxver}")
        textrel = DT_TEXTREL in tags or t(DT_FLAGS, 0) & DF_TEXTREL
        arrays = {}
        for a, sz in ((DT_INIT_ARRAY, DT_INIT_ARRAYSZ), (DT_FINI_ARRAY, DT_FINI_ARRAYSZ),
                      (DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ)):
            if a in tags:
                n = t(sz, 0)
                if n % self.ptrsz:
                    raise _Bad(f"dynamic tag {sz}: array size {n} is not a whole number of pointers")
                off = self.in_load(t(a), n, f"init/fini array (dynamic tag {a})", flag=PF_W)
                for k in range(n // self.ptrsz):
                    arrays[t(a) + k * self.ptrsz] = struct.unpack_from(self.word, self.b, off + k * self.ptrsz)[0]
        for tag in (DT_INIT, DT_FINI):
            if tag in tags:
                self.in_load(t(tag), 1, f"DT_INIT/DT_FINI address {t(tag):#x}", filebacked=False, flag=PF_X)
        relocs = []  # (offset, sym, type, addend, applied as RELATIVE whatever its type: the first DT_RELACOUNT)
        for tab, sz, ent, cnt, fmt, esz, name in (
                (DT_RELA, DT_RELASZ, DT_RELAENT, DT_RELACOUNT, self.rela, self.relasz, "DT_RELA"),
                (DT_REL, DT_RELSZ, DT_RELENT, DT_RELCOUNT, self.rel, self.relsz, "DT_REL")):
            if tab in tags:
                if t(ent) != esz or t(sz) % esz:
                    raise _Bad(f"{name}: {t(sz)} bytes with entry size {t(ent)}, expected entries of {esz}")
                off = self.in_load(t(tab), t(sz), f"relocation table {name}")
                nrel = t(cnt, 0)
                relocs += [(*self.rel_fields(r), k < nrel)
                           for k, r in enumerate(self.table(off, t(sz) // esz, esz, fmt, name))]
        if DT_JMPREL in tags:
            rela = t(DT_PLTREL, DT_RELA)
            if rela not in (DT_RELA, DT_REL):
                raise _Bad(f"DT_PLTREL {rela}, expected DT_RELA or DT_REL")
            fmt, esz = (self.rela, self.relasz) if rela == DT_RELA else (self.rel, self.relsz)
            n = t(DT_PLTRELSZ, 0)
            if n % esz:
                raise _Bad(f"DT_PLTRELSZ {n} is not a whole number of {esz}-byte entries")
            off = self.in_load(t(DT_JMPREL), n, "PLT relocation table (DT_JMPREL)")
            relocs += [(*self.rel_fields(r), False) for r in self.table(off, n // esz, esz, fmt, "DT_JMPREL")]
        relr: list[int] = []
        if DT_RELR in tags:
            if t(DT_RELRENT) != self.ptrsz or t(DT_RELRSZ) % self.ptrsz:
                raise _Bad("DT_RELR: bad entry size or table size")
            off = self.in_load(t(DT_RELR), t(DT_RELRSZ), "relative relocation table (DT_RELR)")
            base, bits = 0, 8 * self.ptrsz - 1
            for (w,) in struct.iter_unpack(self.word, self.b[off:off + t(DT_RELRSZ)]):
                if w & 1 == 0:
                    relr.append(w)
                    base = w + self.ptrsz
                else:
                    relr += [base + k * self.ptrsz for k in range(bits) if (w >> (k + 1)) & 1]
                    base += bits * self.ptrsz
        dyn_lo, dyn_hi, relocated = d["vaddr"], d["vaddr"] + d["memsz"], set()
        known, rel_t, irel_t = _DYN_RELOCS.get(self.machine), _RELATIVE.get(self.machine), \
            _IRELATIVE.get(self.machine)
        for j, (off, sym, typ, add, as_relative) in enumerate(relocs):
            what = f"dynamic relocation {j}"
            if sym >= max(nsyms, 1):
                raise _Bad(f"{what}: symbol {sym} out of range ({nsyms} dynamic symbols)")
            if known is not None and typ not in known:
                raise _Bad(f"{what}: unknown relocation type {typ}")
            if as_relative and rel_t is not None and typ != rel_t:
                raise _Bad(f"{what}: one of the first DT_RELACOUNT/DT_RELCOUNT relocations, but of type {typ}, not "
                           f"relative (ld.so asserts)")
            if typ == 0:
                continue
            self.in_load(off, self.ptrsz, f"{what} target", filebacked=False, flag=0 if textrel else PF_W)
            if dyn_lo < off + self.ptrsz and off < dyn_hi:
                raise _Bad(f"{what}: writes into the dynamic segment at {off:#x}")
            relocated.add(off)
            if add is not None and typ == irel_t:
                self.in_load(add, 1, f"{what}: IRELATIVE resolver", filebacked=False, flag=PF_X)
            if off in arrays and typ == rel_t and add is not None:
                arrays[off] = add
        for j, off in enumerate(relr):  # base + the word in the file: init/fini entries keep their file value
            what = f"DT_RELR relocation {j}"
            self.in_load(off, self.ptrsz, f"{what} target", filebacked=False, flag=0 if textrel else PF_W)
            if dyn_lo < off + self.ptrsz and off < dyn_hi:
                raise _Bad(f"{what}: writes into the dynamic segment at {off:#x}")
            relocated.add(off)
        for slot, fn in arrays.items():
            # ld.so calls every entry, at load base + nothing unless a relocation rewrites the slot
            if slot not in relocated:
                raise _Bad(f"init/fini array entry at {slot:#x} is not relocated: it would be called at {fn:#x}")
            if fn not in (0, (1 << (8 * self.ptrsz)) - 1):
                self.in_load(fn, 1, f"init/fini array entry at {slot:#x}", filebacked=False, flag=PF_X)

    def count_symbols(self, hash_addr: int | None, gnu_addr: int | None) -> int:
        """The number of dynamic symbols, from DT_HASH (nchain) or DT_GNU_HASH (the longest chain's end); both
        tables are checked to lie in the file with their bucket and chain values in range."""
        w = 4
        if hash_addr is not None:
            off = self.in_load(hash_addr, 8, "DT_HASH header")
            nbucket, nchain = struct.unpack_from(self.e + "II", self.b, off)
            if nbucket == 0 or (2 + nbucket + nchain) * w > self.n:
                raise _Bad(f"DT_HASH: {nbucket} buckets, {nchain} chains do not fit the file")
            off = self.in_load(hash_addr, (2 + nbucket + nchain) * w, "DT_HASH table")
            vals = struct.unpack_from(self.e + f"{nbucket + nchain}I", self.b, off + 8)
            if any(v >= nchain for v in vals):
                raise _Bad("DT_HASH: a bucket or chain entry is not a symbol index")
            if gnu_addr is None:
                return nchain
        if gnu_addr is None:
            raise _Bad("dynamic segment: neither DT_HASH nor DT_GNU_HASH")
        off = self.in_load(gnu_addr, 16, "DT_GNU_HASH header")
        nbuckets, symoffset, bloom_size, bloom_shift = struct.unpack_from(self.e + "IIII", self.b, off)
        if nbuckets == 0 or bloom_size == 0 or bloom_size & (bloom_size - 1) or bloom_shift >= 8 * self.ptrsz:
            raise _Bad(f"DT_GNU_HASH: {nbuckets} buckets, bloom size {bloom_size}, shift {bloom_shift}")
        head = 16 + bloom_size * self.ptrsz + nbuckets * w
        if head > self.n:
            raise _Bad("DT_GNU_HASH: the bloom filter and buckets do not fit the file")
        off = self.in_load(gnu_addr, head, "DT_GNU_HASH table")
        buckets = struct.unpack_from(self.e + f"{nbuckets}I", self.b, off + 16 + bloom_size * self.ptrsz)
        nonzero = [b for b in buckets if b]
        if any(b < symoffset for b in nonzero):
            raise _Bad("DT_GNU_HASH: a bucket points below the first hashed symbol")
        if not nonzero:
            return symoffset
        chains = gnu_addr + head
        i = max(nonzero)
        while True:
            coff = self.in_load(chains + (i - symoffset) * w, w, "DT_GNU_HASH chain")
            if struct.unpack_from(self.e + "I", self.b, coff)[0] & 1:
                return i + 1
            i += 1

    def chain(self, start: int, size: int, fmt: str, next_at: int, what: str):
        """The entries of a version chain as glibc walks it: from `start`, by the `next_at`-th field (a byte offset
        from the entry) until it is 0, whatever the counts say. Each entry must lie in a loaded segment's bytes."""
        a, seen = start, 0
        while True:
            off = self.in_load(a, size, f"{what} {seen}")
            ent = struct.unpack_from(self.e + fmt, self.b, off)
            yield a, ent
            seen += 1
            if ent[next_at] == 0:
                return
            if seen > self.n // size:
                raise _Bad(f"{what}: the chain does not end")
            a += ent[next_at]

    def check_versions(self, tags: dict, stroff: int, strsz: int) -> int:
        """Walk the DT_VERNEED / DT_VERDEF chains; the highest version index they define."""
        maxver = 1
        if DT_VERNEED in tags:
            for a, (_v, _cnt, file, aux, _nxt) in self.chain(tags[DT_VERNEED], 16, "HHIII", 4, "version need entry"):
                self.cstr(stroff, strsz, file, "a version need entry's file name")
                for _x, (_h, _f, other, name, _xn) in self.chain(a + aux, 16, "IHHII", 4, "version need aux"):
                    self.cstr(stroff, strsz, name, "a version need aux name")
                    maxver = max(maxver, other & 0x7FFF)
        if DT_VERDEF in tags:
            for a, (_v, _f, ndx, cnt, _h, aux, _nxt) in self.chain(tags[DT_VERDEF], 20, "HHHHIII", 6,
                                                                   "version definition"):
                maxver = max(maxver, ndx & 0x7FFF)
                if cnt:
                    for _x, (name, _xn) in self.chain(a + aux, 8, "II", 1, "version definition aux"):
                        self.cstr(stroff, strsz, name, "a version definition aux name")
        return maxver


def check(lib: bytes, name: str, shared: bool) -> None:
    """Raise MalformedObjectError naming program `name` unless `lib` is a structurally sound ELF object file
    (`shared` False: for the JIT) or shared object (`shared` True: for dlopen) for this host."""
    what = "shared object" if shared else "object file"
    try:
        elf = _Elf(bytes(lib), shared)
        if elf.phnum and not shared:
            elf.table(elf.phoff, elf.phnum, elf.phentsize, elf.phdr, "program header table")
        elf.check_sections()
        if shared:
            elf.check_segments()
    except _Bad as e:
        raise MalformedObjectError(f"program {name!r}: the compiled bytes are not a loadable ELF {what} for this "
                                   f"host: {e}; refusing to load them (damaged or foreign bytes, e.g. a truncated "
                                   f"or edited cache entry)") from None
    except (struct.error, ValueError, OverflowError, IndexError) as e:
        raise MalformedObjectError(f"program {name!r}: the compiled bytes are not a loadable ELF {what}: {e}") \
            from None
