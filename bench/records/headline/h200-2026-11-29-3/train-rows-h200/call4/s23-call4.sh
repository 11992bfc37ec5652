#!/usr/bin/env bash
# Session 23, call 4 (one H200). bin = b077b3b + review fixes, the GraphSAGE root product
# selected after the product, and the step without phase waits under --no-profile
# (uncommitted: GIT_HEAD says); prev = 34ea4c6's code (calls 2-3's binary).
# (1) gnn-train GPU tests (one_gpu: train rows with GCN f32/bf16/f16, GraphSAGE mean and pool);
# (2) gpu_check; (3) the headline same-graph files; (4) prev / bin alternating, 60 epochs,
# --no-profile: GCN 2x128 bf16 and GraphSAGE 2x128 bf16, 3 rounds; GCN f32, 2 rounds.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s23c4; mkdir -p $R; cat .dev/GIT_HEAD .dev/prev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/test/*.xz .dev/prev/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 150 .dev/test/gnn_train_tests --test-threads 1 one_gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; grep -E "^test |result" $R/gpu-tests.log
timeout 150 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep MISS $R/gpu_check.log | head -5; tail -1 $R/gpu_check.log; rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
run() { # side model precision rep
  timeout 60 .dev/$1/train_reddit --data-dir $G --model $2 --layers 2 --hidden 128 --precision $3 --epochs 60 --seed 0 --no-baseline --no-profile --json $R/$2-$3-$1-r$4.json --save /tmp/w3 > $R/$2-$3-$1-r$4.log 2>&1
  echo "$2 $3 $1 r$4 rc $? t=$(el) $(grep -E 'median epoch' $R/$2-$3-$1-r$4.log)"
}
for rep in 1 2 3; do for side in prev bin; do
  [ $(el) -gt 500 ] && break 2
  run $side gcn bf16 $rep; run $side sage bf16 $rep
  [ $rep -lt 3 ] && run $side gcn f32 $rep
done; done
cd $OUT && tar czf s23c4.tar.gz s23c4 && rm -rf s23c4; echo total $(el) s
