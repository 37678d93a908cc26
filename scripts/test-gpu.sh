#!/usr/bin/env bash
# Opt-in GPU tests (never part of `npm test`): the model host's CUDA tests (graph replay equals
# eager, bf16 tolerances, the stream probe) with the machine's python3 that has CUDA torch.
set -euo pipefail
cd "$(dirname "$0")/../host"
python="${GPU_TEST_PYTHON:-python3}"
"$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "no CUDA device: these tests need a GPU")'
"$python" -m pytest -q -p no:cacheprovider tests/gpu
