"""DeviceSpec: the canonical name of one device, "CPU" or "CUDA:1"."""

from __future__ import annotations

import re
from dataclasses import dataclass

_SPEC_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*(\d+)\s*)?$", re.ASCII)  # ASCII digits: "CPU:١" is no CPU:1
_KIND_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")


@dataclass(frozen=True)
class DeviceSpec:
    """A device kind (upper case, an open set: any plugin may add one) and an index among that kind's devices.

    `str()` is canonical: index 0 prints without ":0" ("CPU", "CUDA:1"), and `DeviceSpec.parse(str(s)) == s`.
    """

    kind: str
    index: int = 0

    def __post_init__(self):
        if not isinstance(self.kind, str):
            raise TypeError(f"DeviceSpec.kind must be a str, got {type(self.kind).__name__}")
        kind = self.kind.strip().upper()
        if not _KIND_RE.match(kind):
            raise ValueError(f"invalid device kind {self.kind!r}: expected a name like 'CPU' or 'CUDA' "
                             "(letters, digits, underscore; not starting with a digit)")
        if isinstance(self.index, bool) or not isinstance(self.index, int):
            raise TypeError(f"DeviceSpec.index must be an int, got {type(self.index).__name__}")
        if self.index < 0:
            raise ValueError(f"device index must be >= 0, got {self.index}")
        object.__setattr__(self, "kind", kind)

    @classmethod
    def parse(cls, s: str | DeviceSpec) -> DeviceSpec:
        """'cuda:1' -> DeviceSpec('CUDA', 1); 'CPU' and 'CPU:0' -> DeviceSpec('CPU', 0). Kinds are case-insensitive."""
        if isinstance(s, DeviceSpec):
            return s
        if not isinstance(s, str):
            raise TypeError(f"a device spec is a string like 'CUDA:1', got {type(s).__name__}")
        m = _SPEC_RE.match(s)
        if m is None or len(m.group(2) or "") > 18:  # an index past int64 (5,000 digits: int() itself refuses)
            shown = repr(s) if len(s) <= 80 else f"{s[:60]!r}... ({len(s)} characters)"
            raise ValueError(f"invalid device spec {shown}: expected KIND or KIND:INDEX, e.g. 'CPU' or 'CUDA:1'")
        return cls(m.group(1), int(m.group(2)) if m.group(2) is not None else 0)

    def __str__(self) -> str:
        return self.kind if self.index == 0 else f"{self.kind}:{self.index}"
