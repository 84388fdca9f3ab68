"""The pytest side of the conformance kit: the `--devicekit-device` option, its fixtures and the skip of the kit's
tests when the option is absent. Loaded in every pytest run of an environment with devicekit installed, so it imports
nothing of devicekit until the option is used."""

from __future__ import annotations

import pytest

MARKER = "devicekit_conformance"

# The kit's per-kernel checks: one case per kernel (library kernels, memory-order kernels, hand-written sources),
# each compiling and running a kernel of its own. `--devicekit-sample=K` runs every K-th case of these; every other
# check (hooks, memory, launches, errors, sizes, dtypes, names, interrupt, limits: what is particular to a device) and
# the render and compile of every library kernel still run whole.
SAMPLED = ("test_library_kernel_matches_reference", "test_memory_order_matches_reference",
           "test_memory_order_compiles", "test_handwritten_source_matches_numpy")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("devicekit", "devicekit conformance kit")
    group.addoption("--devicekit-device", metavar="KIND", default=None,
                    help="run the devicekit conformance kit (pytest --pyargs devicekit.testing) against this device, "
                         "e.g. CPU, ACME or CUDA:1")
    group.addoption("--devicekit-seeds", metavar="N", type=int, default=12,
                    help="how many random kernels (seeds 0..N-1) the kit compares with the PYTHON device (default 12)")
    group.addoption("--devicekit-fuzz", metavar="N", type=int, default=0,
                    help="also run the differential fuzzer (devicekit.testing.fuzz) on N kernels against the device "
                         "under test, every compiler pair vs PYTHON (default 0: off)")
    group.addoption("--devicekit-sample", metavar="K", type=int, default=1,
                    help="run every K-th case of the kit's per-kernel checks (library kernels, memory-order kernels, "
                         "hand-written sources) and every other check whole: for a suite that runs every case on "
                         "another device already (default 1: the whole kit)")
    group.addoption("--devicekit-fuzz-seed", metavar="S", type=int, default=0,
                    help="the first fuzz seed (default 0): seeds S..S+N-1")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: a test of the devicekit conformance kit (needs --devicekit-device)")
    if config.getoption("devicekit_device", None):
        _private_cache(config)  # first: checking the device probes plugins, and probes may store in the cache


def _known_device(spec_text: str) -> str | None:
    """None when the spec names a known kind, else the message saying which devices exist."""
    from devicekit.registry import devices
    from devicekit.spec import DeviceSpec

    try:
        spec = DeviceSpec.parse(spec_text)
    except (TypeError, ValueError) as e:
        return f"--devicekit-device: {e}"
    infos = devices()
    rows = [d for d in infos if d.kind == spec.kind]
    if rows and (not rows[0].available or any(d.spec == str(spec) for d in rows)):
        return None  # an unavailable kind is tested as far as it goes here (render, compile)
    if rows:
        return f"--devicekit-device={spec_text}: {spec.kind} has {', '.join(d.spec for d in rows)} here, no {spec}"
    known = ", ".join(f"{d.spec} ({'available' if d.available else 'unavailable: ' + d.reason})" for d in infos)
    return f"--devicekit-device={spec_text}: no plugin declares the kind {spec.kind}. Known devices: {known or 'none'}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kit = [item for item in items if item.get_closest_marker(MARKER)]
    if not kit:
        return
    spec_text = config.getoption("devicekit_device")
    if not spec_text:
        skip = pytest.mark.skip(reason="devicekit conformance kit: pass --devicekit-device=KIND to run it")
        for item in kit:
            item.add_marker(skip)
        return
    _private_cache(config)  # set at configure already; kept for a caller that skipped it
    if (err := _known_device(spec_text)) is not None:
        raise pytest.UsageError(err)
    _sample(config, items)


