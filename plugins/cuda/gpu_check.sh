#!/usr/bin/env bash
# GPU check for devicekit-cuda: on a machine with an NVIDIA GPU and driver, install the plugin with pycuda, run
# the GPU tests (marked `gpu`; they skip elsewhere) and a small benchmark (elementwise and sum bandwidth against
# peak, naive matmul GFLOP/s, launch overhead).
#
#   bash plugins/cuda/gpu_check.sh                 # from the repository root (or anywhere: it cds there)
#   VENV=/path/to/venv bash plugins/cuda/gpu_check.sh      # use/create this virtual environment
#   SKIP_INSTALL=1 bash plugins/cuda/gpu_check.sh          # the current python already has everything
#   WHEELHOUSE=/path/to/wheels bash plugins/cuda/gpu_check.sh   # offline: install from local wheels only
#
# pycuda builds from source: it needs a C++ compiler and the CUDA headers (CUDA_ROOT or /usr/local/cuda).
# Output: test summary, then the benchmark table; the benchmark also goes to $OUT/bench_cuda.json when OUT is set.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"

if [[ "${SKIP_INSTALL:-0}" != "1" ]]; then
  VENV="${VENV:-$ROOT/.venv-gpu}"
  [[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
  PY="$VENV/bin/python"
  PIP=("$PY" -m pip install -q)
  [[ -n "${WHEELHOUSE:-}" ]] && PIP+=(--no-index --find-links "$WHEELHOUSE")
  export CUDA_ROOT="${CUDA_ROOT:-/usr/local/cuda}"
  "${PIP[@]}" -e ".[test]" -e "plugins/cuda[runtime,test]"
fi

echo "== machine"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || echo "(no nvidia-smi)"
"$PY" -c "import pycuda.driver as c; c.init(); print('pycuda', __import__('pycuda').VERSION_TEXT, 'devices:', c.Device.count())"

echo "== devicekit info"
"$PY" -m devicekit.cli info

echo "== GPU tests"
status=0
"$PY" -m pytest -q -rs -m gpu plugins/cuda/tests/test_cuda_gpu.py -p no:cacheprovider || status=$?

echo "== benchmark"
"$PY" plugins/cuda/bench_cuda.py ${OUT:+--json "$OUT/bench_cuda.json"} || status=$?
exit $status
