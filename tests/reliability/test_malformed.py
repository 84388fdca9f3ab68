"""Malformed input gets a clear error, never a crash or silent garbage: kernel graphs assembled from UOps by hand
(bypassing the builder), wrong launch arguments on real CPU programs and the reference, and compiled bytes that
are truncated or garbage (loaded in a subprocess: native loaders can die of a signal, which we report)."""

from __future__ import annotations

import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import Kernel, KernelError, dtypes
from devicekit.ir.ops import Ops
from devicekit.ir.uop import UOp


def _good():
    k = ir.KernelBuilder("m")
    n = k.var("n", 1, 64)
    x = k.param("x", dtypes.float32, n)
    k.param("y", dtypes.int32, n)
    o = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    o[i] = x[i] + 1.0
    return k.build()


GOOD = _good()
(STORE,) = GOOD.sink.src
IDX_OUT, VAL = STORE.src
LOAD_X = VAL.src[0]
I = IDX_OUT.src[1]
LOAD_Y = UOp(Ops.LOAD, dtypes.int32, (UOp(Ops.INDEX, dtypes.int32, (GOOD.param_uops[1], I)),))
ONE = UOp.const(dtypes.float32, 1.0)


def _kernel(stores, params=None, vars_=None):
    sink = UOp(Ops.SINK, dtypes.void, tuple(stores), "m")
    return Kernel("m", sink, GOOD.params, GOOD.vars, GOOD.param_uops if params is None else params,
                  GOOD.var_uops if vars_ is None else vars_)


def _st(v, idx=IDX_OUT):
    return UOp(Ops.STORE, dtypes.void, (idx, v), 0)


def _at(rng):
    return UOp(Ops.INDEX, dtypes.float32, (GOOD.param_uops[2], rng))


