#!/usr/bin/env bash
# Session 20, call 5 (one H200): the final tree (c532563 + GAT walks with 4 rows in flight on
# aligned rows + GAT's output layer on aligned columns, in f32 too). (1) gpu_check of .dev/bin;
# (2) GAT 2x64 on the gat-sparse files, 20 epochs, alternating base (d156db9) / bin / nof32
# (bin with GAT's f32 output layer unpadded); (3) ncu kernel list of bin, bf16;
# (4) the gat-sparse harness (ours and PyG, same files, 3 reps).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s20c5; mkdir -p $R; cat .dev/GIT_HEAD .dev/base/GIT_HEAD .dev/nof32/GIT_HEAD | tee $R/heads.txt
for d in bin base nof32; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el); gat_aggregate ok: $(grep gat_aggregate $R/gpu_check.log | grep -c ok)"; grep MISS $R/gpu_check.log | head; tail -1 $R/gpu_check.log
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph-hd50.log 2>&1; echo "graph hd50 rc $? t=$(el)"
A="--data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 --no-input-cache --no-baseline"
n=0
for c in "bf16 0 base bin" "f32 0 base bin nof32" "bf16 1 base bin" "f32 1 base bin nof32" "bf16 2 base bin"; do set -- $c; p=$1 s=$2; shift 2; for side in "$@"; do n=$((n+1))
  timeout 90 .dev/$side/train_reddit $A --precision $p --seed $s --epochs 20 --json $R/gat-$p-s$s-$side-run$n.json --save /tmp/w > $R/gat-$p-s$s-$side-run$n.log 2>&1
  echo "== gat $p s$s $side rc $? $(grep -E 'median epoch' $R/gat-$p-s$s-$side-run$n.log | head -1 | sed 's/.*test/test/') | $(grep -E '^aggregation' $R/gat-$p-s$s-$side-run$n.log | head -1)"
done; done
echo "t=$(el)"
timeout 100 ncu --clock-control none --csv --metrics gpu__time_duration.sum .dev/bin/train_reddit $A --precision bf16 --seed 0 --epochs 2 --no-profile --json $R/ncu-bin.json --save /tmp/w2 > $R/ncu-bin-gat-bf16.csv 2> $R/ncu-bin.err
echo "ncu rc $? t=$(el)"; xz -9 $R/ncu-bin-gat-bf16.csv
timeout 300 python3 bench/run.py gat-sparse --reps 3 --out /tmp/s20g5 --pack $R/gat-sparse.tar.gz > $R/harness.log 2>&1
echo "harness rc $? t=$(el)"; tail -15 $R/harness.log
cd $OUT && tar czf s20c5.tar.gz s20c5 && rm -rf s20c5; echo total $(el) s
