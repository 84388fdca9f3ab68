"""A Program's signature compiled once: what `Program.execute`'s fast check compares each launch against.

Every backend's Program gets it (the core builds it on the first launch), whichever way the Program was made:
`Device.compile`, `dev.runtime(dev.compiler.compile(dev.renderer.render(k)))`, or `program_from_source`. The fast
check accepts only what it can prove right in a few comparisons (exact int vars within their bounds, finite float
scalars, Buffers of this device and dtype whose allocation holds the bytes the sizes need, no shared memory or an
exact byte-range check for views); anything else takes the full check (`Program.check`), which raises the error
naming the argument. Both accept the same launches: the fast one is a subset proved by the same rules.

It also holds the Program's launch cache (`hits`): the launches it accepted, keyed by each Buffer's token
(`Buffer._key`: never reused in a process, 0 once the Buffer or its base is freed) and the int vals, so a launch with
Buffers and values already accepted together is found by one dict lookup and launched with no check. Buffers are
immutable in device, dtype and size, so a live token stands for everything the fast check proved of its Buffer.
"""

from __future__ import annotations

import os
from typing import Any

from .ir.dtypes import largest_float
from .ir.symfn import compile_sym

__all__ = ["Signature", "debugging"]

# `"DEVICEKIT_DEBUG" in os.environ` costs a KeyError when unset; the raw mapping answers in ~50 ns
_ENV_DATA = getattr(os.environ, "_data", None)
_DEBUG_KEY = os.environ.encodekey("DEVICEKIT_DEBUG") if hasattr(os.environ, "encodekey") else None


def debugging() -> bool:
    """Whether DEVICEKIT_DEBUG is set (then every launch takes the full check, which prints at level 4)."""
    if _ENV_DATA is not None and _DEBUG_KEY is not None:
        return _DEBUG_KEY in _ENV_DATA
    return "DEVICEKIT_DEBUG" in os.environ


def fast_bounds(v: Any) -> tuple:
    """(lo, hi, type) of the values the fast check passes to `_launch` as they are: ints within a var's bounds or an
    int scalar's dtype, finite Python floats within a float32/float64 scalar's range (rounded by the backend's own
    conversion, to nearest even, as the full check rounds). Anything else (a bool or half scalar, a hand-written
    float var, inf, nan, a numpy number) takes the full check, which converts it first."""
    if v.scalar is None:
        return (1, 0, int) if v.is_float else (v.lo, v.hi, int)
    if v.scalar.is_int and not v.scalar.is_bool:
        return (v.lo, v.hi, int)
    if v.scalar.name in ("float32", "float64"):
        big = largest_float(v.scalar)
        return (-big, big, float)
    return (1, 0, int)  # bounds no value meets


