"""The CPU renderers' memo is the core's lowered-kernel cache (compile/lowered.py), for `Device.compile` and the seed's
`dev.renderer.render(k)` alike: a setting that changes lowering changes the rendered source without anyone adding it
to a key by hand, and a kernel is lowered once. The loader's memo is devicekit.lru.LRU."""

from __future__ import annotations

import devicekit as dk
import pytest
from devicekit import kernels, settings
from devicekit.compile import lowered
from devicekit.compile.cache import reset_default_cache
from devicekit.lru import LRU
from devicekit_cpu import memo
from devicekit_cpu.llvm_renderer import LLVMRenderer

KNOB = "DEVICEKIT_CPU_TEST_LOWERING_KNOB"


def _declare_knob(monkeypatch) -> None:
    """Declared for the test only: a declaration at import stayed in the process's registry, and test_settings'
    check that docs/cli.md lists every declared variable then failed on it."""
    monkeypatch.setitem(settings._settings, KNOB, None)  # undone at teardown: the name is undeclared again
    settings.register(KNOB, settings.text, default="", owner="devicekit-cpu test_one_memo",
                      doc="a test plugin's setting that its renderer reads while lowering")


class KnobRenderer(LLVMRenderer):
    """An LLVM renderer whose launch facts depend on a setting it declared (as a plugin's own knob would)."""

    def meta(self, lk) -> tuple:
        return (*super().meta(lk), ("knob", settings.get(KNOB)))


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    _declare_knob(monkeypatch)
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(tmp_path / "cache"))
    reset_default_cache()
    lowered.clear_memory()
    yield
    lowered.clear_memory()
    reset_default_cache()


def test_a_plugin_setting_reaches_the_seed_render_without_a_hand_made_key(fresh, monkeypatch):
    r = KnobRenderer()
    k = kernels.elementwise("a * b + c", name="memo_knob")
    monkeypatch.setenv(KNOB, "one")
    assert r.render(k).get_meta("knob") == "one"
    monkeypatch.setenv(KNOB, "two")
    assert r.render(k).get_meta("knob") == "two"  # the old memo's key (kernel, name, salt, DEVICEKIT_OPT) said "one"
    monkeypatch.setenv(KNOB, "one")
    assert r.render(k).get_meta("knob") == "one"


def test_the_seed_render_and_device_compile_share_one_lowering(fresh, monkeypatch):
    import devicekit.ir.linearize as lin
    calls, real = [], lin.lower
    monkeypatch.setattr(lin, "lower", lambda kernel, caps: calls.append(kernel.name) or real(kernel, caps))
    cpu = dk.device("CPU")
    renderer = cpu.pair("llvm")[0]
    assert isinstance(renderer, memo.MemoRender)
    k = kernels.elementwise("a * b - c * 0.5", name="memo_shared")
    seed = renderer.render(k)
    assert renderer.render(k).src == seed.src and calls == ["memo_shared"]
    lowered.clear_memory()  # a new process's memory (and any memo of the renderer's own, as the old one was)
    if (own := getattr(type(renderer), "_render_memo", None)) is not None:
        own._d.clear()
    prog = cpu.compile(k, pair="llvm")  # the seed's render stored the lowered kernel on disk: no lowering again
    assert calls == ["memo_shared"] and prog.spec.src == seed.src


def test_the_loader_memo_is_the_core_lru():
    assert isinstance(memo._loaded, LRU) and memo.LRU is LRU
    assert not hasattr(memo.MemoRender, "_render_memo")  # no second memo of rendered specs
