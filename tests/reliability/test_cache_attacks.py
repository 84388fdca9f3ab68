"""Attacks on the disk compile cache by another local user and by broken or planted files (docs/reliability.md,
threat model). The attacker is a real second uid (`nobody`, through setpriv) where the machine allows it (root);
ownership that only root could arrange is simulated with chown. Planted code is a real shared object whose
constructor writes a marker file: the marker must never appear. Everything that could hang or eat memory on a
regression runs in a subprocess bounded by a timeout (and a data-size limit)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from devicekit.compile.cache import (
    MAGIC,
    STALE_TMP_SECONDS,
    CacheKey,
    CompileCache,
    decode_entry,
    encode_entry,
)

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
NOBODY = 65534
HAVE_SETPRIV = shutil.which("setpriv") is not None
needs_root = pytest.mark.skipif(not IS_ROOT, reason="chown to another uid needs root")
needs_second_uid = pytest.mark.skipif(not (IS_ROOT and HAVE_SETPRIV),
                                      reason="running the attacker as another uid needs root and setpriv")

KERNEL_SRC = textwrap.dedent("""
    import numpy as np
    from devicekit import ir
    from devicekit.ir import dtypes

    def kernel(j):
        k = ir.KernelBuilder(f"atk{j}")
        n = k.var("n", 1, 1 << 20)
        x = k.param("x", dtypes.float32, n)
        o = k.param("out", dtypes.float32, n, writable=True)
        i = k.range(n, "global")
        o[i] = x[i] * float(j + 3) - float(j)
        return k.build()

    def expected(j, xs):
        return xs * np.float32(j + 3) - np.float32(j)

    XS = np.linspace(-2, 2, 48, dtype=np.float32)

    def pair(name, cache):
        import devicekit as dk
        r, c = dk.device("CPU").pair(name)
        fresh = type(c)()  # its own instance: its own cache, not the process-wide one
        fresh.cache = cache
        return r, fresh

    def run(compiled):
        import devicekit as dk
        cpu = dk.device("CPU")
        prog = cpu.runtime(compiled)
        prog.device = cpu
        x = dk.Buffer(cpu, XS.size, "float32").copyin(XS)
        o = dk.Buffer(cpu, XS.size, "float32")
        prog.execute([x, o], [XS.size], wait=True)
        return o.numpy()
""")
_ns: dict = {}
exec(KERNEL_SRC, _ns)  # noqa: S102 - shared with the subprocesses below
kernel, expected, XS, pair, run = _ns["kernel"], _ns["expected"], _ns["XS"], _ns["pair"], _ns["run"]


def key_of(spec, compiler) -> CacheKey:
    return CacheKey(spec.device, compiler.identity(), hashlib.sha256(spec.src.encode()).hexdigest())


def v1_entry(key: CacheKey, payload: bytes) -> tuple[str, bytes]:
    """(file name, bytes) of an entry in the old format (plain sha256, which anyone can recompute)."""
    text = json.dumps([1, key.device, key.compiler, key.src_sha256], separators=(",", ":")).encode()
    data = b"".join((MAGIC, (1).to_bytes(2, "little"), len(text).to_bytes(4, "little"), text,
                     hashlib.sha256(payload).digest(), len(payload).to_bytes(8, "little"), payload))
    return hashlib.sha256(text).hexdigest() + ".dkc", data


def planted_so(tmp: Path, symbol: str, marker: Path) -> bytes:
    """A real shared object exporting `symbol`, whose constructor writes `marker` when it is loaded."""
    from devicekit_cpu.cc_compiler import find_cc
    cc = find_cc()
    if cc is None:
        pytest.skip("no C compiler")
    src = textwrap.dedent(f"""
        #include <stdio.h>
        __attribute__((constructor)) static void planted(void) {{
            FILE *f = fopen("{marker}", "w");
            if (f) {{ fputs("planted constructor ran", f); fclose(f); }}
        }}
        void {symbol}(void) {{}}
    """)
    out = tmp / "planted.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), "-x", "c", "-"], input=src, text=True, check=True,
                   capture_output=True, timeout=120)
    return out.read_bytes()


@pytest.fixture
def shared_dir():
    """A directory under the system temp dir that other uids can traverse (pytest's tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="dk-attack-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def as_nobody(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run python `code` as uid/gid nobody (no supplementary groups): the other local user."""
    p = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-I",
                        "-c", code], capture_output=True, text=True, timeout=timeout, check=False)
    assert p.returncode == 0, f"the attacker script failed:\n{p.stdout}\n{p.stderr}"
    return p


