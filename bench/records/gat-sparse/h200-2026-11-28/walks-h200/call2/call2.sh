#!/usr/bin/env bash
# Session 20, call 2 (one H200): Nsight Compute sections of the six GAT aggregation kernels of
# one training step (gat_fwd x2, gat_bwd_rows x2, gat_bwd_cols x2), main's code (.dev/base,
# d156db9; GAT unchanged since), GAT 2x64 bf16 on the gat-sparse files.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s20c2; mkdir -p $R; cat .dev/base/GIT_HEAD | tee $R/heads.txt
for f in .dev/base/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph-hd50.log 2>&1; echo "graph hd50 rc $? t=$(el)"
A="--data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 --no-input-cache --seed 0 --no-baseline --no-profile --precision bf16 --epochs 1"
timeout 300 ncu --clock-control none -k regex:'gat_(fwd|bwd)' --launch-count 6 --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section SpeedOfLight --section ComputeWorkloadAnalysis .dev/base/train_reddit $A --json $R/ncu.json --save /tmp/w > $R/ncu-gat-sections.txt 2> $R/ncu.err
echo "ncu rc $? t=$(el)"; grep -E "gat_|Registers Per|Achieved Occupancy|Theoretical Occupancy|Duration|Block Limit|Warp Cycles Per Issued|L2 Hit|L1/TEX Hit|Mem Busy|Max Bandwidth|Issued Warp|No Eligible" $R/ncu-gat-sections.txt | head -150
cd $OUT && tar czf s20c2.tar.gz s20c2 && rm -rf s20c2; echo total $(el) s
