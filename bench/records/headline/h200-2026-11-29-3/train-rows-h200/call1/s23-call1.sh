#!/usr/bin/env bash
# Session 23, call 1 (one H200). bin = HEAD dacebcf + the train-rows output layer (uncommitted,
# GIT_HEAD says). (1) gnn-train GPU tests (one_gpu, incl. train_rows_train_as_the_whole_output);
# (2) gpu_check (full); (3) the headline same-graph files; (4) GCN 2x128 alternating default
# (train rows) / --no-train-rows: bf16 and f32 with the input cache, 3 rounds; bf16 without the
# input cache, 2 rounds; 60 epochs; (5) ncu of the default GCN bf16 epoch.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s23c1; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/test/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 150 .dev/test/gnn_train_tests --test-threads 1 one_gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; tail -4 $R/gpu-tests.log
timeout 170 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep MISS $R/gpu_check.log | head -5; tail -1 $R/gpu_check.log
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
run() { # tag precision rep extra-flags...
  local tag=$1 p=$2 rep=$3; shift 3
  timeout 60 .dev/bin/train_reddit --data-dir $G --model gcn --layers 2 --hidden 128 --precision $p --epochs 60 --seed 0 --no-baseline --no-profile "$@" --json $R/$tag-$p-r$rep.json --save /tmp/w3 > $R/$tag-$p-r$rep.log 2>&1
  echo "$tag $p r$rep rc $? t=$(el) $(grep -E 'median epoch' $R/$tag-$p-r$rep.log)"
}
for rep in 1 2 3; do for p in bf16 f32; do
  [ $(el) -gt 440 ] && break 2
  run rows $p $rep; run all $p $rep --no-train-rows
done; done
for rep in 1 2; do
  [ $(el) -gt 500 ] && break
  run rows-nocache bf16 $rep --no-input-cache; run all-nocache bf16 $rep --no-input-cache --no-train-rows
done
A="--data-dir $G --model gcn --layers 2 --hidden 128 --no-baseline --precision bf16 --seed 0"
[ $(el) -lt 530 ] && { timeout 60 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-gcn.json --save /tmp/w2 > $R/ncu-gcn-rows.csv 2> $R/ncu-gcn.err; echo "ncu rc $? t=$(el)"; xz -9 $R/ncu-gcn-rows.csv; }
cd $OUT && tar czf s23c1.tar.gz s23c1 && rm -rf s23c1; echo total $(el) s