def refused(cache: CompileCache) -> str:
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        return cache.state()


# ---------------------------------------------------------------- item 1: the directory and its ancestors
@needs_second_uid
@pytest.mark.parametrize("how", ["rename", "symlink"])
def test_parent_swapped_after_the_check_by_another_user(shared_dir, how):
    """The cache opens under a safe parent; then `nobody` gets write access to the parent, moves the cache away and
    puts its own in place (a directory, or a symlink to one it owns) with a planted shared object under the next
    kernel's entry names: in the old format with a valid sha256, and in the new one with a MAC under a key file the
    attacker wrote. The process keeps using the directory it pinned: the planted code never runs."""
    parent = shared_dir / "P"
    parent.mkdir(mode=0o755)
    root = parent / "cache"
    marker = shared_dir / "constructor-ran"
    cache = CompileCache(root)
    r, c = pair("c", cache)
    np.testing.assert_array_equal(run(c.compile(r.render(kernel(0)))), expected(0, XS))
    spec = r.render(kernel(1))
    key = key_of(spec, c)
    evil = planted_so(shared_dir, spec.name, marker)
    v1_name, v1_data = v1_entry(key, evil)
    attacker_secret = b"A" * 32
    plants = {v1_name: v1_data, key.filename(): encode_entry(key, evil, attacker_secret)}
    os.chown(parent, NOBODY, NOBODY)  # from now on the other user can write the parent
    as_nobody(textwrap.dedent(f"""
        import os
        parent, root, how = {str(parent)!r}, {str(root)!r}, {how!r}
        os.rename(root, os.path.join(parent, "moved-away"))
        target = root if how == "rename" else os.path.join(parent, "mine")
        os.makedirs(os.path.join(target, "compile"), mode=0o700)
        with open(os.path.join(target, "hmac.key"), "wb") as f:
            f.write({attacker_secret!r})
        for name, data in {plants!r}.items():
            with open(os.path.join(target, "compile", name), "wb") as f:
                f.write(data)
        if how == "symlink":
            os.symlink(target, root)
    """))
    got = c.compile(spec)
    np.testing.assert_array_equal(run(got), expected(1, XS))
    assert not marker.exists(), "the planted constructor ran"
    assert got.lib != evil
    assert (parent / "moved-away" / "compile" / key.filename()).exists()  # written where the cache was pinned
    assert cache.stats["corrupt"] == 0 and cache.stats["refused"] == 0  # the planted files were never even read


@needs_second_uid
def test_ancestor_created_by_another_user_in_a_sticky_dir(shared_dir):
    """`nobody` creates the cache's parent first in a world-writable sticky directory (as in /tmp): the cache refuses
    to live under a directory another user owns, however private the cache directory itself would be."""
    sticky = shared_dir / "tmp"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    as_nobody(f"import os; os.mkdir({str(sticky / 'dk')!r}, 0o755)")
    cache = CompileCache(sticky / "dk" / "cache")
    state = refused(cache)
    assert state.startswith("refused") and f"{sticky / 'dk'} is owned by uid {NOBODY}" in state
    assert not (sticky / "dk" / "cache").exists()  # nothing created under it


@needs_root
def test_foreign_owned_ancestor_is_refused(tmp_path):
    parent = tmp_path / "theirs"
    parent.mkdir(mode=0o755)
    os.chown(parent, NOBODY, NOBODY)
    state = refused(CompileCache(parent / "a" / "cache"))
    assert state.startswith("refused") and f"{parent} is owned by uid {NOBODY}, neither root nor this user" in state


