"""The core pieces a GPU plugin shares (issue 35: lean backends), tested without a device: the C-family integer ops
(render/int_exact.py), the checked driver-binary record (compile/envelope.py), the work-item spelling of launch sizes
and a kernel's required group size (work_sizes.py), and the build options a signature reader sees
(compile/source_spec.py). Each was OpenCL's own before; the OPENCL plugin's tests run them on a device."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from devicekit.compile.envelope import Envelope, MalformedBinaryError
from devicekit.compile.source_spec import preprocessor_flags, read_source
from devicekit.errors import CompileError, LaunchError
from devicekit.ir.dtypes import dtypes
from devicekit.ir.ops import Ops
from devicekit.render.cstyle import CStyleRenderer
from devicekit.render.int_exact import exact_int_ops, int_literal
from devicekit.work_sizes import WorkSizes, to_groups, with_required

C_TYPES = {"int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t",
           "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t"}
UNSIGNED = {8: "uint32_t", 16: "uint32_t", 32: "uint32_t", 64: "uint64_t"}


def test_int_literal_reads_rendered_literals_only():
    assert [int_literal(x) for x in ("5", "(-3L)", "((long)7)", "12UL", "x", "(a+1)")] == [5, -3, 7, 12, None, None]


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_exact_int_ops_give_the_reference_answers_in_c(tmp_path):
    """Compiled by the system's C compiler with -O2 (which exploits signed-overflow UB and traps x / 0): the
    rendered expressions give the IR's answers. Fails with the base's plain C operators."""
    code = exact_int_ops(CStyleRenderer.code_for_op, C_TYPES, UNSIGNED)
    assert code[Ops.CMPLT] is CStyleRenderer.code_for_op[Ops.CMPLT]  # comparisons are left as they are
    i32, i8, u32 = dtypes.int32, dtypes.int8, dtypes.uint32
    cases = [  # (expression, expected) on volatile inputs, so nothing folds at compile time
        (code[Ops.IDIV]("a", "z", dtype=i32), 0), (code[Ops.MOD]("a", "z", dtype=i32), 0),
        (code[Ops.IDIV]("mn", "m1", dtype=i32), -2**31), (code[Ops.MOD]("mn", "m1", dtype=i32), 0),
        (code[Ops.ADD]("mx", "one", dtype=i32), -2**31), (code[Ops.MUL]("mx", "two", dtype=i32), -2),
        (code[Ops.ADD]("c", "c", dtype=i8), -2), (code[Ops.SHL]("one", "s33", dtype=i32), 2),
        (code[Ops.IDIV]("a", "z", dtype=u32), 0), (code[Ops.IDIV]("a", "7", dtype=i32), 100 // 7),
        (code[Ops.CMPLT]("mx", code[Ops.ADD]("mx", "one", dtype=i32), dtype=dtypes.bool), 0),
    ]
    body = "\n".join(f'  printf("%lld\\n", (long long)({e}));' for e, _ in cases)
    src = tmp_path / "t.c"
    src.write_text("#include <stdio.h>\n#include <stdint.h>\nint main(void) {\n"
                   "  volatile int32_t a = 100, z = 0, mn = INT32_MIN, m1 = -1, mx = INT32_MAX, one = 1, two = 2, "
                   "s33 = 33;\n  volatile int8_t c = 127;\n" + body + "\n  return 0;\n}\n")
    exe = tmp_path / "t"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(src)], check=True)
    got = [int(x) for x in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()]
    assert got == [want for _, want in cases]


def test_envelope_round_trips_and_refuses_damage_by_name():
    rec = Envelope(b"DKTEST01", "ACME", "devicekit-acme")
    lib = rec.wrap(b"payload" * 10, "key")
    assert rec.unwrap(lib, "key", "k") == b"payload" * 10
    for bad, why in ((lib[:-1], "truncated"), (lib + b"x", "trailing"), (lib[:20], "shorter than"), (b"", "empty"),
                     (lib[:-1] + b"?", "sha256"), (b"\x7fELF" + lib[4:], "not a devicekit-acme program record"),
                     (rec.wrap(b"p", "other"), "built for another device"),
                     (Envelope(b"DKOTHER1", "X", "x").wrap(b"p", "key"), "not a devicekit-acme")):
        with pytest.raises(MalformedBinaryError, match=why) as e:
            rec.unwrap(bad, "key", "prog")
        assert isinstance(e.value, CompileError)
        assert str(e.value).startswith("ACME: refused the compiled bytes of 'prog'")


def test_to_groups_translates_work_items_and_names_mistakes():
    assert to_groups("k", None, None, (256, 4), (64, 2), None) == ((4, 2), (64, 2))
    assert to_groups("k", None, None, 256, None, (16, 1, 1)) == ((16,), (16,))  # the required size by default
    assert to_groups("k", (3,), (8,), None, None, None) == ((3,), (8,))  # the group spelling passes through
    for *args, why in (((4,), None, 256, None, "not both"), (None, 8, 256, 8, "not both"),
                       (None, None, 100, 64, "not a multiple"), (None, None, (64, 64), (8,), "one local size per axis"),
                       (None, None, -1, None, "global_work_size")):
        with pytest.raises(LaunchError, match=why):
            to_groups("k", *args, None)


def test_with_required_fills_and_enforces_the_required_size():
    assert with_required("k", (4,), None, None) == ((4,), (1,))
    assert with_required("k", (4, 2), (8,), None) == ((4, 2), (8, 1))
    assert with_required("k", (4,), None, (16, 4, 1)) == ((4, 1), (16, 4))
    assert with_required("k", (4,), (16, 4), (16, 4, 1)) == ((4, 1), (16, 4))
    with pytest.raises(LaunchError, match=r"declares reqd_work_group_size\(16, 4, 1\).*pass local_size=\(16, 4, 1\)"):
        with_required("k", (4,), (8,), (16, 4, 1))


def test_work_sizes_mixin_translates_before_the_core_launch():
    class Base:
        def execute(self, buffers, vals=(), global_size=None, local_size=None, wait=False):
            return global_size, local_size

        def __call__(self, *args, **named):
            return named

    class Spec:
        user_params = [type("P", (), {"name": "x"})()]
        vars = [type("V", (), {"name": "local_work_size"})()]  # a var of that name stays the var

    class Prog(WorkSizes, Base):
        name, spec, default_local = "k", Spec(), None

    p = Prog()
    assert p.execute([], (), global_work_size=128, local_work_size=32) == ((4,), (32,))
    assert p(x=1, global_work_size=64, local_work_size=3) == {"x": 1, "local_work_size": 3, "global_size": (64,),
                                                            "local_size": (1,)}


def test_preprocessor_flags_keep_what_the_preprocessor_sees():
    opts = ["-O2", "-D", "N=4", "-DM=2", "-U", "X", "-Iinc", "-I", "dir", "-cl-std=CL2.0", "-cl-fast-relaxed-math",
            "-cl-mad-enable"]
    assert preprocessor_flags(opts) == ["-D", "N=4", "-DM=2", "-U", "X", "-Iinc", "-I", "dir"]
    assert preprocessor_flags(opts, ("-cl-std=", "-cl-fast-relaxed-math"))[-2:] == ["-cl-std=CL2.0",
                                                                                      "-cl-fast-relaxed-math"]


def test_read_source_refuses_what_is_not_source_and_a_name():
    for src, entry in ((b"kernel", "k"), ("src", ""), ("src", None)):
        with pytest.raises(CompileError, match="expected source text and a kernel name"):
            read_source("devicekit_opencl.source:read_opencl", src, entry, device="OPENCL", lang="opencl")
