"""`devicekit compile FILE.py:KERNEL --show source|ir|asm`: each stage on CPU (both pairs), ACME, CUDA (compiled here
without a GPU) and the clear errors: bad references, a function needing arguments, unknown devices and pairs, a
compiler that cannot disassemble, a kind that cannot compile here."""

from __future__ import annotations

import textwrap

import pytest
from devicekit import cli

KERNELS = textwrap.dedent('''
    from devicekit import ir, kernels
    from devicekit.ir import dtypes

    def saxpy():
        k = ir.KernelBuilder("saxpy")
        n = k.var("n", lo=1, hi=2**31 - 1)
        x = k.param("x", dtypes.float32, size=n)
        y = k.param("y", dtypes.float32, size=n)
        out = k.param("out", dtypes.float32, size=n, writable=True)
        i = k.range(n, kind="global")
        out[i] = x[i] * 2.0 + y[i]
        return k.build()

    SOFTMAX = kernels.softmax()

    def needs_args(n):
        return None

    NOT_A_KERNEL = 42
''')


@pytest.fixture
def kfile(tmp_path):
    p = tmp_path / "my_kernels.py"
    p.write_text(KERNELS)
    return str(p)


def _run(capsys, *argv):
    rc = cli.main(["compile", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_source_cpu_llvm(capsys, kfile):
    rc, out, _ = _run(capsys, f"{kfile}:saxpy", "--device", "CPU", "--show", "source")
    assert rc == 0
    assert 'define void @"dku_saxpy"' in out and "fmul" in out


def test_source_kernel_object_and_c_pair(capsys, kfile):
    rc, out, _ = _run(capsys, f"{kfile}:SOFTMAX", "--device", "CPU", "--pair", "c")
    assert rc == 0
    assert "void dku_softmax(const float *restrict dku_x, float *restrict dku_out, long long dku_m, long long dku_n" \
        in out  # user names are dku_<name> in generated source (docs/ir.md, Names)


def test_ir_is_the_linear_form(capsys, kfile):
    import devicekit as dk
    from devicekit.ir.linearize import lower

    rc, out, _ = _run(capsys, f"{kfile}:saxpy", "--device", "CPU", "--show", "ir")
    assert rc == 0
    assert out.split("\n")[0].split()[:2] == ["0", "PARAM"]
    assert "RANGE" in out and "STORE" in out and "ENDRANGE" in out
    from devicekit.inspect_kernel import load_kernel
    assert out.rstrip("\n") == str(lower(load_kernel(f"{kfile}:saxpy"), dk.target("CPU").renderer.capabilities))


def test_asm_llvm_pair_is_host_assembly(capsys, kfile):
    rc, out, _ = _run(capsys, f"{kfile}:saxpy", "--device", "CPU", "--show", "asm")
    assert rc == 0
    assert "dku_saxpy:" in out and "define void" not in out  # the assembly, not the IR before it
    assert "\tret" in out or "ret" in out.split()


def test_asm_c_pair_and_acme_through_objdump(capsys, kfile):
    for argv in (["--device", "CPU", "--pair", "c"], ["--device", "ACME"]):
        rc, out, err = _run(capsys, f"{kfile}:saxpy", "--show", "asm", *argv)
        assert rc == 0, err
        assert "<dku_saxpy>:" in out and "ret" in out
        assert "<_init>" not in out  # only the entry point


def test_cuda_compiles_here_without_a_gpu(capsys, kfile):
    import devicekit as dk
    try:
        dk.target("CUDA")
    except dk.DeviceKitError as e:
        pytest.skip(f"no CUDA compile path here: {e}")
    rc, out, _ = _run(capsys, f"{kfile}:saxpy", "--device", "CUDA")
    assert rc == 0 and '__global__' in out and "dku_saxpy(" in out
    rc, out, err = _run(capsys, f"{kfile}:saxpy", "--device", "CUDA", "--show", "asm")
    assert rc == 0, err
    assert ".entry dku_saxpy" in out or "Function : dku_saxpy" in out  # PTX here (no cuobjdump), SASS where it exists


def test_metal_renders_but_cannot_compile_here(capsys, kfile):
    import sys
    if sys.platform == "darwin":
        pytest.skip("on macOS Metal compiles")
    rc, out, _ = _run(capsys, f"{kfile}:saxpy", "--device", "METAL")
    assert rc == 0 and "kernel void dku_saxpy(" in out
    rc, _, err = _run(capsys, f"{kfile}:saxpy", "--device", "METAL", "--show", "asm")
    assert rc == 1 and "needs macOS" in err


def test_no_disassembly_is_a_clear_message(capsys, kfile):
    rc, _, err = _run(capsys, f"{kfile}:saxpy", "--device", "PYTHON", "--show", "asm")
    assert rc == 1
    assert "offers no disassembly" in err and "--show source" in err


@pytest.mark.parametrize("ref, msg", [
    ("{f}", "expected FILE.py:KERNEL"),
    ("/no/such/file.py:k", "no such file"),
    ("{f}:nope", "has no 'nope'; kernels and functions there: saxpy, SOFTMAX, needs_args"),
    ("{f}:needs_args", "needs arguments"),
    ("{f}:NOT_A_KERNEL", "is an int (42), not a devicekit ir.Kernel"),
])
def test_bad_references_are_usage_errors(capsys, kfile, ref, msg):
    rc, _, err = _run(capsys, ref.format(f=kfile))
    assert rc == 2
    assert msg in err


def test_file_that_raises(capsys, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('broken on purpose')\n")
    rc, _, err = _run(capsys, f"{bad}:k")
    assert rc == 2 and "raised RuntimeError while loading: broken on purpose" in err


def test_unknown_device_and_pair(capsys, kfile):
    rc, _, err = _run(capsys, f"{kfile}:saxpy", "--device", "NOSUCH")
    assert rc == 1 and "no device 'NOSUCH'" in err and "Available:" in err
    rc, _, err = _run(capsys, f"{kfile}:saxpy", "--device", "CPU", "--pair", "zz")
    assert rc == 1 and "has no compiler pair 'zz'; it has llvm, c" in err
