#!/usr/bin/env bash
# Session 23, call 2 (one H200). bin = the train-rows output layer for GCN and GraphSAGE
# (uncommitted, GIT_HEAD says). (1) gnn-train GPU tests (one_gpu; train_rows_... now GCN and
# GraphSAGE-mean); (2) the headline same-graph files; (3) GraphSAGE-mean 2x128 alternating
# default (train rows) / --no-train-rows: bf16 3 rounds, f32 2 rounds; 60 epochs;
# (4) GCN 2x128 bf16 default once (the same binary as the harness call); (5) ncu of the default
# GraphSAGE bf16 epoch.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s23c2; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/test/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 150 .dev/test/gnn_train_tests --test-threads 1 one_gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; tail -4 $R/gpu-tests.log
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
run() { # model tag precision rep extra-flags...
  local m=$1 tag=$2 p=$3 rep=$4; shift 4
  timeout 60 .dev/bin/train_reddit --data-dir $G --model $m --layers 2 --hidden 128 --precision $p --epochs 60 --seed 0 --no-baseline --no-profile "$@" --json $R/$m-$tag-$p-r$rep.json --save /tmp/w3 > $R/$m-$tag-$p-r$rep.log 2>&1
  echo "$m $tag $p r$rep rc $? t=$(el) $(grep -E 'median epoch' $R/$m-$tag-$p-r$rep.log)"
}
for rep in 1 2 3; do
  [ $(el) -gt 400 ] && break
  run sage rows bf16 $rep; run sage all bf16 $rep --no-train-rows
  [ $rep -lt 3 ] && { run sage rows f32 $rep; run sage all f32 $rep --no-train-rows; }
done
run gcn rows bf16 1
A="--data-dir $G --model sage --layers 2 --hidden 128 --no-baseline --precision bf16 --seed 0"
[ $(el) -lt 500 ] && { timeout 60 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-sage.json --save /tmp/w2 > $R/ncu-sage-rows.csv 2> $R/ncu-sage.err; echo "ncu rc $? t=$(el)"; xz -9 $R/ncu-sage-rows.csv; }
cd $OUT && tar czf s23c2.tar.gz s23c2 && rm -rf s23c2; echo total $(el) s
