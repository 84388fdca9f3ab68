"""NVRTC and nvJitLink through NVIDIA's binding (cuda.bindings, cuda-python) compile exactly what the libraries give
through a plain C call, and use the library toolchain.py chose (DEVICEKIT_NVRTC / DEVICEKIT_NVJITLINK), not the one
the binding's own lookup would find. No driver needed."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from devicekit_cuda import nvjitlink, nvrtc

SRC = r'''extern "C" __global__ void saxpy(float *out, const float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + 1.0f;
}'''
OPTS = ["--gpu-architecture=sm_80", "-default-device", "--fmad=false"]


def _plain_c_cubin(path: str) -> bytes:
    """The cubin of SRC through NVRTC's C API called directly (ctypes), as the plugin did before the binding."""
    lib, c = ctypes.CDLL(path), ctypes
    prog = c.c_void_p()
    assert lib.nvrtcCreateProgram(c.byref(prog), SRC.encode(), b"saxpy.cu", 0, None, None) == 0
    opts = (c.c_char_p * len(OPTS))(*[o.encode() for o in OPTS])
    assert lib.nvrtcCompileProgram(prog, len(OPTS), opts) == 0
    size = c.c_size_t()
    assert lib.nvrtcGetCUBINSize(prog, c.byref(size)) == 0
    out = c.create_string_buffer(size.value)
    assert lib.nvrtcGetCUBIN(prog, out) == 0
    lib.nvrtcDestroyProgram(c.byref(prog))
    return out.raw[:size.value]


def test_the_binding_compiles_the_same_cubin_as_the_c_api():
    lib = nvrtc.load()
    cubin, _log = lib.compile(SRC, "saxpy", OPTS, cubin=True)
    assert cubin == _plain_c_cubin(lib.path) and cubin[:4] == b"\x7fELF"


def test_errors_keep_their_words_and_log():
    with pytest.raises(nvrtc.NVRTCError, match=r"nvrtcCompileProgram failed: NVRTC_ERROR_COMPILATION \(6\)") as ei:
        nvrtc.load().compile("int x = ;", "bad", OPTS)
    assert "expected an expression" in ei.value.log
    with pytest.raises(nvjitlink.NvJitLinkError, match="nvJitLink failed for sm_80: NVJITLINK_ERROR_INCORRECT_INPUT_TYPE"):
        nvjitlink.load().link_ptx(b"not ptx", "sm_80", "bad")
    with pytest.raises(nvjitlink.NvJitLinkError, match=r"nvJitLinkCreate\(-arch=sm_9000\) failed: NVJITLINK_ERROR_"):
        nvjitlink.load().link_ptx(b"", "sm_9000", "bad")


def test_jitlink_links_nvrtc_ptx():
    ptx, _ = nvrtc.load().compile(SRC, "saxpy", ["--gpu-architecture=compute_80", "-default-device"])
    a = nvjitlink.load().link_ptx(ptx, "sm_80", "saxpy")
    assert a == nvjitlink.load().link_ptx(ptx, "sm_80", "saxpy") and a[:4] == b"\x7fELF"


OLDEST = Path(sys.prefix) / "nvrtc-13.2" / "nvidia" / "cu13" / "lib" / "libnvrtc.so.13"


@pytest.mark.skipif(not OLDEST.exists(), reason=f"NVRTC 13.2 is not unpacked at {OLDEST} (scripts/dev-setup.sh)")
def test_devicekit_nvrtc_picks_the_library_the_binding_uses():
    """In a fresh process the binding would find the 13.5 wheel; DEVICEKIT_NVRTC names 13.2, and 13.2 compiles."""
    code = ("import json; from devicekit_cuda import nvrtc; n = nvrtc.load(); "
            "from cuda.bindings import nvrtc as b; print(json.dumps([n.version, list(b.nvrtcVersion()[1:])]))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    env["DEVICEKIT_NVRTC"] = str(OLDEST)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1]) == [[13, 2], [13, 2]]


def test_compiling_leaves_the_processes_shared_bytes_alone():
    """The binding writes its outputs into the object it is given; `b" " * 1` (the buffer for an empty log, one NUL)
    is CPython's one shared b" ", so writing bytes buffers turned every b" " in the process into b"\\0": os.environ
    then refused " " ("embedded null byte") and Ray's driver got empty arrays back. Run in a child process, so a
    failure cannot corrupt this worker too."""
    code = ("import os; from devicekit_cuda import nvrtc, nvjitlink; n = nvrtc.load()\n"
            f"ptx, log = n.compile({SRC!r}, 'saxpy', ['--gpu-architecture=compute_80', '-default-device'])\n"
            f"cubin, _ = n.compile({SRC!r}, 'saxpy', {OPTS!r}, cubin=True)\n"
            "nvjitlink.load().link_ptx(ptx, 'sm_80', 'saxpy')\n"
            "assert log == '', log  # the empty log is the case that reached the shared b' '\n"
            "bad = [i for i in range(256) if chr(i).encode('latin-1')[0] != i]  # each is CPython's shared object\n"
            "assert not bad, f'single-byte bytes objects overwritten: {bad}'\n"
            "os.environ['DEVICEKIT_BINDINGS_PROBE'] = ' '\n"
            "print('ok')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stderr[-2000:]


def test_the_readme_repro_still_corrupts_the_shared_bytes():
    """The README's eight-line repro of the binding writing into `bytes` still does what it says (in a child process):
    when a cuda-bindings release stops it (refuses bytes, or copies), this fails and the README should say so."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    code = readme.split("runs it in a child process):\n\n```python notest\n", 1)[1].split("```", 1)[0]
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode != 0 and p.stderr.strip().endswith("ValueError: embedded null byte"), (p.returncode, p.stderr)
