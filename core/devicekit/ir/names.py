"""User-given names (kernel, param, var, local array): the one rule for what is allowed and how source spells them.

Why: a user name copied into C, CUDA, MSL or LLVM IR as is can be a keyword (`int`), a header macro (`INFINITY`),
a builtin (`sqrtf`), a qualifier (`local`) or a renderer's own temporary (`alu0`, `%t1`, `entry`); each of those
fails to compile or, worse, silently computes something else. So the builder accepts plain ASCII identifiers only
(`check`), and every generated-source renderer spells a user name as `mangle(name)` = `USER_PREFIX + name`. No
keyword, macro or builtin of C, C++, CUDA, MSL, OpenCL or LLVM IR starts with `dku_`, and no renderer's own name
does (temporaries are `alu3`, `ridx0`, `%t1`, helpers `dk_*`, ...; tests/reliability/test_hostile_names.py checks
every rendered source): collisions are impossible by construction, not avoided by a deny list. The ProgramSpec keeps
the user's names (arguments are passed by them); only the source and the entry symbol carry the mangled form.
"""

from __future__ import annotations

import re

USER_PREFIX = "dku_"  # devicekit user name: a namespace no language, header or renderer temporary uses
MAX_LEN = 128  # characters of a user name (the mangled name stays well inside every toolchain's limits)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RULE = f"an ASCII identifier ([A-Za-z_][A-Za-z0-9_]*, at most {MAX_LEN} characters)"
# names the lowering itself gives VARs of a CPU kernel (the split range's bounds): a user var may not take them
LOWERING_VARS = ("core_start", "core_end")
BOUNDS_PARAM = "dk_bounds"  # the hidden param of run-time bounds checks (ir/bounds.py)


def check(name: object, what: str) -> str:
    """`name` if it is a valid user name, else ValueError (TypeError for a non-str) saying what `what` (e.g.
    "param name") must be."""
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, {RULE}; got {type(name).__name__} {name!r}")
    if len(name) > MAX_LEN or _IDENT.fullmatch(name) is None:
        why = f"it has {len(name)} characters" if len(name) > MAX_LEN and _IDENT.fullmatch(name) else \
            "it is not one" if name.isascii() else "it has non-ASCII characters"
        raise ValueError(f"{what} {name!r} is not allowed: a name must be {RULE}, and {why}. Any such name works, "
                         "keywords and builtins included: generated source renames it (see docs/ir.md, Names)")
    return name


def mangle(name: str) -> str:
    """How generated source spells user name `name` (injective; disjoint from every keyword and temporary)."""
    return USER_PREFIX + name
