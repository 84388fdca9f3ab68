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

# apt_for_tests WHAT PACKAGE...: as root with apt (and DEVICEKIT_NO_APT unset), install the distribution's PACKAGEs
# for the tests of WHAT; otherwise, or when apt fails, say that those tests will skip with the reason.
apt_for_tests() {
    local what=$1; shift
    if [ "${DEVICEKIT_NO_APT:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "dev-setup: installing for the $what tests: apt-get install $*"
        if ! (apt-get install -y -q "$@" >/dev/null 2>&1 ||
              { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "$@" >/dev/null 2>&1; }); then
            echo "dev-setup: apt-get could not install $*; the $what tests will skip with the reason"
        fi
    else
        echo "dev-setup: $* not installed; the $what tests will skip with the reason" \
             "(as root with apt this script installs them)"
    fi
}

# OpenCL for the tests: pyopencl's PoCL wheel (the opencl [test] extra) cannot build on a CPU its LLVM does not know
# ("unknown target CPU 'generic'", e.g. AMD Zen 5). Then, as root with apt, install the distribution's PoCL; else say
# that the OpenCL tests will skip. DEVICEKIT_NO_APT=1 leaves the system alone.
if ! .venv/bin/python -c 'from devicekit_opencl import platform as p; p.select()' 2>/dev/null; then
    apt_for_tests "OpenCL (no OpenCL platform here builds a kernel: pyopencl's PoCL does not know this CPU)" \
        pocl-opencl-icd
fi

# WebGPU for the tests (plugins/webgpu, installed above with wgpu): without a GPU driver, Mesa's Vulkan software
# adapter (lavapipe), as root with apt; else say that the WebGPU tests will skip. DEVICEKIT_NO_APT=1 as above.
if ! .venv/bin/python -c 'from devicekit_webgpu import adapters as a; a.adapters()' >/dev/null 2>&1; then
    apt_for_tests "WebGPU (no WebGPU adapter here)" mesa-vulkan-drivers
fi

# The C compilers the distribution offers, for the c pair's per-compiler tests (plugins/cpu/tests/test_cc_compilers.py:
# gcc 12, clang 14 as `clang`, clang 19; every dtype against the PYTHON reference): as root with apt; a missing one
# makes its test skip with the reason. DEVICEKIT_NO_APT=1 as above.
missing_cc=""
command -v clang >/dev/null || missing_cc="clang"
command -v clang-19 >/dev/null || missing_cc="$missing_cc clang-19"
if [ -n "$missing_cc" ]; then
    # shellcheck disable=SC2086 # one word per package
    apt_for_tests "c pair's per-compiler" $missing_cc
fi

# The oldest NVRTC devicekit-cuda supports (13.2: 13.0 and 13.1 miscompile, see devicekit_cuda.compiler.MIN_NVRTC)
# beside the installed one, for plugins/cuda/tests/test_cuda_nvrtc_oldest.py: NVRTC versions differ in what they
# accept and produce (found on an H200, whose NVRTC was 13.0), so the test kernels compile with both. Unpacked from
# its wheels into .venv/nvrtc-13.2 (about 120 MB), once; without it the test skips with the reason.
old=.venv/nvrtc-13.2
if [ "$(uname -sm)" = "Linux x86_64" ] && [ ! -f "$old/nvidia/cu13/lib/libnvrtc.so.13" ]; then
    if .venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d "$old/wheels" \
            nvidia-cuda-nvrtc==13.2.86 nvidia-cuda-runtime==13.2.86 >/dev/null 2>&1 &&
        .venv/bin/python -c 'import glob, sys, zipfile
for w in glob.glob(sys.argv[1] + "/wheels/*.whl"): zipfile.ZipFile(w).extractall(sys.argv[1])' "$old"; then
        rm -rf "$old/wheels"
    else
        echo "dev-setup: could not fetch NVRTC 13.2 (pip download); test_cuda_nvrtc_oldest.py will skip with the reason"
    fi
fi
