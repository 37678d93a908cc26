#!/usr/bin/env bash
# Opt-in GPU tests (never part of `npm test`): the model host's CUDA tests (graph replay equals
# eager, bf16 tolerances, the stream probe) with the machine's python3 that has CUDA torch.
# Usage: bash scripts/test-gpu.sh [TEST_PATH ...]   (paths under host/; default: tests/gpu)
set -euo pipefail
cd "$(dirname "$0")/../host"
python="${GPU_TEST_PYTHON:-python3}"
"$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "no CUDA device: these tests need a GPU")'
if [ $# -eq 0 ]; then set -- tests/gpu; fi
"$python" -m pytest -q -p no:cacheprovider "$@"
