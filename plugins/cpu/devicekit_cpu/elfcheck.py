"""A structural check of ELF bytes before they reach llvmlite's JIT linker or dlopen, for bytes we did not produce.

Neither of those is written for hostile or damaged input: LLVM's object reader aborts the process on some malformed
objects, and the dynamic loader maps segments past the end of a truncated file (SIGBUS on first touch) and writes
relocations wherever r_offset points (SIGSEGV). Bytes this process's compiler just produced, or a cache entry whose
MAC verified, are trusted and skip the check (`CompiledSpec.trusted`, read by `loader.load`); this is the defence for
the rest: a CompiledSpec built by hand, a copied cache file, a bad disk.

`check(lib, name, shared)` raises MalformedObjectError naming the program and the first problem found, else returns
None. The ELF structures are decoded by pyelftools (its struct definitions for this file's class and byte order,
each table parsed only after its bounds were checked against the file); the rules of what the loaders need are
ours:

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
import threading
from typing import Any

from devicekit.errors import CompileError

__all__ = ["MalformedObjectError", "check", "host_machine"]


class MalformedObjectError(CompileError, RuntimeError):
    """Compiled bytes that would crash the loader: truncated, damaged, or built for another host."""


SHN_LORESERVE = 0xFF00
PF_X, PF_W = 1, 2
SHF_TLS = 0x400
DF_TEXTREL = 4

_MACHINES = {"x86_64": "EM_X86_64", "amd64": "EM_X86_64", "aarch64": "EM_AARCH64", "arm64": "EM_AARCH64",
             "riscv64": "EM_RISCV", "ppc64le": "EM_PPC64", "ppc64": "EM_PPC64", "s390x": "EM_S390",
             "loongarch64": "EM_LOONGARCH", "i386": "EM_386", "i686": "EM_386", "armv7l": "EM_ARM"}

# relocation types the dynamic loader applies in a shared object (x86-64, aarch64); others: not checked
_DYN_RELOCS = {"EM_X86_64": {0, 1, 6, 7, 8, 16, 17, 18, 36, 37},  # NONE 64 GLOB_DAT JUMP_SLOT RELATIVE DTPMOD64
               # DTPOFF64 TPOFF64 TLSDESC IRELATIVE
               "EM_AARCH64": {0, 257, 1025, 1026, 1027, 1028, 1029, 1030, 1031, 1032}}
_RELATIVE = {"EM_X86_64": 8, "EM_AARCH64": 1027}
_IRELATIVE = {"EM_X86_64": 37, "EM_AARCH64": 1032}
# relocation types LLVM's x86-64 JIT linkers implement in object code (RuntimeDyld aborts on the others):
# NONE 64 PC32 GOT32 PLT32 GOTPCREL 32 32S 16 PC16 8 PC8 TLSGD TLSLD DTPOFF32 GOTTPOFF TPOFF32 PC64 GOTOFF64 GOTPC32
# GOT64 GOTPCREL64 GOTPC64 GOTPLT64 GOTPCRELX REX_GOTPCRELX
_OBJ_RELOCS = {"EM_X86_64": {0, 1, 2, 3, 4, 9, 10, 11, 12, 13, 14, 15, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
                             41, 42}}
_RELOC_WIDTH = {"EM_X86_64": {1: 8, 24: 8, 25: 8, 27: 8, 28: 8, 29: 8, 30: 8, 12: 2, 13: 2, 14: 1, 15: 1}}

MAX_SPAN = 1 << 30  # a kernel's shared object maps a few pages; a damaged header can ask for terabytes


def host_machine() -> str | None:
    """The ELF e_machine of this host as pyelftools names it ("EM_X86_64"), or None where unknown (then the
    machine is not checked)."""
    return _MACHINES.get(platform.machine().lower())


class _Bad(Exception):
    pass


def _pow2ok(a: int) -> bool:
    return a == 0 or a & (a - 1) == 0


_structs: dict[tuple, Any] = {}
_structs_lock = threading.Lock()


def _elf_structs(little: bool, elfclass: int, e_type: str | None = None, e_machine: str | None = None,
                 osabi: str | None = None) -> Any:
    """pyelftools' ELFStructs for one class / byte order (and file type, machine, OS ABI), built once per process:
    building them costs ~0.4 ms, more than checking a small object."""
    key = (little, elfclass, e_type, e_machine, osabi)
    s = _structs.get(key)
    if s is None:
        from elftools.elf.structs import ELFStructs
        s = ELFStructs(little_endian=little, elfclass=elfclass)
        s.create_basic_structs()
        if e_type is not None:
            s.create_advanced_structs(e_type, e_machine, osabi)
        with _structs_lock:
            s = _structs.setdefault(key, s)
    return s


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
        self.is64, little = cls == 2, data == 1
        self.e = "<" if little else ">"
        self.ptrsz = 8 if self.is64 else 4
        basic = _elf_structs(little, 64 if self.is64 else 32)
        ehsz = basic.Elf_Ehdr.sizeof()
        if self.n < ehsz:
            raise _Bad(f"{self.n} bytes, shorter than the {ehsz}-byte ELF header")
        h = basic.Elf_Ehdr.parse(b[:ehsz])
        self.type, self.machine = h["e_type"], h["e_machine"]
        want_type = "ET_DYN" if shared else "ET_REL"
        if self.type != want_type:
            raise _Bad(f"ELF type {self.type}, expected {want_type} ({'shared object' if shared else 'object file'})")
        hm = host_machine()
        if hm is not None and self.machine != hm:
            raise _Bad(f"built for ELF machine {self.machine}, this host ({platform.machine()}) is {hm}")
        if h["e_version"] != "EV_CURRENT":
            raise _Bad(f"e_version {h['e_version']}, expected 1")
        if h["e_ehsize"] != ehsz:
            raise _Bad(f"e_ehsize {h['e_ehsize']}, expected {ehsz}")
        self.s = _elf_structs(little, 64 if self.is64 else 32, self.type, self.machine, h["e_ident"]["EI_OSABI"])
        self.phoff, self.phentsize, self.phnum = h["e_phoff"], h["e_phentsize"], h["e_phnum"]
        self.shoff, self.shentsize, self.shnum, self.shstrndx = h["e_shoff"], h["e_shentsize"], h["e_shnum"], \
            h["e_shstrndx"]
        self.symsz = self.s.Elf_Sym.sizeof()

    # ---------------------------------------------------------------- helpers
    def span(self, off: int, size: int, what: str) -> None:
        if off < 0 or size < 0 or off + size > self.n:
            raise _Bad(f"{what}: bytes [{off:#x}, {off + size:#x}) are outside the {self.n}-byte file")

    def table(self, off: int, count: int, entsize: int, st: Any, what: str) -> list:
        """`count` entries of pyelftools struct `st` at `off`, after checking the entry size and the bounds."""
        size = st.sizeof()
        if entsize != size:
            raise _Bad(f"{what}: entry size {entsize}, expected {size}")
        if count > self.n // max(entsize, 1):
            raise _Bad(f"{what}: {count} entries cannot fit in a {self.n}-byte file")
        self.span(off, count * entsize, what)
        b = self.b
        return [st.parse(b[p:p + size]) for p in range(off, off + count * size, size)]

    def one(self, st: Any, off: int, what: str) -> Any:
        self.span(off, st.sizeof(), what)
        return st.parse(self.b[off:off + st.sizeof()])

    def words(self, off: int, count: int, fmt: str = "I") -> tuple:
        return struct.unpack_from(f"{self.e}{count}{fmt}", self.b, off)

    def cstr(self, tab_off: int, tab_size: int, idx: int, what: str) -> bytes:
        if idx >= tab_size:
            raise _Bad(f"{what}: string offset {idx} past the end of its {tab_size}-byte string table")
        end = self.b.find(b"\0", tab_off + idx, tab_off + tab_size)
        if end < 0:
            raise _Bad(f"{what}: string at offset {idx} is not NUL-terminated inside its string table")
        return self.b[tab_off + idx:end]

    @staticmethod
    def shndx(v: Any) -> int:
        """st_shndx as a number (pyelftools names the special ones)."""
        return v if isinstance(v, int) else {"SHN_UNDEF": 0, "SHN_ABS": 0xFFF1, "SHN_COMMON": 0xFFF2,
                                             "SHN_XINDEX": 0xFFFF}.get(v, SHN_LORESERVE)

    # ---------------------------------------------------------------- sections
    def check_sections(self) -> None:
        if self.shoff == 0:
            if self.shnum or not self.shared:
                raise _Bad("no section header table" if not self.shared else "e_shnum set without a table")
            self.sections = []
            return
        if self.shnum == 0 or self.shstrndx == 0xFFFF:
            raise _Bad("extended section numbering (e_shnum 0 / e_shstrndx SHN_XINDEX) is not supported")
        secs = self.table(self.shoff, self.shnum, self.shentsize, self.s.Elf_Shdr, "section header table")
        self.sections = secs
        if secs[0]["sh_type"] != "SHT_NULL":
            raise _Bad(f"section 0 has type {secs[0]['sh_type']}, expected SHT_NULL")
        if not 0 < self.shstrndx < self.shnum or secs[self.shstrndx]["sh_type"] != "SHT_STRTAB":
            raise _Bad(f"e_shstrndx {self.shstrndx} is not a string table section (of {self.shnum})")
        for i, s in enumerate(secs):
            what = f"section {i}"
            if s["sh_type"] != "SHT_NOBITS":
                self.span(s["sh_offset"], s["sh_size"], what)
            if not _pow2ok(s["sh_addralign"]):
                raise _Bad(f"{what}: alignment {s['sh_addralign']} is not a power of two")
            if not self.shared and s["sh_flags"] & SHF_TLS:
                raise _Bad(f"{what}: a thread-local (SHF_TLS) section, which the JIT linker cannot allocate")
            if s["sh_link"] >= self.shnum:
                raise _Bad(f"{what}: sh_link {s['sh_link']} is not a section (there are {self.shnum})")
        st = secs[self.shstrndx]
        self.names = [self.cstr(st["sh_offset"], st["sh_size"], s["sh_name"], f"section {i} name")
                      for i, s in enumerate(secs)]
        self.symtabs: dict[int, list] = {}
        for i, s in enumerate(secs):
            if s["sh_type"] in ("SHT_SYMTAB", "SHT_DYNSYM"):
                self.check_symtab(i, s)
        for i, s in enumerate(secs):
            what = f"section {i} ({self.names[i].decode(errors='replace')})"
            t = s["sh_type"]
            if t in ("SHT_RELA", "SHT_REL"):
                self.check_relsec(i, s, what)
            elif t == "SHT_GROUP":
                if s["sh_size"] % 4 or s["sh_entsize"] != 4:
                    raise _Bad(f"{what}: a group section of {s['sh_size']} bytes, entry size {s['sh_entsize']}")
                for x in self.words(s["sh_offset"] + 4, s["sh_size"] // 4 - 1) if s["sh_size"] >= 4 else ():
                    if not 0 < x < self.shnum:
                        raise _Bad(f"{what}: member section {x} out of range")
            elif t == "SHT_SYMTAB_SHNDX":
                raise _Bad(f"{what}: extended symbol section indices (SHT_SYMTAB_SHNDX) are not supported")
            if self.names[i] == b".eh_frame" and t != "SHT_NOBITS":
                self.check_eh_frame(s["sh_offset"], s["sh_size"], what)

    def check_symtab(self, i: int, s: Any) -> None:
        what = f"symbol table section {i}"
        if s["sh_entsize"] != self.symsz or s["sh_size"] % self.symsz:
            raise _Bad(f"{what}: {s['sh_size']} bytes with entry size {s['sh_entsize']}, expected entries of "
                       f"{self.symsz}")
        strs = self.sections[s["sh_link"]]
        if strs["sh_type"] != "SHT_STRTAB":
            raise _Bad(f"{what}: sh_link {s['sh_link']} is not a string table")
        syms = self.table(s["sh_offset"], s["sh_size"] // self.symsz, self.symsz, self.s.Elf_Sym, what)
        for j, sym in enumerate(syms):
            self.cstr(strs["sh_offset"], strs["sh_size"], sym["st_name"], f"{what} symbol {j} name")
            shndx, value, size = self.shndx(sym["st_shndx"]), sym["st_value"], sym["st_size"]
            if shndx == 0xFFFF or (shndx >= self.shnum and shndx < SHN_LORESERVE):
                raise _Bad(f"{what} symbol {j}: section index {shndx} out of range (there are {self.shnum})")
            if not self.shared and 0 < shndx < self.shnum:
                sec_size = self.sections[shndx]["sh_size"]
                if value > sec_size or value + size > sec_size and sec_size:
                    raise _Bad(f"{what} symbol {j}: [{value:#x}, +{size:#x}) is outside its section {shndx} "
                               f"({sec_size:#x} bytes)")
        self.symtabs[i] = syms

    def check_relsec(self, i: int, s: Any, what: str) -> None:
        st = self.s.Elf_Rela if s["sh_type"] == "SHT_RELA" else self.s.Elf_Rel
        esz = st.sizeof()
        if s["sh_entsize"] != esz or s["sh_size"] % esz:
            raise _Bad(f"{what}: {s['sh_size']} bytes with entry size {s['sh_entsize']}, expected entries of {esz}")
        link = s["sh_link"]
        if link == 0 and self.shared:
            nsyms = 0
        elif link not in self.symtabs:
            raise _Bad(f"{what}: sh_link {link} is not a symbol table")
        else:
            nsyms = len(self.symtabs[link])
        if not 0 <= s["sh_info"] < self.shnum:
            raise _Bad(f"{what}: sh_info {s['sh_info']} is not a section")
        if self.shared:
            self.span(s["sh_offset"], s["sh_size"], what)
            return  # the loader reads relocations through PT_DYNAMIC: checked there
        relocs = self.table(s["sh_offset"], s["sh_size"] // esz, esz, st, what)
        if s["sh_info"] == 0:
            raise _Bad(f"{what}: sh_info 0, no section to relocate")
        target = self.sections[s["sh_info"]]
        # an addend is an offset inside the object (a section symbol + addend, or -4 for a PC-relative call):
        # LLVM's RuntimeDyld asserts (aborts) when a 32-bit fixup does not fit, so one past the object is damage
        size_all = sum(x["sh_size"] for x in self.sections)
        max_addend = size_all + 4096
        known, width = _OBJ_RELOCS.get(self.machine), _RELOC_WIDTH.get(self.machine, {})
        for j, r in enumerate(relocs):
            off, sym, typ = r["r_offset"], r["r_info_sym"], r["r_info_type"]
            if sym >= max(nsyms, 1):
                raise _Bad(f"{what} relocation {j}: symbol {sym} out of range ({nsyms} symbols)")
            if known is not None and typ not in known:
                raise _Bad(f"{what} relocation {j}: type {typ} is not one the JIT linker implements")
            if off + width.get(typ, 4) > target["sh_size"]:
                raise _Bad(f"{what} relocation {j}: offset {off:#x} is outside section {s['sh_info']} "
                           f"({target['sh_size']:#x} bytes)")
            add = r.get("r_addend", 0)
            if self.machine == "EM_X86_64" and typ == 2 and target["sh_type"] != "SHT_NOBITS":
                # RuntimeDyld adds the 32 bits already at the fixup to a PC32 addend (REL compatibility)
                add += self.words(target["sh_offset"] + off, 1, "i")[0]
            if abs(add) > max_addend:
                raise _Bad(f"{what} relocation {j}: addend {add:#x} reaches outside the {size_all:#x}-byte object")

    def check_eh_frame(self, off: int, size: int, what: str) -> None:
        """The CIE/FDE record chain: each length inside the section, each FDE pointing back at a CIE."""
        p, end, cies = off, off + size, set()
        while p < end:
            if p + 4 > end:
                raise _Bad(f"{what}: a truncated record length at {p - off:#x}")
            (ln,) = self.words(p, 1)
            if ln == 0:
                return  # terminator
            hdr = 4
            if ln == 0xFFFFFFFF:
                if p + 12 > end:
                    raise _Bad(f"{what}: a truncated 64-bit record length at {p - off:#x}")
                (ln,) = self.words(p + 4, 1, "Q")
                hdr = 12
            body = p + hdr
            if ln < 4 or body + ln > end:
                raise _Bad(f"{what}: record at {p - off:#x} of length {ln} runs past the section end")
            (cid,) = self.words(body, 1)
            if cid == 0:
                cies.add(p)
            elif body - cid not in cies:
                raise _Bad(f"{what}: FDE at {p - off:#x} points at {body - cid - off:#x}, which is not a CIE")
            p = body + ln

    # ---------------------------------------------------------------- segments (shared objects)
    def program_headers(self) -> list:
        return self.table(self.phoff, self.phnum, self.phentsize, self.s.Elf_Phdr, "program header table")

    def check_segments(self) -> None:
        if self.phnum == 0:
            raise _Bad("a shared object without program headers")
        segs = self.program_headers()
        loads = []
        for i, p in enumerate(segs):
            what = f"segment {i} (type {p['p_type']})"
            self.span(p["p_offset"], p["p_filesz"], what)
            if p["p_type"] in ("PT_LOAD", "PT_TLS") and p["p_filesz"] > p["p_memsz"]:
                raise _Bad(f"{what}: file size {p['p_filesz']:#x} > memory size {p['p_memsz']:#x}")
            if not _pow2ok(p["p_align"]):
                raise _Bad(f"{what}: alignment {p['p_align']:#x} is not a power of two")
            if p["p_type"] == "PT_LOAD":
                if p["p_align"] > 1 and (p["p_vaddr"] - p["p_offset"]) % p["p_align"]:
                    raise _Bad(f"{what}: address {p['p_vaddr']:#x} and offset {p['p_offset']:#x} disagree modulo "
                               f"the alignment {p['p_align']:#x}")
                if loads and p["p_vaddr"] < loads[-1]["p_vaddr"] + loads[-1]["p_memsz"]:
                    raise _Bad(f"{what}: loadable segments overlap or are out of address order")
                loads.append(p)
        if not loads:
            raise _Bad("no loadable (PT_LOAD) segment")
        span = loads[-1]["p_vaddr"] + loads[-1]["p_memsz"] - loads[0]["p_vaddr"]
        if span > MAX_SPAN:
            raise _Bad(f"the loadable segments span {span:#x} bytes of address space")
        self.loads = loads
        dyns = [p for p in segs if p["p_type"] == "PT_DYNAMIC"]
        if len(dyns) != 1:
            raise _Bad(f"{len(dyns)} PT_DYNAMIC segments, expected 1")
        for i, p in enumerate(segs):
            t = p["p_type"]
            if t in ("PT_DYNAMIC", "PT_NOTE", "PT_GNU_RELRO", "PT_GNU_PROPERTY", "PT_TLS") and p["p_memsz"]:
                self.in_load(p["p_vaddr"], p["p_memsz"] if t != "PT_TLS" else p["p_filesz"], f"segment {i} ({t})",
                             filebacked=t != "PT_GNU_RELRO")
            if t in ("PT_NOTE", "PT_GNU_PROPERTY"):
                self.check_notes(p["p_offset"], p["p_filesz"], f"note segment {i}")
        self.check_dynamic(dyns[0])

    def in_load(self, vaddr: int, size: int, what: str, filebacked: bool = True, flag: int = 0) -> int:
        """The file offset of [vaddr, vaddr+size), which must lie in one PT_LOAD (in its file bytes if
        `filebacked`, with permission `flag`)."""
        for p in self.loads:
            lim = p["p_filesz"] if filebacked else p["p_memsz"]
            if p["p_vaddr"] <= vaddr and vaddr + size <= p["p_vaddr"] + lim and (p["p_flags"] & flag) == flag:
                off = p["p_offset"] + vaddr - p["p_vaddr"]
                if filebacked:
                    self.span(off, size, what)
                return off
        perm = {PF_X: "an executable ", PF_W: "a writable "}.get(flag, "a ")
        raise _Bad(f"{what}: addresses [{vaddr:#x}, {vaddr + size:#x}) are not inside {perm}loaded segment"
                   f"{' (file bytes)' if filebacked else ''}")

    def check_notes(self, off: int, size: int, what: str) -> None:
        p, end, nh = off, off + size, self.s.Elf_Nhdr
        while p + nh.sizeof() <= end:
            note = nh.parse(self.b[p:p + nh.sizeof()])
            p += nh.sizeof() + ((note["n_namesz"] + 3) & ~3) + ((note["n_descsz"] + 3) & ~3)
            if p > end:
                raise _Bad(f"{what}: a note runs past the end of its segment")

    def relocation_table(self, tags: dict, tab: str, sz: str, ent: str, st: Any, name: str) -> list:
        esz = st.sizeof()
        if tags[ent] != esz or tags[sz] % esz:
            raise _Bad(f"{name}: {tags[sz]} bytes with entry size {tags[ent]}, expected entries of {esz}")
        off = self.in_load(tags[tab], tags[sz], f"relocation table {name}")
        return self.table(off, tags[sz] // esz, esz, st, name)

    def check_dynamic(self, d: Any) -> None:
        dsz = self.s.Elf_Dyn.sizeof()
        ents = self.table(d["p_offset"], d["p_filesz"] // dsz, dsz, self.s.Elf_Dyn, "dynamic segment")
        self.in_load(d["p_vaddr"], d["p_filesz"], "dynamic segment")
        tags: dict[Any, int] = {}
        needed: list[int] = []
        for e in ents:
            tag, val = e["d_tag"], e["d_val"]
            if tag == "DT_NULL":
                break
            if tag in ("DT_NEEDED", "DT_SONAME", "DT_RPATH", "DT_RUNPATH"):
                needed.append(val)
            elif tag in tags:
                raise _Bad(f"dynamic segment: tag {tag} appears twice")
            tags[tag] = val
        else:
            raise _Bad("dynamic segment: no DT_NULL terminator inside the segment")
        t = tags.get
        # glibc dereferences these companions without checking that they exist (a NULL l_info entry: SIGSEGV)
        for tag, needs in (("DT_RELA", ("DT_RELASZ", "DT_RELAENT")), ("DT_REL", ("DT_RELSZ", "DT_RELENT")),
                           ("DT_RELR", ("DT_RELRSZ", "DT_RELRENT")), ("DT_JMPREL", ("DT_PLTREL", "DT_PLTRELSZ")),
                           ("DT_PLTREL", ("DT_JMPREL", "DT_PLTRELSZ")), ("DT_INIT_ARRAY", ("DT_INIT_ARRAYSZ",)),
                           ("DT_FINI_ARRAY", ("DT_FINI_ARRAYSZ",)), ("DT_PREINIT_ARRAY", ("DT_PREINIT_ARRAYSZ",))):
            if tag in tags and (missing := [n for n in needs if n not in tags]):
                raise _Bad(f"dynamic segment: tag {tag} without tag(s) {', '.join(missing)}")
        if "DT_STRTAB" not in tags or "DT_STRSZ" not in tags or "DT_SYMTAB" not in tags:
            raise _Bad("dynamic segment: DT_STRTAB, DT_STRSZ or DT_SYMTAB is missing")
        strsz = tags["DT_STRSZ"]
        stroff = self.in_load(tags["DT_STRTAB"], strsz, "dynamic string table (DT_STRTAB/DT_STRSZ)")
        for v in needed:
            self.cstr(stroff, strsz, v, "a DT_NEEDED/DT_SONAME/DT_RPATH name")
        if t("DT_SYMENT", self.symsz) != self.symsz:
            raise _Bad(f"DT_SYMENT {t('DT_SYMENT')}, expected {self.symsz}")
        nsyms = self.count_symbols(t("DT_HASH"), t("DT_GNU_HASH"))
        symoff = self.in_load(tags["DT_SYMTAB"], nsyms * self.symsz, "dynamic symbol table (DT_SYMTAB)")
        syms = self.table(symoff, nsyms, self.symsz, self.s.Elf_Sym, "dynamic symbol table")
        for j, sym in enumerate(syms):
            name = self.cstr(stroff, strsz, sym["st_name"], f"dynamic symbol {j} name")
            shndx, typ = self.shndx(sym["st_shndx"]), sym["st_info"]["type"]
            if shndx != 0 and shndx < SHN_LORESERVE and typ in ("STT_OBJECT", "STT_FUNC"):
                self.in_load(sym["st_value"], sym["st_size"], f"dynamic symbol {j} ({name.decode()})",
                             filebacked=False, flag=PF_X if typ == "STT_FUNC" else 0)
        maxver = self.check_versions(tags, stroff, strsz)
        if "DT_VERSYM" in tags:
            voff = self.in_load(tags["DT_VERSYM"], 2 * nsyms, "symbol version table (DT_VERSYM)")
            for j, v in enumerate(self.words(voff, nsyms, "H")):
                if (v & 0x7FFF) > max(maxver, 1):
                    raise _Bad(f"symbol version table: symbol {j} has version index {v & 0x7FFF}, the highest "
                               f"defined is {maxver}")
        textrel = "DT_TEXTREL" in tags or t("DT_FLAGS", 0) & DF_TEXTREL
        ptr = "Q" if self.is64 else "I"
        arrays = {}
        for a, sz in (("DT_INIT_ARRAY", "DT_INIT_ARRAYSZ"), ("DT_FINI_ARRAY", "DT_FINI_ARRAYSZ"),
                      ("DT_PREINIT_ARRAY", "DT_PREINIT_ARRAYSZ")):
            if a in tags:
                n = t(sz, 0)
                if n % self.ptrsz:
                    raise _Bad(f"dynamic tag {sz}: array size {n} is not a whole number of pointers")
                off = self.in_load(tags[a], n, f"init/fini array ({a})", flag=PF_W)
                for k, fn in enumerate(self.words(off, n // self.ptrsz, ptr)):
                    arrays[tags[a] + k * self.ptrsz] = fn
        for tag in ("DT_INIT", "DT_FINI"):
            if tag in tags:
                self.in_load(tags[tag], 1, f"DT_INIT/DT_FINI address {tags[tag]:#x}", filebacked=False, flag=PF_X)
        relocs = []  # (entry, applied as RELATIVE whatever its type: one of the first DT_RELACOUNT)
        for tab, sz, ent, cnt, st in (("DT_RELA", "DT_RELASZ", "DT_RELAENT", "DT_RELACOUNT", self.s.Elf_Rela),
                                      ("DT_REL", "DT_RELSZ", "DT_RELENT", "DT_RELCOUNT", self.s.Elf_Rel)):
            if tab in tags:
                nrel = t(cnt, 0)
                relocs += [(r, k < nrel) for k, r in enumerate(self.relocation_table(tags, tab, sz, ent, st, tab))]
        if "DT_JMPREL" in tags:
            pltrel = tags["DT_PLTREL"]
            if pltrel not in (7, 17):  # the value is a tag number: DT_RELA (7) or DT_REL (17)
                raise _Bad(f"DT_PLTREL {pltrel}, expected DT_RELA or DT_REL")
            st = self.s.Elf_Rela if pltrel == 7 else self.s.Elf_Rel
            esz, n = st.sizeof(), tags["DT_PLTRELSZ"]
            if n % esz:
                raise _Bad(f"DT_PLTRELSZ {n} is not a whole number of {esz}-byte entries")
            off = self.in_load(tags["DT_JMPREL"], n, "PLT relocation table (DT_JMPREL)")
            relocs += [(r, False) for r in self.table(off, n // esz, esz, st, "DT_JMPREL")]
        relr: list[int] = []
        if "DT_RELR" in tags:
            if tags["DT_RELRENT"] != self.ptrsz or tags["DT_RELRSZ"] % self.ptrsz:
                raise _Bad("DT_RELR: bad entry size or table size")
            off = self.in_load(tags["DT_RELR"], tags["DT_RELRSZ"], "relative relocation table (DT_RELR)")
            base, bits = 0, 8 * self.ptrsz - 1
            for w in self.words(off, tags["DT_RELRSZ"] // self.ptrsz, ptr):
                if w & 1 == 0:
                    relr.append(w)
                    base = w + self.ptrsz
                else:
                    relr += [base + k * self.ptrsz for k in range(bits) if (w >> (k + 1)) & 1]
                    base += bits * self.ptrsz
        dyn_lo, dyn_hi, relocated = d["p_vaddr"], d["p_vaddr"] + d["p_memsz"], set()
        known, rel_t, irel_t = _DYN_RELOCS.get(self.machine), _RELATIVE.get(self.machine), \
            _IRELATIVE.get(self.machine)
        for j, (r, as_relative) in enumerate(relocs):
            what = f"dynamic relocation {j}"
            off, sym, typ, add = r["r_offset"], r["r_info_sym"], r["r_info_type"], r.get("r_addend")
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
            nbucket, nchain = self.words(off, 2)
            if nbucket == 0 or (2 + nbucket + nchain) * w > self.n:
                raise _Bad(f"DT_HASH: {nbucket} buckets, {nchain} chains do not fit the file")
            off = self.in_load(hash_addr, (2 + nbucket + nchain) * w, "DT_HASH table")
            if any(v >= nchain for v in self.words(off + 8, nbucket + nchain)):
                raise _Bad("DT_HASH: a bucket or chain entry is not a symbol index")
            if gnu_addr is None:
                return nchain
        if gnu_addr is None:
            raise _Bad("dynamic segment: neither DT_HASH nor DT_GNU_HASH")
        off = self.in_load(gnu_addr, 16, "DT_GNU_HASH header")
        nbuckets, symoffset, bloom_size, bloom_shift = self.words(off, 4)
        if nbuckets == 0 or bloom_size == 0 or bloom_size & (bloom_size - 1) or bloom_shift >= 8 * self.ptrsz:
            raise _Bad(f"DT_GNU_HASH: {nbuckets} buckets, bloom size {bloom_size}, shift {bloom_shift}")
        head = 16 + bloom_size * self.ptrsz + nbuckets * w
        if head > self.n:
            raise _Bad("DT_GNU_HASH: the bloom filter and buckets do not fit the file")
        off = self.in_load(gnu_addr, head, "DT_GNU_HASH table")
        nonzero = [b for b in self.words(off + 16 + bloom_size * self.ptrsz, nbuckets) if b]
        if any(b < symoffset for b in nonzero):
            raise _Bad("DT_GNU_HASH: a bucket points below the first hashed symbol")
        if not nonzero:
            return symoffset
        chains = gnu_addr + head
        i = max(nonzero)
        while True:
            coff = self.in_load(chains + (i - symoffset) * w, w, "DT_GNU_HASH chain")
            if self.words(coff, 1)[0] & 1:
                return i + 1
            i += 1

    def chain(self, start: int, st: Any, next_field: str, what: str):
        """The entries of a version chain as glibc walks it: from `start`, by `next_field` (a byte offset from the
        entry) until it is 0, whatever the counts say. Each entry must lie in a loaded segment's bytes."""
        a, seen, size = start, 0, st.sizeof()
        while True:
            off = self.in_load(a, size, f"{what} {seen}")
            ent = st.parse(self.b[off:off + size])
            yield a, ent
            seen += 1
            if ent[next_field] == 0:
                return
            if seen > self.n // size:
                raise _Bad(f"{what}: the chain does not end")
            a += ent[next_field]

    def check_versions(self, tags: dict, stroff: int, strsz: int) -> int:
        """Walk the DT_VERNEED / DT_VERDEF chains; the highest version index they define."""
        maxver = 1
        if "DT_VERNEED" in tags:
            for a, need in self.chain(tags["DT_VERNEED"], self.s.Elf_Verneed, "vn_next", "version need entry"):
                self.cstr(stroff, strsz, need["vn_file"], "a version need entry's file name")
                for _x, aux in self.chain(a + need["vn_aux"], self.s.Elf_Vernaux, "vna_next", "version need aux"):
                    self.cstr(stroff, strsz, aux["vna_name"], "a version need aux name")
                    maxver = max(maxver, aux["vna_other"] & 0x7FFF)
        if "DT_VERDEF" in tags:
            for a, vd in self.chain(tags["DT_VERDEF"], self.s.Elf_Verdef, "vd_next", "version definition"):
                maxver = max(maxver, vd["vd_ndx"] & 0x7FFF)
                if vd["vd_cnt"]:
                    for _x, aux in self.chain(a + vd["vd_aux"], self.s.Elf_Verdaux, "vda_next",
                                              "version definition aux"):
                        self.cstr(stroff, strsz, aux["vda_name"], "a version definition aux name")
        return maxver


def check(lib: bytes, name: str, shared: bool) -> None:
    """Raise MalformedObjectError naming program `name` unless `lib` is a structurally sound ELF object file
    (`shared` False: for the JIT) or shared object (`shared` True: for dlopen) for this host."""
    what = "shared object" if shared else "object file"
    try:
        elf = _Elf(bytes(lib), shared)
        if elf.phnum and not shared:
            elf.program_headers()
        elf.check_sections()
        if shared:
            elf.check_segments()
    except _Bad as e:
        raise MalformedObjectError(f"program {name!r}: the compiled bytes are not a loadable ELF {what} for this "
                                   f"host: {e}; refusing to load them (damaged or foreign bytes, e.g. a truncated "
                                   f"or edited cache entry)") from None
    except Exception as e:  # noqa: BLE001 - pyelftools/construct errors on bytes our bounds checks let through
        raise MalformedObjectError(f"program {name!r}: the compiled bytes are not a loadable ELF {what}: "
                                   f"{type(e).__name__}: {e}") from None
