#!/usr/bin/env bash
# Session 27, call 3 (one H200). bin = f678dc3 + sums_f32 in two launches + column sums read
# in 16-byte chunks of the flat array (periods of lcm(d, 8) elements: d = 41 vectorised too;
# 512 blocks, a 32-slot finish) + gnn_kernels::cast_pad (a parameter's cast and zero padding
# in one pass, its gradient's crop and widening in one; the lean layers' pads) (uncommitted:
# GIT_HEAD). prev = call 2's bin (sums_f32 + column sums by rows, 256 blocks).
# (1) gpu_check (column_sum, cast_pad); (2) the headline same-graph files; (3) prev / bin
# alternating, 60 epochs: GCN 2x128 bf16 (input cache + train rows) 3 rounds, GraphSAGE
# 2x128 bf16 3 rounds, GCN f32 1 round; (4) ncu of bin's GCN and GraphSAGE bf16 epochs.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s27c3; mkdir -p $R; cat .dev/GIT_HEAD .dev/prev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/prev/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep -iE "column_sum" $R/gpu_check.log | awk '{print $NF}' | sort | uniq -c; grep -iE "cast_pad" $R/gpu_check.log | awk '{print $NF}' | sort | uniq -c; grep -iE "column_sum (999|500|64x|257|233)|cast_pad (153431|41->48 BF16)" $R/gpu_check.log | head -20; grep -E "MISS|rror" $R/gpu_check.log | head -8; tail -1 $R/gpu_check.log; rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
run() { # side model precision rep
  local tag=$2-$3-$1-r$4
  timeout 60 .dev/$1/train_reddit --data-dir $G --model $2 --layers 2 --hidden 128 --precision $3 --epochs 60 --seed 0 --no-baseline --no-profile --json $R/$tag.json --save /tmp/w3 > $R/$tag.log 2>&1
  echo "$tag rc $? t=$(el) $(grep -E 'median epoch' $R/$tag.log) $(grep -E 'test acc' $R/$tag.log | tail -1)"
}
for rep in 1 2 3; do for side in prev bin; do
  [ $(el) -gt 330 ] && break 2
  run $side gcn bf16 $rep; run $side sage bf16 $rep
  [ $rep -eq 1 ] && run $side gcn f32 $rep
done; done
M="--clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum"
for m in gcn sage; do
  [ $(el) -gt 400 ] && break
  A="--data-dir $G --model $m --layers 2 --hidden 128 --precision bf16 --seed 0 --no-baseline"
  timeout 60 ncu $M .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-$m.json --save /tmp/w2 > $R/ncu-$m-rows.csv 2> $R/ncu-$m.err; echo "ncu $m rc $? t=$(el)"; xz -9 $R/ncu-$m-rows.csv
done
cd $OUT && tar czf s27c3.tar.gz s27c3 && rm -rf s27c3; echo total $(el) s
