#!/usr/bin/env bash
# The benchmark peers, for bench/ only: torch (eager and torch.compile), jax (jax.jit) and numba, installed into the
# project's .venv next to what scripts/setup.sh or scripts/dev-setup.sh put there. Nothing in the tests needs them
# (the README's test command and .ci/run run without): bench/run.py and bench/framework_step.py print "not
# installed" in a missing peer's column. Run it once, from anywhere: bash scripts/bench-setup.sh
#
# torch is pinned to one version and taken from PyTorch's CPU-only index: a plain `pip install torch` on Linux pulls
# the CUDA build (several GB of NVIDIA libraries) that a CPU benchmark never loads. jax brings jaxlib, its CPU build.
# Idempotent: a peer already at the wanted version is not reinstalled.
set -euo pipefail
cd "$(dirname "$0")/.."
VPY=.venv/bin/python
TORCH_VERSION=${DEVICEKIT_BENCH_TORCH:-2.13.0}
# PyTorch's CPU-only index; set DEVICEKIT_BENCH_TORCH_INDEX= (empty) where pip's own configuration already offers the
# CPU wheel (a mirror, or find-links holding torch-*+cpu*.whl) and that index cannot be reached
TORCH_INDEX=${DEVICEKIT_BENCH_TORCH_INDEX-https://download.pytorch.org/whl/cpu}

if [ ! -x "$VPY" ]; then
    echo "bench-setup: no .venv here: run bash scripts/setup.sh (or scripts/dev-setup.sh) first" >&2
    exit 1
fi

has() {  # has MODULE [VERSION]: the module imports (and, given VERSION, its version starts with it)
    "$VPY" - "$@" <<'EOF' 2>/dev/null
import importlib, sys
m = importlib.import_module(sys.argv[1])
sys.exit(0 if len(sys.argv) < 3 or m.__version__.split("+")[0] == sys.argv[2] else 1)
EOF
}

# the peers must not move the packages the tests run on: numpy and llvmlite stay at the versions installed now
KEEP=$("$VPY" -c 'import importlib.metadata as m
for p in ("numpy", "llvmlite"):
    try: print(f"{p}=={m.version(p)}")
    except m.PackageNotFoundError: pass')

pip_install() {
    local log
    # shellcheck disable=SC2086
    set -- "$@" $KEEP
    log=$(mktemp)
    if ! "$VPY" -m pip install -q --disable-pip-version-check "$@" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "bench-setup: pip install $* failed" >&2
        exit 1
    fi
    rm -f "$log"
}

if has torch "$TORCH_VERSION"; then
    echo "bench-setup: torch $TORCH_VERSION is installed"
else
    echo "bench-setup: installing torch==$TORCH_VERSION (CPU build, from ${TORCH_INDEX:-the configured indexes})"
    # PyPI stays the main index for torch's own dependencies (sympy, networkx, ...)
    pip_install "torch==$TORCH_VERSION" ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"}
fi
if has jax; then
    echo "bench-setup: jax is installed"
else
    echo "bench-setup: installing jax (with jaxlib, its CPU build)"
    pip_install jax
fi
if has numba; then
    echo "bench-setup: numba is installed"
else
    echo "bench-setup: installing numba"
    pip_install numba
fi
"$VPY" - <<'EOF'
import torch, jax, numba
build = "CPU-only" if not torch.cuda.is_available() and "+cpu" in torch.__version__ else "see torch.version.cuda"
print(f"bench-setup: torch {torch.__version__} ({build}), jax {jax.__version__} ({jax.default_backend()}), "
      f"numba {numba.__version__}")
EOF
