#!/usr/bin/env bash
# HP-SDDMM on the GPU in one device call (issue 14; docs/perf/h100-2026-11-24-hp-sddmm):
# gpu_check (every op, HP-SDDMM at several partitions and the row kernel, seeds 0 and 1),
# bench_sddmm (ours vs cuSPARSE SDDMM, with the edges-per-warp sweep) and PyTorch's gather
# formulation on the same CSR (scripts/torch_sddmm.py). Expects xz-compressed release
# binaries (built with `--features cuda`) in .dev/bin: gpu_check, bench_sddmm.
set -uo pipefail
R=/tmp/hp/run
source scripts/device-lib.sh
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)" >> "$R/gpu.txt" 2>&1
mkdir -p /tmp/hp/csr
for s in ${CHECK_SEEDS:-0 1}; do
    step "gpu_check_seed$s" /tmp/bin/gpu_check --seed "$s" --json "$R/gpu_check_seed$s.json"
done
step bench_sddmm /tmp/bin/bench_sddmm --sweep --reps ${REPS:-20} --dump /tmp/hp/csr --json "$R/bench_sddmm.json"
step torch_sddmm python3 scripts/torch_sddmm.py --dir /tmp/hp/csr --reps 10 --json "$R/torch_sddmm.json"
