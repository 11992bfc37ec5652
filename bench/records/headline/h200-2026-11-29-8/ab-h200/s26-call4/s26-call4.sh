#!/usr/bin/env bash
# Session 26, call 4 (one H200). bin = 7440435 + (1) the step check's sums in one launch
# (gnn_kernels::sums_f32: the loss and every gradient, one block each) where a reduction per
# tensor, a stack and a concatenation took 13 launches; (2) gpu_check's relative errors fail
# a value finite on one side only (a NaN had scored 0), spmm_then with the residual and bias
# alone (uncommitted: GIT_HEAD says); prev = 8c24880 (the s26 headline's binary).
# (1) gnn-train GPU tests; (2) gpu_check; (3) the headline same-graph files; (4) prev / bin
# in turn, 60 epochs, --no-profile: GCN and GraphSAGE 2x128 bf16, 3 rounds; (5) ncu of bin's
# GCN bf16 epoch.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s26c4; mkdir -p $R; cat .dev/GIT_HEAD .dev/prev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/prev/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
echo "== GPU tests not carried this call (the tree cap); the trainer runs below take sums_f32 on the GPU"
timeout 190 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep -E "sums_f32|residual\+bias" $R/gpu_check.log | head -8; grep -E "MISS|rror" $R/gpu_check.log | head -12; tail -1 $R/gpu_check.log; rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
timeout 40 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
run() { # side model precision rep
  local tag=$2-$3-$1-r$4
  timeout 40 .dev/$1/train_reddit --data-dir $G --model $2 --layers 2 --hidden 128 --precision $3 --epochs 60 --seed 0 --no-baseline --no-profile --json $R/$tag.json --save /tmp/w3 > $R/$tag.log 2>&1
  echo "$tag rc $? t=$(el) $(grep -E 'median epoch' $R/$tag.log)"
}
for rep in 1 2 3; do for side in prev bin; do
  [ $(el) -gt 360 ] && break 2
  run $side gcn bf16 $rep; run $side sage bf16 $rep
done; done
if [ $(el) -lt 400 ]; then
  A="--data-dir $G --model gcn --layers 2 --hidden 128 --precision bf16 --seed 0 --no-baseline"
  timeout 45 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-gcn.json --save /tmp/w2 > $R/ncu-gcn-rows.csv 2> $R/ncu-gcn.err; echo "ncu rc $? t=$(el)"; xz -9 $R/ncu-gcn-rows.csv
fi
cd $OUT && tar czf s26c4.tar.gz s26c4 && rm -rf s26c4; echo total $(el) s