@pytest.mark.parametrize("mode,ok", [(0o775, False), (0o757, False), (0o1777, True), (0o1775, True), (0o755, True)])
def test_writable_ancestor_is_refused_unless_sticky(tmp_path, mode, ok):
    """A group/world-writable ancestor lets others swap what is below it; the sticky bit (as on /tmp) prevents that."""
    parent = tmp_path / "p"
    parent.mkdir()
    os.chmod(parent, mode)
    cache = CompileCache(parent / "cache")
    state = refused(cache)
    if ok:
        assert state == "enabled"
        assert stat.S_IMODE((parent / "cache").stat().st_mode) == 0o700
    else:
        assert state.startswith("refused") and f"{parent} is group- or world-writable without the sticky bit" in state
        assert not (parent / "cache").exists()


UMASK_SCRIPT = textwrap.dedent("""
    import json, os, stat
    os.umask({umask})
    from devicekit.compile.cache import CacheKey, CompileCache
    cache = CompileCache({root!r})
    cache.put(CacheKey("TOY", "toyc", "0" * 64), b"lib")
    modes = {{}}
    p = {top!r}
    for part in ["a", "b", "cache", "compile"]:
        p = os.path.join(p, part)
        modes[part] = oct(stat.S_IMODE(os.stat(p).st_mode))
    modes["hmac.key"] = oct(stat.S_IMODE(os.stat(os.path.join({root!r}, "hmac.key")).st_mode))
    (entry,) = [e for e in os.listdir(os.path.join({root!r}, "compile"))]
    modes["entry"] = oct(stat.S_IMODE(os.stat(os.path.join({root!r}, "compile", entry)).st_mode))
    print(json.dumps(modes))
""")


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o777])
def test_directories_created_private_whatever_the_umask(tmp_path, isolated, umask):
    top = tmp_path / "u"
    top.mkdir()
    rc, out = isolated.run(UMASK_SCRIPT.format(umask=umask, root=str(top / "a" / "b" / "cache"), top=str(top)))
    assert rc == 0, out[-2000:]
    modes = json.loads(out.strip().splitlines()[-1])
    assert modes == {"a": "0o700", "b": "0o700", "cache": "0o700", "compile": "0o700", "hmac.key": "0o600",
                     "entry": "0o600"}


# ---------------------------------------------------------------- items 1-2: entries
@needs_root
@pytest.mark.parametrize("attack", ["another user's file with a valid MAC", "MAC under a guessed key",
                                    "symlink to a valid entry", "old format, valid sha256"])
def test_planted_shared_object_never_runs(tmp_path, attack):
    """A planted shared object with a constructor under the entry name of the kernel about to be compiled: refused
    (not a regular file of this user), rejected by its MAC, or never looked up; removed and recompiled."""
    root = tmp_path / "cache"
    marker = tmp_path / "constructor-ran"
    cache = CompileCache(root)
    r, c = pair("c", cache)
    spec = r.render(kernel(2))
    key = key_of(spec, c)
    evil = planted_so(tmp_path, spec.name, marker)
    entry = cache.directory / key.filename()
    assert cache.state() == "enabled"
    if attack == "another user's file with a valid MAC":
        entry.write_bytes(encode_entry(key, evil, cache.mac_key()))
        os.chown(entry, NOBODY, NOBODY)
    elif attack == "MAC under a guessed key":
        entry.write_bytes(encode_entry(key, evil, b"\0" * 32))
    elif attack == "symlink to a valid entry":
        elsewhere = tmp_path / "elsewhere.dkc"
        elsewhere.write_bytes(encode_entry(key, evil, cache.mac_key()))
        os.chmod(elsewhere, 0o600)
        entry.symlink_to(elsewhere)
    else:
        name, data = v1_entry(key, evil)
        (cache.directory / name).write_bytes(data)
    got = c.compile(spec)
    np.testing.assert_array_equal(run(got), expected(2, XS))
    assert not marker.exists(), "the planted constructor ran"
    assert got.lib != evil and got.trusted and not got.from_cache
    assert decode_entry(entry.read_bytes(), key, cache.mac_key()) == got.lib  # replaced by the real entry
    assert not entry.is_symlink()
    if attack == "symlink to a valid entry":
        assert (tmp_path / "elsewhere.dkc").exists()  # only the link was removed, not what it pointed to
    expect = {"another user's file with a valid MAC": ("refused", 1), "MAC under a guessed key": ("corrupt", 1),
              "symlink to a valid entry": ("refused", 1), "old format, valid sha256": ("corrupt", 0)}[attack]
    assert cache.stats[expect[0]] == expect[1]


