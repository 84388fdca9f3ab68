"""Can CUDA run here, and can it compile here? Both answers in words, cheaply (no pycuda, no NVRTC load).

`runtime_status()` checks, in order: a loadable libcuda.so, cuInit and a device count > 0, pycuda importable.
`compile_status()` checks that NVRTC and a link step (nvJitLink, else ptxas) are present on disk.
"""

from __future__ import annotations

import importlib.util

from devicekit.plugin import Availability

from . import driver, toolchain


def compile_status() -> tuple[bool, str]:
    """(ok, words): which compile pipeline `dk.target("CUDA")` will use, or what is missing."""
    nv, searched = toolchain.nvrtc()
    if nv is None:
        return False, ("NVRTC not found (pip install nvidia-cuda-nvrtc); searched " + ", ".join(searched))
    jl, _ = toolchain.nvjitlink()
    if jl is not None:
        return True, f"NVRTC ({nv.origin}) -> nvJitLink ({jl.origin})"
    px, _ = toolchain.ptxas()
    if px is not None:
        return True, f"NVRTC ({nv.origin}) -> ptxas ({px.path}) [fallback: nvJitLink not found]"
    return False, "NVRTC found but neither nvJitLink (pip install nvidia-nvjitlink) nor ptxas is available"


def runtime_status() -> Availability:
    st = driver.state()
    has_pycuda = importlib.util.find_spec("pycuda") is not None
    if st.ok and has_pycuda:
        return Availability.yes()
    if not st.ok:
        reason = st.reason + ("" if has_pycuda else "; pycuda is not installed either (pip install 'devicekit-cuda[runtime]')")
    else:
        reason = (f"the CUDA driver sees {st.count} device(s) but pycuda is not installed "
                  "(pip install 'devicekit-cuda[runtime]')")
    ok, how = compile_status()
    if ok:
        reason += f"; the compile path still works: dk.target('CUDA') compiles cubins ahead of time ({how})"
    else:
        reason += f"; compiling is unavailable too: {how}"
    return Availability.no(reason)


def count() -> int:
    st = driver.state()
    return st.count if st.ok else 0
