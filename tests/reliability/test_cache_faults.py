"""Disk cache faults with real CPU object code: corrupted, truncated and planted entries (an entry is only ever
loaded under the key that produced it), a full disk (a real tiny tmpfs when we may mount one, and a real
RLIMIT_FSIZE write failure in a subprocess otherwise), 8 processes compiling the same kernels at once, and the
directory checks that keep foreign code out."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from devicekit.compile.cache import CacheKey, CacheWarning, CompileCache, decode_entry, encode_entry

KERNEL_SRC = textwrap.dedent("""
    import numpy as np
    from devicekit import ir
    from devicekit.ir import dtypes

    def kernel(j):
        k = ir.KernelBuilder(f"affine{j}")
        n = k.var("n", 1, 1 << 20)
        x = k.param("x", dtypes.float32, n)
        o = k.param("out", dtypes.float32, n, writable=True)
        i = k.range(n, "global")
        o[i] = x[i] * float(j + 2) + float(j)
        return k.build()

    def expected(j, xs):
        return xs * np.float32(j + 2) + np.float32(j)
""")
_ns: dict = {}
exec(KERNEL_SRC, _ns)  # noqa: S102 - shared with the subprocesses below
kernel, expected = _ns["kernel"], _ns["expected"]
XS = np.linspace(-3, 3, 64, dtype=np.float32)


def _llvm(cache):
    import devicekit as dk
    r, c = dk.device("CPU").pair("llvm")
    fresh = type(c)()  # its own instance: its own cache, not the process-wide one
    fresh.cache = cache
    return r, fresh


def _run(compiled, j):
    """Load the bytes and run them: the only proof that the right program came back."""
    import devicekit as dk
    cpu = dk.device("CPU")
    prog = cpu.runtime(compiled)
    prog.device = cpu
    x = dk.Buffer(cpu, XS.size, "float32").copyin(XS)
    o = dk.Buffer(cpu, XS.size, "float32")
    prog.execute([x, o], [XS.size], wait=True)
    return o.numpy()


def _entry(cache, spec, compiler) -> Path:
    import hashlib
    key = CacheKey(spec.device, compiler.identity(), hashlib.sha256(spec.src.encode()).hexdigest())
    return cache.directory / key.filename()


CORRUPTIONS = {
    "truncated to 0 bytes": lambda b: b"",
    "truncated in the header": lambda b: b[:11],
    "truncated in the key": lambda b: b[:30],
    "truncated in the payload": lambda b: b[:len(b) - 100],
    "payload byte flipped": lambda b: b[:-50] + bytes([b[-50] ^ 1]) + b[-49:],
    "MAC byte flipped": lambda b: _flip_mac(b),
    "length field lies": lambda b: _lie_length(b),
    "trailing garbage": lambda b: b + b"\0" * 16,
    "another format version": lambda b: b[:8] + (99).to_bytes(2, "little") + b[10:],
}


def _klen(b):
    return int.from_bytes(b[10:14], "little")


def _flip_mac(b):
    pos = 14 + _klen(b)
    return b[:pos] + bytes([b[pos] ^ 0xFF]) + b[pos + 1:]


def _lie_length(b):
    pos = 14 + _klen(b) + 32
    return b[:pos] + (len(b) * 2).to_bytes(8, "little") + b[pos + 8:]


@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_corrupted_entry_of_real_object_code_is_recompiled(tmp_path, how):
    cache = CompileCache(tmp_path)
    r, c = _llvm(cache)
    spec = r.render(kernel(1))
    first = c.compile(spec)
    path = _entry(cache, spec, c)
    path.write_bytes(CORRUPTIONS[how](path.read_bytes()))
    cache2 = CompileCache(tmp_path)  # empty memory layer: the next compile reads the disk
    c.cache = cache2
    again = c.compile(spec)
    assert cache2.stats["corrupt"] == 1 and cache2.stats["misses"] == 1 and cache2.stats["disk_hits"] == 0
    assert again.lib == first.lib
    np.testing.assert_array_equal(_run(again, 1), expected(1, XS))
    assert decode_entry(path.read_bytes(), CacheKey(**_key_of(spec, c)), cache2.mac_key()) == first.lib  # rewritten whole


def _key_of(spec, c):
    import hashlib
    return {"device": spec.device, "compiler": c.identity(), "src_sha256": hashlib.sha256(spec.src.encode()).hexdigest()}


def test_entry_that_is_a_directory_or_unreadable_is_a_miss(tmp_path):
    cache = CompileCache(tmp_path)
    r, c = _llvm(cache)
    spec = r.render(kernel(2))
    _entry(cache, spec, c).mkdir(parents=True)
    with pytest.warns(CacheWarning, match="Is a directory"):
        np.testing.assert_array_equal(_run(c.compile(spec), 2), expected(2, XS))
    assert cache.stats["write_errors"] == 1


def test_planted_entries_are_never_loaded(tmp_path):
    """Kernel 3's valid entry copied over kernel 4's file, and entries keyed for another device or another compiler
    identity planted under kernel 4's name: kernel 4 still gets its own program."""
    cache = CompileCache(tmp_path)
    r, c = _llvm(cache)
    s3, s4 = r.render(kernel(3)), r.render(kernel(4))
    lib3 = c.compile(s3).lib
    p4 = _entry(cache, s4, c)
    k4 = CacheKey(**_key_of(s4, c))
    plants = {"kernel 3's entry": _entry(cache, s3, c).read_bytes(),
              "same source for CUDA": encode_entry(CacheKey("CUDA", k4.compiler, k4.src_sha256), lib3, cache.mac_key()),
              "same source, other compiler": encode_entry(CacheKey("CPU", k4.compiler + " -O0", k4.src_sha256), lib3,
                                                          cache.mac_key())}
    for what, data in plants.items():
        p4.write_bytes(data)
        c.cache = CompileCache(tmp_path)
        got = c.compile(s4)
        assert got.lib != lib3, what
        np.testing.assert_array_equal(_run(got, 4), expected(4, XS), err_msg=what)


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777, 0o1777])
@pytest.mark.parametrize("where", ["root", "compile"])
def test_group_or_world_writable_directory_is_refused(tmp_path, mode, where):
    root = tmp_path / f"c{mode:o}{where}"
    (root / "compile").mkdir(parents=True, mode=0o700)
    os.chmod(root, 0o700)
    os.chmod(root / "compile" if where == "compile" else root, mode)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cache = CompileCache(root)
        r, c = _llvm(cache)
        np.testing.assert_array_equal(_run(c.compile(r.render(kernel(5))), 5), expected(5, XS))
    assert cache.state().startswith("refused") and "writable" in cache.state()
    assert any(issubclass(x.category, CacheWarning) for x in w)
    assert not list((root / "compile").glob("*.dkc"))  # nothing written into a directory others can write


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another uid needs root")
def test_foreign_owned_entry_directory_is_refused(tmp_path):
    root = tmp_path / "c"
    (root / "compile").mkdir(parents=True, mode=0o700)
    os.chown(root / "compile", 4242, 4242)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        state = CompileCache(root).state()
    assert state.startswith("refused") and "uid 4242" in state


