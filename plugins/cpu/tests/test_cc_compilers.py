"""The c pair with every C compiler the distribution offers (gcc 12, clang 14, clang 19: scripts/dev-setup.sh
installs them), every dtype, differentially against the PYTHON reference; and the per-compiler feature probe that
picks one whose half really builds here, or renders half through float (issue: Debian's clang 14 broke every float16
kernel; gcc 12 + binutils 2.40 rejected its own AVX512-FP16 `vmovsh`)."""

from __future__ import annotations

import os
import shutil
import stat

import pytest
from devicekit import settings
from devicekit.ir.dtypes import dtypes
from devicekit.targets import Device
from devicekit.testing.random_kernels import ALL_DTYPES, assert_matches, random_kernel
from devicekit_cpu import cc_probe
from devicekit_cpu.c_renderer import CRenderer
from devicekit_cpu.cc_compiler import FLAGS, CCompiler, cc_info

_SLOW = settings.get("DEVICEKIT_SLOW")  # the long run: 400 + 200 kernels per compiler
SEEDS = range(400 if _SLOW else 12)
HALF_SEEDS = range(1000, 1200 if _SLOW else 1010)


def _find(family: str, major: int | None) -> str | None:
    names = [f"clang-{major}", "clang"] if family == "clang" else ["gcc", "cc"]
    for n in names:
        if (p := shutil.which(n)) and (i := cc_info(p)).family == family and (major is None or i.version[0] == major):
            return p
    return None


COMPILERS = {"gcc": ("gcc", None), "clang-14": ("clang", 14), "clang-19": ("clang", 19)}


def _device(cpu, cc: str, flags=FLAGS) -> Device:
    c = CCompiler(cc, flags)
    return Device("CPU", cpu.allocator, CRenderer(half=c.half), c, cpu.runtime)


def _differential(dev, python_ref, seeds, pool=ALL_DTYPES) -> list[str]:
    import devicekit as dk
    failures = []
    for seed in seeds:
        rk = random_kernel(seed, pool=pool)
        try:
            want = python_ref(rk.kernel, **rk.inputs)
            got = dk.run(rk.kernel, device=dev, **rk.inputs)
            assert_matches(got["out"], want["out"], rk.kernel.params[-1].dtype, f"seed {seed}")
        except Exception as e:  # noqa: BLE001 - collect every failing seed
            failures.append(f"seed {seed}: {type(e).__name__}: {str(e)[:300]}")
    return failures


@pytest.mark.parametrize("name", sorted(COMPILERS))
def test_every_compiler_of_the_distribution_matches_the_reference(name, cpu, python_ref):
    cc = _find(*COMPILERS[name])
    if cc is None:
        pytest.skip(f"{name} is not installed here (scripts/dev-setup.sh installs it where it may use apt)")
    dev = _device(cpu, cc)
    assert dev.compiler.half in ("_Float16", "__fp16"), dev.compiler.identity()
    failures = _differential(dev, python_ref, SEEDS)
    failures += _differential(dev, python_ref, HALF_SEEDS, pool=(dtypes.float16, dtypes.float32, dtypes.int32))
    assert not failures, f"{name} ({dev.compiler.identity()}):\n" + "\n".join(failures)


