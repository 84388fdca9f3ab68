import json
import os
import shutil
import subprocess
import sys

import pytest
from devicekit.cli import main


def cli(*args, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    e.update(env)
    return subprocess.run([sys.executable, "-m", "devicekit.cli", *args], capture_output=True, check=False, text=True, env=e,
                          timeout=120)


def test_usage_errors_exit_2(capsys):
    assert main([]) == 2
    assert main(["frobnicate"]) == 2
    assert main(["cache", "explode"]) == 2
    assert "usage: devicekit" in capsys.readouterr().err


def test_cache_info_and_clear(tmp_path):
    d = tmp_path / "cache"
    p = cli("cache", "info", "--json", DEVICEKIT_CACHE_DIR=str(d))
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["dir"] == str(d / "compile") and info["state"] == "enabled" and info["entries"] == 0
    (d / "compile" / ("ab" * 32 + ".dkc")).write_bytes(b"junk")
    p = cli("cache", "clear", DEVICEKIT_CACHE_DIR=str(d))
    assert p.returncode == 0 and "removed 1 entries" in p.stdout
    assert not list((d / "compile").glob("*.dkc"))


def test_cache_clear_on_refused_dir_fails(tmp_path):
    d = tmp_path / "open"
    d.mkdir()
    os.chmod(d, 0o777)
    p = cli("cache", "clear", DEVICEKIT_CACHE_DIR=str(d))
    assert p.returncode == 1 and "not in use" in p.stderr
    assert cli("cache", "info", DEVICEKIT_CACHE_DIR=str(d)).returncode == 0


def test_devices_and_info_run(tmp_path):
    p = cli("devices", "--json", DEVICEKIT_CACHE_DIR=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert all({"spec", "kind", "plugin", "available", "reason", "pair_names"} <= set(d) for d in json.loads(p.stdout))
    p = cli("info", DEVICEKIT_CACHE_DIR=str(tmp_path))
    assert p.returncode == 0 and "plugins:" in p.stdout and "compile cache:" in p.stdout


@pytest.mark.skipif(shutil.which("devicekit", path=os.path.dirname(sys.executable)) is None,
                    reason="console script not installed (run scripts/dev-setup.sh)")
def test_console_script(tmp_path):
    exe = shutil.which("devicekit", path=os.path.dirname(sys.executable))
    p = subprocess.run([exe, "cache", "info", "--json"], capture_output=True, check=False, text=True,
                       env={**os.environ, "DEVICEKIT_CACHE_DIR": str(tmp_path)}, timeout=120)
    assert p.returncode == 0 and json.loads(p.stdout)["dir"] == str(tmp_path / "compile")
