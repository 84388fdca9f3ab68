"""A hostile-input corpus for public entries that take user values: `program_from_source(sizes=)` expressions
(at parse and at launch) and stored `dk.search` choices. Every entry of the corpus must end in a devicekit error
naming what was wrong, or a right result: never a raw ZeroDivisionError, RecursionError, ValueError from int(),
or a stored value that breaks every later call. Settings have their own machine (test_hostile_settings.py)."""

from __future__ import annotations

import devicekit as dk
import pytest
from devicekit import tile_search as search
from devicekit.errors import CompileError, DeviceKitError, LaunchError
from devicekit.ir import dtypes

SRC = "void k(float *x, int n, int m) { for (int i = 0; i < n; i++) x[i] = 1.0f; }"

# (sizes["x"], what the error must contain; None: it compiles and the launch with n=8, m=4 runs or is refused by
# a devicekit error)
SIZE_CORPUS = [
    ("8 // 0", "divides by zero"), ("n // 0", "divides by zero"), ("n % 0", "divides by zero"),
    ("n // (4 - 4)", "divides by zero"), ("n % (2 * 0)", "divides by zero"),
    ("9" * 5000, "cannot parse"), ("(" * 10_000 + "1" + ")" * 10_000, "cannot parse"),
    ("+".join(["n"] * 100_000), "cannot parse"), ("n ** 2", "unsupported expression"),
    ("__import__('os').getpid()", "unsupported expression"), ("n if n else 1", "unsupported expression"),
    ("-5", "unsupported expression"), ("1.5", "unsupported expression"), ("é", "is not an integer parameter"),
    ("\udcff", "cannot parse"), ("", "cannot parse"), ("n +", "cannot parse"), ("x", "is not an integer parameter"),
    (True, "expected an int or an expression string"), (1.5, "expected an int or an expression string"),
    (None, "expected an int or an expression string"), ("n", None), ("n * m", None), (10 ** 23, None),
    ("99999999999 * 99999999999 * 99999999999", None), ("n - 100", None), (-1, None),
]


@pytest.fixture(scope="module")
def cpu():
    return dk.device("CPU")


def _launch(prog, dev, n: int = 8, m: int = 4) -> None:
    b = dk.Buffer(dev, 64, dtypes.float32)
    prog.execute([b], [n, m], wait=True)


@pytest.mark.parametrize("expr, expected", SIZE_CORPUS, ids=lambda v: repr(v)[:24])
def test_every_hostile_size_expression_is_refused_by_name_or_runs(cpu, expr, expected):
    try:
        prog = cpu.program_from_source(SRC, "k", sizes={"x": expr})
    except CompileError as e:
        assert expected is not None, f"refused: {e}"
        assert "sizes['x']" in str(e) and expected in str(e)
        assert len(str(e)) < 1000, "the message repeats a huge expression"
        return
    assert expected is None, f"{expr!r} compiled; expected an error with {expected!r}"
    try:
        _launch(prog, cpu)
    except DeviceKitError as e:
        assert "'x'" in str(e), f"a launch error that does not name the param: {e}"
    except ValueError as e:  # the runtime's "param 'x' needs N elements" (a ValueError by design)
        assert "'x'" in str(e), f"a launch error that does not name the param: {e}"


def test_a_divisor_that_is_zero_at_launch_is_a_launch_error_naming_the_expression(cpu):
    prog = cpu.program_from_source(SRC, "k", sizes={"x": "n // (m - 4)"})
    _launch(prog, cpu, n=8, m=5)  # 8 // 1 = 8 elements: fine
    with pytest.raises(LaunchError, match=r"size expression n // \(m - 4\) divides by zero for n=8, m=4"):
        _launch(prog, cpu, n=8, m=4)
    with pytest.raises(LaunchError, match="divides by zero"):
        cpu.program_from_source(SRC, "k", sizes={"x": "n % (m - 4)"}).execute(
            [dk.Buffer(cpu, 64, dtypes.float32)], [8, 4], wait=True)


