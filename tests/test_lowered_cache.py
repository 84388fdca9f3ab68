"""The lowered-kernel cache (compile/lowered.py): every input that changes a rendered source changes its key, a
cached kernel is never lowered again (in this process or a new one), and a damaged, forged or hostile entry is
refused and the kernel lowered again. Plus the one LRU helper the memos share (devicekit/lru.py)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap

import devicekit as dk
import pytest
from devicekit import ir, settings
from devicekit.compile import lowered
from devicekit.compile.cache import default_cache, encode_entry, reset_default_cache
from devicekit.ir import dtypes
from devicekit.lru import LRU
from devicekit.render.renderer import Renderer


def fma(name: str = "lc_fma", dt=dtypes.float32, hi: int = 1 << 20, sub: bool = False) -> ir.Kernel:
    k = ir.KernelBuilder(name)
    n = k.var("n", 1, hi)
    a, b, c = (k.param(x, dt, n) for x in "abc")
    out = k.param("out", dt, n, writable=True)
    i = k.range(n, "global")
    out[i] = a[i] * b[i] - c[i] if sub else a[i] * b[i] + c[i]
    return k.build()


def matmul(name: str = "lc_mm", s: int = 16, optimize: bool = True, checked: bool = True) -> ir.Kernel:
    """A naive matmul (one output per lane, a plain reduce): the optimizer tiles it."""
    k = ir.KernelBuilder(name)
    a, b = k.param("a", dtypes.float32, shape=(s, s)), k.param("b", dtypes.float32, shape=(s, s))
    c = k.param("c", dtypes.float32, shape=(s, s), writable=True)
    i, j, r = k.range(s, "global"), k.range(s, "global"), k.range(s, "reduce")
    c[i, j] = (a[i, r] * b[r, j]).sum(r)
    return k.build(optimize=optimize, checked=checked)


def gather(checked: bool = True) -> ir.Kernel:
    """out[i] = x[idx[i]]: a data-dependent index, bounds-checked at run time unless `checked` is False."""
    k = ir.KernelBuilder("lc_gather")
    n, m = k.var("n", 1, 1 << 20), k.var("m", 1, 1 << 20)
    x, idx = k.param("x", dtypes.float32, m), k.param("idx", dtypes.int64, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[idx[i]]
    return k.build(checked=checked)


def plain_render(renderer, kernel, name=None) -> tuple:
    """What a render gives, without any memo or cache: the source and the launch facts (a var's bounds are
    checked at launch even where the source does not change)."""
    spec = Renderer.render(renderer, kernel, name)
    return facts(spec)


def facts(spec) -> tuple:
    return (spec.src, spec.name, spec.params, spec.vars, spec.global_size, spec.core_split, spec.checks, spec.meta)


def forget(dev) -> None:
    """Drop every in-process memo of rendered specs, so the next compile reads the disk (or lowers)."""
    reset_default_cache()  # its memory layer holds the entries too
    lowered.clear_memory()
    dev._programs.clear()
    for renderer, _ in dev.compilers:
        memo = getattr(type(renderer), "_render_memo", None)  # the CPU renderers' own memo (plugin memo.py)
        if memo is not None:
            memo._d.clear()


@pytest.fixture
def cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(tmp_path / "cache"))
    reset_default_cache()
    dev = dk.device("CPU")
    forget(dev)
    yield dev
    forget(dev)
    reset_default_cache()


def count_lowerings(monkeypatch) -> list:
    """Every call of the lowering (ir.linearize.lower, which runs the optimizer) is recorded."""
    import devicekit.ir.linearize as lin
    calls, real = [], lin.lower

    def lower(kernel, caps):
        calls.append(kernel.name)
        return real(kernel, caps)
    monkeypatch.setattr(lin, "lower", lower)
    return calls


# ---------------------------------------------------------------- the key
def _llvm():
    from devicekit_cpu.llvm_renderer import LLVMRenderer
    return LLVMRenderer


KERNEL_VARIANTS = {  # base kernel, changed kernel: each renders another source
    "structure": (fma, lambda: fma(sub=True)),
    "dtype": (fma, lambda: fma(dt=dtypes.float64)),
    "var bounds": (fma, lambda: fma(hi=1000)),
    "heuristic vs with_tiles(1, 1)": (matmul, lambda: matmul().with_tiles(1, 1)),
    "with_tiles(2, 4) vs (1, 1)": (lambda: matmul().with_tiles(1, 1), lambda: matmul().with_tiles(2, 4)),
    "optimize=False": (matmul, lambda: matmul(optimize=False)),
    "checked=False": (gather, lambda: gather(checked=False)),
}


@pytest.mark.parametrize("what", list(KERNEL_VARIANTS))
def test_each_kernel_input_changes_the_key(cpu, what):
    base, changed = (f() for f in KERNEL_VARIANTS[what])
    r = cpu.renderer
    assert plain_render(r, base) != plain_render(r, changed)  # it matters to the source...
    kb, kc = lowered.lowering_key(r, base), lowered.lowering_key(r, changed)
    assert kb != kc  # ...so it is in the key, in memory and on disk
    assert lowered.disk_text(kb, r) != lowered.disk_text(kc, r)
    assert facts(cpu.compile(base).spec) == plain_render(r, base)
    assert facts(cpu.compile(changed).spec) == plain_render(r, changed)


def test_the_name_asked_for_is_in_the_key(cpu):
    k, r = fma(), cpu.renderer
    assert lowered.lowering_key(r, k, "other") != lowered.lowering_key(r, k)
    assert cpu.compile(k).spec.name == "lc_fma"
    assert cpu.compile(k, name="other").spec.name == "other"


SETTING_VARIANTS = {  # setting, value, kernel whose source it changes
    "DEVICEKIT_OPT": ("0", matmul),  # the optimizer off
    "DEVICEKIT_CPU_SPLIT": ("1", lambda: matmul(optimize=False)),  # no split accumulators in the reduce
}


@pytest.mark.parametrize("name", list(SETTING_VARIANTS))
def test_settings_that_change_lowering_change_the_key_and_the_program(cpu, monkeypatch, name):
    value, make = SETTING_VARIANTS[name]
    k, r = make(), cpu.renderer
    before = lowered.lowering_key(r, k)
    prog = cpu.compile(k)
    monkeypatch.setenv(name, value)
    assert plain_render(r, k) != facts(prog.spec)  # the setting matters to the source
    assert lowered.lowering_key(r, k) != before
    changed = cpu.compile(k)  # neither the Program memo nor the lowered cache may answer with the old source
    assert changed is not prog and facts(changed.spec) == plain_render(r, k)
    monkeypatch.delenv(name)
    assert cpu.compile(k) is prog  # back: the memoized Program again


def test_every_declared_setting_is_in_the_key_unless_listed(cpu, monkeypatch):
    """A setting a plugin adds tomorrow is in the key without anyone adding it by hand; only NOT_LOWERING (and the
    test suite's own knobs) are left out."""
    import devicekit_cpu.settings  # noqa: F401 - the CPU plugin's settings are declared
    k, r = fma(), cpu.renderer
    base = lowered.lowering_key(r, k)
    checked = 0
    for name in settings.declared_names():
        if name in lowered.NOT_LOWERING or settings.declared(name).owner == "devicekit tests":
            continue
        monkeypatch.setenv(name, "7")
        assert lowered.lowering_key(r, k) != base, f"{name} is not in the lowering key"
        monkeypatch.delenv(name)
        checked += 1
    assert checked >= 5  # DEVICEKIT_OPT, DEVICEKIT_TIERS, DEVICEKIT_DEVICE, the CPU's THREADS/OPT/SPLIT...
    for name in ("DEVICEKIT_TIERS", "DEVICEKIT_CPU_THREADS"):  # named in issue 31
        monkeypatch.setenv(name, "1")
        assert lowered.lowering_key(r, k) != base
        monkeypatch.delenv(name)
    monkeypatch.setenv("DEVICEKIT_DEBUG", "2")  # what is printed is not an input: no relowering
    assert lowered.lowering_key(r, k) == base


def test_renderer_state_is_in_the_key(cpu, monkeypatch):
    """Capabilities (the host's vector registers), an instance attribute, a patched method, the host facts of
    memo_salt (the CPU's streaming threshold) each change the key."""
    cls, k = _llvm(), matmul()
    r = cls()
    base = lowered.lowering_key(r, k)
    base_text = lowered.disk_text(base, r)

    r2 = cls()
    r2.stream_threshold = 4096  # an instance attribute
    assert lowered.lowering_key(r2, k) != base

    monkeypatch.setattr(cls, "vector_register_bytes", 64)  # a host with narrow vectors: other register tiles
    assert lowered.lowering_key(cls(), k) != base
    monkeypatch.undo()

    real = cls.render_linear
    monkeypatch.setattr(cls, "render_linear", lambda self, lk, name: real(self, lk, name) + "\n; patched")
    assert lowered.lowering_key(cls(), k) != base  # a method a test patches
    monkeypatch.undo()
    assert lowered.lowering_key(cls(), k) == base  # undone: the same key again

    from devicekit_cpu import stream
    monkeypatch.setattr(stream, "default_threshold", lambda: 12345)  # another host's LLC
    assert lowered.disk_text(lowered.lowering_key(cls(), k), cls()) != base_text
    monkeypatch.undo()

    narrow = cls()
    narrow.vector_register_bytes = 64  # capabilities as another host reports them (AVX-512 vs SSE registers)
    assert narrow.capabilities != r.capabilities
    assert lowered.disk_text(base, narrow) != base_text  # the same in-process key: the disk text still tells them apart


def test_the_code_stamp_follows_the_renderers_files(tmp_path, monkeypatch):
    """An edit of the renderer's package (or an upgrade that replaces its files) changes the key on disk."""
    pkg = tmp_path / "dk_stamp_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rend.py").write_text(textwrap.dedent("""
        from devicekit_cpu.llvm_renderer import LLVMRenderer
        class StampRenderer(LLVMRenderer):
            pass
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    from dk_stamp_pkg.rend import StampRenderer
    r, k = StampRenderer(), fma()
    key = lowered.lowering_key(r, k)
    before = lowered.disk_text(key, r)
    st = os.stat(pkg / "rend.py")
    os.utime(pkg / "rend.py", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    lowered._stamps.clear()
    assert lowered.disk_text(key, r) != before


def test_a_renderer_whose_state_cannot_be_written_is_rendered_every_time(cpu, monkeypatch):
    calls = count_lowerings(monkeypatch)
    r = _llvm()()
    r.handle = object()  # a public attribute that is not data: not written to disk, not memoized
    k = fma("lc_opaque")
    assert lowered.disk_text(lowered.lowering_key(r, k), r) is None
    a, b = lowered.render(r, k), lowered.render(r, k)
    assert facts(a) == facts(b) == plain_render(r, k)
    assert len(calls) >= 2


# ---------------------------------------------------------------- never lowered again
def test_a_cached_kernel_is_not_lowered_again_in_this_process(cpu, monkeypatch):
    calls = count_lowerings(monkeypatch)
    k = matmul("lc_once")
    first = cpu.compile(k)
    assert calls == ["lc_once"]
    forget(cpu)  # every memo gone: only the disk holds it
    again = cpu.compile(k)
    assert calls == ["lc_once"] and again.spec.src == first.spec.src and again.spec.kernel is k
    assert lowered.info()["disk_hits"] >= 1


CHILD = textwrap.dedent("""\
    import json, sys
    import numpy as np
    import devicekit as dk
    from devicekit import ir
    from devicekit.ir import dtypes
    from devicekit.compile import lowered

    def matmul(s=12):
        k = ir.KernelBuilder("lc_child")
        a, b = k.param("a", dtypes.float32, shape=(s, s)), k.param("b", dtypes.float32, shape=(s, s))
        c = k.param("c", dtypes.float32, shape=(s, s), writable=True)
        i, j, r = k.range(s, "global"), k.range(s, "global"), k.range(s, "reduce")
        c[i, j] = (a[i, r] * b[r, j]).sum(r)
        return k.build()

    if sys.argv[1] == "forbid":  # the lowering and the optimizer may not run at all
        import devicekit.ir.linearize as lin, devicekit.ir.optimize as opt
        def boom(*a, **k):
            raise AssertionError("lowered again")
        lin.lower = opt.optimize = lin.optimize = boom
    prog = dk.device("CPU").compile(matmul())
    a = np.arange(144, dtype=np.float32).reshape(12, 12) / 50
    out = dk.run(prog, a=a.ravel(), b=a.T.ravel())["c"].reshape(12, 12)
    np.testing.assert_allclose(out, a @ a.T, rtol=1e-5)
    print(json.dumps({**lowered.info(), "src": len(prog.spec.src)}))
""")


def test_a_cached_kernel_is_not_lowered_again_in_a_new_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    env["DEVICEKIT_CACHE_DIR"] = str(tmp_path / "cache")

    def child(mode: str) -> dict:
        p = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, capture_output=True, text=True,
                           timeout=120, check=False)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.strip().splitlines()[-1])

    first = child("fill")
    assert first["misses"] == 1 and first["disk_hits"] == 0
    second = child("forbid")  # a new process: the optimizer and the lowering would raise
    assert second["disk_hits"] == 1 and second["misses"] == 0 and second["src"] == first["src"]


# ---------------------------------------------------------------- damaged, forged and hostile entries
class _Marker:
    """A pickle that, if it were ever loaded, would create a file."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _entry(cpu, k):
    r = cpu.renderer
    return lowered.store_key(r, lowered.disk_text(lowered.lowering_key(r, k), r))


def _file(cpu, k):
    return default_cache().directory / _entry(cpu, k).filename()


def _relowered(cpu, k, calls, first) -> dict:
    """The kernel compiles again from a lowering (not from the entry) with the right source, and the entry on disk
    is whole again."""
    forget(cpu)
    n = len(calls)
    again = cpu.compile(k)
    assert len(calls) == n + 1 and again.spec.src == first.spec.src
    stats = dict(default_cache().stats)
    forget(cpu)
    assert cpu.compile(k).spec.src == first.spec.src and len(calls) == n + 1  # rewritten: read from disk now
    return stats


def test_a_damaged_entry_fails_its_mac_and_is_lowered_again(cpu, monkeypatch):
    calls = count_lowerings(monkeypatch)
    k = fma("lc_damaged")
    first = cpu.compile(k)
    path = _file(cpu, k)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    assert _relowered(cpu, k, calls, first)["corrupt"] == 1


def test_a_forged_entry_is_never_unpickled(cpu, monkeypatch, tmp_path):
    """Written with another secret (another user's planted file): the MAC fails before anything is decoded."""
    calls = count_lowerings(monkeypatch)
    k = fma("lc_forged")
    first = cpu.compile(k)
    marker = tmp_path / "forged-ran"
    payload = pickle.dumps(_Marker(marker))
    _file(cpu, k).write_bytes(encode_entry(_entry(cpu, k), payload, os.urandom(32)))
    assert _relowered(cpu, k, calls, first)["corrupt"] == 1  # refused by its MAC
    assert not marker.exists()


@pytest.mark.parametrize("what", ["hostile pickle", "not a pickle", "another kernel's spec", "not a spec"])
def test_an_entry_that_verifies_but_does_not_decode_is_lowered_again(cpu, monkeypatch, tmp_path, what):
    """Under the right MAC (this user's own devicekit, another version, damage before writing): the unpickler builds
    devicekit classes only, and a spec must be the kernel's."""
    calls = count_lowerings(monkeypatch)
    k = fma(f"lc_bad_{what.replace(' ', '_').replace(chr(39), '')}")
    first = cpu.compile(k)
    marker = tmp_path / "hostile-ran"
    other = cpu.renderer.render(fma("lc_someone_else"))
    payload = {"hostile pickle": pickle.dumps(_Marker(marker)),
               "not a pickle": b"\x00 not a pickle",
               "another kernel's spec": lowered._encode(other),
               "not a spec": pickle.dumps(("a", 1))}[what]
    default_cache().put(_entry(cpu, k), payload, replace=True)
    refused = lowered.info()["refused"]
    _relowered(cpu, k, calls, first)
    assert lowered.info()["refused"] == refused + 1
    assert not marker.exists()


def test_the_unpickler_builds_devicekit_classes_and_the_listed_reducers_only():
    """Defence behind the MAC: no builtin, no os function, no devicekit function but UOp's table reducer (a devicekit
    function may start a process or clear the cache)."""
    import io

    from devicekit.render.program_spec import ProgramSpec
    u = lowered._Unpickler(io.BytesIO(b""))
    assert u.find_class("devicekit.render.program_spec", "ProgramSpec") is ProgramSpec
    for module, name in [("os", "system"), ("builtins", "eval"), ("subprocess", "run"),
                         ("devicekit.compile.cache", "cache_clear"), ("devicekit.api", "run")]:
        with pytest.raises(pickle.UnpicklingError):
            u.find_class(module, name)


# ---------------------------------------------------------------- the memo helper
def test_lru_bounds_by_count_and_weight():
    m = LRU(3)
    for i in range(5):
        m.put(i, str(i))
    assert len(m) == 3 and m.get(0) is None and m.get(4) == "4"
    m.get(2)  # made the youngest: 3 goes next
    m.put(5, "5")
    assert 3 not in m and 2 in m
    assert m.setdefault(2, "other") == "2" and m.setdefault(6, "6") == "6"
    assert m.pop(6) == "6" and m.pop(6) is None
    w = LRU(100, weigh=len, max_weight=10)
    w.put("a", b"xxxx")
    w.put("b", b"yyyy")
    w.put("c", b"zzzz")  # 12 > 10: the oldest goes
    assert "a" not in w and w.weight == 8
    w.put("big", b"q" * 50)  # heavier than the cap: kept alone
    assert len(w) == 1 and w.weight == 50
    with pytest.raises(ValueError, match="None"):
        w.put("n", None)
    with pytest.raises(ValueError, match="size"):
        LRU(0)


def test_the_program_memo_is_one_lru_keyed_by_the_lowering_key(cpu):
    """Device._programs is the shared LRU, keyed by (pair, lowering key)."""
    k = fma("lc_memo")
    prog = cpu.compile(k)
    assert isinstance(cpu._programs, LRU)
    key = (0, lowered.lowering_key(cpu.renderer, k))
    assert cpu._programs.get(key) is prog
