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
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

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
            p = subprocess.run([cc, "-print-file-name=include"], capture_output=True, text=True, check=False, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
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
    args = [*_SHIM_ARGS, *_builtin_include_args(), "-Wno-unknown-attributes", "-fsyntax-only"]
    tu = index.parse(name, args=args,
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
}


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


def harness_source(spec, renderer, threaded: bool = False) -> str:
    """The MSL source plus an extern "C" entry point that runs every thread of the grid: one after another, or
    (`threaded`, for kernels with barriers) one threadgroup at a time with a std::thread per thread position."""
    signature = spec.get_meta("signature")  # hand-written kernels (devicekit_metal.source) say where builtins go
    if signature is None:
        signature = ([("buffer", i) for i in range(len(spec.params))] + [("var", j) for j in range(len(spec.vars))]
                     + [("builtin", "threadgroup_position_in_grid", "uint3"),
                        ("builtin", "thread_position_in_threadgroup", "uint3")])
    args = []
    for item in signature:
        if item[0] == "buffer":
            args.append(f"({_c_type(renderer, spec.params[item[1]].dtype)}*)bufs[{item[1]}]")
        elif item[0] == "var":  # 8 bytes per var, as the runtime's setBytes: a narrower type reads the low bytes
            args.append(f"*({item[2]}*)&vals[{item[1]}]" if len(item) > 2 else f"vals[{item[1]}]")
        else:
            args.append(_builtin_expr(item[1], item[2]))
    call = f"{spec.name}({', '.join(args)});"
    if threaded:
        return f"""#define DK_HOST_THREADS 1
{spec.src}
#undef thread
extern "C" int dk_host_run(void **bufs, long *vals, const long *grid, const long *group) {{
  for (long gz = 0; gz < grid[2]; gz++) for (long gy = 0; gy < grid[1]; gy++) for (long gx = 0; gx < grid[0]; gx++) {{
    std::barrier<> b(group[0] * group[1] * group[2]);
    metal::dk_group_barrier = &b;
    std::vector<std::thread> ts;
    for (long lz = 0; lz < group[2]; lz++) for (long ly = 0; ly < group[1]; ly++) for (long lx = 0; lx < group[0]; lx++)
      ts.emplace_back([=] {{ {call} }});
    for (auto &t : ts) t.join();
  }}
  return 0;
}}
"""
    return f"""{spec.src}
extern "C" int dk_host_run(void **bufs, long *vals, const long *grid, const long *group) {{
  for (long gz = 0; gz < grid[2]; gz++) for (long gy = 0; gy < grid[1]; gy++) for (long gx = 0; gx < grid[0]; gx++)
    for (long lz = 0; lz < group[2]; lz++) for (long ly = 0; ly < group[1]; ly++) for (long lx = 0; lx < group[0]; lx++)
      {call}
  return 0;
}}
"""


class HostKernel:
    """A rendered Metal kernel compiled for the host CPU through the shim (barrier-free kernels only)."""

    MAX_THREADED_GROUP = 1024

    def __init__(self, spec, renderer, workdir: str | None = None):
        compiler = cxx()
        if compiler is None:
            raise HostCheckError("no C++ compiler (g++/clang++) for the host emulation")
        self.spec = spec
        self.threaded = "threadgroup_barrier" in spec.src  # barriers need the threads of a group to run together
        src = harness_source(spec, renderer, self.threaded)
        digest = hashlib.sha256(src.encode()).hexdigest()[:16]
        self._dir = workdir or tempfile.mkdtemp(prefix="dk_metal_host_")
        cpp = Path(self._dir) / f"{spec.name}_{digest}.cpp"
        so = cpp.with_suffix(".so")
        cpp.write_text(src)
        std = ["-std=c++20", "-pthread"] if self.threaded else ["-std=c++17"]
        cmd = [compiler, *std, "-O1", "-fPIC", "-shared", "-fno-fast-math", "-ffp-contract=off",
               f"-I{SHIM_DIR}", "-Wno-attributes", "-o", str(so), str(cpp)]
        p = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if p.returncode != 0:
            raise HostCheckError(f"host compile of {spec.name} failed:\n{p.stderr}\n--- source ---\n{src}")
        self._lib = ctypes.CDLL(str(so))
        self._fn = self._lib.dk_host_run
        self._fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_long),
                             ctypes.POINTER(ctypes.c_long), ctypes.POINTER(ctypes.c_long)]

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
        cvals = (ctypes.c_long * max(1, len(vals)))(*[int(v) for v in vals])
        self._fn(bufs, cvals, (ctypes.c_long * 3)(*grid), (ctypes.c_long * 3)(*group))
