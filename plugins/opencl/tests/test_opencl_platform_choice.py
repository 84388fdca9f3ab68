"""Choosing the platform when there are several: one whose compiler cannot build (an old PoCL whose LLVM does not know
the host CPU: "unknown target CPU 'generic'") is passed over with its reason, never chosen to fail every compile.

The broken platform is a stand-in object (a real broken PoCL exists only on some CPUs); the working one is real."""

from __future__ import annotations

import pytest

pytest.importorskip("pyopencl")

from devicekit_opencl import platform as P


class _BrokenDevice:
    name = "pthread-broken"
    type = 2  # CL_DEVICE_TYPE_CPU: a context cannot be made on it, as a build cannot on a broken PoCL


class _BrokenPlatform:
    name = "Broken Computing Language"
    version = "OpenCL 3.0 broken"

    def get_devices(self):
        return [_BrokenDevice()]


@pytest.fixture
def platforms(monkeypatch):
    def use(plats):
        monkeypatch.setattr(P, "_platforms", lambda: plats)
        monkeypatch.setattr(P, "_builds", {})
        P._select.cache_clear()
    yield use
    P._select.cache_clear()  # no stand-in platform stays chosen for the tests after


def _working():
    try:
        real = [p for p in P._platforms() if P._devices(p) and P._build_failure(p, P._devices(p)[0]) is None]
    except P.Unavailable as e:
        pytest.skip(str(e))
    if not real:
        pytest.skip("no OpenCL platform here builds a kernel")
    return real[0]


def test_a_platform_that_cannot_build_is_passed_over(platforms):
    good = _working()
    platforms([_BrokenPlatform(), good])
    assert P.select().platform is good
    assert P._builds[("Broken Computing Language", "OpenCL 3.0 broken", "pthread-broken")]  # the reason is kept


def test_only_broken_platforms_make_the_kind_unavailable_with_the_reason(platforms):
    platforms([_BrokenPlatform()])
    avail = P.probe()
    assert not avail.ok
    assert "no OpenCL platform here can build a kernel: Broken Computing Language (OpenCL 3.0 broken)" in avail.reason


def test_an_explicitly_chosen_broken_platform_says_why(platforms, monkeypatch):
    good = _working()
    platforms([good, _BrokenPlatform()])
    monkeypatch.setenv("DEVICEKIT_OPENCL_PLATFORM", "broken")
    avail = P.probe()
    assert not avail.ok and "cannot build a kernel here" in avail.reason, avail.reason
