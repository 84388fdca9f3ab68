"""Hand-written source -> ProgramSpec: the steps every source-reading plugin's `parse_source` takes around its reader.

A plugin writes only its reader (`reader(src, entry, flags) -> render.signature.Signature`, run in the bounded reader
process: render/parse_worker.py); `read_source` checks the two arguments, adds the source context of the call in
progress (compile/deps.py: the caller's working dir for quoted includes, `include_dirs=` as -I, `defines=` as -D) to
the reader's flags, and makes the ProgramSpec (`render.signature.build_spec`). `preprocessor_flags` picks out of a
compiler's options those the reader's preprocessor must see too, so `#ifdef` resolves as the compiler's does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import CompileError
from ..render.parse_worker import bounded
from ..render.signature import build_spec
from .deps import active_context

__all__ = ["preprocessor_flags", "read_source"]

_WITH_VALUE = ("-D", "-U", "-I")


def preprocessor_flags(options: Sequence[str], keep: tuple[str, ...] = ()) -> list[str]:
    """The -D, -U and -I options (joined or with the value as the next word) and those starting with one of `keep`
    (OpenCL: `-cl-std=`, `-cl-fast-relaxed-math`, which defines __FAST_RELAXED_MATH__); the rest only change code
    generation."""
    out, it = [], iter(options)
    for w in it:
        if w in _WITH_VALUE:
            out += [w, next(it, "")]
        elif w.startswith(_WITH_VALUE + keep):
            out.append(w)
    return out


def read_source(reader: str, src: Any, entry: Any, flags: Sequence[str] = (), **options: Any) -> Any:
    """The ProgramSpec of kernel `entry` in `src`: its Signature read by `reader` ("pkg.module:function") with
    `flags` plus the source context's, then `build_spec(sig, src, **options)` (device=, lang=, sizes=, ...)."""
    if not isinstance(src, str) or not isinstance(entry, str) or not entry.strip():
        raise CompileError(f"program_from_source(src, entry): expected source text and a kernel name, got "
                           f"{type(src).__name__} and {entry!r}")
    ctx = active_context()
    sig = bounded(reader, src, entry.strip(), (*flags, f"-iquote{ctx.cwd}", *ctx.cc_args()))
    return build_spec(sig, src, **options)