def _sample(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--devicekit-sample=K: deselects all but every K-th case (0, K, 2K, ...) of each SAMPLED check."""
    k = config.getoption("devicekit_sample", 1)
    if k < 1:
        raise pytest.UsageError(f"--devicekit-sample must be >= 1, got {k}")
    if k == 1:
        return
    seen: dict[tuple[str, str], int] = {}
    keep, drop = [], []
    for item in items:
        name = getattr(item, "originalname", item.name)
        if item.get_closest_marker(MARKER) and name in SAMPLED and hasattr(item, "callspec"):
            i = seen[(str(item.path), name)] = seen.get((str(item.path), name), -1) + 1
            if i % k:
                drop.append(item)
                continue
        keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _private_cache(config: pytest.Config) -> None:
    """The kit compiles hundreds of kernels: into a temporary compile cache (DEVICEKIT_CACHE_DIR for this process
    and the fresh interpreters it starts), removed at the end, never the user's own cache."""
    import tempfile

    from devicekit.compile.cache import reset_default_cache

    if getattr(config, "_devicekit_cache", None) is not None:
        return  # already set up (test_conformance_source builds the target while collecting)
    tmp = tempfile.mkdtemp(prefix="devicekit-kit-cache-")
    env = pytest.MonkeyPatch()  # undone at unconfigure: the caller's setting comes back
    env.setenv("DEVICEKIT_CACHE_DIR", tmp)
    config._devicekit_cache = (tmp, env)
    reset_default_cache()


def pytest_unconfigure(config: pytest.Config) -> None:
    saved = getattr(config, "_devicekit_cache", None)
    if saved is None:
        return
    import shutil

    from devicekit.compile.cache import reset_default_cache

    tmp, env = saved
    env.undo()
    reset_default_cache()
    shutil.rmtree(tmp, ignore_errors=True)


def pytest_report_header(config: pytest.Config) -> str | None:
    spec_text = config.getoption("devicekit_device")
    if not spec_text or _known_device(spec_text) is not None:
        return None
    from .conformance import device_info
    d = device_info(spec_text)
    state = "available" if d.available else f"unavailable here ({d.reason}): runtime tests skip"
    return f"devicekit conformance: {spec_text} from plugin {d.plugin!r} ({d.distribution} {d.version}), {state}"


# ---------------------------------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def dk_spec(request: pytest.FixtureRequest):
    """The DeviceSpec under test (from --devicekit-device)."""
    from devicekit.spec import DeviceSpec

    spec_text = request.config.getoption("devicekit_device")
    if not spec_text:
        pytest.skip("devicekit conformance kit: pass --devicekit-device=KIND to run it")
    return DeviceSpec.parse(spec_text)


@pytest.fixture(scope="session")
def dk_info(dk_spec):
    """The dk.devices() row of the device under test (the kind's row when it is unavailable)."""
    from .conformance import device_info
    return device_info(dk_spec)


@pytest.fixture(scope="session")
def dk_target(dk_spec, dk_info):
    """dk.target(spec): the compile side, built even where the device cannot run."""
    import devicekit as dk
    try:
        return dk.target(dk_spec)
    except dk.DeviceKitError as e:
        if dk_info.available:
            raise  # an available device must have a compile side
        pytest.skip(f"{dk_spec} has no compile side here: {e}")


@pytest.fixture(scope="session")
def dk_compiles(dk_target, dk_info):
    """Skips when the target's compiler cannot run on this machine (e.g. Metal off macOS); else the target."""
    import devicekit as dk

    from .conformance import probe_kernel
    try:
        dk_target.compiler.compile(dk_target.renderer.render(probe_kernel()))
    except dk.CompileError as e:
        if dk_info.available:
            raise
        pytest.skip(f"{dk_target.spec} renders here but cannot compile: {e.message}")
    return dk_target


@pytest.fixture(scope="session")
def dk_device(dk_spec, dk_info):
    """dk.device(spec), or a skip with the reason dk.devices() gives when the device cannot run here."""
    import devicekit as dk
    if not dk_info.available:
        pytest.skip(f"{dk_spec} cannot run here: {dk_info.reason}")
    return dk.device(dk_spec)


@pytest.fixture(scope="session")
def dk_seeds(request: pytest.FixtureRequest) -> list[int]:
    n = request.config.getoption("devicekit_seeds")
    if n < 0:
        raise pytest.UsageError(f"--devicekit-seeds must be >= 0, got {n}")
    return list(range(n))


@pytest.fixture(scope="session")
def dk_fuzz(request: pytest.FixtureRequest) -> range:
    """The fuzz seeds of --devicekit-fuzz=N (from --devicekit-fuzz-seed); a skip when N is 0."""
    n = request.config.getoption("devicekit_fuzz")
    start = request.config.getoption("devicekit_fuzz_seed")
    if n < 0 or start < 0:
        raise pytest.UsageError(f"--devicekit-fuzz and --devicekit-fuzz-seed must be >= 0, got {n} and {start}")
    if n == 0:
        pytest.skip("the differential fuzzer is off: pass --devicekit-fuzz=N to run N kernels")
    return range(start, start + n)
