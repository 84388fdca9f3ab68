"""Finding ACME's toolchain (the host C compiler). Kept apart from the compiler so the probe stays import-light."""

from __future__ import annotations

import os
import shutil

from . import settings


def find_cc() -> str | None:
    """$ACME_CC, else $CC, else clang, cc, gcc: the first found on PATH, or None."""
    for cand in (settings.get("ACME_CC"), os.environ.get("CC"), "clang", "cc", "gcc"):
        if cand and (path := shutil.which(cand)):
            return path
    return None
