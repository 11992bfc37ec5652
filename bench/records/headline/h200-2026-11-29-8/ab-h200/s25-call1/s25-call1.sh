#!/usr/bin/env bash
# Session 25, call 1 (one H200). bin = 143707c + (1) the fused cross-entropy with rows in
# flight and its loss summed per block, the gradients' sums row-first for the step's check;
# (2) a 2-layer GCN's hidden and output layers as one op (uncommitted: GIT_HEAD says);
# prev = 143707c's code.
# (1) gnn-train GPU tests; (2) gpu_check (xent at every register width, 100,003 rows);
# (3) the headline same-graph files; (4) prev / bin alternating, 60 epochs, --no-profile:
# GCN 2x128 bf16 (input cache + train rows), 3 rounds; GraphSAGE 2x128 bf16 and GCN f32,
# 2 rounds; (5) ncu of bin's GCN bf16 epoch.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s25c1; mkdir -p $R; cat .dev/GIT_HEAD .dev/prev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/test/*.xz .dev/prev/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 170 .dev/test/gnn_train_tests --test-threads 1 one_gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; grep -E "^test |result" $R/gpu-tests.log
timeout 170 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep -i "xent" $R/gpu_check.log | head -40; grep MISS $R/gpu_check.log | head -5; tail -1 $R/gpu_check.log; rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
run() { # side model precision rep [extra]
  local tag=$2-$3-$1-r$4$6
  timeout 60 .dev/$1/train_reddit --data-dir $G --model $2 --layers 2 --hidden 128 --precision $3 --epochs 60 --seed 0 --no-baseline --no-profile $5 --json $R/$tag.json --save /tmp/w3 > $R/$tag.log 2>&1
  echo "$tag rc $? t=$(el) $(grep -E 'median epoch' $R/$tag.log) $(grep -E 'test acc' $R/$tag.log | tail -1)"
}
for rep in 1 2 3; do for side in prev bin; do
  [ $(el) -gt 480 ] && break 2
  run $side gcn bf16 $rep
  [ $rep -lt 3 ] && run $side sage bf16 $rep && run $side gcn f32 $rep
done; done
if [ $(el) -lt 500 ]; then
  A="--data-dir $G --model gcn --layers 2 --hidden 128 --precision bf16 --seed 0 --no-baseline"
  timeout 90 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-gcn.json --save /tmp/w2 > $R/ncu-gcn-rows.csv 2> $R/ncu-gcn.err; echo "ncu rc $? t=$(el)"; xz -9 $R/ncu-gcn-rows.csv
fi
cd $OUT && tar czf s25c1.tar.gz s25c1 && rm -rf s25c1; echo total $(el) s
