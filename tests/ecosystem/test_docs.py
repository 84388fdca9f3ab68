"""Meta-tests: every hook spec is documented for plugin authors, every CLI command in docs/cli.md, and the docs the
README links exist."""

from __future__ import annotations

import re

from devicekit import hookspecs
from devicekit.cli import build_parser

from .conftest import ROOT


def _hooks() -> list[str]:
    return sorted(n for n in dir(hookspecs) if n.startswith("devicekit_") and callable(getattr(hookspecs, n)))


def test_every_hook_is_documented():
    hooks = _hooks()
    assert len(hooks) == 4, hooks
    for doc in ("docs/plugins.md", "docs/writing-a-plugin.md"):
        text = (ROOT / doc).read_text()
        missing = [h for h in hooks if h not in text]
        assert not missing, f"{doc} does not mention {missing}"


def test_every_cli_command_is_documented():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    text = (ROOT / "docs/cli.md").read_text()
    for name in sub.choices:
        assert f"devicekit {name}" in text, f"docs/cli.md does not show `devicekit {name}`"


def test_readme_links_resolve():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(((?:docs|examples)/[^)#]+)\)", readme)
    assert {"docs/writing-a-plugin.md", "docs/plugins.md", "docs/cli.md", "docs/conformance.md"} <= set(links)
    for link in links:
        assert (ROOT / link).exists(), link


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```(?:bash|sh|console)\n(.*?)^```", text, re.DOTALL | re.MULTILINE)


def test_ci_runs_the_readmes_test_command_and_the_main_job_setup_is_lean():
    readme = (ROOT / "README.md").read_text()
    main_job, tests = (b.strip() for b in _bash_blocks(readme)[:2])
    assert main_job.startswith("bash scripts/setup.sh && "), main_job
    assert tests.startswith("bash scripts/dev-setup.sh && "), tests
    assert tests in (ROOT / ".ci" / "run").read_text()
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "-e . -e plugins/cpu" in setup and "vendor_plugin" not in setup.split("set -euo")[1]


# commands a reader copies: bare, they need the venv active (pip/python of the system otherwise)
_BARE = re.compile(r"^(?:\$ )?(?:[A-Z_]+=\S+ )*(python3?|pytest|devicekit|pip)\b")
_ALLOWED_ABSOLUTE = ("/dev/", "/proc/", "/usr/", "/opt/cuda", "/tmp", "/home/me/", "/etc/", "/bin/sh")


def _docs() -> list:
    pending = {"docs/writing-a-plugin.md"}  # another engineer's tutorial, converted separately
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("plugins/*/README.md")),
            ROOT / "bench" / "README.md", ROOT / "examples" / "vendor_plugin" / "README.md"]
    return [d for d in docs if d.relative_to(ROOT).as_posix() not in pending]


def test_doc_commands_work_after_the_readmes_setup():
    """Every shell command in a doc spells .venv/bin/ (or the doc says to activate the venv first)."""
    bad = []
    for doc in _docs():
        text = doc.read_text()
        if ". .venv/bin/activate" in text:
            continue
        for block in _bash_blocks(text):
            bad += [f"{doc.relative_to(ROOT)}: {line}" for line in block.splitlines() if _BARE.match(line.strip())]
    assert not bad, "bare commands (spell .venv/bin/ or say to activate):\n" + "\n".join(bad)


def test_docs_name_no_path_outside_the_repository():
    """Relative links resolve inside the repository; absolute paths are only well-known system locations."""
    bad = []
    for doc in _docs():
        text = doc.read_text()
        for link in re.findall(r"\]\(([^)#\s]+)", text):
            if "://" in link or link.startswith("mailto:"):
                continue
            target = (doc.parent / link).resolve()
            if not target.is_relative_to(ROOT) or not target.exists():
                bad.append(f"{doc.relative_to(ROOT)}: link {link}")
        for path in re.findall(r"(?:^|[\s`(\"'])(/[A-Za-z][\w.+-]*(?:/[\w.+-]*)*)", text):
            if not path.startswith(_ALLOWED_ABSOLUTE):
                bad.append(f"{doc.relative_to(ROOT)}: {path}")
    assert not bad, "\n".join(bad)
