"""Hand-written OpenCL C and its headers, on PoCL (issue: the compile cache keyed a source by its text alone, so an
edited header kept serving the old binary): the reader's inclusion list is the entry's dependency manifest, and
include_dirs= / defines= reach the reader, the driver and the key alike."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit.errors import CompileError

SRC = '#include "scale.h"\n__kernel void k(__global real *x) { x[get_global_id(0)] = SCALE; }\n'


def _run(dev, src=SRC, **opts):
    prog = dev.program_from_source(src, "k", global_size=(4,), local_size=(1,), **opts)
    return dk.run(prog, x=np.zeros(4, np.float32))["x"].tolist()


def test_an_edited_header_gives_the_new_answer_and_a_removed_one_an_error(cl_device, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scale.h").write_text("typedef float real;\n#define SCALE 2\n")
    assert _run(cl_device) == [2.0] * 4
    (tmp_path / "scale.h").write_text("typedef float real;\n#define SCALE 3\n")
    assert _run(cl_device) == [3.0] * 4  # the old key served 2
    (tmp_path / "scale.h").unlink()
    with pytest.raises(CompileError, match="scale.h"):
        _run(cl_device)


def test_include_dirs_and_defines(cl_device, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "scale.h").write_text("typedef float real;\n#define SCALE (5 + EXTRA)\n")
    src = SRC.replace('"scale.h"', "<scale.h>")
    assert _run(cl_device, src, include_dirs=["inc"], defines={"EXTRA": 1}) == [6.0] * 4
    assert _run(cl_device, src, include_dirs=["inc"], defines={"EXTRA": 2}) == [7.0] * 4
