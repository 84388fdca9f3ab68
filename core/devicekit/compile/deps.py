"""What a hand-written compile reads besides its source, so the compile cache serves bytes only while all of it is
unchanged (docs/decisions.md, "Compile cache": header-aware keys).

- `SourceContext`: where a compile looks for headers and what it predefines: the working directory (quoted includes
  of the source resolve there), the user's include dirs (absolute, in order) and defines. It is part of the cache
  key, so the same source compiled from another folder, or with other -I/-D, is another entry.
- The dependency manifest: a cache entry of a hand-written source holds, before its bytes, every file the compile
  read (the compiler's own dependency output where it has one: `cc -MD`, NVRTC's `-MD`; libclang's inclusion list
  of the signature reader otherwise) with the sha256 of its content. A hit is valid only when every recorded file
  still hashes the same (ccache's manifest idea); a changed or removed header makes it a miss, and the compile then
  gives the new bytes or the compiler's own error.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from ..errors import CompileError

MAGIC = b"DKDEPS1\n"
_LEN = struct.Struct("<I")
MAX_FILE_BYTES = 64 << 20  # a header bigger than this is hashed by its first 64 MiB and its size


@dataclass(frozen=True)
class SourceContext:
    """The header search setup of one hand-written compile (see the module docstring)."""

    cwd: str
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()  # "NAME" or "NAME=VALUE"

    def key_text(self) -> str:
        return json.dumps({"cwd": self.cwd, "I": self.include_dirs, "D": self.defines}, separators=(",", ":"))

    def cc_args(self) -> list[str]:
        """-I/-D flags for a C-family compiler driver (and libclang)."""
        return [*(f"-I{d}" for d in self.include_dirs), *(f"-D{d}" for d in self.defines)]


def _text(x: object, what: str) -> str:
    if not isinstance(x, (str, os.PathLike)):
        raise CompileError(f"{what}: expected a str, got {type(x).__name__} ({x!r})")
    s = os.fspath(x)
    if not isinstance(s, str) or not s or "\0" in s or "\n" in s:
        raise CompileError(f"{what}: {s!r} is empty or holds a NUL or newline")
    try:
        s.encode()
    except UnicodeEncodeError:
        raise CompileError(f"{what}: {s!r} is not valid text (a lone surrogate)") from None
    return s


def make_context(include_dirs: Iterable[str | os.PathLike] | None = None,
                 defines: dict[str, object] | Sequence[str] | None = None, cwd: str | None = None
                 ) -> SourceContext:
    """A SourceContext from `program_from_source`'s include_dirs= (paths; relative ones are made absolute now, as
    the compiler would resolve them from here) and defines= ({"N": 64, "FLAG": None} or ["N=64", "FLAG"])."""
    if not cwd:
        try:
            cwd = os.getcwd()
        except OSError:  # the working dir was removed: nothing resolves there; "/" is no one's to plant headers in
            cwd = "/"
    cwd = os.path.abspath(cwd)
    if isinstance(include_dirs, (str, os.PathLike)):
        include_dirs = [include_dirs]
    dirs = []
    for i, d in enumerate(include_dirs or ()):
        d = _text(d, f"include_dirs[{i}]")
        d = os.path.normpath(os.path.join(cwd, os.path.expanduser(d)))
        if not os.path.isdir(d):
            raise CompileError(f"include_dirs[{i}]: {d} is not a directory")
        dirs.append(d)
    defs: list[str] = []
    if isinstance(defines, dict):
        items = list(defines.items())
    elif isinstance(defines, (str, bytes)):
        raise CompileError(f"defines=: expected a dict {{name: value}} or a list of 'NAME=VALUE', got "
                           f"{type(defines).__name__}")
    else:
        items = [(d, None) for d in (defines or ())]
    for name, value in items:
        name = _text(name, "defines=")
        if value is None and "=" in name:
            name, value = name.split("=", 1)
        if not name.isidentifier() or not name.isascii():
            raise CompileError(f"defines=: {name!r} is not a macro name")
        if isinstance(value, bool):
            value = int(value)
        if value is None:
            defs.append(name)
        else:
            defs.append(f"{name}={_text(str(value), f'defines[{name!r}]')}")
    return SourceContext(cwd, tuple(dirs), tuple(defs))


def file_digest(path: str) -> str | None:
    """sha256 of the file's content, or None when it cannot be read (removed, a directory, no permission)."""
    try:
        with open(path, "rb") as f:
            h = hashlib.sha256()
            left = MAX_FILE_BYTES
            while left > 0 and (b := f.read(min(left, 1 << 20))):
                h.update(b)
                left -= len(b)
            if left <= 0:
                h.update(str(os.fstat(f.fileno()).st_size).encode())
            return h.hexdigest()
    except OSError:
        return None


