"""The llvm pair's loop passes (devicekit_cpu/loop_passes.py) declare the variables they read in one place,
`SETTINGS`, and the renderer's memo salt is derived from it: a pass that starts reading a new variable without
declaring it, or a salt that drops one, is caught here (a stale memo would hand back the other setting's source)."""

from __future__ import annotations

import ast
import inspect

import pytest


def _names_read(module) -> set[str]:
    """Every literal name a module passes to `settings.get(...)`."""
    out = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.add(node.args[0].value)
    return out


def test_the_passes_declare_every_variable_they_read():
    from devicekit_cpu import llvm_renderer, loop_passes
    assert _names_read(loop_passes) <= set(loop_passes.SETTINGS)
    assert "DEVICEKIT_CPU_SPLIT" in loop_passes.SETTINGS
    assert not _names_read(llvm_renderer), "the renderer reads its settings through loop_passes.SETTINGS"


@pytest.mark.parametrize("name", ["DEVICEKIT_CPU_SPLIT"])
def test_the_memo_salt_follows_each_declared_variable(monkeypatch, name):
    from devicekit_cpu.llvm_renderer import LLVMRenderer
    from devicekit_cpu.loop_passes import SETTINGS
    assert name in SETTINGS
    r = LLVMRenderer()
    monkeypatch.delenv(name, raising=False)
    before = r.memo_salt()
    assert before.startswith("0 stream=")  # the spelling the memo keys of earlier releases used
    monkeypatch.setenv(name, "2")
    assert r.memo_salt() != before
