"""Read the signature of a hand-written C kernel with libclang and make a ProgramSpec of it.

Conventions (docs/handwritten.md, docs/decisions.md "CPU plugin"):
- the source is read with the include setup of the C compiler the pair uses (its builtin headers: stddef.h,
  stdbool.h, float.h, ...; `cc_compiler.reader_args`), in a helper process bounded by DEVICEKIT_PARSE_TIMEOUT;
  only the signature is judged here, the body is the compiler's;
- pointer and array params are buffers (declaration order), element dtype from the C type (vector types too); a
  buffer is writable unless its element is const; `float x[1024]` states 1024 elements, C99 `double A[n][m]`
  states n*m;
- scalar params (bool, 8-64 bit ints, size_t, float, double) are vars in declaration order, in any order with the
  buffers: `execute(buffers, vals)` takes each list in declaration order, `dk.run` takes them by name;
- `sizes={"x": 1024, "y": "n*4"}` states buffer sizes in elements (an int, or an expression over the int params);
  a buffer with no stated size is unchecked;
- params named `core_start` and `core_end` (the last two, integers) make the kernel splittable across threads:
  pass `split="n"` (the extent, an int or expression) and the runtime calls it once per chunk of [0, extent).
"""

from __future__ import annotations

import os
import re

from devicekit.errors import CompileError
from devicekit.render import signature as sg
from devicekit.render.parse_worker import bounded

FNAME = "kernel.c"


def read_c(src: str, entry: str, args: list[str], fname: str = FNAME) -> sg.Signature:
    """(In the reader process.) The Signature of `entry` in C source `src`, read as the file `fname` (a path in the
    compile's working dir, so quoted includes resolve where the compiler finds them)."""
    import clang.cindex as ci

    FNAME = fname
    tu = sg.parse(FNAME, src, args, src=src)
    fn, names = sg.find_function(tu, entry, FNAME)
    if fn is None:
        errs = sg.first_errors(tu, FNAME)
        raise CompileError(f"no function definition named {entry!r} in the source (found: "
                           f"{', '.join(sorted(set(names))) or 'none'})", "\n".join(errs), src)
    if errs := sg.signature_errors(tu, fn, FNAME):
        raise CompileError(f"{entry}: its signature does not parse (a type from a header the reader did not "
                           "find?)", "\n".join(errs), src)
    if fn.result_type.kind != ci.TypeKind.VOID:
        raise CompileError(f"{entry}:{fn.location.line}: a kernel returns void, {entry} returns "
                           f"{fn.result_type.spelling}", "", src)
    params = []
    for a in fn.get_arguments():
        where = f"{entry}:{a.location.line}: param {a.spelling!r} ({a.type.spelling})"
        params.append(sg.read_param(a.spelling, a.type, a.location.line, where,
                                    tokens=tuple(t.spelling for t in a.get_tokens())))
    facts = (("static", fn.storage_class == ci.StorageClass.STATIC),
             ("includes", sg.included_files(tu)))
    return sg.Signature(entry, tuple(params), fn.location.line, facts)


def exported(src: str, entry: str) -> str:
    """`src` with its `static` entry exported as written: the function is renamed by a macro (every use, line
    numbers kept by `#line`), and a global alias under the entry's own name points at it, so the loader finds it by
    name and the user edits nothing (PolyBench/C's `static void kernel_*`)."""
    local = f"__dk_static_{entry}"
    return (f"#define {entry} {local}\n#line 1\n{src}\n#undef {entry}\n"
            f"extern __typeof__({local}) {entry} __attribute__((alias(\"{local}\"), visibility(\"default\")));\n")


def _compiler_error(src: str, ctx) -> CompileError | None:
    """The C compiler's own error for a source the reader could not find the entry in (an #include of a file that
    is not C, a syntax error before it): `cc -fsyntax-only` in the same setup; None when the compiler takes it."""
    from devicekit.compile.subproc import run_compiler

    from .cc_compiler import FLAGS, find_cc
    cc = find_cc()
    if cc is None:
        return None
    std = [f for f in FLAGS if f.startswith("-std=")]
    try:
        p = run_compiler([cc, *std, *ctx.cc_args(), "-fsyntax-only", "-x", "c", "-"], input=src, cwd=ctx.cwd,
                         timeout=60)
    except CompileError:
        return None
    if p.returncode == 0:
        return None
    return CompileError(f"{os.path.basename(cc)} rejected the C source (exit {p.returncode})", p.stderr, src)


def parse_c_source(src: str, entry: str, sizes: dict | None = None, split=None, device: str = "CPU",
                   lang: str = "c", reader_args: list[str] | None = None):
    """The ProgramSpec of hand-written C (see the module docstring)."""
    from .cc_compiler import reader_args as default_args

    if not isinstance(src, str) or not isinstance(entry, str) or not entry:
        raise CompileError(f"program_from_source(src, entry): expected source text and a function name, got "
                           f"{type(src).__name__} and {entry!r}")
    from devicekit.compile.deps import active_context
    ctx = active_context()
    args = [*(default_args() if reader_args is None else reader_args), *ctx.cc_args()]
    try:
        sig = bounded("devicekit_cpu.source_parse:read_c", src, entry, args, os.path.join(ctx.cwd, FNAME))
    except CompileError as e:
        if e.message.startswith("no function definition") and (own := _compiler_error(src, ctx)) is not None:
            raise own from None
        raise
    params = list(sig.params)
    names = [p.name for p in params]
    split_ints = names[-2:] == ["core_start", "core_end"] and all(
        p.kind == "scalar" and p.dtype.is_int for p in params[-2:])
    if split_ints:
        params = params[:-2]
        if split is None:
            raise CompileError(f"{entry} takes core_start/core_end: pass split= (the extent to divide)", "", src)
    elif split is not None:
        raise CompileError(f"split= needs {entry} to end with (long long core_start, long long core_end)", "", src)
    for p in params:
        if p.kind == "scalar" and p.dtype.is_float and p.dtype.itemsize == 2:
            raise CompileError(f"{entry}:{p.line}: param {p.name!r} ({p.type}): a half-precision scalar cannot be "
                               "passed through the C ABI here: take a float and convert inside", "", src)
        if p.kind in ("local", "builtin"):
            raise CompileError(f"{entry}:{p.line}: param {p.name!r} ({p.type}) is not a C kernel param", "", src)
    sig = sg.Signature(sig.entry, tuple(params), sig.line, sig.facts)
    if sig.fact("static"):
        src = exported(src, entry)
    if entry != "main" and re.search(r"^\s*int\s+main\s*\(", src, re.MULTILINE):  # a whole program (PolyBench/C):
        src = f"#define main __dk_host_main\nstatic int __dk_host_main();\n#line 1\n{src}"  # main made static, unused
    return sg.build_spec(sig, src, device=device, lang=lang, sizes=sizes, split=split, meta=(("split_cost", 1 << 12),))