def test_half_through_float_gives_the_reference_values(cpu, python_ref):
    """A clang whose _Float16 does not build with its flags (clang 14 on x86 without -march=native) renders half
    as clang's __fp16 storage type, each result rounded back to half: the same values as the reference."""
    flags = tuple(f if f != "-march=native" else "-march=x86-64-v3" for f in FLAGS)  # AVX2 + F16C, no AVX512-FP16
    for cc in filter(None, (_find("clang", 14), _find("clang", None))):
        if not cc_probe.probe(cc, flags).float16 and cc_probe.probe(cc, flags).fp16_storage:
            break
    else:
        pytest.skip("no clang here lacks _Float16 but builds __fp16 with -march=x86-64-v3 (clang 14 on x86 does)")
    dev = _device(cpu, cc, flags)
    assert dev.compiler.half == "__fp16" and "half=__fp16" in dev.compiler.identity()
    failures = _differential(dev, python_ref, HALF_SEEDS, pool=(dtypes.float16, dtypes.float32, dtypes.int32))
    # with float64 inputs: clang 14's own double -> __fp16 called libgcc's __truncdfhf2 across an ABI mismatch
    # (garbage: 3.6e-07 for 24.2 in seed 5047)
    failures += _differential(dev, python_ref, (5015, 5047, 5099),
                              pool=(dtypes.float16, dtypes.float32, dtypes.int32, dtypes.float64))
    assert not failures, "\n".join(failures)
    # double -> half rounds once: through a float rounded to nearest, 1 + 2^-11 + 2^-30 became a tie (-> 1.0)
    import devicekit as dk
    import numpy as np
    from devicekit import ir
    k = ir.KernelBuilder("d2h")
    n = k.var("n", 1)
    a = k.param("a", dtypes.float64, n)
    out = k.param("out", dtypes.float16, n, writable=True)
    i = k.range(n, "global")
    out[i] = a[i].cast(dtypes.float16)
    x = np.array([1 + 2.0**-11 + 2.0**-30, 1 + 2.0**-11, -(1 + 3 * 2.0**-11 - 2.0**-40), 65519.99, 65520.0, 1e-9,
                  2.0**-25 + 2.0**-60, 3.0e-8, -0.0, np.inf, np.nan])
    got = dk.run(k.build(), device=dev, a=x, n=x.size)["out"]
    with np.errstate(over="ignore"):  # 65520 and inf round to inf: the expected value
        want = x.astype(np.float16)
    np.testing.assert_array_equal(got, want)  # numpy rounds double -> half directly


def test_the_default_compiler_builds_half_when_any_compiler_here_does(cpu):
    """The old choice took `clang` whatever it supported; now the first whose half builds (recorded in the key)."""
    c = CCompiler()
    able = [cc for cc in cc_probe.candidates()
            if cc_probe.settle(cc, c._base_flags).features.float16]
    if able:
        assert c.half == "_Float16" and os.path.realpath(c.cc) == os.path.realpath(able[0])
    assert f"features={c.choice.features.text()}" in c.identity() and f"half={c.half or 'none'}" in c.identity()


def test_a_hand_written_source_gets_a_compiler_that_has_its_features(cpu):
    """tinygrad's CPU kernels use clang's ext_vector_type, which gcc ignores (a warning, then wrong code): a source
    that names it is compiled by a compiler that has it."""
    import devicekit as dk
    import numpy as np
    src = ("typedef float float4 __attribute__((ext_vector_type(4)));\n"
           "void k(float *restrict out, const float *restrict a) {\n"
           "  float4 v = *(const float4 *)a; float4 w = v.wzyx * 2.0f; *(float4 *)out = w; }\n")
    if not any(cc_probe.settle(cc, FLAGS).features.ext_vector_type for cc in cc_probe.candidates()):
        pytest.skip("no C compiler here has ext_vector_type (clang has)")
    prog = cpu.program_from_source(src, "k", sizes={"out": 4, "a": 4})
    out = dk.run(prog, out=np.zeros(4, np.float32), a=np.arange(4, dtype=np.float32))["out"]
    assert out.tolist() == [6.0, 4.0, 2.0, 0.0]
    gcc = _find("gcc", None)
    if gcc is None:
        return
    dev = _device(cpu, gcc)  # a pair whose compiler is gcc (the c pair's choice where clang is absent)
    assert not dev.compiler.choice.features.ext_vector_type
    assert "clang" in dev.compiler.for_source(src).identity()  # the old pair compiled it with gcc: scalar code
    prog = dev.program_from_source(src, "k", sizes={"out": 4, "a": 4})
    out = dk.run(prog, out=np.zeros(4, np.float32), a=np.arange(4, dtype=np.float32))["out"]
    assert out.tolist() == [6.0, 4.0, 2.0, 0.0]


