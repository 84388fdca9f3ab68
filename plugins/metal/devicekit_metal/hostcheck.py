"""Check Metal Shading Language without a Mac: a libclang syntax check and a host emulation with g++.

Both compile the MSL exactly as rendered against the shim header `shim/metal_stdlib`, which declares the Metal types,
address spaces (empty macros), attributes and builtins the renderer uses. Neither is Metal's compiler: they catch
malformed source and wrong arithmetic, not Metal-specific type rules.

- `syntax_check(src)` parses the source as C++17 with libclang (the `libclang` wheel) and returns the error
  diagnostics (an empty list means it parsed).
- `HostKernel(spec)` compiles a ProgramSpec's MSL with g++ (or $CXX) into a shared library whose entry point loops
  over every threadgroup and thread position and calls the kernel; `run(arrays, vals)` executes it on numpy arrays.
  Kernels with barriers run each threadgroup as real threads (C++20 std::barrier, threadgroup arrays shared), one
  group at a time; kernels without run every thread one after another.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np
from devicekit.compile.subproc import run_compiler
from devicekit.errors import CompileError

from .hostpch import libclang_pch, pch_include

SHIM_DIR = Path(__file__).parent / "shim"
_SHIM_ARGS = ["-x", "c++", "-std=c++17", f"-I{SHIM_DIR}"]


class HostCheckError(RuntimeError):
    pass


def libclang_available() -> str | None:
    """None when clang.cindex can parse here, else why not."""
    try:
        import clang.cindex as ci
        ci.Index.create()
    except Exception as e:  # noqa: BLE001 - any failure means "not here"
        return f"libclang is not usable: {e} (pip install libclang)"
    return None


@functools.cache
def _builtin_include_args() -> list[str]:
    """The `libclang` wheel ships no compiler builtin headers (stddef.h, ...): borrow the host compiler's."""
    for cc in ("gcc", "cc", "clang"):
        if shutil.which(cc) is None:
            continue
        try:
            p = run_compiler([cc, "-print-file-name=include"], timeout=30)
        except CompileError:
            continue
        d = p.stdout.strip()
        if p.returncode == 0 and os.path.isfile(os.path.join(d, "stddef.h")):
            return ["-isystem", d]
    return []


def syntax_check(src: str, filename: str = "kernel.metal") -> list[str]:
    """Parse MSL as C++17 against the shim with libclang; return error diagnostics as 'line:col: message'."""
    import clang.cindex as ci
    index = ci.Index.create()
    name = filename if filename.endswith(".cpp") else filename + ".cpp"
    args = [*_SHIM_ARGS, *_builtin_include_args(), "-Wno-unknown-attributes"]
    pch = libclang_pch(args, SHIM_DIR) if src.lstrip().startswith("#include <metal_stdlib>") else []
    tu = index.parse(name, args=[*args, *pch, "-fsyntax-only"],
                     unsaved_files=[(name, src)], options=0)
    errs = []
    for d in tu.diagnostics:
        if d.severity >= ci.Diagnostic.Error:
            loc = d.location
            errs.append(f"{loc.line}:{loc.column}: {d.spelling}")
    return errs


def cxx() -> str | None:
    for c in (os.environ.get("CXX"), "g++", "clang++", "c++"):
        if c and shutil.which(c):
            return c
    return None


def _c_type(renderer, dt) -> str:
    return renderer.render_dtype(dt)


_BUILTIN_XYZ = {
    "threadgroup_position_in_grid": ("gx", "gy", "gz"),
    "thread_position_in_threadgroup": ("lx", "ly", "lz"),
    "thread_position_in_grid": ("gx*group[0]+lx", "gy*group[1]+ly", "gz*group[2]+lz"),
    "threads_per_threadgroup": ("group[0]", "group[1]", "group[2]"),
    "threadgroups_per_grid": ("grid[0]", "grid[1]", "grid[2]"),
    "threads_per_grid": ("grid[0]*group[0]", "grid[1]*group[1]", "grid[2]*group[2]"),
    "thread_index_in_threadgroup": ("(lz*group[1]+ly)*group[0]+lx",),
    "thread_index_in_simdgroup": ("((lz*group[1]+ly)*group[0]+lx)%32",),
    "simdgroup_index_in_threadgroup": ("((lz*group[1]+ly)*group[0]+lx)/32",),
    "threads_per_simdgroup": ("32",),
    "thread_execution_width": ("32",),
    "simdgroups_per_threadgroup": ("(group[0]*group[1]*group[2]+31)/32",),
}
# kernels whose threads talk to each other run as real threads (a std::barrier per threadgroup and per simdgroup)
THREADED_MARKERS = ("threadgroup_barrier", "simdgroup_barrier", "simd_", "quad_")


