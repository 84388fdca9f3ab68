"""Allocator, hand-written C through libclang, compile errors, and discovery through the real entry point."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import devicekit as dk
import numpy as np
import pytest
from devicekit.errors import CompileError
from devicekit.ir import dtypes


# ---- allocator
def test_alignment_views_zero_copy(cpu):
    al = cpu.allocator
    hs = [al.alloc(n) for n in (1, 3, 100, 4097)]
    assert all(h.ptr % 64 == 0 for h in hs)
    h = al.alloc(64)
    al.copyin(h, memoryview(np.arange(16, dtype=np.float32)).cast("B"))
    mv = al.as_buffer(h, 64)
    assert np.frombuffer(mv, np.float32)[3] == 3.0
    np.frombuffer(mv, np.float32)[3] = 42.0  # zero-copy: writes land in the allocation
    out = np.empty(16, np.float32)
    al.copyout(memoryview(out).cast("B"), h)
    assert out[3] == 42.0
    v = al.offset(h, 8, 16)
    assert v.ptr == h.ptr + 16
    out2 = np.empty(2, np.float32)
    al.copyout(memoryview(out2).cast("B"), v)
    np.testing.assert_array_equal(out2, [4.0, 5.0])


def test_lru_reuse(cpu):
    from devicekit_cpu.allocator import CPUAllocator
    al = CPUAllocator("CPU")
    h = al.alloc(1000)
    ptr = h.ptr
    al.free(h, 1000)
    h2 = al.alloc(1000)
    assert h2.ptr == ptr and al.stats["hits"] == 1


def test_buffer_view_in_kernel(cpu):
    from devicekit import ir
    k = ir.KernelBuilder("inc")
    n = k.var("n", lo=1, hi=1 << 20)
    x = k.param("x", dtypes.float32, size=n, writable=True)
    i = k.range(n, kind="global")
    x[i] = x[i] + 1.0
    prog = cpu.compile(k.build())
    base = dk.Buffer(cpu, 10, dtypes.float32).copyin(np.zeros(10, np.float32))
    prog.execute([base.view(4, offset=3)], [4])
    np.testing.assert_array_equal(base.numpy(), [0, 0, 0, 1, 1, 1, 1, 0, 0, 0])


# ---- hand-written C
SRC = """
#include <stdint.h>
void scale(const float *restrict x, float *restrict out, int32_t *counts, long long n, int k) {
  for (long long i = 0; i < n; i++) { out[i] = x[i] * k; counts[i % 4] += 1; }
}
static void helper(void) {}
"""


def test_parse_source_signature(cpu):
    r, _ = cpu.pair("c")
    spec = r.parse_source(SRC, "scale", sizes={"x": "n", "out": "n", "counts": 4})
    assert [(p.name, p.dtype, p.writable) for p in spec.params] == [
        ("x", dtypes.float32, False), ("out", dtypes.float32, True), ("counts", dtypes.int32, True)]
    assert [(v.name, v.lo, v.hi) for v in spec.vars] == [("n", -2**63, 2**63 - 1), ("k", -2**31, 2**31 - 1)]
    assert spec.params[2].size == 4


def test_program_from_source_runs(cpu):
    prog = cpu.program_from_source(SRC, "scale")
    n = 10
    x = dk.Buffer(cpu, n, dtypes.float32).copyin(np.arange(n, dtype=np.float32))
    out = dk.Buffer(cpu, n, dtypes.float32)
    counts = dk.Buffer(cpu, 4, dtypes.int32).copyin(np.zeros(4, np.int32))
    prog.execute([x, out, counts], [n, 3])
    np.testing.assert_array_equal(out.numpy(), np.arange(n) * 3)
    np.testing.assert_array_equal(counts.numpy(), [3, 3, 2, 2])


def test_program_from_source_sizes_are_checked(cpu):
    r, c = cpu.pair("c")
    prog = cpu.runtime(c.compile(r.parse_source(SRC, "scale", sizes={"x": "n", "out": "n", "counts": 4})))
    x, out = dk.Buffer(cpu, 5, dtypes.float32), dk.Buffer(cpu, 10, dtypes.float32)
    with pytest.raises(ValueError, match="needs 10 elements"):
        prog.execute([x, out, dk.Buffer(cpu, 4, dtypes.int32)], [10, 1])


def test_split_source_runs_on_threads(cpu):
    src = """void add1(float *x, long long n, long long core_start, long long core_end) {
      for (long long i = core_start; i < core_end; i++) x[i] += 1.0f; }"""
    r, c = cpu.pair("c")
    spec = r.parse_source(src, "add1", sizes={"x": "n"}, split="n")
    prog = cpu.runtime(c.compile(spec))
    x = dk.Buffer(cpu, 1 << 16, dtypes.float32).copyin(np.zeros(1 << 16, np.float32))
    prog.execute([x], [1 << 16])
    assert (x.numpy() == 1).all()


def test_body_error_has_line_numbers(cpu):
    """The reader judges the signature; an error in the body comes from the C compiler, with its lines."""
    r, _ = cpu.pair("c")
    bad = "void f(float *x) {\n  x[0] = 1.0f\n}\n"
    assert [p.name for p in r.parse_source(bad, "f").params] == ["x"]
    with pytest.raises(CompileError) as e:
        cpu.program_from_source(bad, "f")
    assert ":2:" in e.value.log or ":3:" in e.value.log
    assert "x[0] = 1.0f" in str(e.value)  # the offending source line is shown


def test_signature_error_has_line_numbers(cpu):
    r, _ = cpu.pair("c")
    bad = "#include <stddef.h>\nvoid f(float *x,\n       undeclared_t n) {}\n"
    with pytest.raises(CompileError, match="signature does not parse") as e:
        r.parse_source(bad, "f")
    assert "kernel.c:3:" in e.value.log and "undeclared_t" in str(e.value)


@pytest.mark.parametrize("src,msg", [
    ("void f(float *x) {}", "no function definition named 'g'"),
    ("int g(float *x) { return 0; }", "returns void"),
    ("struct s {int a;}; void g(struct s *p) {}", "buffers of structs"),
    ("struct s {int a;}; void g(struct s p) {}", "struct params cannot be read yet: pass each field"),
    ("void g(void (*cb)(float), float *x) {}", "function pointers cannot be passed"),
    ("void g(float **rows) {}", "pointers to pointers"),
    ("void g(void *p) {}", "void \\* buffer has no element type"),
])
def test_parse_source_rejects(cpu, src, msg):
    r, _ = cpu.pair("c")
    with pytest.raises(CompileError, match=msg):
        r.parse_source(src, "g")


# ---- compile errors carry diagnostics and source lines
def test_llvm_compile_error():
    from devicekit_cpu.llvm_compiler import LLVMCompiler
    src = "define void @f() {\nentry:\n  %x = add i32 1, %nope\n  ret void\n}\n"
    with pytest.raises(CompileError) as e:
        LLVMCompiler().compile_src(src)
    assert "nope" in e.value.log and ">" in str(e.value) and "%x = add i32 1, %nope" in str(e.value)


def test_cc_compile_error():
    from devicekit_cpu.cc_compiler import CCompiler
    src = "void f(float *x) {\n  x[0] = undefined_thing;\n}\n"
    with pytest.raises(CompileError) as e:
        CCompiler().compile_src(src)
    assert "undefined_thing" in e.value.log and "x[0] = undefined_thing;" in str(e.value)


# ---- discovery
def test_entry_point_is_registered():
    eps = [ep for ep in entry_points(group="devicekit") if ep.name == "cpu"]
    assert eps and eps[0].value == "devicekit_cpu.plugin"


def test_discovered_as_a_device():
    infos = {i.kind: i for i in dk.devices()}
    assert infos["CPU"].available and infos["CPU"].plugin == "cpu"
    assert list(infos["CPU"].pair_names)[:2] == ["llvm", "c"]


def test_listing_devices_imports_nothing_heavy():
    code = ("import sys, devicekit as dk; dk.devices(); "
            "heavy = [m for m in ('llvmlite', 'clang', 'devicekit_cpu.llvm_jit') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
