#!/usr/bin/env bash
# Session 17, call 6 (one H100): every kernel of GAT 2x64 bf16 epochs on the gat-sparse files
# (same_graph.py --half-deg 50, 23.2 M non-zeros) under ncu (gpu__time_duration only), to see
# where the ~7 ms outside the gat_* kernels go. Binary: .dev/bin (2647919's code).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s17c6; mkdir -p $R; cat .dev/GIT_HEAD
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
xz -dkf .dev/bin/train_reddit.xz; chmod +x .dev/bin/train_reddit
A="--data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 --precision bf16 --no-input-cache --seed 0 --no-baseline"
timeout 60 .dev/bin/train_reddit $A --epochs 20 --json $R/gat.json --save /tmp/w > $R/gat.log 2>&1; echo "gat rc $?"
grep -A12 "^phase" $R/gat.log | head -14
timeout 300 ncu --clock-control none --csv --metrics gpu__time_duration.sum .dev/bin/train_reddit $A --epochs 2 --json $R/gat-ncu.json --save /tmp/w2 > $R/gat-ncu.csv 2> $R/gat-ncu.err
echo "ncu rc $? lines $(wc -l < $R/gat-ncu.csv) t=$(el)"
cd $OUT && tar czf s17c6.tar.gz s17c6 && rm -rf s17c6
