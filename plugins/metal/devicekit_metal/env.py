"""Cheap facts about this machine that decide whether Metal can run here. No pyobjc import at module level."""

from __future__ import annotations

import functools
import importlib.util
import platform
import shutil
import subprocess

INSTALL_HINT = "pip install pyobjc-framework-Metal"


def os_name() -> str:
    s = platform.system()
    return {"Darwin": "macOS"}.get(s, s or "an unknown OS")


def is_macos() -> bool:
    return platform.system() == "Darwin"


def unavailable_reason() -> str | None:
    """None when Metal can plausibly run here, else the reason in words (cheap: no framework import)."""
    if not is_macos():
        return (f"Metal needs macOS; this is {os_name()} (rendering still works here: "
                "dk.target('METAL').renderer.render(kernel) gives Metal Shading Language)")
    if importlib.util.find_spec("Metal") is None:
        return f"the Metal framework bindings are missing: {INSTALL_HINT}"
    return None


def compile_unavailable_reason() -> str | None:
    """Why Metal Shading Language cannot be compiled here (None when it can)."""
    if not is_macos():
        return (f"compiling Metal Shading Language needs macOS with the Metal framework (via {INSTALL_HINT}) "
                f"or Xcode's `xcrun metal`; this is {os_name()}. Rendering works anywhere: "
                "dk.target('METAL').renderer.render(kernel) gives the MSL source")
    if importlib.util.find_spec("Metal") is None:
        return f"compiling Metal Shading Language in process needs the Metal bindings: {INSTALL_HINT}"
    return None


@functools.cache
def xcrun_metal() -> tuple[str, str] | None:
    """(path of `metal`, path of `metallib`) from Xcode's toolchain, or None when it is not installed."""
    if not is_macos() or shutil.which("xcrun") is None or shutil.which("xcode-select") is None:
        return None
    try:  # without developer tools, running xcrun opens an install dialog: ask xcode-select first (it never does)
        if subprocess.run(["xcode-select", "-p"], capture_output=True, text=True, check=False, timeout=30).returncode:
            return None
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = []
    for tool in ("metal", "metallib"):
        try:
            p = subprocess.run(["xcrun", "-sdk", "macosx", "-find", tool], capture_output=True, text=True, check=False, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if p.returncode != 0 or not p.stdout.strip():
            return None
        found.append(p.stdout.strip())
    return found[0], found[1]
