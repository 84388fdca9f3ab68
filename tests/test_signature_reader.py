"""The shared signature reader (devicekit.render.signature) on real libclang, and its time-bounded reader process
(devicekit.render.parse_worker): every scalar type in any order, vector and half types, C99 array params, qualifiers,
OpenCL address spaces and local-memory params, one-line errors for what cannot be passed, and a macro bomb that
is stopped with the limit named instead of hanging the process."""

from __future__ import annotations

import os
import time

import pytest
from devicekit.errors import CompileError
from devicekit.ir.dtypes import dtypes
from devicekit.render import parse_worker
from devicekit.render import signature as sg

pytest.importorskip("clang.cindex", reason="the libclang wheel (a dependency of the source-reading plugins)")


def read_params(src: str, entry: str, args: list[str], fname: str = "k.c", **kw) -> sg.Signature:
    """(In the reader process.) A minimal reader, as a plugin writes one: parse, find, read each param."""
    tu = sg.parse(fname, src, args)
    fn, names = sg.find_function(tu, entry, fname)
    if fn is None:
        raise CompileError(f"no {entry} (found {names})")
    if errs := sg.signature_errors(tu, fn, fname):
        raise CompileError(f"{entry}: signature does not parse", "\n".join(errs))
    return sg.Signature(entry, tuple(sg.read_param(a.spelling, a.type, a.location.line, f"{entry}: {a.spelling}",
                                                   tokens=tuple(t.spelling for t in a.get_tokens()), **kw)
                                     for a in fn.get_arguments()))


def _read(src, entry, args, fname="k.c"):
    return parse_worker.bounded("test_signature_reader:read_params", src, entry, args, fname)


@pytest.fixture(autouse=True)
def _importable(monkeypatch):
    monkeypatch.syspath_prepend(os.path.dirname(__file__))  # the worker imports this module by name


def test_every_scalar_type_in_any_order():
    src = """typedef unsigned long size_t; typedef long ptrdiff_t;
    void k(_Bool b, signed char i8, unsigned char u8, short i16, unsigned short u16, float *x, int i32, unsigned u32,
           long long i64, unsigned long long u64, size_t n, ptrdiff_t d, float f, double g, _Float16 h, enum E { A } e,
           const double *restrict y) {}"""
    sig = _read(src, "k", ["-x", "c", "-std=gnu11"])
    got = [(p.name, p.kind, p.dtype.name) for p in sig.params]
    assert got == [("b", "scalar", "bool"), ("i8", "scalar", "int8"), ("u8", "scalar", "uint8"),
                   ("i16", "scalar", "int16"), ("u16", "scalar", "uint16"), ("x", "buffer", "float32"),
                   ("i32", "scalar", "int32"), ("u32", "scalar", "uint32"), ("i64", "scalar", "int64"),
                   ("u64", "scalar", "uint64"), ("n", "scalar", "uint64"), ("d", "scalar", "int64"),
                   ("f", "scalar", "float32"), ("g", "scalar", "float64"), ("h", "scalar", "float16"),
                   ("e", "scalar", "uint32"), ("y", "buffer", "float64")]
    assert [p.writable for p in sig.params if p.kind == "buffer"] == [True, False]  # const -> read-only
    spec = sg.build_spec(sig, src, device="CPU", lang="c")
    assert spec.arg_order()[:7] == (("var", 0), ("var", 1), ("var", 2), ("var", 3), ("var", 4), ("buffer", 0),
                                    ("var", 5))
    assert spec.vars[1].lo == -128 and spec.vars[2].hi == 255 and spec.vars[12].is_float


def test_array_params_state_their_extents():
    src = "void k(int n, int m, double A[n][m], float c[16][4], double (*rows)[m], float x[]) {}"
    sig = _read(src, "k", ["-x", "c", "-std=gnu11"])
    assert [(p.name, p.extent) for p in sig.params if p.kind == "buffer"] == [
        ("A", "(n)*(m)"), ("c", 64), ("rows", None), ("x", None)]
    spec = sg.build_spec(sig, src, device="CPU", lang="c")
    assert spec.buffer_sizes({"n": 3, "m": 5}) == [15, 64, 0, 0]


def test_opencl_address_spaces_vectors_and_local_memory():
    """OpenCL C (what the OpenCL plugin reads): address spaces from the type, vectors, half, __local args."""
    src = """typedef float float4 __attribute__((ext_vector_type(4)));
    typedef unsigned int uint; typedef unsigned char uchar;  /* what opencl-c-base.h declares */
    #pragma OPENCL EXTENSION cl_khr_fp16 : enable
    __kernel void k(__global float4 *a, __global const half *h, __local float *tmp, __constant int *lut,
                    float alpha, uint n, global uchar *bytes) {}"""
    sig = _read(src, "k", ["-x", "cl", "-cl-std=CL1.2", "-cl-no-stdinc"], fname="k.cl")
    got = [(p.name, p.kind, str(p.dtype), p.space, p.writable) for p in sig.params]
    assert got == [("a", "buffer", "dtypes.float32.vec(4)", "global", True),
                   ("h", "buffer", "dtypes.float16", "global", False),
                   ("tmp", "local", "dtypes.float32", "local", True),
                   ("lut", "buffer", "dtypes.int32", "constant", False),
                   ("alpha", "scalar", "dtypes.float32", "private", False),
                   ("n", "scalar", "dtypes.uint32", "private", False),
                   ("bytes", "buffer", "dtypes.uint8", "global", True)]
    spec = sg.build_spec(sig, src, device="CL", lang="opencl", shared_bytes={"tmp": "n * 4"},
                         global_size=("n",), local_size=(64,))
    assert [p.name for p in spec.params] == ["a", "h", "lut", "bytes"] and [v.name for v in spec.vars] == ["alpha", "n"]
    assert spec.arg_order() == (("buffer", 0), ("buffer", 1), ("local", 0), ("buffer", 2), ("var", 0), ("var", 1),
                                ("buffer", 3))
    assert sg.launch_shared(spec, {"alpha": 1.5, "n": 10}) == (0, (40,))
    with pytest.raises(CompileError, match=r"param 'tmp' .* is local memory the launch allocates: give its size"):
        sg.build_spec(sig, src, device="CL", lang="opencl")


