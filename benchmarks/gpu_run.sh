#!/usr/bin/env bash
# One prepared GPU session (under 10 minutes): gpu tests, CUDA benchmarks, the page's GPU block.
# Usage: bash benchmarks/gpu_run.sh [--dry-run]    (--dry-run: the same code paths on the CPU)
# See benchmarks/gpu.py for what runs and where the results go.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec timeout 580 "${PYTHON:-python}" -m benchmarks.gpu "$@"
