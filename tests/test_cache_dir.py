"""Where the disk compile cache lives when DEVICEKIT_CACHE_DIR is unset: the platform's per-user cache directory
(platformdirs), so macOS gets ~/Library/Caches/devicekit rather than a Linux-style ~/.cache; the variable still wins."""

from __future__ import annotations

from pathlib import Path

import platformdirs
import pytest
from devicekit.compile.cache import default_cache_dir
from platformdirs.macos import MacOS
from platformdirs.unix import Unix


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.delenv("DEVICEKIT_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_macos_uses_library_caches(home, monkeypatch):
    monkeypatch.setattr(platformdirs, "PlatformDirs", MacOS)  # what platformdirs picks on a Mac
    assert default_cache_dir() == home / "Library" / "Caches" / "devicekit"


def test_linux_uses_xdg_cache_home_else_dot_cache(home, monkeypatch):
    monkeypatch.setattr(platformdirs, "PlatformDirs", Unix)
    assert default_cache_dir() == home / ".cache" / "devicekit"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "xdg"))
    assert default_cache_dir() == home / "xdg" / "devicekit"


def test_devicekit_cache_dir_wins(home, monkeypatch):
    monkeypatch.setattr(platformdirs, "PlatformDirs", MacOS)
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(home / "mine"))
    assert default_cache_dir() == home / "mine"
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", "~/tilde")
    assert default_cache_dir() == Path(home / "tilde")
