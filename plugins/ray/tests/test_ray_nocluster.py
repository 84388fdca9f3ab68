"""Without a reachable cluster (no RAY_ADDRESS, no ray.init()): RAY is listed unavailable with the reason, and listing
devices neither imports Ray nor starts a cluster. Two fresh interpreters, ~3 s."""

from __future__ import annotations

import json

CODE = """
import json, sys
import devicekit as dk
from devicekit.cli.info import report, text_report
from devicekit.registry import get_registry
row = next(d for d in dk.devices() if d.kind == "RAY")
info = next(x for x in text_report(report(get_registry())).splitlines() if x.strip().startswith("RAY "))
print(json.dumps({"available": row.available, "reason": row.reason, "ray_imported": "ray" in sys.modules,
                  "info": info}))
"""


def test_without_a_cluster_ray_is_unavailable_and_nothing_starts(run_py):
    p = run_py("-c", CODE)
    assert p.returncode == 0, p.stderr[-3000:]
    row = json.loads(p.stdout.strip().splitlines()[-1])
    assert row["available"] is False
    assert "RAY_ADDRESS is not set" in row["reason"] and "never starts a cluster" in row["reason"], row
    assert row["ray_imported"] is False, "listing devices (and devicekit info) imported ray"
    assert "unavailable: no Ray cluster" in row["info"], row["info"]


def test_an_unreachable_address_is_a_reason_not_a_hang(run_py):
    p = run_py("-c", CODE, env={"RAY_ADDRESS": "127.0.0.1:1"}, timeout=60)
    assert p.returncode == 0, p.stderr[-3000:]
    row = json.loads(p.stdout.strip().splitlines()[-1])
    assert row["available"] is False
    assert "127.0.0.1:1" in row["reason"], row
