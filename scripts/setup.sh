#!/usr/bin/env bash
# The main job's setup: .venv with the core (devicekit) and the CPU plugin (devicekit-cpu), editable, nothing else:
# no test tools, no CUDA/Metal/OpenCL plugins, no example vendor device. Idempotent: a rerun with nothing changed
# returns at once. The tests need more: scripts/dev-setup.sh (it installs this and the rest into the same .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_install.sh
dk_install setup "devicekit (core) and plugins/cpu" -e . -e plugins/cpu
