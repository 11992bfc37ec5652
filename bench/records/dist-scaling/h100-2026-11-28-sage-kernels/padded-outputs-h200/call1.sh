#!/usr/bin/env bash
# Session 20, call 1 (one H200): branch s19-pad-classes (.dev/bin, 8a2512f: output layers on
# aligned columns, 41 -> 48) against main (.dev/base, d156db9), alternating within the call.
# GCN / GraphSAGE 2x128 on the generated Reddit-shaped graph (bf16 seeds 0-2 twice, f32 seed 0),
# GAT 2x64 on the gat-sparse files (bf16 seeds 0-2, f32 seed 0, bf16 seed 0 again), 20 epochs;
# then ncu kernel lists of bin for GCN and GraphSAGE bf16 (3 epochs).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s20c1; mkdir -p $R; cat .dev/GIT_HEAD .dev/base/GIT_HEAD | tee $R/heads.txt
for d in bin base; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
n=0
one() { m=$1 p=$2 s=$3; shift 3; for side in base bin; do n=$((n+1))
  timeout 90 .dev/$side/train_reddit "$@" --model $m --precision $p --epochs 20 --seed $s --no-baseline --json $R/$m-$p-s$s-$side-run$n.json --save /tmp/w > $R/$m-$p-s$s-$side-run$n.log 2>&1
  echo "== $m $p s$s $side rc $? $(grep -E 'median epoch' $R/$m-$p-s$s-$side-run$n.log | head -1 | sed 's/.*test/test/') | $(grep 'kernels used' $R/$m-$p-s$s-$side-run$n.log)"
done; }
G="--layers 2 --hidden 128"
for s in 0 1 2; do one gcn bf16 $s $G; one sage bf16 $s $G; done
one gcn f32 0 $G; one sage f32 0 $G
for s in 0 1 2; do one gcn bf16 $s $G; one sage bf16 $s $G; done
echo "t=$(el)"
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph-hd50.log 2>&1; echo "graph hd50 rc $? t=$(el)"
A="--data-dir /tmp/gnn-bench/same-graph-hd50 --layers 2 --hidden 64 --heads 8 --no-input-cache"
for s in 0 1 2; do one gat bf16 $s $A; done; one gat f32 0 $A; one gat bf16 0 $A
echo "t=$(el)"
for c in "gcn bf16" "sage bf16"; do set -- $c
  timeout 100 ncu --clock-control none --csv --metrics gpu__time_duration.sum .dev/bin/train_reddit --model $1 $G --precision $2 --epochs 3 --seed 0 --no-baseline --no-profile --json $R/ncu-$1.json --save /tmp/w2 > $R/ncu-bin-$1-2x128-$2.csv 2> $R/ncu-$1.err
  echo "ncu $1 rc $? t=$(el)"; xz -9 $R/ncu-bin-$1-2x128-$2.csv; done
cd $OUT && tar czf s20c1.tar.gz s20c1 && rm -rf s20c1; echo total $(el) s