def _fake_cc(tmp_path, real: str) -> str:
    """A stand-in for gcc 12 + binutils 2.40 on an AVX512-FP16 host (this host's CPU may lack it): half code fails
    to assemble with the assembler's own message unless -mno-avx512fp16 is given; everything else is the real
    compiler."""
    p = tmp_path / "gcc-fp16"
    p.write_text(f"""#!/bin/sh
case " $* " in *" - "*) ;; *) exec {real} "$@";; esac
src=$(cat)
case "$*" in *-mno-avx512fp16*) ;; *) case "$src" in *_Float16*)
  echo "/tmp/ccX.s: Assembler messages:" >&2; echo "/tmp/ccX.s:20: Error: unsupported masking for \\`vmovsh'" >&2
  exit 1;; esac;; esac
printf '%s' "$src" | exec {real} "$@"
""")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(p)


def test_a_compiler_whose_half_does_not_assemble_gets_the_flag_that_stops_it(tmp_path, monkeypatch):
    real = shutil.which("gcc") or shutil.which("cc")
    if real is None:
        pytest.skip("no gcc here")
    from devicekit_cpu import hostinfo
    monkeypatch.setattr(hostinfo, "cpu_flags", lambda: frozenset({"sse2", "avx512f", "avx512fp16"}))
    fake = _fake_cc(tmp_path, real)
    c = cc_probe.settle(fake, FLAGS)
    assert c.features.float16 and c.half == "_Float16" and cc_probe.NO_FP16_FLAG in c.flags
    assert any("vmovsh" in n for n in c.notes)
    monkeypatch.setattr(hostinfo, "cpu_flags", lambda: frozenset({"sse2", "avx2"}))  # the flag means nothing here
    assert cc_probe.NO_FP16_FLAG not in cc_probe.settle(fake, FLAGS).flags


def _reload_after_loop_kernel():
    """fuzz seed 301863 (memory profile), shrunk: z[2i + j] += x[2i + j] over j < 2, then y[2i] = z[2i]."""
    from devicekit import ir
    k = ir.KernelBuilder("mo301863")
    n = k.var("n", 1, 64)
    x = k.param("x", dtypes.float64, n * 2)
    y = k.param("y", dtypes.float64, n * 2, writable=True)
    z = k.param("z", dtypes.float64, n * 2, writable=True)
    i, j = k.range(n, "global"), k.range(2, "loop")
    z[i * 2 + j] = x[i * 2 + j] + z[i * 2 + j]
    y[i * 2] = z[i * 2]
    return k.build()


@pytest.mark.parametrize("name", sorted(COMPILERS))
def test_a_load_after_the_loop_that_stores_there_sees_the_stores(name, cpu, python_ref):
    """clang 14 at -O2 -fwrapv with AVX2 hoisted y[2i] = z[2i]'s load above the loop's stores (its loop vectorizer's
    interleaved groups): y came back as the old z. cc_compiler.KNOWN_BAD adds the flag that stops it."""
    import devicekit as dk
    import numpy as np
    cc = _find(*COMPILERS[name])
    if cc is None:
        pytest.skip(f"{name} is not installed here (scripts/dev-setup.sh installs it where it may use apt)")
    k, n = _reload_after_loop_kernel(), 16
    args = {"x": np.arange(1, 2 * n + 1, dtype=np.float64), "y": np.zeros(2 * n), "z": np.full(2 * n, 10.0), "n": n}
    want = python_ref(k, **args)
    got = dk.run(k, device=_device(cpu, cc), **args)
    assert_matches(got["y"], want["y"], dtypes.float64, f"{name}: y")
    assert_matches(got["z"], want["z"], dtypes.float64, f"{name}: z")
