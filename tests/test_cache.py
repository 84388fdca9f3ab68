import multiprocessing as mp
import os
import pickle
import stat
import warnings

import pytest
from devicekit.compile import CompiledSpec, CompileError
from devicekit.compile.cache import MAGIC, CacheKey, CacheWarning, CompileCache, decode_entry, encode_entry
from devicekit.ir.dtypes import dtypes
from devicekit.render.program_spec import ParamSpec, ProgramSpec
from dkfix_toy.toylang import ToyCompiler

SRC = "out[:] = x * 2\n"


def spec(src: str = SRC, device: str = "TOY") -> ProgramSpec:
    return ProgramSpec(name="double", src=src, device=device, lang="toy",
                       params=(ParamSpec("x", dtypes.float32, 4, False), ParamSpec("out", dtypes.float32, 4, True)))


def compiler(cache: CompileCache, calls: list | None = None) -> ToyCompiler:
    c = ToyCompiler(calls=calls if calls is not None else [])
    c.cache = cache
    return c


def only_entry(cache: CompileCache):
    (entry,) = list(cache.directory.glob("*.dkc"))
    return entry


def test_miss_then_memory_then_disk_hit(tmp_path):
    calls = []
    c1 = CompileCache(tmp_path)
    a = compiler(c1, calls).compile(spec())
    assert isinstance(a, CompiledSpec) and a.name == "double" and a.params[0].name == "x" and a.vars == ()
    b = compiler(c1, calls).compile(spec())
    assert len(calls) == 1 and b.lib == a.lib and c1.stats["memory_hits"] == 1
    c2 = CompileCache(tmp_path)  # a new process, as far as the cache can tell
    c = compiler(c2, calls).compile(spec())
    assert len(calls) == 1 and c.lib == a.lib and c2.stats["disk_hits"] == 1
    assert c.compiler_id == ToyCompiler().identity()


def test_dir_created_private(tmp_path):
    cache = CompileCache(tmp_path / "new" / "cache")
    compiler(cache).compile(spec())
    for d in (cache.root, cache.directory):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert cache.info()["entries"] == 1 and cache.info()["state"] == "enabled"


def test_key_parts_separate_entries(tmp_path):
    calls = []
    cache = CompileCache(tmp_path)
    compiler(cache, calls).compile(spec())
    compiler(cache, calls).compile(spec(device="OTHER"))  # another base device key
    compiler(cache, calls).compile(spec(src=SRC + "# v2\n"))  # another source
    c = compiler(cache, calls)
    c.level = 9  # another identity (flags)
    c.compile(spec())
    assert len(calls) == 4 and cache.info()["entries"] == 4


def test_corrupted_entry_is_detected_deleted_recompiled(tmp_path, capsys, monkeypatch):
    calls = []
    good = compiler(CompileCache(tmp_path), calls).compile(spec()).lib
    entry = only_entry(CompileCache(tmp_path))
    data = bytearray(entry.read_bytes())
    data[-1] ^= 0xFF  # flip a payload bit
    entry.write_bytes(bytes(data))
    monkeypatch.setenv("DEVICEKIT_DEBUG", "1")
    cache = CompileCache(tmp_path)
    again = compiler(cache, calls).compile(spec()).lib
    assert again == good and len(calls) == 2 and cache.stats["corrupt"] == 1
    err = capsys.readouterr().err
    assert "is corrupt (MAC mismatch: damaged, or not written by this user's devicekit): deleted, recompiling" in err
    assert decode_entry(entry.read_bytes(), CacheKey("TOY", ToyCompiler().identity(), _sha(SRC)),
                        cache.mac_key()) == good


def _sha(s: str) -> str:
    import hashlib
    return hashlib.sha256(s.encode()).hexdigest()


@pytest.mark.parametrize("cut", [3, len(MAGIC) + 4, 60, -1])
def test_truncated_entry(tmp_path, cut):
    calls = []
    compiler(CompileCache(tmp_path), calls).compile(spec())
    entry = only_entry(CompileCache(tmp_path))
    entry.write_bytes(entry.read_bytes()[:cut])
    cache = CompileCache(tmp_path)
    compiler(cache, calls).compile(spec())
    assert len(calls) == 2 and cache.stats["corrupt"] == 1
    assert len(entry.read_bytes()) > 60  # replaced by a whole entry


def test_entry_only_loaded_under_its_own_key(tmp_path):
    k1 = CacheKey("TOY", "toyc", "a" * 64)
    k2 = CacheKey("TOY", "toyc", "b" * 64)
    with pytest.raises(KeyError):
        decode_entry(encode_entry(k1, b"lib1", b"s" * 32), k2, b"s" * 32)
    cache = CompileCache(tmp_path)
    cache.put(k1, b"lib1")
    # plant k1's entry at the file name of k2 (a collision or a copied file): k2 must not get lib1
    (cache.directory / k1.filename()).rename(cache.directory / k2.filename())
    assert CompileCache(tmp_path).get(k2) is None
    assert CompileCache(tmp_path).get_or_compile(k2, lambda: b"lib2") == b"lib2"