def record(paths: Iterable[str], cwd: str) -> list[tuple[str, str]]:
    """(absolute path, sha256) of each file read; files that cannot be read now are left out (a compile that read
    them succeeded: they were there)."""
    out, seen = [], set()
    for p in paths:
        p = os.path.normpath(os.path.join(cwd, p))
        if p in seen:
            continue
        seen.add(p)
        if (d := file_digest(p)) is not None:
            out.append((p, d))
    return sorted(out)


def pack(deps: Sequence[tuple[str, str]], lib: bytes) -> bytes:
    """A cache payload: the manifest, then the bytes."""
    meta = json.dumps(list(map(list, deps)), separators=(",", ":")).encode()
    return MAGIC + _LEN.pack(len(meta)) + meta + lib


def unpack(payload: bytes) -> tuple[list[tuple[str, str]], bytes] | None:
    """(manifest, bytes) of a payload made by `pack`, or None when it is not one."""
    if not payload.startswith(MAGIC) or len(payload) < len(MAGIC) + _LEN.size:
        return None
    (n,) = _LEN.unpack_from(payload, len(MAGIC))
    start = len(MAGIC) + _LEN.size
    try:
        deps = [(str(p), str(d)) for p, d in json.loads(payload[start:start + n])]
    except (ValueError, TypeError):
        return None
    return deps, payload[start + n:]


def stale(deps: Sequence[tuple[str, str]]) -> str | None:
    """Why a manifest no longer holds (the first file changed or gone), or None when every file hashes the same."""
    for path, digest in deps:
        now = file_digest(path)
        if now is None:
            return f"{path} is gone"
        if now != digest:
            return f"{path} changed"
    return None


def parse_make_deps(text: str) -> list[str]:
    """The prerequisites of a Makefile dependency rule (`cc -MD -MF` output): every file after the first `:`,
    with escaped spaces and line continuations undone."""
    body = text.replace("\\\n", " ")
    out = []
    for line in body.splitlines():
        _, sep, rest = line.partition(": ")
        if not sep:
            continue
        words = []
        cur = ""
        i = 0
        while i < len(rest):
            c = rest[i]
            if c == "\\" and i + 1 < len(rest) and rest[i + 1] in " #":
                cur += rest[i + 1]
                i += 2
                continue
            if c == "$" and rest[i + 1:i + 2] == "$":
                cur += "$"
                i += 2
                continue
            if c.isspace():
                if cur:
                    words.append(cur)
                cur = ""
            else:
                cur += c
            i += 1
        if cur:
            words.append(cur)
        out += [w for w in words if w not in ("-", "<stdin>")]
    return out


# ---------------------------------------------------------------- the setup of the program_from_source in progress
_active: contextvars.ContextVar[SourceContext | None] = contextvars.ContextVar("devicekit_source_ctx", default=None)


def active_context() -> SourceContext:
    """The SourceContext of the `program_from_source` call in progress (Target sets it around the plugin's
    parse_source, so every reader and compiler of that call sees the same one), else the working dir alone."""
    return _active.get() or make_context()


@contextlib.contextmanager
def using(ctx: SourceContext) -> Iterator[SourceContext]:
    token = _active.set(ctx)
    try:
        yield ctx
    finally:
        _active.reset(token)
