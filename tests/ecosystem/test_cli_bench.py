"""`devicekit bench`: the table for one device, JSON, the plain progress fallback without rich, the rich bar, the
PNG plot, a clear error when matplotlib is missing, and an unknown device."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from devicekit import cli
from devicekit.bench.definition import BenchResult
from devicekit.bench.report import Progress, format_table

BLOCK = ("import sys; sys.modules.update(dict.fromkeys({mod!r}.split())); from devicekit.cli import main; "
         "sys.exit(main({argv!r}))")  # the modules named in `mod` cannot be imported


def _table(stdout: str) -> tuple[list[str], list[str]]:
    """(the machine line and the header, the kernel rows) of a bench table."""
    lines = stdout.splitlines()
    assert lines[0].startswith("machine: ") and " CPUs, load " in lines[0], lines[0]
    rows = [ln for ln in lines[3:] if ln and ln.split()[0] in ("fma", "sum", "softmax", "matmul", "gather",
                                                                 "gather-unchecked")]
    return lines[:2], rows


def test_bench_python_quick_table(run_py):
    p = run_py("-m", "devicekit.cli", "bench", "--device", "PYTHON", "--quick", "--no-numba")
    assert p.returncode == 0, p.stderr
    (machine, head), rows = _table(p.stdout)
    assert "openblas" in machine or "BLAS threads unknown" in machine or "threads" in machine, machine
    assert head.split() == ["kernel", "size", "device", "time", "rate", "vs", "numpy", "check"]
    assert [r.split()[0] for r in rows] == ["fma", "sum", "softmax", "matmul", "gather", "gather-unchecked"]
    for r in rows:
        assert re.search(r"PYTHON\s+[\d.]+ m?s\s+[\d.]+ (GB/s|GFLOP/s)\s+[\d.]+x\s+ok$", r), r
    assert "[4/6] matmul 32x32x32 on PYTHON" in p.stderr  # plain progress: stderr is not a terminal
    assert "no numba column: --no-numba" in p.stdout


def test_bench_numba_column(run_py):
    """Parallel numba on the same data in the same process, as a column; absent with the reason without numba."""
    pytest.importorskip("numba")
    p = run_py("-m", "devicekit.cli", "bench", "--device", "CPU", "--quick", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    rows = {r["kernel"]: r for r in json.loads(p.stdout)}
    assert all(rows[k]["numba_seconds"] > 0 and rows[k]["vs_numba"] > 0 for k in ("fma", "sum", "softmax", "matmul"))
    # without numba: test_bench_without_rich_or_numba_falls_back_to_plain


def test_a_busy_machine_is_flagged():
    from devicekit.bench import machine as bench_machine
    assert bench_machine.busy_warning(0.3, 2) is None
    warning = bench_machine.busy_warning(3.5, 2)
    assert warning.startswith("warning: the machine is busy (load 3.50 on 2 CPUs)") and "vs numpy" in warning


def test_bench_json_and_every_device(run_py):
    p = run_py("-m", "devicekit.cli", "bench", "--quick", "--json", "--no-numba")  # the installed devices only
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    rows = json.loads(p.stdout)
    listed = run_py("-m", "devicekit.cli", "devices", "--json")
    listed = json.loads(listed.stdout)
    available = {d["spec"] for d in listed if d["available"]}
    assert {"CPU", "PYTHON", "ACME"} <= available
    examples = {d["spec"] for d in listed if d["example"]}
    assert examples == {"ACME", "ACME:1"}  # the example vendor device is listed as one, and not benched by default
    assert {r["device"] for r in rows} == available - examples
    assert all(r["ok"] and r["seconds"] > 0 and r["rate"] > 0 for r in rows), rows


def test_bench_without_rich_or_numba_falls_back_to_plain(run_py):
    p = run_py("-c", BLOCK.format(mod="rich numba", argv=["bench", "--device", "CPU", "--quick"]))
    assert p.returncode == 0, p.stderr
    assert "[1/6] fma n=16384 on CPU" in p.stderr
    (_, head), rows = _table(p.stdout)
    assert "matmul" in p.stdout and rows
    assert "numba" not in head and "no numba column: numba is not installed" in p.stdout


def test_rich_progress_bar_when_rich_is_installed():
    pytest.importorskip("rich")
    bar = Progress(3, plain=False)
    assert bar._rich is not None
    for step in ("a", "b", "c"):
        bar(step)
    bar.close()
    assert bar.done == 3


def test_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "bench.png"
    assert cli.main(["bench", "--device", "PYTHON", "--quick", "--no-numba", "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot written to {out}" in capsys.readouterr().out


def test_plot_without_matplotlib_is_a_clear_error(run_py, tmp_path):
    out = tmp_path / "bench.png"
    p = run_py("-c", BLOCK.format(mod="matplotlib", argv=["bench", "--quick", "--plot", str(out)]))
    assert p.returncode == 1
    assert "needs matplotlib: pip install 'devicekit[bench]'" in p.stderr
    assert not out.exists() and "fma" not in p.stdout  # refused before benchmarking


def test_bench_unknown_device(capsys):
    assert cli.main(["bench", "--device", "NOSUCH", "--quick"]) == 1
    err = capsys.readouterr().err
    assert "no device 'NOSUCH'" in err and "Available:" in err


def test_a_failing_device_is_an_error_row_not_a_crash(monkeypatch):
    from devicekit.bench import definition as benchmarking

    def broken(case, dev, inputs):
        raise RuntimeError("device fell over")

    monkeypatch.setattr(benchmarking, "_device_time", broken)
    rows = benchmarking.run_bench(["PYTHON"], quick=True, numba=False)  # numba's compiles: 6 s of nothing here
    assert len(rows) == 6 and not any(r.ok for r in rows)
    assert all(r.error == "RuntimeError: device fell over" for r in rows)


def test_table_shows_errors_and_mismatches():
    rows = [BenchResult("fma", "n=4", "X", None, 1e-3, 64, "GB/s", False, "CompileError: boom"),
            BenchResult("fma", "n=4", "Y", 2e-3, 1e-3, 64, "GB/s", False, "max abs error 1 against numpy")]
    text = format_table(rows)
    assert "ERROR CompileError: boom" in text
    assert "0.50x" in text and "MISMATCH max abs error 1" in text


def test_wrong_results_show_as_mismatch(run_py):
    from .conftest import FIXTURES
    code = ("import sys; import devicekit as dk, dkfix_buggy.plugin as p; dk.register_plugin(p, 'buggy'); "
            "from devicekit.cli import main; sys.exit(main(['bench', '--device', 'BUGGY', '--quick', '--no-numba']))")
    p = run_py("-c", code, env={"PYTHONPATH": str(FIXTURES)})
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stdout.count("MISMATCH max abs error") == 6, p.stdout


def test_bench_script_rows_come_from_the_shared_definition():
    """bench/run.py's rows (and the bars it checks them against) are the titles of devicekit.bench.definition's cases
    at the "large" profile: one definition for the script and `devicekit bench`."""
    import importlib.util

    from devicekit.bench.definition import cases

    from .conftest import ROOT
    spec = importlib.util.spec_from_file_location("dk_bench_run", ROOT / "bench" / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    from devicekit.bench import more_cases
    large = {c.name: c for c in (*cases(profile="large", proposals=True), *more_cases.cases("large"))}
    assert set(run.ROWS.values()) <= set(large)
    assert set(run.BARS) <= {c.title for c in large.values()}
    assert large["fma"].title == "fused a*b+c 16M f32" and large["matmul-packed"].title.startswith("matmul 1024 f32")
    assert [c.name for c in cases(quick=True)] == ["fma", "sum", "softmax", "matmul", "gather", "gather-unchecked"]


def test_every_case_is_right_on_cpu_and_a_wrong_answer_is_caught():
    """The quick profile with the proposals (two-stage sum, pack + matmul) matches numpy on the CPU device; the
    same check flags an off-by-one answer."""
    import devicekit as dk
    from devicekit.bench.definition import _device_time, cases, time_numpy

    cpu_device = dk.device("CPU")
    for case in cases(quick=True, proposals=True):
        inputs = case.inputs()
        _, want = time_numpy(case, inputs, reps=1)
        seconds, got = _device_time(case, cpu_device, inputs, reps=1)
        assert seconds > 0 and case.check(got, want) == "", case.name
        wrong = np.array(got, np.float64).reshape(-1)
        wrong[-1] += 1.0
        assert "max abs error" in case.check(wrong, want), case.name


def test_bench_on_an_unavailable_device_says_why_once(run_py):
    import devicekit as dk
    cuda = [d for d in dk.devices() if d.kind == "CUDA"]
    if not cuda or cuda[0].available:
        pytest.skip("needs the CUDA plugin installed on a machine without a CUDA driver")
    p = run_py("-m", "devicekit.cli", "bench", "--device", "CUDA", "--quick")
    assert p.returncode == 1
    lines = (p.stdout + p.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("devicekit bench: CUDA is not available here: no CUDA driver"), lines
    assert len(lines[0]) < 200 and "`devicekit info`" in lines[0]


def test_bench_runs_an_example_device_when_asked(run_py):
    p = run_py("-m", "devicekit.cli", "bench", "--device", "ACME", "--quick", "--json", "--no-numba")
    assert p.returncode == 0, p.stderr[-2000:]
    assert {r["device"] for r in json.loads(p.stdout)} == {"ACME"}


@pytest.mark.parametrize("name, problem", [("missing/dir/b.png", "does not exist"), ("b.txt", "cannot write .txt"),
                                           (".", "is a directory")])
def test_plot_checks_its_path_before_benchmarking(tmp_path, capsys, name, problem):
    pytest.importorskip("matplotlib")
    target = str(tmp_path / name) if name != "." else str(tmp_path)
    if name == ".":
        target += "/sub.png"
        (tmp_path / "sub.png").mkdir()
    assert cli.main(["bench", "--device", "PYTHON", "--quick", "--plot", target]) == 1
    err = capsys.readouterr()
    assert f"devicekit bench --plot: {target!r}" in err.err and problem in err.err
    assert "[1/" not in err.err  # nothing was benchmarked


def test_plot_legend_covers_no_bar(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    from devicekit.bench.report import plot
    from matplotlib import pyplot as plt

    rows = [BenchResult(k, "n=4", dev, 1e-3, t, 64, "GB/s", True) for k in ("fma", "sum", "softmax")
            for dev, t in (("CPU", 5e-3), ("ACME", 4e-3), ("PYTHON", 1e-1))]
    made = []
    orig = plt.close
    plt.close = lambda fig=None: made.append(fig)  # keep the figure to measure it
    try:
        plot(rows, str(tmp_path / "b.png"))
    finally:
        plt.close = orig
    (fig,) = made
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    assert all(not legend.overlaps(bar.get_window_extent()) for bar in ax.patches)
    plt.close(fig)


def test_matmul_layouts_script_times_both_layouts_and_checks_them():
    """bench/matmul_layouts.py's row at a small ragged size: both layouts ran, were checked against numpy (the row
    asserts it), and their ratios are printed."""
    import importlib.util

    import devicekit as dk

    from .conftest import ROOT
    spec = importlib.util.spec_from_file_location("dk_bench_layouts", ROOT / "bench" / "matmul_layouts.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    row = mod.one_size(dk.device("CPU"), 40)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "40" and len(cells) == 8, row  # size, numpy, then default, pack + panels, panels: time, ratio
    assert all(re.fullmatch(r"\d+\.\d\dx", c) and float(c[:-1]) > 0 for c in (cells[3], cells[5], cells[7])), row