BOUNDED_SCRIPT = textwrap.dedent("""
    import json, resource, time
    resource.setrlimit(resource.RLIMIT_DATA, (1 << 30, 1 << 30))  # a regression fails with MemoryError, not the box
    from devicekit.compile.cache import CompileCache
    cache = CompileCache({root!r})
    r, c = pair("llvm", cache)
    t0 = time.perf_counter()
    got = c.compile(r.render(kernel({j})))
    secs = time.perf_counter() - t0
    ok = bool((run(got) == expected({j}, XS)).all())
    print(json.dumps({{"ok": ok, "secs": secs, "stats": cache.stats}}))
""")


def _plant_special(entry: Path, what: str) -> None:
    if what == "FIFO":
        os.mkfifo(entry, 0o600)
    elif what == "symlink to /dev/zero":
        entry.symlink_to("/dev/zero")
    elif what == "3 GB sparse file":
        with open(entry, "wb") as f:
            f.truncate(3 << 30)
        os.chmod(entry, 0o600)
    elif what == "device node":
        os.mknod(entry, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
    elif what == "unix socket":
        import socket
        short = Path(tempfile.mkdtemp()) / "s"  # AF_UNIX paths are short: bind there, then move it in place
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(short))
        s.close()
        os.rename(short, entry)
        os.rmdir(short.parent)


