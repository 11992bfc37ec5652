#!/usr/bin/env bash
# Session 20, call 3 (one H200): where the GAT aggregation kernels' instructions go. Nsight
# Compute per-SASS-instruction counts (SourceCounters, source page) and the opcode mix
# (InstructionStats) of gat_fwd (both layers) and gat_bwd_cols (both layers), main's code
# (.dev/base, d156db9), GAT 2x64 bf16 on the gat-sparse files, one epoch.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s20c3; mkdir -p $R; cat .dev/base/GIT_HEAD | tee $R/heads.txt
for f in .dev/base/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph-hd50.log 2>&1; echo "graph hd50 rc $? t=$(el)"
A="--data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 --no-input-cache --seed 0 --no-baseline --no-profile --precision bf16 --epochs 1"
timeout 200 ncu --clock-control none -k regex:'gat_(fwd|bwd_cols)' --launch-count 4 --section SourceCounters --page source --print-source sass --csv .dev/base/train_reddit $A --json $R/ncu1.json --save /tmp/w > $R/ncu-gat-source.csv 2> $R/ncu1.err
echo "ncu source rc $? t=$(el) lines $(wc -l < $R/ncu-gat-source.csv)"; tail -3 $R/ncu1.err
timeout 150 ncu --clock-control none -k regex:'gat_(fwd|bwd)' --launch-count 6 --section InstructionStats --section WarpStateStats --print-details all .dev/base/train_reddit $A --json $R/ncu2.json --save /tmp/w > $R/ncu-gat-instr.txt 2> $R/ncu2.err
echo "ncu instr rc $? t=$(el)"; grep -E "gat_|Executed Instructions  |Stall" $R/ncu-gat-instr.txt | head -80
xz -9 $R/ncu-gat-source.csv
cd $OUT && tar czf s20c3.tar.gz s20c3 && rm -rf s20c3; echo total $(el) s
