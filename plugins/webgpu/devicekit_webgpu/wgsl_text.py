"""The C-shaped statements of the shared walk (devicekit.render.cstyle) respelled as WGSL, line by line.

The C-style base emits a handful of statement shapes that are not hooks: typed declarations (`T x = e;`), a typed
for header (`for (T r = a; r < b; r++) {`), a braceless gated store (`if (g) st;`) and a gated load as a C
conditional (`(g?x:y)`). WGSL spells them `let x: T = e;` (`var` for accumulators), `for (var r: T = a; ...`,
`if (g) { st; }` and `select(y, x, g)`. Everything else the walk writes goes through the renderer's hooks. The
rewrite is exact because the renderer controls every expression's text: `?` and `:` appear in no expression but the
gated load's, and every type name is one of WGSL's scalar names (docs/writing-a-plugin.md, section 13, lists the
base changes that would make this module unnecessary).
"""

from __future__ import annotations

import re

_TYPES = r"(?:bool|i32|u32|f32|f16)"
_DECL = re.compile(rf"^(\s*)({_TYPES}) ([A-Za-z_]\w*) = (.*);$")
_FOR = re.compile(rf"^(\s*)for \(({_TYPES}) ([A-Za-z_]\w*) = ")
_IF = re.compile(r"^(\s*)if \(")


def _close(s: str, i: int) -> int:
    """Index of the ')' matching the '(' at s[i]."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "(":
            depth += 1
        elif s[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced parentheses in {s!r}")


def ternaries(s: str) -> str:
    """Every `(g?x:y)` of s as `select(y, x, g)`, innermost first (the walk parenthesizes each conditional)."""
    while (q := s.find("?")) >= 0:
        depth, start = 0, -1
        for j in range(q - 1, -1, -1):  # the '(' that opens the conditional
            if s[j] == ")":
                depth += 1
            elif s[j] == "(":
                if depth == 0:
                    start = j
                    break
                depth -= 1
        end = _close(s, start)
        inner = s[start + 1:end]
        qi = inner.find("?")
        depth, colon = 0, -1
        for j in range(qi + 1, len(inner)):
            c = inner[j]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif c == "?" and depth == 0:
                raise ValueError(f"nested conditional without parentheses in {s!r}")
            elif c == ":" and depth == 0:
                colon = j
                break
        g, x, y = inner[:qi], inner[qi + 1:colon], inner[colon + 1:]
        s = f"{s[:start]}select({y}, {x}, {g}){s[end + 1:]}"
    return s


def statement(line: str) -> str:
    """One line of the walk's body in WGSL."""
    line = ternaries(line) if "?" in line else line
    if m := _DECL.match(line):
        pad, t, name, e = m.groups()
        kw = "var" if name.startswith("acc") else "let"  # accumulators are assigned again
        return f"{pad}{kw} {name}: {t} = {e};"
    if m := _FOR.match(line):
        pad, t, name = m.groups()
        return f"{pad}for (var {name}: {t} = {line[m.end():]}"
    if (m := _IF.match(line)) and not line.rstrip().endswith("{"):
        end = _close(line, m.end() - 1)
        return f"{line[:end + 1]} {{ {line[end + 1:].strip()} }}"
    return line
