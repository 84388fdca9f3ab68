#!/usr/bin/env bash
# The test setup: .venv with everything the tests use, all editable: the core with its `test` and `bench` extras,
# every plugins/* package (as "plugins/X[test]" when its pyproject has a `test` extra) and the example vendor plugin
# (examples/vendor_plugin, the ACME device). Idempotent: a rerun with nothing changed returns at once. The main job
# alone needs less: scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_install.sh

has_test_extra() {  # $1: a project directory; true when its pyproject.toml defines a `test` extra
    awk '/^\[/ { inside = ($0 == "[project.optional-dependencies]") } inside && /^test[ \t]*=/ { found = 1 }
         END { exit !found }' "$1/pyproject.toml"
}

args=(-e ".[test,bench]")
names=("devicekit[test,bench]")
for pp in plugins/*/pyproject.toml examples/vendor_plugin/pyproject.toml; do
    [ -f "$pp" ] || continue
    d=$(dirname "$pp")
    if has_test_extra "$d"; then args+=(-e "$d[test]"); names+=("$d[test]"); else args+=(-e "$d"); names+=("$d"); fi
done
what=$(printf '%s, ' "${names[@]}")
dk_install dev-setup "${what%, }" "${args[@]}"
