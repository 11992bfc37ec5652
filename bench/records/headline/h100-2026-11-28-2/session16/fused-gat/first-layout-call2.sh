#!/usr/bin/env bash
# Session 16, call 2 (one H100): where the fused GAT kernels' time goes. Nsight Compute on the
# gat_* kernels of two GAT 2x64 bf16 epochs on the generated Reddit-shaped graph.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
R=$OUT/s16c2; mkdir -p $R
for f in .dev/bin/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
M=gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,lts__t_bytes.sum,dram__bytes_read.sum,launch__registers_per_thread,launch__occupancy_limit_registers,launch__grid_size,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__cycles_active.avg
timeout 500 ncu --clock-control none -k regex:gat_ --launch-count 12 --metrics $M \
  .dev/bin/train_reddit --model gat --layers 2 --hidden 64 --heads 8 --precision bf16 --epochs 1 \
  --seed 0 --no-baseline --json $R/gat.json --save /tmp/w > $R/ncu.txt 2>&1
echo "rc $?"
grep -E "gat_|duration|warps_active|inst_executed|bank_conflicts|lts__t_bytes|dram__bytes|registers|grid_size|long_scoreboard|cycles_active" $R/ncu.txt | head -150
cd $OUT && tar czf s16c2.tar.gz s16c2 && rm -rf s16c2
