"""bench/run.py --update-readme keeps one table per CPU model: a model's rerun replaces its own table only, a new
model gets a section of its own where the README marks the next one."""

from __future__ import annotations

import os
import runpy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_one_table_per_cpu_model(tmp_path, monkeypatch):
    run = runpy.run_path(os.path.join(ROOT, "bench", "run.py"), run_name="bench_run")  # defines, does not run
    readme = tmp_path / "README.md"
    readme.write_text(f"# bench\n\n## Results\n\n{run['NEW_MODEL']}\n\n## Notes\n")
    update = run["update_readme"]
    update.__globals__["README"] = str(readme)
    update("Zen 4 model A", "| table A1 |")
    update("Xeon model B", "| table B1 |")
    update("Zen 4 model A", "| table A2 |")
    text = readme.read_text()
    assert "| table A1 |" not in text and text.count("| table A2 |") == 1 and text.count("| table B1 |") == 1
    assert text.index("### Zen 4 model A") < text.index("### Xeon model B") < text.index(run["NEW_MODEL"]) \
        < text.index("## Notes")
    assert text.count("<!-- bench:begin Zen 4 model A -->") == 1 and "_Last run: " in text
