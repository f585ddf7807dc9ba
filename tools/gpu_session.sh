#!/usr/bin/env bash
# The checks that need a CUDA card, in one run: the CUDA tests first (a failing fused kernel stops
# the session before any timing), then the GPU benchmark case, its results kept in docs/data/.
#
#   tools/gpu_session.sh [PLAN ...]      default plans: the pass, FALKON at 1.1·10⁷ (M = 20,000 and
#                                        100,000), GPyTorch's full system; see benchmarks/bench_gpu.py
#
# The card's machine reaches no registry: torch's CUDA wheel (which ships triton), pykeops and
# gpytorch must already be installed there. Each plan's result is appended to
# benchmark-results/gpu.jsonl as soon as it exists, so a session cut short keeps what it measured.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD"

python - <<'PY'
import torch
assert torch.cuda.is_available(), "no CUDA device: this script is for a machine with a card"
print("#", torch.cuda.get_device_name(0), "torch", torch.__version__, "CUDA", torch.version.cuda)
import triton
print("# triton", triton.__version__)
PY

# 1. CUDA tests: the fused products against the blocked ones on the card, the blocked in-place
#    factorisations, the device tests.
python -m pytest tests/core/test_fused_kernels.py tests/core/test_blocked_factor.py tests/core/test_devices.py -x -q \
    -k "not interpreted and not falkon_fit_matches" -p no:cacheprovider

# 2. The benchmark: one pass (fused, blocked, pykeops) with its floors, then the fits.
mkdir -p benchmark-results
if [ "$#" -eq 0 ]; then
    set -- pass-1e6-M5k-f32 pass-1e6-M5k-f64 falkon-1.1e7-M20k-f32 falkon-1.1e7-M100k-f32 gpytorch-5e4-f32
fi
python -m benchmarks.bench_gpu --out benchmark-results --plan "$@" || echo "# some plans failed: see above"
echo "# results: benchmark-results/gpu.jsonl (store them as docs/data/gpu.json to draw docs/benchmarks.md)"
