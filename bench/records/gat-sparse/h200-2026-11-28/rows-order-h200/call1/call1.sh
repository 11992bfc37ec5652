#!/usr/bin/env bash
# Session 21, call 1 (one H200). bin = main ec690a2 (39bf2d0's one aligned walk, f018a94's GAT
# shapes), lf = branch s20-longest-first 5b878c4 (GAT rows longest first), base = d156db9.
# (1) gpu_check of bin (lf's waits for call 2: the 64 MiB carry limit); (2) GAT 2x64 gat-sparse files, 20 epochs, bin/lf alternating,
# bf16 and f32, seeds 0-2; (3) full-size same-graph files, GAT 2x64 bf16 100 epochs, seeds 0-2,
# base/bin/lf alternating (accuracy over seeds and longer training, and full-size epoch times).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s21c1; mkdir -p $R; cat .dev/GIT_HEAD .dev/lf/GIT_HEAD .dev/base/GIT_HEAD | tee $R/heads.txt
for d in bin base lf; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
for side in bin; do
  timeout 170 .dev/$side/gpu_check --reddit-scale 0 --json $R/gpu_check-$side.json > $R/gpu_check-$side.log 2>&1
  echo "== gpu_check $side rc $? t=$(el); gat_aggregate ok: $(grep gat_aggregate $R/gpu_check-$side.log | grep -c ok)"; grep MISS $R/gpu_check-$side.log | head -5; tail -1 $R/gpu_check-$side.log
done
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph-hd50.log 2>&1; echo "graph hd50 rc $? t=$(el)"
A="--data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 --no-input-cache --no-baseline"
n=0
for c in "bf16 0" "f32 0" "bf16 1" "f32 1" "bf16 2" "f32 2"; do set -- $c; p=$1 s=$2; for side in bin lf; do n=$((n+1))
  timeout 90 .dev/$side/train_reddit $A --precision $p --seed $s --epochs 20 --json $R/gat-$p-s$s-$side-run$n.json --save /tmp/w > $R/gat-$p-s$s-$side-run$n.log 2>&1
  echo "== gat $p s$s $side rc $? $(grep -E 'median epoch' $R/gat-$p-s$s-$side-run$n.log | head -1 | sed 's/.*test/test/')"
done; done
echo "t=$(el)"
timeout 100 python3 bench/run.py headline --graphs-only --out /tmp/rec1 > $R/graph-full.log 2>&1; echo "graph full rc $? t=$(el)"
F="--data-dir /tmp/gnn-bench/same-graph --model gat --layers 2 --hidden 64 --heads 8 --no-input-cache --no-baseline --no-profile --precision bf16 --epochs 100"
for s in 0 1 2; do for side in base bin lf; do
  [ $(el) -gt 560 ] && { echo "out of time at s$s $side"; break 2; }
  timeout 40 .dev/$side/train_reddit $F --seed $s --json $R/full-bf16-s$s-$side.json --save /tmp/w > $R/full-bf16-s$s-$side.log 2>&1
  echo "== full bf16 s$s $side rc $? $(grep -E 'epoch +(20|100)/100' $R/full-bf16-s$s-$side.log | sed 's/.*loss/loss/' | tr '\n' ' ') $(grep -E 'median epoch' $R/full-bf16-s$s-$side.log | head -1 | sed 's/.*test/test/')"
done; done
cd $OUT && tar czf s21c1.tar.gz s21c1 && rm -rf s21c1; echo total $(el) s