# stored dk.search choices that verify (valid MAC) but are not ones this version makes
CHOICE_CORPUS = [b"[true, 4]", b"[1.0, 4]", b"[4, true]", b"[2, 4.0]", b"[false, 1]", b"[99, 3]", b"[-1, 4]",
                 b"[[2], 4]", b"[2, 4, 8]", b"[4]", b"null", b"{}", b'"fastest"', b'["heuristic"]', b"1e999",
                 b"[" * 100_000, b"\xff\xfe", b"", b"[1" + b"0" * 5000 + b", 4]"]


@pytest.mark.parametrize("stored", CHOICE_CORPUS, ids=lambda v: repr(v)[:20])
def test_every_hostile_stored_search_choice_is_a_miss(monkeypatch, tmp_path, stored):
    """`_recall` treats it as a miss (the search runs again and replaces it); without the search, directly."""
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(search, "_CHOSEN", search.LRU(search.CHOSEN_MEMO_SIZE))
    cpu = dk.device("CPU")
    key = search._key(type("K", (), {"key": b"hostile"})(), cpu, cpu.compiler, [24])
    search._store(cpu.compiler).put(search._cache_key(key), stored, replace=True)
    assert search._recall(key, cpu.compiler) is None
    assert key not in search._CHOSEN


@pytest.mark.parametrize("good", [b'"heuristic"', b"[1, 1]", b"[16, 16]", b"[4, 8]"])
def test_good_stored_choices_are_reused(monkeypatch, tmp_path, good):
    import json
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(search, "_CHOSEN", search.LRU(search.CHOSEN_MEMO_SIZE))
    cpu = dk.device("CPU")
    key = search._key(type("K", (), {"key": b"good"})(), cpu, cpu.compiler, [24])
    search._store(cpu.compiler).put(search._cache_key(key), good, replace=True)
    assert search._recall(key, cpu.compiler) == json.loads(good)


# device names at dk.device: a devicekit error (or the ValueError/TypeError of a malformed name) naming it, short
NAME_CORPUS = ["", " ", "CPU:-1", "CPU:" + "9" * 30, "CPU:" + "9" * 5000, "é", "\udcff", "x" * 100_000,
               "x" * 100_000 + "!", "CPU:١", "CPU:²", "CPU::0", "CPU:0x1", "../CPU", "CPUU", "GPU", "gpu:3", 5, b"CPU",
               1.5, "CPU\x00", "CPU:1e3"]


@pytest.mark.parametrize("name", NAME_CORPUS, ids=lambda v: repr(v)[:20])
def test_every_hostile_device_name_is_refused_in_a_short_message(name):
    with pytest.raises((DeviceKitError, ValueError, TypeError)) as ei:
        dk.device(name)
    msg = str(ei.value)
    assert len(msg) < 1500, f"{len(msg)} characters"
    if isinstance(name, str) and name.strip():
        assert repr(name)[1:20].upper() in msg.upper() or "characters)" in msg or "device spec" in msg


def test_a_non_ascii_digit_is_no_device_index():
    """'CPU:١' (ARABIC-INDIC DIGIT ONE) was read as CPU:1 by the spec's \\d."""
    with pytest.raises(ValueError, match="invalid device spec"):
        dk.device("CPU:١")


def test_size_expressions_of_one_text_share_code_but_each_names_its_own_vars():
    """compile_sym compiles `lambda v: ...` once per text (symfn._lambda_code); two expressions that read the same
    positions (n // (m - 4) and k // (j - 4)) share it, yet each function's division check names its own
    expression and values (its own globals), and computes from the values it is given."""
    from devicekit import ir
    from devicekit.ir import symfn
    kb = ir.KernelBuilder("sym_share")
    n, m, k, j = (kb.var(x, 0, 100) for x in "nmkj")
    f = symfn.compile_sym(n // (m - 4), ("n", "m"))
    before = symfn._lambda_code.cache_info().hits
    g = symfn.compile_sym(k // (j - 4), ("k", "j"))
    assert symfn._lambda_code.cache_info().hits == before + 1
    assert f((8, 5)) == 8 and g((9, 7)) == 3
    with pytest.raises(LaunchError, match=r"size expression k // \(j - 4\) divides by zero for k=9, j=4"):
        g((9, 4))
    with pytest.raises(LaunchError, match=r"size expression n // \(m - 4\) divides by zero for n=8, m=4"):
        f((8, 4))