MALFORMED = {
    "add of float32 and int32": (lambda: [_st(UOp(Ops.ADD, dtypes.float32, (LOAD_X, LOAD_Y)))], "dtype mismatch"),
    "add with one operand": (lambda: [_st(UOp(Ops.ADD, dtypes.float32, (LOAD_X,)))], "takes 2 operand"),
    "add with three operands": (lambda: [_st(UOp(Ops.ADD, dtypes.float32, (LOAD_X, ONE, ONE)))], "takes 2 operand"),
    "where with two operands": (lambda: [_st(UOp(Ops.WHERE, dtypes.float32, (UOp.const(dtypes.bool, True), LOAD_X)))],
                                "takes 3 operand"),
    "neg of nothing": (lambda: [_st(UOp(Ops.NEG, dtypes.float32, ()))], "takes 1 operand"),
    "store into a constant": (lambda: [UOp(Ops.STORE, dtypes.void, (ONE, LOAD_X), 0)], "takes \\(INDEX, value\\)"),
    "store of nothing": (lambda: [UOp(Ops.STORE, dtypes.void, (), 0)], "takes \\(INDEX, value\\)"),
    "sink of a load": (lambda: [LOAD_X], "holds STOREs"),
    "empty sink": (list, "stores nothing"),
    "index into a constant": (lambda: [_st(UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32, (ONE, I)),)))],
                              "only params and local arrays"),
    "load without index": (lambda: [_st(UOp(Ops.LOAD, dtypes.float32, ()))], "needs an INDEX"),
    "gep past the last lane": (lambda: [_st(UOp(Ops.GEP, dtypes.float32, (ir.vectorize(LOAD_X, LOAD_X),), 5))],
                               "lane within it"),
    "gep of a scalar": (lambda: [_st(UOp(Ops.GEP, dtypes.float32, (LOAD_X,), 0))], "lane within it"),
    "string constant": (lambda: [_st(UOp(Ops.CONST, dtypes.float32, (), "abc"))], "not a dtypes.float32 constant"),
    "None constant": (lambda: [_st(UOp(Ops.CONST, dtypes.float32, (), None))], "not a dtypes.float32 constant"),
    "int constant out of range": (lambda: [_st(UOp(Ops.CONST, dtypes.int8, (), 300).cast(dtypes.float32))],
                                  "not a dtypes.int8 constant"),
    "cast that drops lanes": (lambda: [_st(UOp(Ops.CAST, dtypes.float32, (ir.vectorize(LOAD_X, LOAD_X),)))],
                              "number of lanes"),
    "range of unknown kind": (lambda: [_st(LOAD_X, _at(UOp(Ops.RANGE, dtypes.int64, (GOOD.var_uops[0],), (9, "bogus"))))],
                              "kind in"),
    "range without end": (lambda: [_st(LOAD_X, _at(UOp(Ops.RANGE, dtypes.int64, (), (9, "global"))))], "its end"),
    "reduce without range": (lambda: [_st(UOp(Ops.REDUCE, dtypes.float32, (LOAD_X,), Ops.ADD))], "value, range"),
    "reduce by SUB": (lambda: [_st(UOp(Ops.REDUCE, dtypes.float32, (LOAD_X, UOp(Ops.RANGE, dtypes.int64, (
        UOp.const(dtypes.int64, 4),), (8, "reduce"))), Ops.SUB))], "ADD, MAX or MUL"),
    "vectorize of mixed dtypes": (lambda: [_st(UOp(Ops.GEP, dtypes.float32, (UOp(Ops.VECTORIZE, dtypes.float32.vec(2), (
        LOAD_X, LOAD_Y)),), 0))], "scalar lanes of one dtype"),
    "bitcast that changes size": (lambda: [_st(UOp(Ops.BITCAST, dtypes.float32, (UOp.const(dtypes.int64, 3),)))],
                                  "changes the size"),
    "float index": (lambda: [_st(UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32, (
        GOOD.param_uops[0], ONE)),)))], "index must be a scalar integer"),
    "a store used as a value": (lambda: [_st(UOp(Ops.ADD, dtypes.void, (STORE, STORE)))], "is not a value"),
    "linear-form op in a graph": (lambda: [_st(UOp(Ops.DEFINE_ACC, dtypes.float32, (ONE,), 0))], "linear form"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_hand_built_graph_is_refused_naming_the_node(name):
    stores, match = MALFORMED[name]
    with pytest.raises(KernelError, match=match):
        _kernel(stores())


def test_signature_that_does_not_match_the_nodes_is_refused():
    with pytest.raises(KernelError, match="does not match"):
        _kernel([STORE], params=GOOD.param_uops[:1])
    with pytest.raises(KernelError, match="does not match"):
        _kernel([STORE], vars_=())
    swapped = (GOOD.param_uops[1], GOOD.param_uops[0], GOOD.param_uops[2])
    with pytest.raises(KernelError, match="does not match its node"):
        _kernel([STORE], params=swapped)


def test_a_well_formed_hand_built_graph_runs():
    """Control: the same assembly route with a good graph builds and runs on every device here."""
    import devicekit as dk
    k = _kernel([_st(UOp(Ops.MUL, dtypes.float32, (LOAD_X, UOp.const(dtypes.float32, 3.0))))])
    for dev in ("PYTHON", "CPU"):
        out = dk.run(k, device=dev, x=np.arange(4, dtype=np.float32), y=np.zeros(4, np.int32), n=4)["out"]
        np.testing.assert_array_equal(out, np.arange(4, dtype=np.float32) * 3)


# ---------------------------------------------------------------- launch arguments
@pytest.fixture(scope="module", params=["CPU/llvm", "CPU/c", "PYTHON"])
def program(request):
    import devicekit as dk
    kind, _, pair = request.param.partition("/")
    dev = dk.device(kind)
    return dev, dev.compile(GOOD, pair=pair or None)


def _bufs(dev, n=8, dt=dtypes.float32):
    import devicekit as dk
    return [dk.Buffer(dev, n, dtypes.float32).copyin(np.ones(n, np.float32)), dk.Buffer(dev, n, dtypes.int32),
            dk.Buffer(dev, n, dt)]


BAD_ARGS = {
    "too few buffers": (lambda d: (_bufs(d)[:2], [4]), TypeError, "expected 3 buffers \\(x, y, out\\)"),
    "too many buffers": (lambda d: (_bufs(d) + _bufs(d)[:1], [4]), TypeError, "expected 3 buffers"),
    "wrong dtype": (lambda d: (_bufs(d, dt=dtypes.float64), [4]), TypeError, "param 'out' is dtypes.float32, the buffer is dtypes.float64"),
    "buffer too small": (lambda d: (_bufs(d, n=2), [4]), ValueError, "needs 4 elements"),
    "numpy array, not a Buffer": (lambda d: ([np.ones(8, np.float32)] + _bufs(d)[1:], [4]), TypeError,
                                  "must be a devicekit Buffer"),
    "no vars": (lambda d: (_bufs(d), []), TypeError, "expected 1 int vars \\(n\\)"),
    "two vars": (lambda d: (_bufs(d), [4, 4]), TypeError, "expected 1 int vars"),
    "var below its bounds": (lambda d: (_bufs(d), [0]), ValueError, "n=0 is outside its declared range \\[1, 64\\]"),
    "var above its bounds": (lambda d: (_bufs(d), [65]), ValueError, "outside its declared range"),
    "var beyond int64": (lambda d: (_bufs(d), [2**70]), ValueError, "outside its declared range"),
    "float var": (lambda d: (_bufs(d), [3.7]), TypeError, "var n must be an int, got float"),
    "bool var": (lambda d: (_bufs(d), [True]), TypeError, "var n must be an int, got bool"),
    "numpy float var": (lambda d: (_bufs(d), [np.float64(4)]), TypeError, "must be an int"),
    "string var": (lambda d: (_bufs(d), ["4"]), TypeError, "must be an int"),
}


@pytest.mark.parametrize("name", list(BAD_ARGS))
def test_bad_launch_arguments_are_clear_errors_and_write_nothing(program, name):
    dev, prog = program
    make, exc, match = BAD_ARGS[name]
    bufs, vals = make(dev)
    with pytest.raises(exc, match=match):
        prog.execute(bufs, vals, wait=True)
    if len(bufs) >= 3:
        assert not bufs[2].numpy().any()  # nothing was launched: 'out' is still zeros


def test_numpy_int_var_is_accepted(program):
    dev, prog = program
    bufs = _bufs(dev)
    prog.execute(bufs, [np.int64(4)], wait=True)
    np.testing.assert_array_equal(bufs[2].numpy()[:4], np.full(4, 2, np.float32))


def test_buffer_of_another_device_kind_is_refused(program):
    import devicekit as dk
    dev, prog = program
    other = dk.device("PYTHON" if dev.spec.kind == "CPU" else "CPU")
    bufs = _bufs(dev)
    bufs[0] = dk.Buffer(other, 8, dtypes.float32).copyin(np.ones(8, np.float32))
    with pytest.raises(ValueError, match="is a buffer on"):
        prog.execute(bufs, [4], wait=True)


def test_run_refuses_wrong_arrays():
    import devicekit as dk
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="dtype|float64"):
        dk.run(GOOD, device="CPU", x=x.astype(np.float64), y=np.zeros(4, np.int32), n=4)
    with pytest.raises(ValueError, match="x"):
        dk.run(GOOD, device="CPU", x=x[:2], y=np.zeros(4, np.int32), n=4)
    with pytest.raises(TypeError, match="missing input array for param 'y'"):
        dk.run(GOOD, device="CPU", x=x, n=4)
    with pytest.raises(TypeError, match="unexpected argument"):
        dk.run(GOOD, device="CPU", x=x, y=np.zeros(4, np.int32), n=4, bogus=1)


