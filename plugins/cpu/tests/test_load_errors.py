"""A compiled CPU kernel the dynamic loader refuses is a devicekit error naming the program and why (issue 33): a C
source that declares a function it never defines compiled, then dlopen (RTLD_NOW) failed and a raw RuntimeError
came out, naming a temp file already removed. Real cc, real dlopen."""

from __future__ import annotations

import shutil
import subprocess

import devicekit as dk
import pytest
from devicekit.errors import CompileError, DeviceKitError

UNDEFINED = "void nowhere(void);\nvoid k(float *x) { nowhere(); x[0] = 1; }\n"


def test_undefined_symbol_is_a_devicekit_error_naming_it():
    with pytest.raises(DeviceKitError) as info:  # C source is compiled to a shared object and dlopened
        dk.device("CPU").program_from_source(UNDEFINED, "k", sizes={"x": 1})
    err = info.value
    assert isinstance(err, CompileError) and isinstance(err, RuntimeError)  # still what callers caught before
    assert "'k'" in str(err) and "undefined symbol: nowhere" in str(err)
    assert "devicekit_so_" not in str(err)  # the removed temp file is not the news


@pytest.mark.skipif(shutil.which("cc") is None, reason="no cc")
def test_the_loader_names_a_missing_symbol(tmp_path):
    from devicekit_cpu.loader import LoadError, load_shared
    src, so = tmp_path / "a.c", tmp_path / "a.so"
    src.write_text("int other(int x) { return x + 1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True, timeout=60)
    with pytest.raises(LoadError, match="symbol 'k' not found"):
        load_shared(so.read_bytes(), "k")
    src.write_text("int nowhere(int);\nint k(int x) { return nowhere(x); }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True, timeout=60)
    with pytest.raises(LoadError, match="program 'k'.*undefined symbol: nowhere"):
        load_shared(so.read_bytes(), "k")