def test_symlinked_root_to_a_world_writable_directory_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    link = tmp_path / "link"
    link.symlink_to(shared)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert CompileCache(link).state().startswith("refused")


# ---------------------------------------------------------------- full disk
def _can_mount() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.fixture
def tiny_tmpfs(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mnt)], capture_output=True,
                       text=True, check=False)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.skipif(not _can_mount(), reason="mounting a tmpfs needs root")
def test_full_disk_warns_once_keeps_working_and_leaves_no_temp_files(tiny_tmpfs):
    root = tiny_tmpfs / "dk"
    cache = CompileCache(root)
    assert cache.state() == "enabled"
    free = shutil.disk_usage(tiny_tmpfs).free
    (tiny_tmpfs / "filler").write_bytes(b"\0" * max(0, free - 2048))  # ~2 KiB left: entries no longer fit
    r, c = _llvm(cache)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for j in range(4):
            np.testing.assert_array_equal(_run(c.compile(r.render(kernel(10 + j))), 10 + j), expected(10 + j, XS))
    full = [x for x in w if issubclass(x.category, CacheWarning)]
    assert len(full) == 1 and "No space left" in str(full[0].message)
    assert cache.stats["write_errors"] >= 3
    assert not [p for p in cache.directory.iterdir() if p.name.startswith(".tmp-")]
    for p in cache.directory.glob("*.dkc"):  # whatever did get written is whole
        assert p.read_bytes()[:8] == b"DKCACHE\0"
    (tiny_tmpfs / "filler").unlink()  # space again: entries are stored again
    c.cache = CompileCache(root)
    c.compile(r.render(kernel(20)))
    assert c.cache.stats["write_errors"] == 0 and c.cache.info()["entries"] >= 1


