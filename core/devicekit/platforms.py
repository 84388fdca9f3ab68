"""Which of a driver's platforms and devices become a kind's ids (KIND:0, KIND:1, ...): the choice a plugin makes
over a driver that lists platforms, each with typed devices (OpenCL's ICDs: a GPU vendor's, PoCL's; a Vulkan loader's
drivers and a Level Zero loader's are the same shape). devicekit-opencl uses it.

- `device_choice` and `platform_choice` parse the two variables such a plugin declares (which devices: a type or
  indices; which platform: an index or a part of its name), each value bounded.
- `choose_platform`: the named platform, else the first with a GPU, else the first with any device, of those that
  pass the plugin's smoke check (a platform may list devices and still fail every build: an old PoCL whose LLVM does
  not know the host CPU), so installing a second driver never makes the kind fail. `Unavailable` says why none,
  with each platform's reason.
- `Selection`: the chosen platform and the devices a choice keeps (`Selection.of`), and each id's device (`device`).
- `probe`: the kind's probe over the devices found, above the CPU device only with a GPU (WEBGPU's uses it too)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import settings
from .plugin import Availability

__all__ = ["DEVICE_TYPES", "Selection", "Unavailable", "choose_platform", "device_choice", "first_error_line",
           "platform_choice", "probe"]

DEVICE_TYPES = ("all", "gpu", "cpu", "accelerator")
MAX_INDEX_DIGITS = 4  # devicekit lists at most 4096 ids per kind
MAX_NAME = 256  # characters of a platform name part


class Unavailable(RuntimeError):
    """No usable platform or device; the message says why and what to do."""


@settings.accepting("all, gpu, cpu, accelerator, or device indices within the platform such as 0 or 0,2")
def device_choice(raw: str) -> tuple[str, tuple[int, ...]]:
    """(type, ()) for a device type, ("index", indices) for distinct indices in the platform's order."""
    text = raw.strip().lower()
    if text in DEVICE_TYPES:
        return text, ()
    parts = [x.strip() for x in text.split(",")]
    if not all(x.isascii() and x.isdigit() for x in parts):
        raise ValueError("not a device type or a list of indices")
    if any(len(x) > MAX_INDEX_DIGITS for x in parts):
        raise ValueError("an index out of range")
    idx = tuple(int(x) for x in parts)
    if not idx or len(set(idx)) != len(idx):
        raise ValueError("indices must be distinct and >= 0")
    return "index", idx


@settings.accepting(f"a platform index (0, 1, ...) or a part of its name of at most {MAX_NAME} characters")
def platform_choice(raw: str) -> str:
    """A platform index (ASCII digits) or a part of its name; kept as written (`choose_platform` matches it)."""
    text = raw.strip()
    if text.isdigit() and not (text.isascii() and len(text) <= MAX_INDEX_DIGITS):
        raise ValueError("not a platform index")
    if len(text) > MAX_NAME:
        raise ValueError("longer than any platform name")
    return raw


def first_error_line(log: str, fallback: str) -> str:
    """The first line of a driver's log that mentions an error, else its first line, else `fallback` (200
    characters at most): the reason a smoke check failed, short enough for a device listing."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    return next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else fallback)[:200]


def choose_platform(want: str | None, platforms: Sequence[Any], *, api: str, var: str,
                    devices_of: Callable[[Any], list[Any]], type_of: Callable[[Any], str],
                    failure: Callable[[Any, Any], str | None],
                    describe: Callable[[Any], str] = lambda p: p.name) -> tuple[Any, list[Any]]:
    """(platform, its devices): the one `want` names (`platform_choice`: an index or a part of its name,
    case-insensitive), else the first with a device whose `type_of` is "gpu", else the first with any device, of
    those whose first device passes `failure(platform, device)` (None, or why not). `platforms` has at least one;
    `api` and `var` name the driver and the variable in the messages."""
    names = ", ".join(f"{i}: {p.name}" for i, p in enumerate(platforms))
    if want is not None:
        text = want.strip()
        if text.isdigit() and int(text) >= len(platforms):
            raise Unavailable(f"{var}={want}: there are {len(platforms)} platforms ({names})")
        hits = [platforms[int(text)]] if text.isdigit() else [p for p in platforms if text.lower() in p.name.lower()]
        if not hits:
            raise Unavailable(f"{var}={want!r} matches no platform ({names})")
        plat, devs = hits[0], devices_of(hits[0])
        if devs and (why_not := failure(plat, devs[0])):
            raise Unavailable(f"{var}={want!r}: {plat.name} cannot build a kernel here: {why_not}")
        return plat, devs
    found = [(p, ds) for p in platforms if (ds := devices_of(p))]
    if not found:
        raise Unavailable(f"no {api} platform has a device (platforms: {names})")
    found.sort(key=lambda pd: not any(type_of(d) == "gpu" for d in pd[1]))  # GPU first, else in order (stable)
    reasons = []
    for p, ds in found:
        if (why := failure(p, ds[0])) is None:
            return p, ds
        reasons.append(f"{describe(p)}: {why}")
    raise Unavailable(f"no {api} platform here can build a kernel: " + "; ".join(reasons))


@dataclass(frozen=True)
class Selection:
    """The chosen platform (an object with a `name` and a `version`, as the driver's) and its devices in use: KIND:i
    is devices[i]."""

    platform: Any
    devices: tuple[Any, ...]

    @classmethod
    def of(cls, plat: Any, devs: Sequence[Any], choice: tuple[str, tuple[int, ...]], type_of: Callable[[Any], str],
           *, api: str, var: str) -> Selection:
        """The devices `choice` (`device_choice`'s value) keeps of `devs`, in the platform's order of indices or
        types; Unavailable when none is left or an index is past the platform's devices."""
        kind, idx = choice
        if kind == "index":
            if bad := [i for i in idx if i >= len(devs)]:
                raise Unavailable(f"{var}: {plat.name} has {len(devs)} devices, no device {bad[0]}")
            devs = [devs[i] for i in idx]
        elif kind != "all":
            devs = [d for d in devs if type_of(d) == kind]
        if not devs:
            what = "" if kind in ("all", "index") else f" of type {kind} ({var})"
            raise Unavailable(f"{api} platform {plat.name} has no device{what}")
        return cls(plat, tuple(devs))

    def device(self, kind: str, index: int) -> Any:
        """The device of KIND:index; Unavailable naming how many there are when it does not exist."""
        if not 0 <= index < len(self.devices):
            raise Unavailable(f"{kind}:{index} does not exist: {self.platform.name} ({self.platform.version}) has "
                              f"{len(self.devices)} device(s)")
        return self.devices[index]


def probe(find: Callable[[], Sequence[Any]], is_gpu: Callable[[Any], bool]) -> Availability:
    """A kind's probe: available when `find()` gives its devices, above the CPU device only when one is a GPU
    (Availability.found: a software driver, PoCL's host-CPU device or lavapipe, never changes the default device);
    not available, with the reason, when it raises Unavailable."""
    try:
        found = find()
    except Unavailable as e:
        return Availability.no(str(e))
    return Availability.found(gpu=any(is_gpu(d) for d in found))
