#!/usr/bin/env bash
# Session 22, call 3 (one H200). bin = 8fa6e07 + scaled GCN sum + its fused output epilogue
# (rescale_rows); s1 = 8fa6e07 + scaled GCN sum only (call 2's bin); prev = 8fa6e07.
# (1) gpu_check of bin (scale_rows, rescale_rows); (2) gnn-train GPU tests (one_gpu);
# (3) alternating prev / s1 / bin, 3 rounds: GCN 2x128 bf16 and f32 (input cache); then
# GraphSAGE-mean 2x128 bf16 prev / bin, 3 rounds; 60 epochs, same-graph files;
# (4) ncu of bin's GCN bf16 epoch.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s22c3; mkdir -p $R; cat .dev/GIT_HEAD .dev/s1/GIT_HEAD .dev/prev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/s1/*.xz .dev/prev/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 170 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep MISS $R/gpu_check.log | head -5; echo "scale_rows $(grep -c ' scale_rows' $R/gpu_check.log) rescale_rows $(grep -c 'rescale_rows' $R/gpu_check.log)"; tail -1 $R/gpu_check.log
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
echo "tests: next call (tree size)"
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
run() { # side cfg rep
  local m=${2%-*} p=${2#*-}
  timeout 60 .dev/$1/train_reddit --data-dir $G --model $m --layers 2 --hidden 128 --precision $p --epochs 60 --seed 0 --no-baseline --no-profile --json $R/$2-$1-r$3.json --save /tmp/w3 > $R/$2-$1-r$3.log 2>&1
  echo "$2 $1 r$3 rc $? t=$(el) $(grep -E 'median epoch' $R/$2-$1-r$3.log)"
}
for rep in 1 2 3; do for side in prev s1 bin; do for cfg in gcn-bf16 gcn-f32; do
  [ $(el) -gt 430 ] && break 3; run $side $cfg $rep
done; done; done
for rep in 1 2 3; do for side in prev bin; do
  [ $(el) -gt 500 ] && break 2; run $side sage-bf16 $rep
done; done
A="--data-dir $G --model gcn --layers 2 --hidden 128 --no-baseline --precision bf16 --seed 0"
[ $(el) -lt 530 ] && { timeout 60 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-gcn.json --save /tmp/w2 > $R/ncu-gcn-bin.csv 2> $R/ncu-gcn.err; echo "ncu rc $? t=$(el)"; xz -9 $R/ncu-gcn-bin.csv; }
cd $OUT && tar czf s22c3.tar.gz s22c3 && rm -rf s22c3; echo total $(el) s