def test_padded_three_vectors_are_four_lanes():
    """OpenCL and Metal store float3 in 16 bytes (clang's ext_vector_type(3) has the size of four): a buffer of
    them has a four-lane stride, or a launch would pass 12-byte elements; a 3-vector as wide as 3 lanes stays 3."""
    src = """typedef float float3 __attribute__((ext_vector_type(3)));
    typedef unsigned char uchar3 __attribute__((ext_vector_type(3)));
    __kernel void k(__global float3 *p, __global const uchar3 *c) {}"""
    sig = _read(src, "k", ["-x", "cl", "-cl-std=CL1.2", "-cl-no-stdinc"], fname="k.cl")
    assert [p.dtype for p in sig.params] == [dtypes.float32.vec(4), dtypes.uint8.vec(4)]
    assert [p.type.split(" *")[0] for p in sig.params] == ["__global float3", "const __global uchar3"]  # as written


@pytest.mark.parametrize("decl,match", [
    ("struct P { float a; }; void k(struct P p)", "struct params cannot be read yet: pass each field"),
    ("struct P { float a; }; void k(struct P *p)", "buffers of structs"),
    ("void k(float (*f)(float))", "function pointers cannot be passed"),
    ("void k(float **rows)", "pointers to pointers"),
    ("void k(void *p)", r"void \* buffer has no element type"),
])
def test_what_cannot_be_passed_says_what_to_do(decl, match):
    with pytest.raises(CompileError, match=match) as e:
        _read(decl + " {}", "k", ["-x", "c"])
    assert "\n" not in e.value.message  # one line


def test_a_fatal_error_anywhere_is_reported():
    """After a fatal error (a missing header) libclang reports nothing more: the signature cannot be trusted."""
    with pytest.raises(CompileError, match="signature does not parse") as e:
        _read("#include <no_such_header.h>\nvoid k(mystery_t *p) {}", "k", ["-x", "c"])
    assert "no_such_header.h' file not found" in e.value.log


def test_build_spec_checks_its_options():
    sig = sg.Signature("k", (sg.Param("x", "buffer", dtypes.float32, True), sg.Param("n", "scalar", dtypes.int32),
                             sg.Param("a", "scalar", dtypes.float32)))
    with pytest.raises(CompileError, match="sizes= names y, which are not buffer params of k"):
        sg.build_spec(sig, "", device="X", lang="c", sizes={"y": 4})
    with pytest.raises(CompileError, match="'a' is not an integer parameter"):
        sg.build_spec(sig, "", device="X", lang="c", sizes={"x": "a * 2"})  # float scalars are not sizes
    with pytest.raises(CompileError, match="no local-memory params"):
        sg.build_spec(sig, "", device="X", lang="c", shared_bytes={"x": 4})
    spec = sg.build_spec(sig, "", device="X", lang="cuda", shared_bytes="n * 4")
    assert sg.launch_shared(spec, {"n": 8, "a": 0.5}) == (32, ())


BOMB = "#define A0 x\n" + "".join(f"#define A{i} A{i - 1} A{i - 1}\n" for i in range(1, 40)) + \
    "void k(float *p) {}\nint y = sizeof(A39);\n"


def test_macro_bomb_is_stopped_with_the_limit_named(monkeypatch):
    monkeypatch.setenv("DEVICEKIT_PARSE_TIMEOUT", "2")
    t0 = time.monotonic()
    with pytest.raises(CompileError, match=r"took longer than 2 s .* DEVICEKIT_PARSE_TIMEOUT=<seconds>"):
        _read(BOMB, "k", ["-x", "c"])
    assert time.monotonic() - t0 < 30
    assert [p.name for p in _read("void k(float *p) {}", "k", ["-x", "c"]).params] == ["p"]  # a fresh reader


def test_bad_timeout_setting_is_explained(monkeypatch):
    monkeypatch.setenv("DEVICEKIT_PARSE_TIMEOUT", "soon")
    from devicekit.settings import SettingError
    with pytest.raises(SettingError, match="DEVICEKIT_PARSE_TIMEOUT.*soon.*seconds"):
        _read("void k(float *p) {}", "k", ["-x", "c"])


def test_in_process_reading_when_the_bound_is_off(monkeypatch):
    monkeypatch.setenv("DEVICEKIT_PARSE_TIMEOUT", "0")
    assert [p.name for p in _read("void k(float *p, int n) {}", "k", ["-x", "c"]).params] == ["p", "n"]


def crash(code: int) -> None:
    """(In the reader process.) Die as a crash in libclang would."""
    os._exit(code)


def test_a_dead_reader_is_reported_and_replaced():
    with pytest.raises(CompileError, match="the reader process died"):
        parse_worker.bounded("test_signature_reader:crash", 3)
    assert [p.name for p in _read("void k(float *p) {}", "k", ["-x", "c"]).params] == ["p"]
