# Shared by setup.sh (the main job) and dev-setup.sh (the tests): create .venv when missing, then install the given
# pip arguments (editable projects) unless a stamp says exactly these were installed from these pyproject files.
# Quiet pip, one progress line per step; pip's own output only shows when it fails. Build isolation is off (the
# venv's own setuptools builds), so a rerun needs no network.
# usage: dk_install NAME "what it installs, in words" PIP_ARGS...   (the caller is in the repository root)

dk_install() {
    local name=$1 what=$2
    shift 2
    local py="${PYTHON:-python3}" vpy=.venv/bin/python
    local stamp=".venv/.devicekit-$name" want log
    want=$( (cat scripts/_install.sh "scripts/$name.sh"; printf '%s\n' "$@"
             for a in "$@"; do
                 local d=${a%%\[*}
                 [ -f "$d/pyproject.toml" ] && cat "$d/pyproject.toml"
             done) | sha256sum | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$vpy" -c 'import devicekit' 2>/dev/null; then
        echo "$name: .venv is up to date ($what)"
        return 0
    fi
    if [ ! -x "$vpy" ]; then
        echo "$name: creating .venv with $("$py" --version 2>&1)"
        "$py" -m venv .venv
    fi
    log=$(mktemp)
    # shellcheck disable=SC2064
    trap "rm -f '$log'" EXIT
    _dk_pip() {
        if ! "$vpy" -m pip install -q --disable-pip-version-check "$@" >"$log" 2>&1; then
            cat "$log" >&2
            echo "$name: pip install $* failed" >&2
            exit 1
        fi
    }
    # the build backend named in [build-system] (setuptools>=70.1 builds wheels without the `wheel` package)
    if ! "$vpy" -c 'import setuptools, sys; v = tuple(int(x) for x in setuptools.__version__.split(".")[:2]); sys.exit(v < (70, 1))' 2>/dev/null; then
        echo "$name: installing setuptools>=70.1 (the build backend)"
        _dk_pip "setuptools>=70.1"
    fi
    echo "$name: installing $what into .venv (a minute or two the first time; quiet unless it fails)"
    local t0=$SECONDS
    _dk_pip --no-build-isolation "$@"
    echo "$want" > "$stamp"
    echo "$name: done in $((SECONDS - t0)) s; .venv/bin/python has $(
        "$vpy" -m pip list --disable-pip-version-check --format=freeze 2>/dev/null | grep -ciE '^devicekit') devicekit packages"
}
