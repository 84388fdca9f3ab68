"""`devicekit compile FILE.py:KERNEL --show source|ir|asm`: load a kernel from a Python file and show one stage of
its compilation for a device: the renderer's source, the linear IR the renderer walks, or the compiler's assembly.
It uses `dk.target`, so it works for kinds that cannot run here (CUDA without a GPU)."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["KernelLoadError", "NoDisassembly", "load_kernel", "show"]

STAGES = ("source", "ir", "asm")


class KernelLoadError(ValueError):
    """FILE.py:KERNEL could not be loaded (bad reference, missing file, error in the file, not a kernel)."""


class NoDisassembly(RuntimeError):
    """The compiler of this pair cannot show assembly."""


def _load_module(path: Path) -> Any:
    name = f"_devicekit_user_{abs(hash(str(path))):x}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise KernelLoadError(f"{path}: not a loadable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))  # the file may import its neighbours
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise KernelLoadError(f"{path} raised {type(e).__name__} while loading: {e}") from e
    finally:
        sys.path.remove(str(path.parent))
    return module


def load_kernel(ref: str) -> Any:
    """The ir.Kernel named by "path/to/file.py:NAME": a Kernel object, or a function taking no arguments that
    returns one."""
    from .ir import Kernel

    path_s, sep, attr = ref.rpartition(":")
    if not sep or not path_s or not attr:
        raise KernelLoadError(f"expected FILE.py:KERNEL (e.g. kernels.py:saxpy), got {ref!r}")
    path = Path(path_s)
    if not path.is_file():
        raise KernelLoadError(f"{path_s}: no such file")
    module = _load_module(path)
    if not hasattr(module, attr):
        found = [n for n, v in vars(module).items() if not n.startswith("_") and
                 (isinstance(v, Kernel) or (inspect.isfunction(v) and v.__module__ == module.__name__))]
        raise KernelLoadError(f"{path_s} has no {attr!r}; kernels and functions there: {', '.join(found) or 'none'}")
    obj = getattr(module, attr)
    if callable(obj) and not isinstance(obj, Kernel):
        try:
            inspect.signature(obj).bind()
        except TypeError:
            raise KernelLoadError(f"{ref}: {attr}() needs arguments; give a kernel or a zero-argument function "
                                  "returning one") from None
        except ValueError:
            pass  # no signature (a builtin): just call it
        try:
            obj = obj()
        except Exception as e:
            raise KernelLoadError(f"{ref}: {attr}() raised {type(e).__name__}: {e}") from e
    if not isinstance(obj, Kernel):
        from .ir.accept import described
        raise KernelLoadError(f"{ref} is {described(obj)}, not a devicekit ir.Kernel (build one with "
                              "ir.KernelBuilder(...).build())")
    return obj


def _asm_of(compiler: Any, spec: Any) -> str:
    """The assembly of `spec` as its compiler shows it; NoDisassembly with the reason when it cannot."""
    dis = getattr(compiler, "disassemble", None)
    if callable(dis):
        params = list(inspect.signature(dis).parameters)
        if params and params[0] == "src":  # the CPU llvm pair: optimized IR followed by llvmlite's emit_assembly
            text = dis(spec.src)
            m = re.search(r"^\s*\.(text|file|section)\b", text, re.MULTILINE)
            return text[m.start():].lstrip("\n") if m else text
        lib = compiler.compile(spec).lib
        text = dis(lib)
        if text.strip() and not text.startswith("("):
            return text
        if callable(to_ptx := getattr(compiler, "to_ptx", None)):  # CUDA without cuobjdump: the PTX it linked
            ptx = to_ptx(spec.src, spec.entry)
            return f"// {text.strip()}: showing the PTX that was linked into the cubin\n" + \
                (ptx.decode(errors="replace") if isinstance(ptx, bytes) else str(ptx))
        raise NoDisassembly(f"compiler {compiler.name!r}: {text.strip() or 'its disassembler printed nothing'}")
    lib = compiler.compile(spec).lib
    if lib[:4] == b"\x7fELF" and (objdump := shutil.which("objdump")):
        with tempfile.TemporaryDirectory(prefix="devicekit_asm_") as d:
            f = os.path.join(d, "kernel.o")
            Path(f).write_bytes(lib)
            for only in ([f"--disassemble={spec.entry}"], ["-d"]):  # just the entry point, when objdump can
                p = subprocess.run([objdump, *only, "--no-show-raw-insn", f], capture_output=True, text=True,
                                   timeout=60, check=False)
                if p.returncode == 0 and re.search(r"^\s+[0-9a-f]+:", p.stdout, re.MULTILINE):
                    blocks = p.stdout.replace(f, "kernel.o").strip("\n").split("\n\n")
                    return "\n\n".join(b for b in blocks if b.strip() and not re.fullmatch(r"Disassembly of section \S+:", b.strip()))
    raise NoDisassembly(f"compiler {compiler.name!r} offers no disassembly (it has no disassemble() and its "
                        f"{len(lib)} bytes are not an object file objdump reads); try --show source or --show ir")


def show(kernel: Any, device: str, stage: str = "source", pair: str | int | None = None) -> str:
    """One stage of compiling `kernel` for `device` with compiler pair `pair` (None: the best)."""
    from .ir.linearize import lower
    from .registry import target

    if stage not in STAGES:
        raise ValueError(f"--show must be one of {', '.join(STAGES)}, got {stage!r}")
    t = target(device)
    renderer, compiler = t.pair(pair)
    if stage == "ir":
        lk = lower(kernel, renderer.capabilities)
        return "".join(f"# optimizer: {o}\n" for o in lk.opts) + str(lk)
    spec = renderer.render(kernel)
    if opts := spec.get_meta("opts"):
        print(f"devicekit compile: optimizer: {', '.join(opts)}", file=sys.stderr)  # stdout stays the source
    if stage == "source":
        return spec.src
    return _asm_of(compiler, spec)