FSIZE_SCRIPT = textwrap.dedent("""
    import json, resource, signal, warnings
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit then fail with EFBIG, as a full disk does
    from devicekit.compile.cache import CompileCache, CacheWarning
    import devicekit as dk
    cache = CompileCache({root!r})
    cache.state()
    r, c = dk.device("CPU").pair("llvm")
    c = type(c)(); c.cache = cache
    specs = [r.render(kernel(j)) for j in range(3)]  # before the limit: rendering stores lowered specs (default cache)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        libs = [len(c.compile(s).lib) for s in specs]
    print(json.dumps({{"libs": libs, "stats": cache.stats, "warnings": [str(x.message) for x in w
                      if issubclass(x.category, CacheWarning)], "files": sorted(p.name for p in cache.directory.iterdir())}}))
""")


def test_write_failures_from_a_file_size_limit(tmp_path, isolated):
    """No root needed: RLIMIT_FSIZE makes every entry write fail for real (EFBIG)."""
    rc, out = isolated.run(KERNEL_SRC + FSIZE_SCRIPT.format(root=str(tmp_path / "c")),
                           DEVICEKIT_CACHE_DIR=str(tmp_path / "default"))
    assert rc == 0, f"{isolated.describe(rc)}\n{out[-1500:]}"
    rep = json.loads(out.strip().splitlines()[-1])
    assert all(n > 512 for n in rep["libs"]) and rep["stats"]["write_errors"] == 3
    assert len(rep["warnings"]) == 1 and "File too large" in rep["warnings"][0]
    assert rep["files"] == []  # temp files removed


# ---------------------------------------------------------------- many processes
WORKER = textwrap.dedent("""
    import json, os, sys, time, warnings
    warnings.simplefilter("ignore")
    import numpy as np
    import devicekit as dk
    from devicekit.compile.cache import CompileCache
    go = {go!r}
    while not os.path.exists(go):
        time.sleep(0.005)
    cpu = dk.device("CPU")
    r, c = cpu.pair("llvm")
    xs = np.linspace(-3, 3, 64, dtype=np.float32)
    bad, corrupt, disk_hits = 0, 0, 0
    for rnd in range(3):
        for j in range({k}):
            comp = type(c)()
            comp.cache = CompileCache({root!r})  # nothing in memory: every round reads the disk others write
            compiled = comp.compile(r.render(kernel(j)))
            corrupt += comp.cache.stats["corrupt"]
            disk_hits += comp.cache.stats["disk_hits"]
            prog = cpu.runtime(compiled); prog.device = cpu
            x = dk.Buffer(cpu, 64, "float32").copyin(xs); o = dk.Buffer(cpu, 64, "float32")
            prog.execute([x, o], [64], wait=True)
            bad += int(not np.array_equal(o.numpy(), expected(j, xs)))
    print(json.dumps({{"bad": bad, "corrupt": corrupt, "disk_hits": disk_hits}}))
""")


def test_eight_processes_compiling_the_same_kernels(tmp_path):
    k, root, go = 6, tmp_path / "shared-cache", tmp_path / "go"
    code = KERNEL_SRC + WORKER.format(go=str(go), k=k, root=str(root))
    env = {x: v for x, v in os.environ.items() if not x.startswith("DEVICEKIT_")}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(8)]
    go.touch()  # all start compiling at once
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-1500:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert [o["bad"] for o in outs] == [0] * 8  # no wrong program was ever loaded
    assert [o["corrupt"] for o in outs] == [0] * 8  # no torn read
    assert sum(o["disk_hits"] for o in outs) >= 8 * k  # later rounds really came from the disk
    cache = CompileCache(root)
    entries = sorted(cache.directory.glob("*.dkc"))
    assert len(entries) == k  # nothing lost, nothing duplicated
    assert not [p for p in cache.directory.iterdir() if p.name.startswith(".tmp-")]
    for p in entries:
        data = p.read_bytes()
        stored = json.loads(data[14:14 + _klen(data)])
        key = CacheKey(stored[1], stored[2], stored[3])
        assert key.filename() == p.name and decode_entry(data, key, cache.mac_key())
