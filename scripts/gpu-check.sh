#!/usr/bin/env bash
# The checks that need a CUDA device, as one script for a machine with a GPU and PyTorch (no JDK needed): the
# Session's CUDA staging tests against the summing transport double, then the staging benchmark. Writes its logs
# to $OUT (or ./gpu-check-out).
#
# usage: scripts/gpu-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-check-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python="${NETREDUCE_PYTHON:-python3}"
nvidia-smi -L 2>&1 | tee "$out/device.txt"
"$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
      torch.cuda.get_device_name() if torch.cuda.is_available() else "no device")' 2>&1 | tee -a "$out/device.txt"
per_test=()
"$python" -c 'import pytest_timeout' 2>/dev/null && per_test=(--timeout=120)
timeout 300 "$python" -m pytest -v -p no:cacheprovider -rs "${per_test[@]}" python/tests/test_staging.py 2>&1 | tee "$out/pytest.log"
status=$?
[ -n "${GPU_CHECK_BENCH-1}" ] && timeout 180 "$python" scripts/bench/gpu_staging.py --world 2 --calls 8 2>&1 | tee "$out/bench.jsonl"
exit $status
