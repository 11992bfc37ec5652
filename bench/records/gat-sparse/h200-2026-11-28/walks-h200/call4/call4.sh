#!/usr/bin/env bash
# Session 20, call 4 (one H200): GAT aggregation kernels whose edge walks load 4 rows (2 for
# element loads) before using any, without a branch per load. (1) gpu_check of .dev/bin;
# (2) GAT 2x64 on the gat-sparse files, 20 epochs, alternating base (d156db9) / bin (c532563 +
# the new walks) / pad (bin + branch s19-pad-classes' GAT output layer on 48 aligned columns),
# bf16 seeds 0-2, f32 seed 0, bf16 seed 0 again; (3) ncu kernel lists of bin and pad, bf16.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s20c4; mkdir -p $R; cat .dev/GIT_HEAD .dev/base/GIT_HEAD .dev/pad/GIT_HEAD | tee $R/heads.txt
for d in bin base pad; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el); gat_aggregate ok: $(grep gat_aggregate $R/gpu_check.log | grep -c ok)"; grep MISS $R/gpu_check.log | head; tail -1 $R/gpu_check.log
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph-hd50.log 2>&1; echo "graph hd50 rc $? t=$(el)"
A="--data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 --no-input-cache --no-baseline"
n=0
for c in "bf16 0" "bf16 1" "f32 0" "bf16 2" "bf16 0"; do set -- $c; for side in base bin pad; do n=$((n+1))
  timeout 90 .dev/$side/train_reddit $A --precision $1 --seed $2 --epochs 20 --json $R/gat-$1-s$2-$side-run$n.json --save /tmp/w > $R/gat-$1-s$2-$side-run$n.log 2>&1
  echo "== gat $1 s$2 $side rc $? $(grep -E 'median epoch' $R/gat-$1-s$2-$side-run$n.log | head -1 | sed 's/.*test/test/') | $(grep -E '^aggregation' $R/gat-$1-s$2-$side-run$n.log | head -1)"
done; done
echo "t=$(el)"
for side in bin pad; do
  timeout 100 ncu --clock-control none --csv --metrics gpu__time_duration.sum .dev/$side/train_reddit $A --precision bf16 --seed 0 --epochs 2 --no-profile --json $R/ncu-$side.json --save /tmp/w2 > $R/ncu-$side-gat-bf16.csv 2> $R/ncu-$side.err
  echo "ncu $side rc $? t=$(el)"; xz -9 $R/ncu-$side-gat-bf16.csv; done
cd $OUT && tar czf s20c4.tar.gz s20c4 && rm -rf s20c4; echo total $(el) s
