import json
import subprocess
import sys

HEAVY = ("llvmlite", "pycuda", "nvrtc", "Metal", "cuda", "objc", "clang")

CODE = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import devicekit
after_import = sorted(sys.modules)
devicekit.devices()
print(json.dumps({"after_import": after_import, "after_devices": sorted(sys.modules)}))
"""


def heavy(mods):
    return sorted(m for m in mods if any(part in HEAVY or "nvrtc" in part for part in m.split(".")))


def test_import_and_listing_import_no_toolchain():
    p = subprocess.run([sys.executable, "-c", CODE], capture_output=True, check=False, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert heavy(out["after_import"]) == []
    assert heavy(out["after_devices"]) == []
    # `import devicekit` alone loads no submodule but the tiny plugin-declaration module
    assert [m for m in out["after_import"] if m.startswith("devicekit")] == ["devicekit", "devicekit.plugin"]
    assert "numpy" not in out["after_import"]


def test_heavy_filter_would_notice():
    assert heavy(["llvmlite.binding", "cuda.bindings.nvrtc", "numpy"]) == ["cuda.bindings.nvrtc", "llvmlite.binding"]
