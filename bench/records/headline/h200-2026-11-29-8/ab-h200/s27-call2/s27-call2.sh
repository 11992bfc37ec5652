#!/usr/bin/env bash
# Session 27, call 2 (one H200). bin = f678dc3 + sums_f32 in two launches (as call 1) + column
# sums in a kernel of their own (gnn_kernels::column_sum: 256 row blocks of fp32 partials,
# then a fixed-order finish) instead of cuBLAS's GEMV with a ones row (uncommitted: GIT_HEAD).
# (1) gnn-train GPU tests; (2) gpu_check (column_sum f32/bf16/f16, 10 shapes); (3) the
# headline same-graph files; (4) bin: GCN 2x128 bf16 (input cache + train rows) 3 runs,
# GraphSAGE 2x128 bf16 2 runs, GCN f32 1 run (to read beside call 1's); (5) ncu of bin's GCN
# and GraphSAGE bf16 epochs.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s27c2; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/test/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 150 .dev/test/gnn_train_tests --test-threads 1 one_gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; grep -E "^test |result" $R/gpu-tests.log
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep -iE "column_sum|sums_f32" $R/gpu_check.log | head -40; grep -E "MISS|rror" $R/gpu_check.log | head -8; tail -1 $R/gpu_check.log; rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
run() { # model precision rep
  local tag=$1-$2-bin-r$3
  timeout 60 .dev/bin/train_reddit --data-dir $G --model $1 --layers 2 --hidden 128 --precision $2 --epochs 60 --seed 0 --no-baseline --no-profile --json $R/$tag.json --save /tmp/w3 > $R/$tag.log 2>&1
  echo "$tag rc $? t=$(el) $(grep -E 'median epoch' $R/$tag.log) $(grep -E 'test acc' $R/$tag.log | tail -1)"
}
for rep in 1 2 3; do run gcn bf16 $rep; [ $rep -lt 3 ] && run sage bf16 $rep; done; run gcn f32 1
M="--clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum"
for m in gcn sage; do
  [ $(el) -gt 470 ] && break
  A="--data-dir $G --model $m --layers 2 --hidden 128 --precision bf16 --seed 0 --no-baseline"
  timeout 90 ncu $M .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-$m.json --save /tmp/w2 > $R/ncu-$m-rows.csv 2> $R/ncu-$m.err; echo "ncu $m rc $? t=$(el)"; xz -9 $R/ncu-$m-rows.csv
done
cd $OUT && tar czf s27c2.tar.gz s27c2 && rm -rf s27c2; echo total $(el) s
