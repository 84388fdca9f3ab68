"""Finding ACME's toolchain (the host C compiler). Kept apart from the compiler so the probe stays import-light."""

from __future__ import annotations

import os
import shutil

from devicekit.plugin import Availability

from . import settings


def find_cc() -> str | None:
    """$ACME_CC, else $CC, else clang, cc, gcc: the first found on PATH, or None."""
    for cand in (settings.get("ACME_CC"), os.environ.get("CC"), "clang", "cc", "gcc"):
        if cand and (path := shutil.which(cand)):
            return path
    return None


def probe() -> Availability:
    """Cheap and never raising: can ACME run here? It needs a host C compiler (its 'toolchain')."""
    if find_cc() is None:
        return Availability.no("no host C compiler for ACME (set ACME_CC or CC, or install clang/gcc)")
    return Availability.yes()
