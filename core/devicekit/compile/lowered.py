"""The lowered-kernel cache: a kernel's rendered ProgramSpec (source + launch facts), keyed *before* lowering, in
memory and on disk beside the compiled bytes. A kernel whose spec is cached never runs the optimizer or the
lowering again, in any process (a naive 100x64 @ 64x64 matmul spends ~0.4-0.9 s there on a 2-core machine; read
back from the disk it costs ~1 ms).

The key holds everything a rendered source depends on besides the code itself:
- the kernel's key (its graph, dtypes, var bounds and relations, checked / optimize, `with_tiles`: dk.search's
  choices are kernels with tiles) and the name asked for;
- the renderer: its class, every attribute of its classes and bases (methods included: a test's patch is another
  key) and of the instance (an OpenCL device's extensions, a CPU renderer's stream_threshold); on disk also its
  `capabilities` (the host's vector registers) and `memo_salt()` (host facts such as the CPU's streaming threshold,
  from the LLC and the thread count), which are constant in a process;
- every declared setting's raw value, but those in NOT_LOWERING and the test suite's own (a setting a plugin adds
  is in the key without anyone adding it by hand);
- on disk, a code stamp: (file, size, mtime) of the modules lowering runs (devicekit's ir/ and render/, settings,
  this module) and of the renderer's package. An upgrade or an edit of that code changes the key; a version string
  would not change in an editable checkout.

`lowering_key` is the in-process key (objects, ~15 us: `Device.compile` keys its Program memo by it); `disk_text`
writes it down for other processes, only on a memory miss. The disk layer is the compile cache (`CompileCache`, the
compiler's own or the process's), under the identity `lowered-1 <renderer class>`: the same pinned directory,
per-user MAC, atomic writes and eviction as compiled bytes. The payload is the spec without its kernel (re-attached
from the caller's kernel, whose key matched), pickled (not compressed: inflating 110 KB of LLVM IR cost 0.3 ms of
the 5 ms a warm compile may take); it is read back only after the MAC verified, by an unpickler that builds devicekit classes (and the REDUCERS they pickle through) and nothing else. An entry that does not decode, or decodes
to a spec of another device, language, name or params, is discarded and the kernel lowered again
(DEVICEKIT_DEBUG>=1 says why). A renderer holding state that cannot be written down (a public attribute that is an
arbitrary object) is rendered every time, as before.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import io
import os
import pickle
import sys
import types
from typing import TYPE_CHECKING, Any

from .. import settings
from ..debug import dprint
from ..lru import LRU
from .cache import CacheKey, CompileCache, default_cache

if TYPE_CHECKING:
    from ..render.program_spec import ProgramSpec
    from ..render.renderer import Renderer

__all__ = ["FORMAT", "NOT_LOWERING", "disk_text", "info", "lowering_key", "render", "store_key"]

FORMAT = "lowered-1"  # part of the key and of the store identity: a change of the payload starts afresh
# settings that cannot change a rendered source: where things are cached, what is printed, how long probes wait,
# dk.run's search switch (a search's choice reaches lowering as Kernel.tiles). Everything else is in the key.
NOT_LOWERING = frozenset({"DEVICEKIT_DEBUG", "DEVICEKIT_TRACE_PLUGINS", "DEVICEKIT_STRICT_PLUGINS",
                          "DEVICEKIT_PROBE_TIMEOUT", "DEVICEKIT_PARSE_TIMEOUT", "DEVICEKIT_CACHE",
                          "DEVICEKIT_CACHE_DIR", "DEVICEKIT_CACHE_MAX_BYTES", "DEVICEKIT_SEARCH"})
_TEST_OWNER = "devicekit tests"  # settings of the test suite (DEVICEKIT_SLOW, DEVICEKIT_FUZZ_N, ...)
MEMO_SIZE = 2048  # specs kept in memory (least recently used evicted)

_memo: LRU[tuple, Any] = LRU(MEMO_SIZE)
_texts: LRU[Any, str] = LRU(512)  # the text of a frozenset or a frozen dataclass, by (type, value)
_stamps: dict[type, str] = {}
_keyed: list = [(), frozenset()]  # (declared names seen, those in the key)
_classes: dict[type, list[_ClassVersion]] = {}  # the last versions of each renderer class seen
stats = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "refused": 0, "uncacheable": 0}


class _Uncacheable(Exception):
    """A renderer whose state this module cannot write down: it is rendered every time (never cached)."""


# ---------------------------------------------------------------- the key
def lowering_key(renderer: Renderer, kernel: Any, name: str | None = None) -> tuple:
    """What the rendered source of `kernel` by `renderer` depends on in this process (see the module's docstring),
    as a hashable tuple of the objects themselves: cheap enough for every `Device.compile` (~15 us; its Program memo
    is keyed by it). The host's facts (`memo_salt()`, capabilities), the code stamp and the text for the disk
    (`disk_text`) are added on a memory miss only."""
    return (_renderer_state(renderer), _settings_state(), kernel.key, name)


def disk_text(key: tuple, renderer: Renderer) -> str | None:
    """`key` as text that is equal in every process for equal inputs (no id, no hash order), with what is equal in
    one process but not across hosts or installs (capabilities, memo_salt(), the code stamp); None when the renderer
    holds state that cannot be written down (it is then rendered every time, as before)."""
    rstate, sstate, kkey, name = key
    try:
        rtext = _renderer_text(rstate)
        host = f"{_canon(renderer.capabilities)}|salt={_canon(_salt(renderer))}"
    except _Uncacheable as e:
        dprint(2, f"lowered cache: {type(renderer).__qualname__} is not cached ({e})")
        return None
    return repr((FORMAT, _code_stamp(type(renderer)), rtext, host, sstate, kkey.hex(), name))


def _salt(renderer: Renderer) -> Any:
    salt = getattr(renderer, "memo_salt", None)
    return salt() if callable(salt) else None


def _renderer_text(rstate: tuple) -> str:
    if len(rstate) != 3:
        raise _Uncacheable("an attribute no key can hold")
    cls, version, inst_items = rstate
    parts = [_canon(cls)]
    for k, v in version.items:  # what isn't data at class level (a memo object, a lock) is a helper: its class
        try:
            parts.append(f"{k}={_canon(v)}")
        except _Uncacheable:
            parts.append(f"{k}=helper {type(v).__qualname__}")
    for k, v in inst_items:
        if isinstance(v, tuple) and len(v) == 2 and v[0] == "renderer":
            parts.append(f"{k}=<{_renderer_text(v[1])}>")
            continue
        try:
            parts.append(f"{k}={_canon(v)}")
        except _Uncacheable:
            if not k.startswith("_"):
                raise _Uncacheable(f"attribute {k} is {type(v).__name__}") from None
            parts.append(f"{k}=helper {type(v).__qualname__}")  # private helpers: a lock, a handle
    return "|".join(parts)


def _settings_state() -> tuple:
    names = settings.declared_names()
    if len(names) != len(_keyed[0]):  # a plugin declared more: sort them once
        keyed = frozenset(n for n in names if n not in NOT_LOWERING and settings.declared(n).owner != _TEST_OWNER)
        encode = getattr(os.environ, "encodekey", None)
        _keyed[:] = [names, keyed, frozenset(map(encode, keyed)) if encode is not None else None]
    # one pass over the environment's own dict (CPython's os.environ._data, its keys encoded): a get per name costs
    # ~50 us, os.environ's decoding iterator ~10, this ~3
    data, raw = getattr(os.environ, "_data", None), _keyed[2]
    if isinstance(data, dict) and raw is not None:
        return tuple(sorted((n, v) for n, v in data.items() if n in raw and v.strip()))
    keyed, env = _keyed[1], os.environ
    return tuple(sorted((n, v) for n in env if n in keyed and (v := env[n]).strip()))


def _renderer_state(r: Any) -> tuple:
    """(class, the version of its classes' attributes, the instance's attributes): a method or a class attribute a
    test patches, an instance attribute (an OpenCL device's extensions, a CPU renderer's stream_threshold) change
    it. Capabilities are made of those attributes."""
    cls = type(r)
    inst = getattr(r, "__dict__", None)
    state = (cls, _class_version(cls), tuple((k, _hashable(v)) for k, v in sorted(inst.items())) if inst else ())
    try:
        hash(state)
    except TypeError:  # an attribute no key can hold: this renderer object alone, never on disk
        return (cls, id(r))
    return state


class _ClassVersion:
    """The attributes of a renderer class and its bases as they are now (methods included): one object per
    version, hashed by identity, so a memo key holds it cheaply and a patched class gets a new one."""

    __slots__ = ("dicts", "items")

    def __init__(self, mro: tuple[type, ...]):
        self.dicts = tuple(dict(k.__dict__) for k in mro)
        self.items = tuple((f"{k.__qualname__}.{a}", v) for k, d in zip(mro, self.dicts) for a, v in d.items()
                           if a[:2] != "__")


def _class_version(cls: type) -> _ClassVersion:
    """The version of `cls` as it is now: the last one seen, or an earlier one it is equal to again (a test's patch
    undone), or a new one."""
    mro = cls.__mro__[:-1]
    seen = _classes.setdefault(cls, [])
    for i, v in enumerate(seen):
        if len(v.dicts) == len(mro) and all(k.__dict__ == d for k, d in zip(mro, v.dicts)):
            if i:
                seen.insert(0, seen.pop(i))
            return v
    seen.insert(0, _ClassVersion(mro))
    del seen[8:]
    return seen[0]


def _hashable(v: Any) -> Any:
    if isinstance(v, (list, dict, set)):
        return ("value", _canon(v))
    if hasattr(v, "capabilities") and hasattr(v, "render"):  # a renderer inside a renderer (the Ray wrapper's)
        return ("renderer", _renderer_state(v))
    return v


def _canon(v: Any, depth: int = 0) -> str:
    """A text that is equal for equal values, in every process; _Uncacheable for what is not data."""
    if depth > 12:
        raise _Uncacheable("nested too deep")
    if v is None or isinstance(v, (bool, int, float, str, bytes)):
        return repr(v)
    if isinstance(v, enum.Enum):
        return f"{type(v).__name__}.{v.name}"
    if isinstance(v, type):
        return f"class {v.__module__}.{v.__qualname__}"
    if isinstance(v, (classmethod, staticmethod)):
        return _canon(v.__func__, depth + 1)
    if isinstance(v, property):
        return f"property {_canon(v.fget, depth + 1)}"
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        code = getattr(v, "__code__", None)  # a function a test patches in is another function: another text
        return f"fn {getattr(v, '__module__', '')}.{v.__qualname__}:{code.co_firstlineno if code else ''}"
    if isinstance(v, frozenset):
        return _memo_text(v, depth)
    if isinstance(v, (tuple, list)):
        return "(" + ",".join(_canon(x, depth + 1) for x in v) + ")"
    if isinstance(v, set):
        return "{" + ",".join(sorted(_canon(x, depth + 1) for x in v)) + "}"
    if isinstance(v, dict):
        return "{" + ",".join(sorted(f"{_canon(a, depth + 1)}:{_canon(b, depth + 1)}" for a, b in v.items())) + "}"
    if dataclasses.is_dataclass(v):
        params = getattr(type(v), "__dataclass_params__", None)
        return _memo_text(v, depth) if params is not None and params.frozen else _dataclass_text(v, depth)
    raise _Uncacheable(f"a {type(v).__name__}")


def _dataclass_text(v: Any, depth: int) -> str:
    fields = ",".join(f"{f.name}={_canon(getattr(v, f.name), depth + 1)}" for f in dataclasses.fields(v))
    return f"{type(v).__name__}({fields})"


def _memo_text(v: Any, depth: int) -> str:
    """The text of a frozenset or a frozen dataclass (Capabilities, DType), memoized by value: only those (1 ==
    True would make an int and a bool share a text)."""
    text = _texts.get((type(v), v))
    if text is None:
        text = (_dataclass_text(v, depth) if dataclasses.is_dataclass(v)
                else "{" + ",".join(sorted(_canon(x, depth + 1) for x in v)) + "}")
        _texts.put((type(v), v), text)
    return text


def _code_stamp(cls: type) -> str:
    """(file, size, mtime) of the code a render of `cls` runs: devicekit's ir/ and render/, its settings and this
    module, and the renderer's own package. Once per class and process (~0.2 ms)."""
    stamp = _stamps.get(cls)
    if stamp is None:
        core = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        paths = [os.path.join(core, "ir"), os.path.join(core, "render"), os.path.join(core, "settings.py"),
                 os.path.abspath(__file__)]
        mod = sys.modules.get(cls.__module__)
        if mod is not None and getattr(mod, "__file__", None):
            paths.append(os.path.dirname(os.path.abspath(mod.__file__)))
            top = sys.modules.get(cls.__module__.split(".")[0])
            if top is not None and getattr(top, "__file__", None):
                paths.append(os.path.dirname(os.path.abspath(top.__file__)))
        h = hashlib.sha256()
        for p in dict.fromkeys(paths):
            for entry in _py_files(p):
                h.update(entry.encode())
        stamp = _stamps[cls] = h.hexdigest()[:32]
    return stamp


def _py_files(path: str) -> list[str]:
    """'name size mtime_ns' of `path` (a .py file) or of the .py files in it (not below)."""
    try:
        if os.path.isfile(path):
            st = os.stat(path)
            return [f"{os.path.basename(path)} {st.st_size} {st.st_mtime_ns}"]
        return sorted(f"{e.name} {e.stat().st_size} {e.stat().st_mtime_ns}" for e in os.scandir(path)
                      if e.name.endswith(".py") and e.is_file())
    except OSError:
        return [f"{path} unreadable"]


# ---------------------------------------------------------------- render through the cache
def render(renderer: Renderer, kernel: Any, name: str | None = None, key: tuple | None = None,
           cache: CompileCache | None = None) -> ProgramSpec:
    """`renderer.render(kernel, name)`, from the memory layer, else from the disk store `cache` (default: the
    process's compile cache), else rendered and stored in both. `key`: `lowering_key(...)` when the caller has it."""
    key = lowering_key(renderer, kernel, name) if key is None else key
    mkey = (key, _salt(renderer))
    if (spec := _memo.get(mkey)) is not None:
        stats["memory_hits"] += 1
        return _with_kernel(spec, kernel)
    if (text := disk_text(key, renderer)) is None:
        stats["uncacheable"] += 1
        return _lower(renderer, kernel, name)
    store = cache if cache is not None else default_cache()
    ck = store_key(renderer, text)
    raw = store.get(ck)
    if raw is not None:
        try:
            spec = _decode(raw, renderer, kernel, name)
        except Exception as e:  # noqa: BLE001 - any entry that does not decode is lowered again
            stats["refused"] += 1
            dprint(1, f"lowered cache: the entry of {name or kernel.name} does not decode ({type(e).__name__}: {e}); "
                      "discarded, lowering again")
            store.discard(ck)
        else:
            stats["disk_hits"] += 1
            dprint(2, f"lowered cache hit for {spec.name} ({renderer.device}, {spec.lang})")
            return _with_kernel(_memo.setdefault(mkey, spec), kernel)
    stats["misses"] += 1
    spec = _lower(renderer, kernel, name)
    store.put(ck, _encode(spec), replace=raw is not None)
    _memo.put(mkey, spec)
    return spec


def _lower(renderer: Renderer, kernel: Any, name: str | None) -> ProgramSpec:
    """The renderer's own render, past a memo it puts in front of this cache (the CPU plugin's MemoRender, whose
    `render` is this module's: `render_uncached` is the lowering itself)."""
    own = getattr(renderer, "render_uncached", None)
    return own(kernel, name) if own is not None else renderer.render(kernel, name)


def store_key(renderer: Renderer, text: str) -> CacheKey:
    """The compile-cache key of a lowered spec whose `disk_text` is `text`."""
    cls = type(renderer)
    return CacheKey(renderer.device, f"{FORMAT} {cls.__module__}.{cls.__qualname__}",
                    hashlib.sha256(text.encode()).hexdigest())


def _with_kernel(spec: ProgramSpec, kernel: Any) -> ProgramSpec:
    return spec if spec.kernel is kernel else dataclasses.replace(spec, kernel=kernel)


def _encode(spec: ProgramSpec) -> bytes:
    return pickle.dumps(dataclasses.replace(spec, kernel=None), protocol=5)


# functions a devicekit class pickles through (its __reduce__): data in, an object out. Only these: a devicekit
# function in general may start a process (a compiler, a parse worker). A renamed one makes every entry refuse to
# decode (lowered again each time): test_a_cached_kernel_is_not_lowered_again_in_a_new_process fails on it.
REDUCERS = frozenset({("devicekit.ir.uop", "_from_table")})  # UOp: the graph as a flat table


class _Unpickler(pickle.Unpickler):
    """Builds classes of devicekit and its plugins (ProgramSpec, ParamSpec, UOp, DType, Ops...) and the REDUCERS,
    nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        if module.split(".")[0].startswith("devicekit"):
            obj = super().find_class(module, name)
            if isinstance(obj, type) or (module, name) in REDUCERS:
                return obj
        raise pickle.UnpicklingError(f"{module}.{name} is not a devicekit class")


def _decode(raw: bytes, renderer: Renderer, kernel: Any, name: str | None) -> ProgramSpec:
    from ..render.program_spec import ProgramSpec
    spec = _Unpickler(io.BytesIO(raw)).load()
    if not isinstance(spec, ProgramSpec):
        raise TypeError(f"a {type(spec).__name__}, not a ProgramSpec")
    want = (renderer.device, renderer.lang, name or kernel.name, tuple(p.name for p in kernel.params))
    got = (spec.device, spec.lang, spec.name, tuple(p.name for p in spec.user_params))
    if got != want:
        raise ValueError(f"a spec of {got}, expected {want}")
    return spec


def info() -> dict:
    """The memory layer's size and the hit / miss counts of this process."""
    return {"memory_entries": len(_memo), **stats}


def clear_memory() -> None:
    """Forget the memory layer (the disk entries stay): the next render of each kernel reads the disk."""
    _memo.clear()