def _builtin_expr(attr: str, type_spelling: str) -> str:
    """The host value of a Metal builtin param, in the harness's loop variables."""
    if attr not in _BUILTIN_XYZ:
        raise HostCheckError(f"the host emulation does not model [[{attr}]]")
    xyz = _BUILTIN_XYZ[attr]
    t = type_spelling.replace("const ", "").replace("metal::", "").strip()
    lanes = int(t[-1]) if t[-1].isdigit() else 1
    if lanes == 1:
        return f"({t})({xyz[0]})"
    return f"{t}(" + ", ".join(f"({t[:-1]})({x})" for x in (xyz + ("0", "0"))[:lanes]) + ")"


_TG_ATTR = re.compile(r"\[\[\s*threadgroup\s*\(")


def host_msl(src: str) -> str:
    """MSL as the shim compiles it: `[[threadgroup(i)]]` spelled `[[dk_threadgroup(i)]]` (the shim defines the address
    space `threadgroup` as a macro, which would eat the attribute's name)."""
    return _TG_ATTR.sub("[[dk_threadgroup(", src)


def _drop_param_address_spaces(src: str, name: str) -> str:
    """`threadgroup` in the entry's parameter list removed (the threaded shim defines it as `static`, which is right
    for threadgroup arrays in the body and wrong for a param)."""
    m = re.search(rf"\b{re.escape(name)}\s*\(", src)
    if m is None:
        return src
    depth, k = 1, m.end()
    while k < len(src) and depth:
        depth += {"(": 1, ")": -1}.get(src[k], 0)
        k += 1
    return src[:m.end()] + re.sub(r"\bthreadgroup\b", "", src[m.end():k]) + src[k:]


