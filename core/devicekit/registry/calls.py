"""Calling a hook on each plugin separately (through a pluggy subset hook caller holding that plugin only, so hook
tracing still sees every call): one plugin's exception or wrong answer is that plugin's failure, the others' answers
still count. An answer is checked whole: the declaration type, and every priority an int (NaN or a float would sort
silently wrong). List hooks are flattened to (plugin record, declaration) pairs; no ranking happens here. Anything a
hook raises is its plugin's failure except KeyboardInterrupt, which is the user's and propagates."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

from .. import hookspecs
from ..plugin import check_priority
from .records import PluginFailure, PluginRecord

__all__ = ["HOOK_TYPES", "answer_type", "call_each"]


def answer_type(spec: Callable[..., Any]) -> tuple[type, bool]:
    """(declaration type, returns a list) of a hook, read from its spec's return annotation: `list[X]` -> (X, True),
    `X | None` -> (X, False). Anything else is a mistake in hookspecs.py, said when the registry is imported."""
    ret = typing.get_type_hints(spec)["return"]
    origin, args = typing.get_origin(ret), typing.get_args(ret)
    if origin is list and len(args) == 1 and isinstance(args[0], type):
        return args[0], True
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        (decl,) = [a for a in args if a is not type(None)]
        if isinstance(decl, type):
            return decl, False
    raise TypeError(f"hook spec {spec.__name__} returns {ret!r}: expected list[X] or X | None")


HOOK_TYPES: dict[str, tuple[type, bool]] = {  # hook -> (declaration type, returns a list), from hookspecs.py
    name: answer_type(fn) for name, fn in vars(hookspecs).items()
    if name.startswith("devicekit_") and callable(fn)
}


def call_each(pm: Any, by_obj: dict[int, PluginRecord], hook: str,
              fail: Callable[[PluginRecord, str, BaseException], PluginFailure],
              **kwargs: Any) -> list[tuple[PluginRecord, Any]]:
    """Every registered plugin's answer to `hook` (in registration order), each call isolated. `by_obj` maps
    id(plugin object) to its record; plugins without a record are not asked."""
    decl_type, is_list = HOOK_TYPES[hook]
    caller = getattr(pm.hook, hook)
    plugins = pm.get_plugins()
    out: list[tuple[PluginRecord, Any]] = []
    for impl in reversed(caller.get_hookimpls()):  # registration order, for stable messages
        rec = by_obj.get(id(impl.plugin))
        if rec is None:
            continue
        try:
            sub = pm.subset_hook_caller(hook, [p for p in plugins if p is not impl.plugin])
            results = sub(**kwargs)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - isolation: SystemExit, GeneratorExit, ... are the plugin's
            fail(rec, f"hook {hook}", e)
            continue
        if not results:
            continue
        res = results[0]
        items = list(res) if is_list and isinstance(res, (list, tuple)) else None
        if (items is None and (is_list or not isinstance(res, decl_type))) or \
                (items is not None and not all(isinstance(x, decl_type) for x in items)):
            want = f"a list of {decl_type.__name__}" if is_list else f"{decl_type.__name__} or None"
            fail(rec, f"hook {hook}", TypeError(f"{hook} must return {want}, got {res!r}"))
            continue
        try:
            for decl in items if items is not None else [res]:
                check_priority(decl)  # declarations made without __post_init__ (object.__setattr__, subclasses)
        except TypeError as e:
            fail(rec, f"hook {hook}", e)
            continue
        out.extend((rec, x) for x in items) if items is not None else out.append((rec, res))
    return out
