#!/usr/bin/env bash
# Create .venv (if missing) and install devicekit with its test extras, every plugin under plugins/ and the example
# vendor plugin, all editable. Idempotent and quiet: when nothing it installs from changed since the last run, it
# returns at once. Build isolation is off (the venv's own setuptools builds), so reruns need no network.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
VPY=.venv/bin/python

projects=(.)
for pp in plugins/*/pyproject.toml; do
    [ -f "$pp" ] && projects+=("$(dirname "$pp")")
done
[ -f examples/vendor_plugin/pyproject.toml ] && projects+=(examples/vendor_plugin)

stamp=.venv/.devicekit-dev-setup
want=$( (cat "$0"; for p in "${projects[@]}"; do echo "$p"; cat "$p/pyproject.toml"; done) | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VPY" -c 'import devicekit' 2>/dev/null; then
    exit 0
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
pipq() {  # quiet: pip's and the build backend's chatter only shows when something fails
    if ! "$VPY" -m pip install -q --disable-pip-version-check "$@" >"$log" 2>&1; then
        cat "$log" >&2
        echo "dev-setup: pip install $* failed" >&2
        exit 1
    fi
}
# the build backend named in [build-system] (setuptools>=70.1 builds wheels without the `wheel` package)
if ! "$VPY" -c 'import setuptools, sys; v = tuple(int(x) for x in setuptools.__version__.split(".")[:2]); sys.exit(v < (70, 1))' 2>/dev/null; then
    pipq "setuptools>=70.1"
fi
args=()
for p in "${projects[@]}"; do
    if [ "$p" = . ]; then args+=(-e ".[test,bench]")
    elif grep -Eq '^test[[:space:]]*=' "$p/pyproject.toml"; then args+=(-e "$p[test]")  # a plugin's test extra
    else args+=(-e "$p"); fi
done
pipq --no-build-isolation "${args[@]}"
echo "$want" > "$stamp"
