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
