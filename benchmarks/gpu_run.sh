#!/usr/bin/env bash
# The device check, as one script: benchmarks/gpu_check.py and the Triton tests on a CUDA GPU.
# Run from the repository root on a machine with a CUDA GPU, torch and triton installed (no network
# needed): installs this checkout without dependencies, then writes its logs under ${OUT:-/tmp}.
set -u
out=${OUT:-/tmp/gpu_run}
mkdir -p "$out"
py=${PYTHON:-python3}
nvidia-smi -L 2>&1 | tee "$out/nvidia-smi.txt"
$py -c "import torch, triton, numpy; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__)"
$py -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -3
timeout 300 $py benchmarks/gpu_check.py --json "$out/gpu_check.json" 2>&1 | tee "$out/gpu_check.txt"
echo "gpu_check exit: ${PIPESTATUS[0]}"
timeout 240 $py -m pytest -q -p no:cacheprovider tests/test_ext_triton.py tests/test_ext_gpu_check.py \
  2>&1 | tail -25 | tee "$out/pytest_triton.txt"
echo "pytest exit: ${PIPESTATUS[0]}"
