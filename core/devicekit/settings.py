"""Every environment variable devicekit and its plugins read, declared once: name, parser, default, what it accepts
and what it does. Code reads a variable only through `get(name)`, so a bad value is always the same clear error
(`SettingError`, naming the variable, the value found and what it accepts), and `devicekit info` can show every
effective setting with where it came from (default or environment).

Plugins declare their own variables the same way, from the module their entry point names (so they are declared as
soon as the plugin loads)::

    from devicekit import settings
    settings.register("ACME_DEVICE_COUNT", settings.int_in(1, 64), default=2, owner="devicekit-acme",
                      doc="how many ACME devices to offer")
    n = settings.get("ACME_DEVICE_COUNT")

Values are read from `os.environ` on every `get` (tests and notebooks change them at run time), parsed once per
distinct raw string. An empty value counts as unset. One exception to "a bad value raises": DEVICEKIT_DEBUG is read
by the error reporting itself, so a bad value there warns once (`SettingWarning`) and counts as level 1.

Reads: the environment variables declared below (DEVICEKIT_*) and those plugins declare.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import shlex
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import SettingError
from .spec import DeviceSpec

__all__ = ["Setting", "SettingError", "SettingWarning", "accepting", "declared", "describe", "device_spec", "flag",
           "get", "get_or_default", "int_in", "name_list", "path", "register", "seconds", "size", "source", "text",
           "unknown"]


class SettingWarning(RuntimeWarning):
    """A variable that cannot raise (DEVICEKIT_DEBUG) had a bad value; the message says which and what it took."""


# ---------------------------------------------------------------- parsers: str -> value, ValueError(why) when bad
# Each parser carries `accepts`, the words of the error message ("0 or 1 (also true/false, yes/no, on/off)").

Parser = Callable[[str], Any]

# Every value has a range, so a hostile one is refused here, naming the variable, rather than deep inside whatever
# reads it (DEVICEKIT_PROBE_TIMEOUT=1e10 passed and then every probe died of OverflowError in Thread.join).
MAX_RAW = 32 << 10  # characters of one value (Linux caps one environment string at 128 KiB anyway)
MAX_INT = (1 << 31) - 1  # the bound of int_in(lo) without its own
MAX_SECONDS = 1_000_000.0  # about 11.6 days; threading's and select's limits are far above, 0 means no limit
MAX_SIZE = 1 << 60  # bytes
MAX_PATH = 4096  # characters (PATH_MAX)
_INT_RE = re.compile(r"^\s*[+-]?\d+\s*$", re.ASCII)
_FLOAT_RE = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$", re.ASCII)


def _accepting(words: str) -> Callable[[Parser], Parser]:
    """A decorator giving a parser its `accepts` words; a plugin marks its own parsers with `settings.accepting`."""
    def mark(fn: Parser) -> Parser:
        fn.accepts = words  # type: ignore[attr-defined]
        return fn
    return mark


accepting = _accepting


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@_accepting("1 or 0 (also true/false, yes/no, on/off)")
def flag(raw: str) -> bool:
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError("not a switch")


def int_in(lo: int, hi: int | None = None) -> Parser:
    """An integer in [lo, hi] written in ASCII decimal digits (hi None: MAX_INT)."""
    hi = MAX_INT if hi is None else hi
    words = f"an integer from {lo} to {hi}"

    @_accepting(words)
    def parse(raw: str) -> int:
        if not _INT_RE.match(raw):
            raise ValueError("not an integer")
        if len(raw.strip().lstrip("+-0")) > 20:  # int() of 5,000 digits is slow and refused anyway
            raise ValueError("out of range")
        n = int(raw.strip(), 10)
        if n < lo or n > hi:
            raise ValueError("out of range")
        return n
    return parse


@_accepting(f"a number of seconds from 0 to {MAX_SECONDS:.0f}, e.g. 5 or 0.5 (0: no limit)")
def seconds(raw: str) -> float:
    if not _FLOAT_RE.match(raw):
        raise ValueError("not a number")
    v = float(raw.strip())
    if not math.isfinite(v) or v < 0 or v > MAX_SECONDS:
        raise ValueError("out of range")
    return v


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE | re.ASCII)


@_accepting("a size in bytes: a whole number (1073741824) or one with a binary unit K, M, G or T "
            "(512M, 1G, 1.5GiB; 1K = 1024), at most 1024P")
def size(raw: str) -> int:
    m = _SIZE_RE.match(raw)
    if m is None or len(raw) > 40:
        raise ValueError("not a size" if m is None else "out of range")
    number, unit = m.group(1), m.group(2).lower()
    if "." in number and not unit:
        raise ValueError("a fraction of a byte")
    n = int(float(number) * _UNITS[unit]) if "." in number else int(number) * _UNITS[unit]
    if n > MAX_SIZE:
        raise ValueError("out of range")
    return n


@_accepting("a device name KIND or KIND:INDEX, e.g. CPU or CUDA:1")
def device_spec(raw: str) -> DeviceSpec:
    if not raw.isascii():
        raise ValueError("not a device name")
    try:
        spec = DeviceSpec.parse(raw)
    except ValueError:
        raise ValueError("not a device name") from None
    if spec.index > MAX_INT:
        raise ValueError("index out of range")
    return spec


_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


@_accepting("comma-separated plugin (entry-point) names, e.g. cuda,metal")
def name_list(raw: str) -> frozenset[str]:
    names = [n.strip() for n in raw.split(",")]
    bad = [n for n in names if n and not _NAME_RE.match(n)]
    if bad:
        raise ValueError(f"{bad[0]!r} is not a plugin name")
    return frozenset(n for n in names if n)


@_accepting(f"a path of at most {MAX_PATH} characters")
def path(raw: str) -> str:
    if "\0" in raw:
        raise ValueError("a NUL byte")
    if len(raw) > MAX_PATH:
        raise ValueError("too long")
    return os.path.expanduser(raw.strip())


@_accepting("any text")
def text(raw: str) -> str:
    return raw


def shell_words(raw: str) -> list[str]:
    """Arguments split as a POSIX shell would (quotes respected)."""
    try:
        return shlex.split(raw)
    except ValueError as e:
        raise ValueError(str(e)) from None


shell_words.accepts = "arguments as a shell would split them, e.g. -O3 \"-D NAME=1\""  # type: ignore[attr-defined]


def one_of(*choices: str) -> Parser:
    @_accepting(" or ".join(choices))
    def parse(raw: str) -> str:
        v = raw.strip().lower()
        if v not in choices:
            raise ValueError("not one of the choices")
        return v
    return parse


# ---------------------------------------------------------------- declarations

_RAISE = object()


@dataclass(frozen=True)
class Setting:
    """One variable: `parse(raw)` gives its value (ValueError when bad); `default` is used when it is unset or
    empty; `shown_default` is how the docs and `devicekit info` describe the default ("1 GiB", "all CPUs")."""

    name: str
    parse: Parser
    default: Any
    doc: str
    owner: str = "devicekit"
    shown_default: str | None = None
    on_error: Any = _RAISE  # anything else: warn once and use this value instead of raising

    @property
    def accepts(self) -> str:
        return getattr(self.parse, "accepts", "a valid value")

    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if self.default is None:
            return "unset"
        if isinstance(self.default, bool):
            return "1" if self.default else "0"
        return str(self.default)

    def error(self, raw: str, why: str) -> SettingError:
        why = why if len(why) <= 300 else why[:200] + f"... ({len(why)} characters)"  # a parser quoting it all
        return SettingError(f"{self.name}={_shown(raw)} is not valid ({why}): expected {self.accepts}. Unset it "
                            f"to use the default ({self.default_text()}).")

    def parse_raw(self, raw: str) -> Any:
        """`parse(raw)` after the checks every value gets: a bounded length and text that is UTF-8 (os.environ
        holds undecodable bytes as lone surrogates, which fail later wherever the value is encoded)."""
        if len(raw) > MAX_RAW:
            raise ValueError(f"{len(raw)} characters; at most {MAX_RAW}")
        if any("\ud800" <= c <= "\udfff" for c in raw):
            raise ValueError("bytes that are not UTF-8")
        return self.parse(raw)


def _shown(raw: str) -> str:
    """raw as the error shows it: quoted and escaped, a long one cut to its start and its length."""
    return repr(raw) if len(raw) <= 200 else f"{raw[:80]!r}... ({len(raw)} characters)"


_settings: dict[str, Setting] = {}
_parsed: dict[str, tuple[str, Any]] = {}  # name -> (raw, value) of the last successful parse
_warned: set[tuple[str, str]] = set()
_lock = threading.Lock()


def register(name: str, parse: Parser, default: Any = None, doc: str = "", owner: str = "devicekit",
             shown_default: str | None = None, on_error: Any = _RAISE) -> Setting:
    """Declare variable `name`. Declaring it again from the same owner replaces the declaration (module reloads);
    from another owner is an error naming both."""
    if not isinstance(name, str) or not re.match(r"^[A-Z][A-Z0-9_]*$", name):
        raise ValueError(f"setting name {name!r}: expected an upper-case environment variable name like ACME_COUNT")
    s = Setting(name, parse, default, doc, owner, shown_default, on_error)
    with _lock:
        prev = _settings.get(name)
        if prev is not None and prev.owner != owner:
            raise ValueError(f"{name} is already declared by {prev.owner}; {owner} cannot declare it again")
        _settings[name] = s
        _parsed.pop(name, None)
    return s


def declared(name: str) -> Setting:
    try:
        return _settings[name]
    except KeyError:
        raise LookupError(f"{name} is not a declared setting (declare it with devicekit.settings.register)") from None


def declared_names() -> tuple[str, ...]:
    """The name of every declared variable, in declaration order (the lowered-kernel cache keys on their values)."""
    return tuple(_settings)


def _raw(name: str) -> str | None:
    raw = os.environ.get(name)
    return None if raw is None or raw.strip() == "" else raw


def get(name: str) -> Any:
    """The value of variable `name`: parsed from the environment, or its default when unset or empty. A bad value
    raises SettingError naming the variable, the value and what it accepts."""
    s = declared(name)
    raw = _raw(name)
    if raw is None:
        return s.default
    hit = _parsed.get(name)
    if hit is not None and hit[0] == raw:
        return hit[1]
    try:
        value = s.parse_raw(raw)
    except (ValueError, TypeError) as e:
        err = s.error(raw, str(e) or type(e).__name__)
        if s.on_error is _RAISE:
            raise err from None
        if (name, raw) not in _warned:
            _warned.add((name, raw))
            warnings.warn(f"devicekit: {err} Using {s.on_error!r}.", SettingWarning, stacklevel=2)
        return s.on_error
    _parsed[name] = (raw, value)
    return value


def get_or_default(name: str) -> Any:
    """Like `get`, but a bad value gives the default instead of raising (for the diagnostic, which shows the
    error itself)."""
    try:
        return get(name)
    except SettingError:
        return declared(name).default


def source(name: str) -> str:
    """'environment' when the variable is set (not empty), else 'default'."""
    declared(name)
    return "default" if _raw(name) is None else "environment"


def describe() -> list[dict]:
    """Every declared variable: name, owner, value, raw text, source, default, accepts, doc, and `error` (the
    SettingError message) when the value is bad. Never raises and never warns."""
    out = []
    for name in sorted(_settings):
        s = _settings[name]
        raw = _raw(name)
        row = {"name": name, "owner": s.owner, "source": "default" if raw is None else "environment", "raw": raw,
               "value": s.default, "error": None, "default": s.default_text(), "accepts": s.accepts, "doc": s.doc}
        if raw is not None:
            try:
                row["value"] = s.parse_raw(raw)
            except (ValueError, TypeError) as e:
                row["error"] = str(s.error(raw, str(e) or type(e).__name__))
                row["value"] = None if s.on_error is _RAISE else s.on_error
        out.append(row)
    return out


def unknown(prefix: str = "DEVICEKIT_") -> list[tuple[str, str | None]]:
    """Variables set in the environment with `prefix` that nothing declared, each with the declared name it most
    resembles (a misspelling), or None."""
    names = sorted(n for n in _settings if n.startswith(prefix))
    tails = {n[len(prefix):]: n for n in names}  # compare what follows the shared prefix
    out = []
    for k in sorted(os.environ):
        if k.startswith(prefix) and k not in _settings:
            close = difflib.get_close_matches(k[len(prefix):], list(tails), n=1, cutoff=0.7)
            out.append((k, tails[close[0]] if close else None))
    return out


# ---------------------------------------------------------------- the core's variables

_CORE = "devicekit"
register("DEVICEKIT_DEVICE", device_spec, None, "the default device (dk.device() and everything that takes none)",
         _CORE, shown_default="the available kind of highest priority")
register("DEVICEKIT_DISABLE_PLUGINS", name_list, frozenset(), "plugins never imported, matched case-insensitively",
         _CORE, shown_default="none")
register("DEVICEKIT_STRICT_PLUGINS", flag, False, "a plugin failure raises PluginError instead of being skipped",
         _CORE)
register("DEVICEKIT_TRACE_PLUGINS", flag, False, "trace plugin loading and every hook call on stderr", _CORE)
register("DEVICEKIT_PROBE_TIMEOUT", seconds, 5.0, "seconds a kind's probe() or count() may take (set: for every "
         "kind; unset: a kind's own DeviceKind.probe_timeout, else 5)", _CORE, shown_default="5")
register("DEVICEKIT_PROBE_CACHE", flag, True, "remember the probe answers of kinds that allow it (OPENCL, CUDA, WEBGPU) "
         "across processes, keyed by the environment, drivers and installed packages, to list devices fast; a "
         "device is probed again before it is built, and `devicekit info` always probes", _CORE)
register("DEVICEKIT_DEBUG", int_in(0, 9), 0, "debug output on stderr: 1 device choices, fallbacks, cache events; "
         "2 compiles; 3 sources; 4 launches", _CORE, on_error=1)
register("DEVICEKIT_PARSE_TIMEOUT", seconds, 20.0, "seconds reading one hand-written kernel's signature may take "
         "(0: no bound, read in process)", _CORE, shown_default="20")
register("DEVICEKIT_OPT", flag, True, "the heuristic optimizer (register tiles for reductions; 0: every kernel as "
         "written, as build(optimize=False) does for one)", _CORE)
register("DEVICEKIT_OPT_PACK", flag, True, "the optimizer packs b into a local array per K block for a gemm on the "
         "CPU (ir/pack.py; 0: the unpacked register tile)", _CORE)
register("DEVICEKIT_TIERS", flag, True, "a new kernel first runs a quick build (the CPU llvm pair: O0, same values "
         "bit for bit) until it has run enough to earn its final one; 0: the final build at once", _CORE)
register("DEVICEKIT_SEARCH", flag, False, "dk.run searches the optimizer's register tiles of a kernel (dk.search: "
         "timed on the device, the choice cached per kernel, device and var values)", _CORE)
register("DEVICEKIT_CACHE", flag, True, "the disk compile cache (0: memory only)", _CORE)
register("DEVICEKIT_CACHE_DIR", path, None, "where the disk compile cache lives", _CORE,
         shown_default="the user cache directory: ~/.cache/devicekit, ~/Library/Caches/devicekit on macOS")
register("DEVICEKIT_CACHE_MAX_BYTES", size, 1 << 30, "the disk compile cache's size cap", _CORE,
         shown_default="1G")
register("DEVICEKIT_COMPILER_MEMORY", size, 8 << 30, "address space one compiler process may map (RLIMIT_AS of "
         "cc, clang, ptxas, xcrun ...; 0: no limit)", _CORE, shown_default="8G")
register("DEVICEKIT_COMPILER_TIMEOUT", seconds, 300.0, "seconds one compiler process may run before its whole process "
         "group is killed (0: no limit)", _CORE)
# the test suite's knobs (tests/): declared here so a typo is an error and `devicekit info` shows them
_TESTS = "devicekit tests"
register("DEVICEKIT_SLOW", flag, False, "run the long tests (fuzz campaigns, soaks)", _TESTS)
register("DEVICEKIT_FUZZ_N", int_in(1), 100, "kernels per CPU pair in the CI fuzz test", _TESTS)
register("DEVICEKIT_FUZZ_LONG_N", int_in(1), 20000, "kernels per profile in the long fuzz test", _TESTS)
register("DEVICEKIT_NO_APT", flag, False, "scripts/dev-setup.sh never installs the distribution's PoCL with apt", _TESTS)


@_accepting(f"a number of seconds > 0, at most {MAX_SECONDS:.0f}")
def _duration(raw: str) -> float:
    v = seconds(raw)
    if v <= 0:
        raise ValueError("not > 0")
    return v


register("DEVICEKIT_SOAK_SECONDS", _duration, 300.0, "length of the thread soak test", _TESTS, shown_default="300")
