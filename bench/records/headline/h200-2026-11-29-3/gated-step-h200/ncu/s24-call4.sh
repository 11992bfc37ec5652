#!/usr/bin/env bash
# Session 24, call 4 (one H200). bin = calls 1-3's (2673b43's code; GIT_HEAD says f41d32d+dirty).
# ncu of the default GCN 2x128 bf16 training (input cache + train rows), 3 epochs, on the
# headline same-graph files: each kernel's time and bytes, to set the epoch's kernel time
# against its wall time (3.347 ms, ../README.md).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s24c4; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/train_reddit.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
A="--data-dir $G --model gcn --layers 2 --hidden 128 --precision bf16 --seed 0 --no-baseline"
timeout 200 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-gcn.json --save /tmp/w2 > $R/ncu-gcn-rows.csv 2> $R/ncu-gcn.err; echo "ncu rc $? t=$(el)"; xz -9 $R/ncu-gcn-rows.csv
cd $OUT && tar czf s24c4.tar.gz s24c4 && rm -rf s24c4; echo total $(el) s
