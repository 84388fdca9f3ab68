"""AcmeProgram: loads the compiled shared object in process and calls the kernel through ctypes."""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading
import time

from devicekit.ir.symfn import compile_sym
from devicekit.runtime import Program

_loaded: dict[tuple[bytes, str], tuple[ctypes.CDLL, int]] = {}
_lock = threading.Lock()
# estimated operations from which a launch from the main thread runs where Ctrl-C can leave it (devicekit.interrupt):
# a native call holds KeyboardInterrupt back until it returns
LONG_WORK = 1 << 22


def _load(lib: bytes, symbol: str) -> tuple[ctypes.CDLL, int]:
    """(library, address of `symbol`), each distinct object loaded once per process. The file is removed right after
    dlopen (the mapping keeps the code) and has a unique path (the loader reuses libraries by path)."""
    key = (hashlib.sha256(lib).digest(), symbol)
    with _lock:
        if key in _loaded:
            return _loaded[key]
        with tempfile.TemporaryDirectory(prefix="devicekit_acme_") as d:
            path = os.path.join(d, f"acme_{key[0].hex()[:16]}.so")
            with open(path, "wb") as f:
                f.write(lib)
            dll = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        try:
            addr = ctypes.cast(getattr(dll, symbol), ctypes.c_void_p).value
        except AttributeError:
            raise RuntimeError(f"ACME: symbol {symbol!r} not found in the compiled object") from None
        _loaded[key] = (dll, addr)
        return dll, addr


# the ctypes type of each scalar argument: a generated kernel's int64 vars and k.scalar wire dtypes (never bool or
# half), and a hand-written kernel's C types (bool included)
_CTYPES = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
           "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
           "float32": ctypes.c_float, "float64": ctypes.c_double}


class AcmeProgram(Program):
    """The C signature is `spec.arg_order()`: for a generated kernel, buffer pointers (param order), then int64 vars
    and k.scalar params of their wire dtype (`VarSpec.dtype`: a bool as a uint8, half/bfloat16 as a float); for a
    hand-written one, buffers and scalars interleaved as the source declares them. Then `long long core_start,
    core_end` when the spec has a core split. ACME runs the whole range in one call (ctypes releases the GIL, so
    several threads may launch at once)."""

    def __init__(self, compiled, device=None, home=None):
        super().__init__(compiled, device)
        self.home = home  # the DeviceSpec this Program serves (ACME memory is host memory: no context to pick)
        spec = compiled.spec
        if getattr(compiled, "trusted", False) is not True:  # bytes from anywhere else may be anything: check them
            from devicekit_cpu.elfcheck import check  # before dlopen, which may crash on a damaged object
            check(compiled.lib, spec.name, shared=True)
        self._dll, addr = _load(compiled.lib, spec.entry)
        self._order = spec.arg_order()  # ("buffer", i) / ("var", j) in the native signature's order
        types = [ctypes.c_void_p if kind == "buffer" else
                 ctypes.c_int64 if spec.vars[j].dtype is None else _CTYPES[spec.vars[j].dtype.name]
                 for kind, j in self._order]
        splits = [ctypes.c_int64] * (2 if spec.core_split is not None else 0)
        self._fn = ctypes.CFUNCTYPE(None, *types, *splits)(addr)
        # the launch's estimated operations from the var values; a hand-written kernel's loops are unknown (None)
        cost = spec.get_meta("split_cost", 1)
        work = cost if spec.core_split is None else spec.core_split * cost
        self._work = None if spec.get_meta("from_source", False) else \
            compile_sym(work, tuple(v.name for v in spec.vars), fallback=LONG_WORK)

    def may_run_long(self, vals) -> bool:
        """Hand-written kernels and launches of LONG_WORK estimated operations or more: `execute` runs them on a
        launcher thread when called from the main thread, so Ctrl-C interrupts the wait at once."""
        return self._work is None or self._work(tuple(vals)) >= LONG_WORK

    def _launch(self, handles, vals, var_vals, global_size, local_size, wait):
        t0 = time.perf_counter()
        args = [handles[j].ctypes.data if kind == "buffer" else vals[j] for kind, j in self._order]
        if self.spec.core_split is not None:
            args += [0, self.spec.split_extent(var_vals)]
        self._fn(*args)
        return time.perf_counter() - t0 if wait else None


def factory(spec):
    """The runtime of one device: the spec (kind and index) is bound, so ACME:1's Programs know they serve ACME:1."""
    return lambda compiled: AcmeProgram(compiled, home=spec)
