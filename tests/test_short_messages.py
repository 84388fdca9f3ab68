"""Short one-line messages, details in `devicekit info`: an unavailable kind's reason once and only its first
clause in errors, a readable dk.devices(), a DEVICEKIT_DEBUG=2 compile line without the CPU feature list, and ACME
listed as the example device it is."""

from __future__ import annotations

import devicekit as dk
import pytest
from devicekit.compile.compiler import short_identity
from devicekit.errors import DeviceNotFoundError, DeviceUnavailableError
from devicekit.registry.records import DeviceInfo, DeviceList, short_reason


def _row(**kw) -> DeviceInfo:
    reason = "no X driver: libx.so not found; pip install x; the compile path still works (dk.target('X'))"
    return DeviceInfo(**{"spec": "X", "kind": "X", "plugin": "x", "distribution": "devicekit-x", "version": "1.0",
                         "available": False, "reason": reason, **kw})


def test_the_first_clause_is_the_summary():
    assert short_reason(_row().reason) == "no X driver: libx.so not found"
    assert short_reason("Metal needs macOS; this is Linux") == "Metal needs macOS"


def test_device_rows_print_one_short_line_each():
    rows = DeviceList([_row(), _row(spec="Y", kind="Y", available=True, reason="", example=True)])
    text = repr(rows)
    assert text.splitlines() == ["2 devices (details: devicekit info):",
                                 "  X  unavailable: no X driver: libx.so not found  (plugin x)",
                                 "  Y  available  (plugin x, an example device, not hardware)"]
    assert repr(rows[0]) == "<DeviceInfo X unavailable: no X driver: libx.so not found; plugin 'x' (devicekit-x 1.0)>"
    assert isinstance(dk.devices(), list) and len(repr(dk.devices())) < 120 * len(dk.devices())


def test_errors_name_unavailable_kinds_without_their_reasons():
    with pytest.raises(DeviceNotFoundError) as e:
        dk.device("NOSUCH")
    msg = str(e.value)
    assert "Available: " in msg and len(msg) < 300, msg
    unavailable = [d for d in dk.devices() if not d.available]
    if unavailable:
        assert "Unavailable here: " in msg and "`devicekit info` says why" in msg
        assert all(short_reason(d.reason) not in msg for d in unavailable)
        with pytest.raises(DeviceUnavailableError) as e2:
            dk.device(unavailable[0].spec)
        one = str(e2.value)
        assert short_reason(unavailable[0].reason) in one and "`devicekit info`" in one
        if "; " in unavailable[0].reason:
            assert unavailable[0].reason not in one  # the long tail is for devicekit info


def test_debug_lines_keep_the_identity_short():
    ident = "llvm llvmlite-0.50.0 LLVM-22.1.0 cpu=x O3 features=" + ",".join(f"+f{i}" for i in range(300))
    s = short_identity(ident)
    assert s == "llvm llvmlite-0.50.0 LLVM-22.1.0 cpu=x O3 ..." and short_identity("gcc-12 -O2") == "gcc-12 -O2"
    assert len(short_identity("a " * 200)) <= 104


def test_debug_2_compile_line_is_short(tmp_path):
    import subprocess
    import sys
    code = ("import devicekit as dk; from devicekit import kernels; "
            "dk.run(kernels.elementwise('a + b', name='dbg'), 'CPU', a=[1.0], b=[2.0], n=1)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                       env={"PATH": "/usr/bin:/bin", "DEVICEKIT_DEBUG": "2", "DEVICEKIT_CACHE_DIR": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "compiled dbg" in ln]
    assert lines and all(len(ln) < 200 for ln in lines), lines
