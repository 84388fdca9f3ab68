"""A hostile-input corpus for `program_from_source`, run on every language that compiles here (C on the CPU, CUDA
through NVRTC, OpenCL on PoCL): each entry is refused with a devicekit error (a CompileError naming what is wrong)
or compiles, never a raw Python exception (UnicodeEncodeError, TypeError, OSError) or a warm-cache answer for a file
that is gone. A new class of hostile source gets its row here."""

from __future__ import annotations

import devicekit as dk
import pytest
from devicekit.errors import DeviceKitError

KERNELS = {  # {inc}: lines put before the kernel; {body}: its statement
    "c": "{inc}\nvoid k(float *x) {{ {body} }}\n",
    "cuda": "{inc}\n__global__ void k(float *x) {{ {body} }}\n",
    "opencl": "{inc}\n__kernel void k(__global float *x) {{ {body} }}\n",
}
TARGETS = {"c": "CPU", "cuda": "CUDA", "opencl": "OPENCL"}
OPTIONS = {"c": {}, "cuda": {}, "opencl": {"global_size": (1,), "local_size": (1,)}}

# (id, lines before the kernel, body, program_from_source options, files to create {name: bytes}, refused?)
CORPUS = [
    ("surrogate-in-comment", "// caf\udce9", "x[0] = 1;", {}, {}, True),
    ("surrogate-in-body", "", "x[0] = 1; /* \udcff */", {}, {}, True),
    ("nul-byte", "", "x[0] = 1; // \x00", {}, {}, None),
    ("include-csv", '#include "data.csv"', "x[0] = 1;", {}, {"data.csv": b'name,value\n1,2\n"q {",3\n'}, True),
    ("include-binary", '#include "blob.bin"', "x[0] = 1;", {}, {"blob.bin": bytes(range(256)) * 4}, True),
    ("include-missing", '#include "nowhere.h"', "x[0] = 1;", {}, {}, True),
    ("include-a-directory", '#include "sub"', "x[0] = 1;", {}, {"sub/x.h": b""}, True),
    ("include-cycle", '#include "cyc.h"', "x[0] = 1;", {}, {"cyc.h": b'#include "cyc.h"\n'}, True),
    ("include-dirs-missing", "", "x[0] = 1;", {"include_dirs": ["nowhere"]}, {}, True),
    ("include-dirs-a-file", "", "x[0] = 1;", {"include_dirs": ["f.h"]}, {"f.h": b""}, True),
    ("include-dirs-nul", "", "x[0] = 1;", {"include_dirs": ["a\x00b"]}, {}, True),
    ("include-dirs-surrogate", "", "x[0] = 1;", {"include_dirs": ["\udcff"]}, {}, True),
    ("include-dirs-int", "", "x[0] = 1;", {"include_dirs": [3]}, {}, True),
    ("defines-bad-name", "", "x[0] = 1;", {"defines": {"1X": 1}}, {}, True),
    ("defines-newline-value", "", "x[0] = 1;", {"defines": {"X": "1\n#error x"}}, {}, True),
    ("defines-a-string", "", "x[0] = 1;", {"defines": "X=1"}, {}, True),
    ("defines-non-str-key", "", "x[0] = 1;", {"defines": {3: 1}}, {}, True),
    ("defines-ok", "", "x[0] = V;", {"defines": {"V": 2}}, {}, False),
    ("include-dirs-ok", "#include <ok.h>", "x[0] = V;", {"include_dirs": ["inc"]}, {"inc/ok.h": b"#define V 3\n"},
     False),
]


@pytest.fixture(scope="module", params=sorted(KERNELS))
def lang_target(request):
    lang = request.param
    try:
        t = dk.device(TARGETS[lang]) if lang == "opencl" else dk.target(TARGETS[lang])
    except Exception as e:  # noqa: BLE001 - a kind not available here
        pytest.skip(f"{TARGETS[lang]} is not available here: {e}")
    return lang, t


@pytest.mark.parametrize("case", CORPUS, ids=[c[0] for c in CORPUS])
def test_every_hostile_source_is_refused_by_name_or_compiles(lang_target, case, tmp_path, monkeypatch):
    lang, target = lang_target
    _, inc, body, options, files, refused = case
    monkeypatch.chdir(tmp_path)
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    src = KERNELS[lang].format(inc=inc, body=body)
    try:
        target.program_from_source(src, "k", **OPTIONS[lang], **options)
    except DeviceKitError as e:
        assert refused is not False, f"{lang}: a good source was refused: {e}"
        assert str(e).strip(), "an error without a message"
        return
    assert refused is not True, f"{lang}: {case[0]} compiled"