class Signature:
    """The compiled checker of one Program's ProgramSpec: per param its dtype, bytes per element, writability and
    size as a function of the vals tuple; per var its fast bounds; the related vars' bounds as functions; the launch
    dims as functions (for backends whose `_launch` takes them). `home` is the device a Program made without one
    (the seed path) has seen its Buffers on, once the full check accepted them."""

    __slots__ = ("_front_src", "checked", "fast", "gfns", "hits", "home", "key", "lfns", "lookup", "names", "nb", "nv", "pbytes",
                 "pdt", "pw", "rels", "sizes", "spec", "vb", "vtypes")

    def __init__(self, spec: Any):
        self.spec = spec
        params = spec.user_params
        names = self.names = tuple(v.name for v in spec.vars)
        self.nb, self.nv = len(params), len(spec.vars)
        self.pdt = tuple(p.dtype for p in params)
        self.pbytes = tuple(p.dtype.nbytes for p in params)
        self.pw = tuple(bool(p.writable) for p in params)
        self.sizes = tuple(compile_sym(p.size, names) for p in params)
        self.vb = tuple(fast_bounds(v) for v in spec.vars)
        self.vtypes = tuple(t for _, _, t in self.vb)
        # bounds that name other vars (k.var("kk", 0, n - 1)), compiled: (slot, lo fn, hi fn)
        self.rels = tuple((j, compile_sym(v.lo if v.lo_rel is None else v.lo_rel, names),
                           compile_sym(v.hi if v.hi_rel is None else v.hi_rel, names))
                          for j, v in enumerate(spec.vars) if v.related)
        dims = lambda d: None if d is None else tuple(compile_sym(x, names) for x in d)
        self.gfns, self.lfns = dims(spec.global_size), dims(spec.local_size)
        self.checked = spec.checks is not None  # a hidden bounds-check record follows the user's buffers
        self.home: Any = None
        self.fast = self._compile()
        # the launch cache (Program.execute): launches this signature accepted, by their Buffers' tokens and values
        self.hits: dict[tuple, list] = {}
        self.key, self.lookup = self._compile_key()

    def _compile_key(self) -> tuple[Any, Any]:
        """`key(buffers, vals)`: the launch cache's key of a launch (each Buffer's `_key` token, then the vals), or
        None; `lookup(buffers, vals)`: the cached entry (a list) of an accepted launch with these very Buffers and
        values, else the key (a tuple: no second computation to store the entry of a launch the fast check accepts),
        else None. Both are None for a signature whose launches are not cached: a bounds-check record to read, or a
        value that is not an int (a float scalar: 0.0 == -0.0 and both hash alike, so a key of equal values could
        replay the other one's bits). A token is the Buffer's own, never reused and 0 once freed, so an entry can
        only be found again with the Buffers whose device, dtype, size and aliasing it was proved for."""
        if self.checked or any(t is not int for t in self.vtypes):
            return None, None
        nb, nv = self.nb, self.nv
        seq = "(type(b) is list or type(b) is tuple) and (type(v) is list or type(v) is tuple)"
        bs, vs = [f"b{i}" for i in range(nb)], [f"v{j}" for j in range(nv)]
        # unpacking a list or tuple checks its length (ValueError) at the cost of one opcode
        unpack = "".join(f"            {', '.join(xs)}{',' if len(xs) == 1 else ''} = {x}\n"
                         for xs, x in ((bs, "b"), (vs, "v")) if xs)
        unpack += "".join(f"            if len({x}):\n                return None\n" for xs, x in ((bs, "b"), (vs, "v"))
                          if not xs)
        ints = " and ".join(f"type(v{j}) is int" for j in range(nv)) or "True"
        items = [f"b{i}._key" for i in range(nb)] + vs
        tup = f"({', '.join(items)}{',' if len(items) == 1 else ''})"
        src = ""
        for name, ret in (("key", f"return {tup}"), ("lookup", f"k = {tup}\n                e = hits.get(k)\n"
                                                             "                return k if e is None else e")):
            src += (f"def {name}(b, v):\n    if {seq}:\n        try:\n{unpack}"
                    f"            if {ints}:\n                {ret}\n"
                    "        except (ValueError, AttributeError, TypeError):\n            pass\n    return None\n")
        env: dict[str, Any] = {"hits": self.hits}
        exec(compile(src, f"<devicekit launch key of {self.spec.name}>", "exec"), env)  # noqa: S102
        self._front_src = (seq, unpack, ints, tup)
        return env["key"], env["lookup"]

    def front(self, program: Any, slow: Any, launch_cls: type) -> Any:
        """`program.execute` for a launch the cache holds, as one generated function: the key, the lookup and the
        bound native call with no method call between them (~60-90 ns less than `Program.execute`'s own hit path).
        Anything else (a miss, launch dims, a keyword option of the class's own, an entry not yet bound) goes to
        `slow(program, ...)`, the class's `execute`, through a weak reference: the function lives on the Program and
        must not keep it alive. None for a signature whose launches are not cached."""
        if self.lookup is None:
            return None
        import weakref
        from time import perf_counter
        seq, unpack, ints, tup = self._front_src
        unpack = unpack.replace("return None", "raise ValueError")  # a length mismatch: the class's execute says
        src = ("def execute(buffers, vals=(), global_size=None, local_size=None, wait=False, **options):\n"
               "    b, v, e = buffers, vals, None\n"
               f"    if global_size is None and local_size is None and not options and {seq}:\n"
               "        try:\n"
               f"{unpack}"
               f"            if {ints}:\n"
               f"                e = hits.get({tup})\n"
               "        except (ValueError, AttributeError, TypeError):\n"
               "            pass\n"
               "        if e is not None:\n"  # the native call runs outside the try: its errors are its own
               "            fn = e[0]\n"
               "            if fn is not None:\n"
               "                t0 = perf_counter()\n"
               "                fn()\n"
               "                if wait:\n"
               "                    return perf_counter() - t0\n"
               "                h = NEW(Launch)\n"
               "                h._device, h._t0, h.seconds = e[7], t0, None\n"
               "                return h\n"
               "            return ref()._again(e, perf_counter(), wait)\n"
               "    return slow(ref(), buffers, vals, global_size, local_size, wait, **options)\n")
        env: dict[str, Any] = {"hits": self.hits, "perf_counter": perf_counter, "NEW": object.__new__,
                               "Launch": launch_cls, "slow": slow, "ref": weakref.ref(program)}
        exec(compile(src, f"<devicekit execute of {self.spec.name}>", "exec"), env)  # noqa: S102
        return env["execute"]

    def _compile(self) -> Any:
        """`fast(buffers, vals, home)`: the handles of a launch this signature proves right, else None (then the
        full check runs, and raises naming what is wrong). Generated once as straight-line Python for this
        signature: no loops, zips or tuple unpacking per launch."""
        from .memory import Buffer
        from .runtime import _check_aliasing
        env: dict[str, Any] = {"Buffer": Buffer, "_check_aliasing": _check_aliasing, "spec": self.spec,
                               "sizes": self.sizes}
        nb, nv = self.nb, self.nv
        lines = ["def fast(buffers, vals, home):",
                 f"    if (type(buffers) is not list and type(buffers) is not tuple) or len(buffers) != {nb}:",
                 "        return None",
                 f"    if (type(vals) is not list and type(vals) is not tuple) or len(vals) != {nv}:",
                 "        return None"]
        for j, (lo, hi, t) in enumerate(self.vb):
            env[f"LO{j}"], env[f"HI{j}"], env[f"T{j}"] = lo, hi, t
            lines += [f"    v{j} = vals[{j}]",
                      f"    if type(v{j}) is not T{j} or not LO{j} <= v{j} <= HI{j}:", "        return None"]
        for r, (j, lo_f, hi_f) in enumerate(self.rels):
            env[f"RL{r}"], env[f"RH{r}"] = lo_f, hi_f
            lines += [f"    if not RL{r}(vals) <= v{j} <= RH{r}(vals):", "        return None"]
        from .ir.ops import Ops
        names = self.names
        shared: dict[int, str] = {}  # one evaluation per distinct size expression
        for i in range(nb):
            env[f"D{i}"] = self.pdt[i]
            size = self.spec.user_params[i].size
            if isinstance(size, int):
                elems = f"{int(size)}"
            elif getattr(size, "op", None) is Ops.VAR and size.arg[0] in names:  # a var itself: no call
                elems = f"v{names.index(size.arg[0])}"
            elif id(size) in shared:
                elems = shared[id(size)]
            else:
                env[f"S{i}"] = self.sizes[i]
                lines.append(f"    s{i} = S{i}(vals)")
                elems = shared[id(size)] = f"s{i}"
            need = f"{elems} * {self.pbytes[i]}"
            ro = f" or b{i}._readonly" if self.pw[i] else ""
            lines += [f"    b{i} = buffers[{i}]",
                      (f"    if (type(b{i}) is not Buffer or b{i}._device is not home{ro}"
                       f" or (b{i}._dtype is not D{i} and b{i}._dtype != D{i}) or b{i}._nbytes < {need}):"),
                      "        return None",
                      f"    h{i} = b{i}._handle",
                      f"    if h{i} is None:",  # unallocated (allocate it), or freed (free() drops the handle)
                      f"        if b{i}._freed:",
                      "            return None",
                      f"        h{i} = b{i}.handle"]
        if nb > 1:
            views = " or ".join(f"b{i}._base is not None" for i in range(nb))
            pairs = " or ".join(f"b{i} is b{k}" for i in range(nb) for k in range(i + 1, nb)) if nb <= 6 else \
                f"len(set(buffers)) != {nb}"
            lines += [f"    if {views}:", "        _check_aliasing(spec, buffers, [f(vals) for f in sizes])",
                      f"    elif {pairs}:", "        return None"]
        lines.append(f"    return [{', '.join(f'h{i}' for i in range(nb))}]")
        exec(compile("\n".join(lines), f"<devicekit signature of {self.spec.name}>", "exec"), env)  # noqa: S102
        return env["fast"]

    def dims(self, vals: Any) -> tuple[Any, Any]:
        """The launch dims the spec computes for these vals (declaration order)."""
        g, loc = self.gfns, self.lfns
        return (None if g is None else tuple(f(vals) for f in g)), (None if loc is None else tuple(f(vals) for f in loc))