# ---------------------------------------------------------------- truncated / garbage compiled bytes
# one process per pair loads every damaged form in turn, printing the mode before each (a crash names the mode it
# died in): a process per mode was ten interpreters and compiles of the same kernel, 0.7 s each
MODES = ["truncated", "garbage", "empty", "elf-header-then-garbage", "bytes-flipped"]
LOADER = r"""
import os, sys, warnings
warnings.simplefilter("ignore")
import devicekit as dk
from devicekit.compile.compiler import CompiledSpec
from devicekit.testing.random_kernels import random_kernel
cpu = dk.device("CPU")
pair, modes = sys.argv[1], sys.argv[2]
r, c = cpu.pair(pair)
comp = c.compile(r.render(random_kernel(1).kernel))
for mode in modes.split(","):
    print("MODE", mode, end=": ", flush=True)
    lib = comp.lib
    if mode == "truncated": lib = lib[: len(lib) // 2]
    elif mode == "garbage": lib = bytes((i * 37 + 11) % 256 for i in range(len(lib)))
    elif mode == "empty": lib = b""
    elif mode == "elf-header-then-garbage": lib = lib[:64] + bytes((i * 91 + 7) % 256 for i in range(len(lib) - 64))
    elif mode == "bytes-flipped":
        b = bytearray(lib)
        for i in range(64, len(b), 97): b[i] ^= 0xFF
        lib = bytes(b)
    try:
        p = cpu.runtime(CompiledSpec(comp.spec, lib, comp.compiler_id))
        print("LOADED", flush=True)
    except Exception as e:
        print("ERROR", type(e).__name__, str(e).replace(chr(10), " ")[:300], flush=True)
"""


@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_bad_compiled_bytes_are_an_error_not_a_crash(pair, isolated):
    code = LOADER.replace("sys.argv[1], sys.argv[2]", f"{pair!r}, {','.join(MODES)!r}")
    rc, out = isolated.run(code, DEVICEKIT_CACHE="0")
    lines = [line for line in out.splitlines() if line.startswith("MODE ")]
    at = lines[-1].split(":")[0] if lines else "before the first mode"
    assert rc >= 0, f"{pair}, {at}: the process was {isolated.describe(rc)}:\n{out[-800:]}"
    assert rc == 0, out[-800:]
    for mode in MODES:
        line = next((x for x in lines if x.startswith(f"MODE {mode}: ")), None)
        assert line is not None and " ERROR " in line + " " and "LOADED" not in line, f"{pair}/{mode}: {line}\n{out[-800:]}"
