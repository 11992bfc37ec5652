#!/usr/bin/env bash
# Session 24, call 1 (one H200). bin = f41d32d + the gated Adam step (one synchronisation per
# training step; uncommitted: GIT_HEAD says); prev = f41d32d.
# (1) gnn-train GPU tests (one_gpu: train rows with GCN, GraphSAGE, GIN); (2) gpu_check
# (gated Adam checks); (3) the headline same-graph files; (4) prev / bin alternating,
# 60 epochs, --no-profile: GCN 2x128 bf16 (input cache), GraphSAGE 2x128 bf16, 3 rounds;
# GCN f32, 2 rounds; (5) GIN 2x128 bf16, bin with and without --no-train-rows.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s24c1; mkdir -p $R; cat .dev/GIT_HEAD .dev/prev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/test/*.xz .dev/prev/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 170 .dev/test/gnn_train_tests --test-threads 1 one_gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; grep -E "^test |result" $R/gpu-tests.log
timeout 170 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep -i "adam" $R/gpu_check.log | head -4; grep MISS $R/gpu_check.log | head -5; tail -1 $R/gpu_check.log; rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
run() { # side model precision rep [extra]
  local tag=$2-$3-$1-r$4$6
  timeout 60 .dev/$1/train_reddit --data-dir $G --model $2 --layers 2 --hidden 128 --precision $3 --epochs 60 --seed 0 --no-baseline --no-profile $5 --json $R/$tag.json --save /tmp/w3 > $R/$tag.log 2>&1
  echo "$tag rc $? t=$(el) $(grep -E 'median epoch' $R/$tag.log)"
}
for rep in 1 2 3; do for side in prev bin; do
  [ $(el) -gt 520 ] && break 2
  run $side gcn bf16 $rep; run $side sage bf16 $rep
  [ $rep -lt 3 ] && run $side gcn f32 $rep
done; done
[ $(el) -lt 530 ] && run bin gin bf16 1 && run bin gin bf16 1 --no-train-rows -all
# A small generated graph (scale 0.05: 11,648 nodes), where launches and waits weigh more.
small() { # side rep
  local tag=small-gcn-bf16-$1-r$2
  timeout 30 .dev/$1/train_reddit --scale 0.05 --model gcn --layers 2 --hidden 128 --precision bf16 --epochs 200 --seed 0 --no-baseline --no-profile --json $R/$tag.json --save /tmp/w4 > $R/$tag.log 2>&1
  echo "$tag rc $? t=$(el) $(grep -E 'median epoch' $R/$tag.log)"
}
for rep in 1 2; do for side in prev bin; do [ $(el) -lt 570 ] && small $side $rep; done; done
cd $OUT && tar czf s24c1.tar.gz s24c1 && rm -rf s24c1; echo total $(el) s