def harness_source(spec, renderer, threaded: bool = False) -> str:
    """The MSL source plus an extern "C" entry point that runs every thread of the grid: one after another, or
    (`threaded`, for kernels with barriers or simd functions) one threadgroup at a time with a std::thread per
    thread position. Hand-written kernels (devicekit_metal.source) bring their own argument order and builtins."""
    params = spec.get_meta("source_params")
    src = host_msl(spec.src)
    if params is None:  # generated: buffers, int64 vars, then the two positions the renderer asks for
        order = [("buffer", i, None) for i in range(len(spec.params))]
        order += [("var", j, None) for j in range(len(spec.vars))]
        order += [("builtin", 0, ("threadgroup_position_in_grid", "uint3")),
                  ("builtin", 0, ("thread_position_in_threadgroup", "uint3"))]
    else:
        order = [(kind, k, (p.attr[0], p.type) if kind == "builtin" else None)
                 for (kind, k), p in zip(spec.arg_order(), params)]
        if any(kind == "local" for kind, _, _ in order):
            src = _drop_param_address_spaces(src, spec.entry)
    args = []
    for kind, k, extra in order:
        if kind == "buffer":
            args.append(f"dk_ptr{{bufs[{k}]}}" if params is not None else
                        f"({_c_type(renderer, spec.params[k].dtype)}*)bufs[{k}]")
        elif kind == "var":
            dt = spec.vars[k].dtype
            # a scalar of any type: the slot read as the parameter's own type (MSL's char is not the host's int8_t)
            args.append(f"vals[{k}]" if dt is None else f"dk_ref{{&vals[{k}]}}")
        elif kind == "local":
            args.append(f"dk_ptr{{tg[{k}].data()}}")
        else:
            args.append(_builtin_expr(*extra))
    call = f"{spec.entry}({', '.join(args)});"
    prelude = ("struct dk_ptr { void* p; template <class T> operator T*() const { return (T*)p; } };\n"  # any buffer
               "struct dk_ref { void* p; template <class T> operator T&() const { return *(T*)p; } };\n")  # any scalar
    # threadgroup args: the launch's bytes, then a canary; a kernel writing past its argument (shared_bytes too
    # small) makes dk_host_run return 1 + the argument's index instead of corrupting the host's heap
    tg_alloc = ("std::vector<std::vector<long double>> tg(ntg);\n"
                "    for (long k = 0; k < ntg; k++) {\n"
                "      tg[k].assign((tgbytes[k] + 64) / sizeof(long double) + 1, 0);\n"
                "      std::memset((char *)tg[k].data() + tgbytes[k], 0xA5, 64);\n"
                "    }")
    tg_check = ("for (long k = 0; k < ntg; k++)\n"
                "      for (long b = 0; b < 64; b++)\n"
                "        if (((unsigned char *)tg[k].data())[tgbytes[k] + b] != 0xA5) return 1 + k;")
    if threaded:
        return f"""#define DK_HOST_THREADS 1
{src}
#undef thread
#include <cstring>
#include <memory>
{prelude}
extern "C" int dk_host_run(void **bufs, long *vals, const long *grid, const long *group, long ntg,
                           const long *tgbytes) {{
  const long nthreads = group[0] * group[1] * group[2];
  for (long gz = 0; gz < grid[2]; gz++) for (long gy = 0; gy < grid[1]; gy++) for (long gx = 0; gx < grid[0]; gx++) {{
    {tg_alloc}
    std::barrier<> b(nthreads);
    std::vector<std::unique_ptr<std::barrier<>>> sb;
    for (long s = 0; s < (nthreads + 31) / 32; s++)
      sb.emplace_back(new std::barrier<>(std::min(32L, nthreads - 32 * s)));
    std::vector<std::barrier<>*> sbp;
    for (auto &x : sb) sbp.push_back(x.get());
    metal::dk_group_barrier = &b;
    metal::dk_simd_barriers = sbp.data();
    metal::dk_group_threads = nthreads;
    std::vector<std::thread> ts;
    for (long lz = 0; lz < group[2]; lz++) for (long ly = 0; ly < group[1]; ly++) for (long lx = 0; lx < group[0]; lx++)
      ts.emplace_back([=, &tg] {{ metal::dk_tid = (lz * group[1] + ly) * group[0] + lx; {call} }});
    for (auto &t : ts) t.join();
    {tg_check}
  }}
  return 0;
}}
"""
    return f"""{src}
#include <cstring>
#include <vector>
{prelude}
extern "C" int dk_host_run(void **bufs, long *vals, const long *grid, const long *group, long ntg,
                           const long *tgbytes) {{
  for (long gz = 0; gz < grid[2]; gz++) for (long gy = 0; gy < grid[1]; gy++) for (long gx = 0; gx < grid[0]; gx++) {{
    {tg_alloc}
    for (long lz = 0; lz < group[2]; lz++) for (long ly = 0; ly < group[1]; ly++) for (long lx = 0; lx < group[0]; lx++)
      {call}
    {tg_check}
  }}
  return 0;
}}
"""


def var_slots(spec, vals) -> list[int]:
    """Var values as the 64-bit slots the harness reads: ints as they are, floats as the bits of their type."""
    out = []
    for v, x in zip(spec.vars, vals):
        if v.is_float:
            fmt = {"float16": "e", "float32": "f", "float64": "d"}.get(v.dtype.name)
            if fmt is None:
                raise HostCheckError(f"the host emulation cannot pass a {v.dtype} var")
            out.append(struct.unpack("<q", struct.pack("<" + fmt, float(x)).ljust(8, b"\0"))[0])
        else:
            out.append(int(x))
    return out


