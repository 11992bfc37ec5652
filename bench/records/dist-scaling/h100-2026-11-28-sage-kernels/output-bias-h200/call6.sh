#!/usr/bin/env bash
# Session 19, call 6 (one H200): (1) gpu_check of .dev/bin (f47f606 + the lean output layers'
# bias add as one kernel, GraphSAGE's root term added with it in place); (2) base (.dev/base:
# c48934e's code) vs bin, alternating, on the generated Reddit-shaped graph, 20 epochs, seed 0,
# profiled: GCN 2x128 bf16 (input cache), GraphSAGE-mean 2x128 bf16 and f32; (3) ncu durations
# of every kernel of bin's GraphSAGE bf16 (3 epochs).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s19c6; mkdir -p $R; cat .dev/GIT_HEAD .dev/base/GIT_HEAD | tee $R/heads.txt
for d in bin base; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el); bias_add ok: $(grep bias_add $R/gpu_check.log | grep -c ok)"; grep MISS $R/gpu_check.log | head; tail -1 $R/gpu_check.log
n=0
for c in "gcn bf16" "sage bf16" "gcn bf16" "sage bf16" "sage f32" "gcn bf16" "sage bf16"; do set -- $c; for side in base bin; do n=$((n+1))
  timeout 60 .dev/$side/train_reddit --model $1 --layers 2 --hidden 128 --precision $2 --epochs 20 --seed 0 --no-baseline --json $R/$1-$2-$side-run$n.json --save /tmp/w > $R/$1-$2-$side-run$n.log 2>&1
  echo "== $1 $2 $side rc $? $(grep -E 'median epoch' $R/$1-$2-$side-run$n.log | head -1 | sed 's/.*test/test/')"
  grep -E "^activation|^backward dense" $R/$1-$2-$side-run$n.log | head -2
done; done
echo "t=$(el)"
timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum .dev/bin/train_reddit --model sage --layers 2 --hidden 128 --precision bf16 --epochs 3 --seed 0 --no-baseline --no-profile --json $R/ncu.json --save /tmp/w2 > $R/ncu-sage2x128-bf16.csv 2> $R/ncu.err
echo "ncu rc $? t=$(el)"; xz -9 $R/ncu-sage2x128-bf16.csv
cd $OUT && tar czf s19c6.tar.gz s19c6 && rm -rf s19c6; echo total $(el) s
