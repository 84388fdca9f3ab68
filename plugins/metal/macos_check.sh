#!/bin/sh
# Run the METAL checks that need a Mac (Apple silicon or an Intel Mac with a Metal GPU), from the repository root:
#   sh plugins/metal/macos_check.sh
# Installs devicekit + devicekit-metal (which pulls pyobjc-framework-Metal on macOS) into the current Python
# environment, prints `devicekit info`, runs the plugin's tests (the `macos` ones included) and devicekit's
# conformance kit against METAL. Optional: pyobjc-framework-libdispatch (metallib loading without a temp file),
# Xcode's Metal toolchain (the `xcrun` compiler pair; `xcodebuild -downloadComponent MetalToolchain`).
set -eu
[ "$(uname -s)" = "Darwin" ] || { echo "macos_check.sh: this is $(uname -s); Metal needs macOS" >&2; exit 2; }
PY="${PYTHON:-python3}"
"$PY" -m pip install -q -e ".[test]" -e plugins/metal
"$PY" -m devicekit.cli info
"$PY" -m pytest -q plugins/metal/tests -rs
"$PY" -m pytest -q --pyargs devicekit.testing --devicekit-device=METAL --devicekit-seeds=50 -rs
