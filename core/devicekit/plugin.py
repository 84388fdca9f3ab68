"""What plugins declare: cheap dataclasses returned from hooks. Nothing heavy is built until a device is asked for.

A plugin module sets `DEVICEKIT_API = (1, 0)` (the API it was built for; `API_VERSION` is the core's) and defines
`@devicekit.hookimpl` functions from `devicekit.hookspecs`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .compile.compiler import Compiler
    from .memory import Allocator
    from .render.renderer import Renderer
    from .runtime import RuntimeFactory
    from .spec import DeviceSpec

API_VERSION: tuple[int, int] = (1, 0)
"""The plugin API this core provides. A plugin declaring another major version is refused; a newer minor is noted."""

GPU_PRIORITY = 40  # a kind found on a real GPU: above CPU (10), below CUDA and METAL (50), which win on their own GPUs
SOFTWARE_PRIORITY = 2  # the same kind on a software or host-CPU device: below CPU (10) and ACME (5), above PYTHON


@dataclass(frozen=True)
class Availability:
    """The answer of a kind's probe: available, or not with the reason in words ("no CUDA driver", "needs macOS").

    `priority`, when given, replaces the kind's declared `DeviceKind.priority` once the probe has run: a probe knows
    what it found (OpenCL on a real GPU should outrank the CPU device, OpenCL on PoCL's host-CPU device must not),
    the declaration made before it cannot. None keeps the declared priority. Like every priority it must be an int.
    """

    ok: bool
    reason: str = ""
    priority: int | None = None

    def __post_init__(self) -> None:
        if self.priority is not None:
            check_priority(self)

    @classmethod
    def yes(cls, priority: int | None = None) -> Availability:
        return cls(True, "", priority)

    @classmethod
    def found(cls, gpu: bool) -> Availability:
        """Available, ranked by what the probe found: GPU_PRIORITY on a real GPU, else SOFTWARE_PRIORITY, so that
        installing a software driver (PoCL for OPENCL, lavapipe for WEBGPU) never changes the default device."""
        return cls(True, "", GPU_PRIORITY if gpu else SOFTWARE_PRIORITY)

    @classmethod
    def no(cls, reason: str) -> Availability:
        return cls(False, reason)

    def __bool__(self) -> bool:
        return self.ok


def check_priority(decl: object) -> None:
    """Refuse a priority that is not an integer (NaN, 2.5, True, "5"): ranking sorts by it, and NaN or a float
    would sort silently wrong. Integral values (numpy ints included) are stored as a plain int."""
    p = getattr(decl, "priority", None)
    if isinstance(p, bool) or not isinstance(p, numbers.Integral):
        name = getattr(decl, "name", None)
        what = f"{type(decl).__name__} {name!r}" if name is not None else type(decl).__name__
        raise TypeError(f"{what}: priority must be an int, got {p!r} ({type(p).__name__})")
    if type(p) is not int:
        object.__setattr__(decl, "priority", int(p))


def _always() -> Availability:
    return Availability.yes()


def _one() -> int:
    return 1


@dataclass(frozen=True)
class DeviceKind:
    """A device kind a plugin owns. `probe()` must be cheap and must not raise for "not here"; `count()` is the
    number of ids (CUDA:0..count-1) and is only called when the probe said yes. The highest priority among
    available kinds is the default device: the probe's `Availability.priority` when it gives one, else `priority`. Every priority here and in the factories below must be an int (NaN,
floats and bools are refused when the declaration is made)."""

    name: str
    description: str = ""
    priority: int = 0
    probe: Callable[[], Availability] = _always
    count: Callable[[], int] = _one
    # an example or emulated device, not hardware (the vendor example ACME): listed and usable, marked "example"
    # by `devicekit info`/`devices`, and left out of what tools pick by themselves (`devicekit bench` without --device)
    example: bool = False
    # where id i is, in words, for `devicekit info` (a remote device's node); called only after count() said i exists
    describe_id: Callable[[int], str] | None = None
    # seconds probe() and count() may each take, for a kind whose probe is slow by nature (a cluster's discovery);
    # None: the core's default (5). DEVICEKIT_PROBE_TIMEOUT, when the user sets it, wins over both. 0: no limit
    probe_timeout: float | None = None
    # True: the probe's answer depends only on the machine (drivers, installed packages, environment variables), not
    # on this process's state, so the registry may remember it across processes (registry/probe_memo.py) while
    # listing devices; a device is probed for real before it is built, and `devicekit info` always probes
    memo: bool = False
    # seconds after which a clean "unavailable" answer is probed again when the kind is next asked about, for a kind
    # that can come up while a process runs (a Ray cluster started after the process listed devices); None: the
    # answer lasts as long as the registry, as every answer did. Available answers, and answers of a probe that
    # raised or timed out (the plugin's failure: it would hang or fail again), are kept either way
    recheck_after: float | None = None

    def __post_init__(self) -> None:
        check_priority(self)
        if not isinstance(self.example, bool):
            raise TypeError(f"DeviceKind {self.name!r}: example must be a bool, got {self.example!r}")
        if not isinstance(self.memo, bool):
            raise TypeError(f"DeviceKind {self.name!r}: memo must be a bool, got {self.memo!r}")
        r = self.recheck_after
        if r is not None:
            if isinstance(r, bool) or not isinstance(r, numbers.Real):
                raise TypeError(f"DeviceKind {self.name!r}: recheck_after must be None or a number of seconds, got "
                                f"{r!r} ({type(r).__name__})")
            if not math.isfinite(r) or r <= 0:
                raise ValueError(f"DeviceKind {self.name!r}: recheck_after must be a number of seconds > 0 (None: "
                                 f"never probe again), got {r!r}")
            object.__setattr__(self, "recheck_after", float(r))
        t = self.probe_timeout
        if t is None:
            return
        if isinstance(t, bool) or not isinstance(t, numbers.Real):
            raise TypeError(f"DeviceKind {self.name!r}: probe_timeout must be None or a number of seconds, got {t!r} "
                            f"({type(t).__name__})")
        if not math.isfinite(t) or t < 0:
            raise ValueError(f"DeviceKind {self.name!r}: probe_timeout must be a number of seconds >= 0 (0: no limit), "
                             f"got {t!r}")
        object.__setattr__(self, "probe_timeout", float(t))


@dataclass(frozen=True)
class AllocatorFactory:
    """Builds the allocator of one device: `factory(spec)` gets that device's full DeviceSpec (kind and index:
    OPENCL:1's allocator must allocate in device 1's context). The highest priority answer wins; a tie at the top is an error."""

    factory: Callable[[DeviceSpec], Allocator]
    priority: int = 0

    def __post_init__(self) -> None:
        check_priority(self)


@dataclass(frozen=True)
class CompilerPairFactory:
    """One (renderer, compiler) pair for a kind, by name ("llvm", "clang", "nvrtc"). `renderer(spec)` and
    `compiler(spec)` get the full DeviceSpec (kind and index) of the device or target being built; a target built
    for a kind alone (`dk.target("OPENCL")`) gets index 0. Any plugin may add pairs to any
    kind. Pairs are ordered by priority, best first; a factory that raises is skipped and the reason kept."""

    name: str
    renderer: Callable[[DeviceSpec], Renderer]
    compiler: Callable[[DeviceSpec], Compiler]
    priority: int = 0

    def __post_init__(self) -> None:
        check_priority(self)


@dataclass(frozen=True)
class RuntimeFactoryDecl:
    """Builds the runtime of one device: `factory(spec)` gets that device's full DeviceSpec (kind and index) and
    returns a RuntimeFactory (CompiledSpec -> Program) whose Programs load and run on that device only: the core
    checks that every buffer a Program is given lives on the same device (kind and index)."""

    factory: Callable[[DeviceSpec], RuntimeFactory]
    priority: int = 0

    def __post_init__(self) -> None:
        check_priority(self)