class HostKernel:
    """A rendered Metal kernel compiled for the host CPU through the shim (barrier-free kernels only)."""

    MAX_THREADED_GROUP = 1024

    def __init__(self, spec, renderer, workdir: str | None = None):
        compiler = cxx()
        if compiler is None:
            raise HostCheckError("no C++ compiler (g++/clang++) for the host emulation")
        self.spec = spec
        self.threaded = any(m in spec.src for m in THREADED_MARKERS)  # threads that talk must run together
        src = harness_source(spec, renderer, self.threaded)
        digest = hashlib.sha256(src.encode()).hexdigest()[:16]
        self._dir = workdir or tempfile.mkdtemp(prefix="dk_metal_host_")
        cpp = Path(self._dir) / f"{spec.name}_{digest}.cpp"
        so = cpp.with_suffix(".so")
        cpp.write_text(src)
        std = ["-std=c++20", "-pthread"] if self.threaded else ["-std=c++17"]
        # -O0: a kernel is built per check and run once on small data; the build is most of the cost (IEEE semantics
        # are the same: SSE, no contraction, no fast-math); the shim's headers precompiled (hostpch.py)
        flags = [*std, "-O0", "-fPIC", "-fno-fast-math", "-ffp-contract=off", "-Wno-attributes"]
        pch = pch_include(compiler, flags, SHIM_DIR, ("DK_HOST_THREADS=1",) if self.threaded else ())
        cmd = [compiler, *flags, "-shared", *pch, f"-I{SHIM_DIR}", "-o", str(so), str(cpp)]
        p = run_compiler(cmd, what=os.path.basename(compiler))
        if p.returncode != 0:
            raise HostCheckError(f"host compile of {spec.name} failed:\n{p.stderr}\n--- source ---\n{src}")
        self._lib = ctypes.CDLL(str(so))
        self._fn = self._lib.dk_host_run
        self._fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_long),
                             ctypes.POINTER(ctypes.c_long), ctypes.POINTER(ctypes.c_long), ctypes.c_long,
                             ctypes.POINTER(ctypes.c_long)]

    def run(self, arrays: list[np.ndarray], vals: list[int] = (), grid=None, group=None) -> None:
        """Run the kernel over its whole grid, in place on `arrays` (param order; storage dtypes, contiguous).
        The grid (threadgroups) and group (threads) default to the spec's launch dims for these vars."""
        spec = self.spec
        var_vals = spec.check_vars(list(vals))
        g, loc = spec.launch_dims(var_vals)
        grid, group = grid or g, group or loc
        grid = tuple(grid or (1,)) + (1,) * (3 - len(grid or (1,)))
        group = tuple(group or (1,)) + (1,) * (3 - len(group or (1,)))
        if self.threaded and group[0] * group[1] * group[2] > self.MAX_THREADED_GROUP:
            raise HostCheckError(f"{spec.name}: {group} threads per group is too many to emulate with threads")
        if len(arrays) != len(spec.params):
            raise ValueError(f"{spec.name}: expected {len(spec.params)} arrays, got {len(arrays)}")
        for a, p in zip(arrays, spec.params):
            if not a.flags.c_contiguous or a.dtype != p.dtype.np:
                raise ValueError(f"{spec.name}: {p.name} must be a contiguous {p.dtype.np} array")
        bufs = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        # the checked values (a k.scalar rounded to its dtype), not the raw ones
        cvals = (ctypes.c_long * max(1, len(vals)))(*var_slots(spec, [var_vals[v.name] for v in spec.vars]))
        from devicekit.render.signature import launch_shared
        tg = launch_shared(spec, var_vals)[1]
        rc = self._fn(bufs, cvals, (ctypes.c_long * 3)(*grid), (ctypes.c_long * 3)(*group), len(tg),
                      (ctypes.c_long * max(1, len(tg)))(*tg))
        if rc:
            p = [q for q in spec.get_meta("source_params") if q.kind == "local"][rc - 1]
            raise HostCheckError(f"{spec.name}: the kernel wrote past its threadgroup argument {p.name!r} "
                                 f"({tg[rc - 1]} bytes for this launch): give it more with shared_bytes=")