def _writer(args):
    root, n = args
    from devicekit.compile.cache import CompileCache
    from dkfix_toy.toylang import ToyCompiler
    bad = 0
    for i in range(n):
        c = ToyCompiler()
        c.cache = CompileCache(root)  # memory empty each time: every read goes to disk
        lib = c.compile(spec()).lib
        bad += lib != ToyCompiler().compile_src(SRC)
        if i % 3 == 0:
            c.cache.clear()  # racing deletes too
    return bad


def test_concurrent_writers_never_tear(tmp_path):
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    with ctx.Pool(8) as pool:
        bad = pool.map(_writer, [(str(tmp_path), 25)] * 8)
    assert bad == [0] * 8
    cache = CompileCache(tmp_path)
    assert cache.info()["entries"] <= 1
    assert not [p for p in cache.directory.iterdir() if p.name.startswith(".tmp-")]  # no temp files left


def test_world_writable_dir_refused_with_one_warning(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, 0o777)
    calls = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cache = CompileCache(root)
        compiler(cache, calls).compile(spec())
        compiler(cache, calls).compile(spec())
        CompileCache(root).info()  # a second cache on the same dir: still one warning per process
    refused = [x for x in w if issubclass(x.category, CacheWarning)]
    assert len(refused) == 1 and "writable" in str(refused[0].message)
    assert len(calls) == 1  # still cached in memory
    assert cache.info()["state"].startswith("refused") and not (root / "compile").exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another uid needs root")
def test_foreign_owned_dir_refused(tmp_path):
    root = tmp_path / "foreign"
    root.mkdir(mode=0o700)
    os.chown(root, 4242, 4242)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        state = CompileCache(root).state()
    assert state.startswith("refused") and "uid 4242" in state
    assert any(issubclass(x.category, CacheWarning) for x in w)


def test_write_error_warns_once_and_continues(tmp_path):
    cache = CompileCache(tmp_path)
    assert cache.state() == "enabled"
    cache.directory.rmdir()
    cache.directory.write_text("not a directory")  # every write now fails
    calls = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        compiler(cache, calls).compile(spec())
        compiler(cache, calls).compile(spec(src=SRC + "#2\n"))
    assert len([x for x in w if issubclass(x.category, CacheWarning)]) == 1
    assert len(calls) == 2 and cache.stats["write_errors"] == 2


def test_disabled_by_env(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVICEKIT_CACHE", "0")
    cache = CompileCache(tmp_path)
    compiler(cache).compile(spec())
    assert cache.state().startswith("disabled") and not (tmp_path / "compile").exists()


def test_size_cap_evicts_least_recently_used(tmp_path):
    cache = CompileCache(tmp_path, max_bytes=10_000)
    keys = [CacheKey("TOY", "toyc", f"{i:064x}") for i in range(4)]
    for i, k in enumerate(keys[:3]):
        cache.put(k, bytes(3000))
        os.utime(cache.directory / k.filename(), (1000 + i, 1000 + i))
    CompileCache(tmp_path).get(keys[0])  # a hit touches keys[0]: now keys[1] is the oldest
    cache.put(keys[3], bytes(3000))
    left = {p.name for p in cache.directory.glob("*.dkc")}
    assert keys[1].filename() not in left and keys[0].filename() in left and keys[3].filename() in left
    assert cache.info()["bytes"] <= 10_000 and cache.stats["evicted"] == 1


def test_clear(tmp_path):
    cache = CompileCache(tmp_path)
    compiler(cache).compile(spec())
    assert cache.clear() == 1 and cache.info()["entries"] == 0 and cache.info()["memory_entries"] == 0


def test_compile_error_shows_log_and_source_and_pickles(tmp_path):
    src = "a = 1\nb = (2 +\nc = 3\n"
    with pytest.raises(CompileError) as ei:
        compiler(CompileCache(tmp_path)).compile(spec(src=src))
    text = str(ei.value)
    assert "syntax error" in text and "<toy>:" in text and "compiler log" in text
    assert ">    2 | b = (2 +" in text
    e2 = pickle.loads(pickle.dumps(ei.value))
    assert str(e2) == text and e2.src == src
    assert CompileCache(tmp_path).info()["entries"] == 0  # failures are not cached


def test_compile_error_without_line_numbers():
    e = CompileError("failed", log="internal compiler error", src="x\ny\n")
    assert str(e) == "failed\n--- compiler log ---\ninternal compiler error"
    assert str(CompileError("plain")) == "plain"
    e = CompileError("nvrtc", log="kernel.cu(2): error: identifier undefined", src="a\nbad\nc\n")
    assert ">    2 | bad" in str(e)


def test_compiled_spec_pickles(tmp_path):
    cs = compiler(CompileCache(tmp_path)).compile(spec())
    assert pickle.loads(pickle.dumps(cs)) == cs


def test_a_cache_collected_at_interpreter_shutdown_closes_quietly(tmp_path, monkeypatch):
    """At shutdown a module's globals may already be None when a cache in a cycle is collected: __del__ still
    closes its pinned directories, with no 'Exception ignored in ... __del__' (seen after every pytest run)."""
    from devicekit.compile import cache_store
    cache = CompileCache(tmp_path, disk=True)
    assert cache.state() == "enabled"
    dfd = cache._dfd
    monkeypatch.setattr(cache_store, "os", None)
    cache.__del__()  # would raise AttributeError reading os.close
    monkeypatch.undo()
    with pytest.raises(OSError):
        os.fstat(dfd)  # closed
    cache._dfd = cache._root_fd = None