@pytest.mark.parametrize("what", ["FIFO", "symlink to /dev/zero", "3 GB sparse file", "device node", "unix socket"])
def test_special_files_are_refused_before_reading(tmp_path, isolated, what):
    """An entry that would block (FIFO), never end (/dev/zero) or exhaust memory (3 GB): refused from its lstat
    before it is opened for reading, removed, recompiled; bounded by a timeout and a 1 GiB data limit."""
    if what == "device node" and not IS_ROOT:
        pytest.skip("mknod needs root")
    root = tmp_path / "cache"
    cache = CompileCache(root)
    assert cache.state() == "enabled"
    r, c = pair("llvm", cache)
    entry = cache.directory / key_of(r.render(kernel(3)), c).filename()
    _plant_special(entry, what)
    try:
        rc, out = isolated.run(KERNEL_SRC + BOUNDED_SCRIPT.format(root=str(root), j=3), timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail(f"compiling with a {what} as the cache entry hung")
    assert rc == 0, f"{isolated.describe(rc)}\n{out[-2000:]}"
    rep = json.loads(out.strip().splitlines()[-1])
    assert rep["ok"] and rep["stats"]["refused"] == 1 and rep["stats"]["misses"] == 1
    assert entry.is_file() and not entry.is_symlink() and entry.stat().st_size < 1 << 20  # the real entry now


def test_oversized_entry_is_refused_by_its_size(tmp_path):
    cache = CompileCache(tmp_path / "c", max_bytes=4096)
    assert cache.entry_limit == 4096
    key = CacheKey("TOY", "toyc", "1" * 64)
    (cache.directory / key.filename()).write_bytes(encode_entry(key, b"x" * 8192, cache.mac_key()))
    assert cache.get(key) is None and cache.stats["refused"] == 1
    assert not (cache.directory / key.filename()).exists()


def test_group_writable_entry_is_refused(tmp_path):
    cache = CompileCache(tmp_path / "c")
    key = CacheKey("TOY", "toyc", "2" * 64)
    cache.put(key, b"lib")
    os.chmod(cache.directory / key.filename(), 0o664)
    assert CompileCache(tmp_path / "c").get(key) is None


def test_key_file_that_others_can_read_is_replaced(tmp_path):
    """A readable key lets others forge entries: it is replaced, and every entry made under it is rebuilt."""
    cache = CompileCache(tmp_path / "c")
    key = CacheKey("TOY", "toyc", "3" * 64)
    cache.put(key, b"lib")
    old = cache.mac_key()
    os.chmod(tmp_path / "c" / "hmac.key", 0o644)
    again = CompileCache(tmp_path / "c")
    assert again.get(key) is None and again.stats["corrupt"] == 1
    assert again.mac_key() != old and stat.S_IMODE((tmp_path / "c" / "hmac.key").stat().st_mode) == 0o600


# ---------------------------------------------------------------- item 4: verified bytes that do not load
WRONG_SYMBOL_SCRIPT = textwrap.dedent("""
    import json
    import devicekit as dk
    from devicekit.compile.cache import default_cache, encode_entry
    from devicekit.targets import Device
    cpu = dk.device("CPU")
    out = {{}}
    for pname in ("llvm", "c"):
        r, c = cpu.pair(pname)
        if {plant!r}:  # a valid entry (right MAC) for kernel 4 holding kernel 5's bytes: the symbol is wrong
            lib5 = c.compile(r.render(kernel(5))).lib
            key4 = c.cache_key(r.render(kernel(4)))
            path = default_cache().directory / key4.filename()
            path.write_bytes(encode_entry(key4, lib5, default_cache().mac_key()))
            continue
        one_pair = Device("CPU", cpu.allocator, runtime=cpu.runtime, pairs=[(r, c)], pair_names=[pname])
        res = dk.run(kernel(4), device=one_pair, x=XS, n=XS.size)["out"]
        out[pname] = bool((res == expected(4, XS)).all())
    from devicekit.compile import lowered  # its rendered specs share the store: their hits are counted apart
    print(json.dumps({{"ok": out, "stats": default_cache().stats, "lowered": lowered.stats}}))
""")


def test_verified_entry_that_fails_to_load_is_rebuilt_once(tmp_path, isolated):
    """A cache entry whose MAC verifies but whose bytes do not load (here: another kernel's code, the wrong symbol)
    is discarded and recompiled once by Device, through the core's compile path, on both CPU pairs; the next process
    then gets the good entry from disk."""
    env = {"DEVICEKIT_CACHE_DIR": str(tmp_path / "dk")}
    rc, out = isolated.run(KERNEL_SRC + WRONG_SYMBOL_SCRIPT.format(plant=True), **env)
    assert rc == 0, out[-2000:]
    rc, out = isolated.run(KERNEL_SRC + WRONG_SYMBOL_SCRIPT.format(plant=False), **env)
    assert rc == 0, out[-2000:]
    rep = json.loads(out.strip().splitlines()[-1])
    assert rep["ok"] == {"llvm": True, "c": True}
    # the store's hits: kernel 4's compiled bytes (the planted entry) once per pair, and its lowered spec once per pair
    assert rep["lowered"]["disk_hits"] == 2 and rep["stats"]["disk_hits"] - rep["lowered"]["disk_hits"] == 2
    assert rep["stats"]["load_failures"] == 2
    rc, out = isolated.run(KERNEL_SRC + WRONG_SYMBOL_SCRIPT.format(plant=False), **env)
    rep = json.loads(out.strip().splitlines()[-1])
    assert rep["ok"] == {"llvm": True, "c": True} and rep["stats"]["load_failures"] == 0


def test_freshly_compiled_bytes_that_fail_to_load_are_not_retried(tmp_path):
    """Only cached bytes earn a rebuild: a compiler whose own output does not load fails at once, compiled once."""
    import devicekit as dk
    from devicekit.compile import Compiler
    from devicekit.targets import Device

    calls = []

    class Garbage(Compiler):
        name = "garbage"

        def compile_src(self, src):
            calls.append(src)
            return b"\x7fELF garbage"

    cpu = dk.device("CPU")
    comp = Garbage()
    comp.cache = CompileCache(tmp_path / "g")
    dev = Device("CPU", cpu.allocator, cpu.pair("c")[0], comp, cpu.runtime)
    with pytest.raises(Exception):  # noqa: B017 - the runtime's own error for bad bytes
        dev.compile(kernel(6))
    assert len(calls) == 1 and comp.cache.stats["load_failures"] == 0
    with pytest.raises(Exception):  # noqa: B017 - now from the cache (memory): rebuilt once, fails again, raised
        Device("CPU", cpu.allocator, cpu.pair("c")[0], comp, cpu.runtime).compile(kernel(6))
    assert len(calls) == 2 and comp.cache.stats["load_failures"] == 1


# ---------------------------------------------------------------- item 5: temp files of killed writers
KILLED_WRITER = textwrap.dedent("""
    import os, sys, time
    from devicekit.compile import cache as cache_mod
    from devicekit.compile.cache import CacheKey, CompileCache
    def stuck_rename(*a, **k):  # hold the write window open: the temp file is written, not yet renamed
        print("in the write window", flush=True)
        time.sleep(600)
    cache = CompileCache({root!r})
    cache.state()
    cache_mod.os.rename = stuck_rename
    cache.put(CacheKey("TOY", "toyc", "{n}" * 64), b"payload" * 100)
""")


def _kill_in_write_window(root: Path, n: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    p = subprocess.Popen([sys.executable, "-c", KILLED_WRITER.format(root=str(root), n=n)], stdout=subprocess.PIPE,
                         text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "in the write window"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)


def test_temp_files_of_a_killed_writer_are_counted_and_removed_when_stale(tmp_path):
    root = tmp_path / "c"
    _kill_in_write_window(root, 1)
    d = root / "compile"
    (tmp,) = [p for p in d.iterdir() if p.name.startswith(".tmp-")]
    info = CompileCache(root).info()  # a fresh temp file may be a live writer's: counted, kept
    assert info["tmp_files"] == 1 and info["stale_tmp_files"] == 0 and tmp.exists()
    old = time.time() - 2 * STALE_TMP_SECONDS
    os.utime(tmp, (old, old))
    assert CompileCache(root).info()["stale_tmp_files"] == 0 and not tmp.exists()  # opening removed it
    cache = CompileCache(root)
    assert cache.state() == "enabled"
    _kill_in_write_window(root, 2)  # another kill, after this cache opened
    (tmp2,) = [p for p in d.iterdir() if p.name.startswith(".tmp-")]
    os.utime(tmp2, (old, old))
    fresh = d / ".tmp-live-writer.dkc"
    fresh.write_bytes(b"being written")
    info = cache.info()
    assert info["tmp_files"] == 2 and info["stale_tmp_files"] == 1
    cache.clear()
    assert not tmp2.exists() and fresh.exists() and cache.info()["tmp_files"] == 1


def test_cli_cache_info_counts_temp_files(tmp_path):
    root = tmp_path / "c"
    _kill_in_write_window(root, 3)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    env["DEVICEKIT_CACHE_DIR"] = str(root)
    p = subprocess.run([sys.executable, "-m", "devicekit.cli", "cache", "info"], capture_output=True, text=True, env=env,
                       timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert "temp files: 1 (0 stale" in p.stdout


# ---------------------------------------------------------------- trust
def test_trusted_only_for_bytes_this_process_compiled_or_verified(tmp_path):
    import pickle

    from devicekit.compile import CompiledSpec
    cache = CompileCache(tmp_path / "t")
    r, c = pair("llvm", cache)
    spec = r.render(kernel(7))
    fresh = c.compile(spec)
    assert fresh.trusted and not fresh.from_cache
    mem = c.compile(spec)
    assert mem.trusted and mem.from_cache
    c.cache = CompileCache(tmp_path / "t")
    disk = c.compile(spec)
    assert disk.trusted and disk.from_cache and c.cache.stats["disk_hits"] == 1
    assert not CompiledSpec(spec, fresh.lib, fresh.compiler_id).trusted  # built by hand
    back = pickle.loads(pickle.dumps(fresh))
    assert back == fresh and not back.trusted  # trust does not travel through a pickle
