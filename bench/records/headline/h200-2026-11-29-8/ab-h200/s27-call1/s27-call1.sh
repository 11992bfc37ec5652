#!/usr/bin/env bash
# Session 27, call 1 (one H200). bin = f678dc3 + (1) sums_f32 in two launches (64 partial sums
# per tensor, eight accumulators a thread; tables by value, no upload); (2) cudarc's per-buffer
# events off on a one-stream device (GNN_X_EVENTS=1 keeps them: the experiment's switch, not
# committed). prev = 8c24880's build.
# (1) gnn-train GPU tests; (2) gpu_check (sums_f32 with 70 tensors; HEAD's spmm_then since
# 6cbc59a); (3) the headline same-graph files; (4) GCN 2x128 bf16, input cache + train rows:
# prev / bin / bin with events, 3 rounds; no input cache, bf16 and f32: prev / bin, 2 rounds;
# (5) ncu of bin's GCN bf16 epoch.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s27c1; mkdir -p $R; cat .dev/GIT_HEAD .dev/prev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/prev/*.xz $(ls .dev/test/*.xz 2>/dev/null); do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
[ -f .dev/test/gnn_train_tests.xz ] && timeout 150 .dev/test/gnn_train_tests --test-threads 1 one_gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; grep -E "^test |result" $R/gpu-tests.log
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep -iE "sums_f32|spmm_then" $R/gpu_check.log | head -30; grep -E "MISS|rror" $R/gpu_check.log | head -8; tail -2 $R/gpu_check.log; rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
run() { # side tag precision rep extra...
  local side=$1 prec=$3 tag=gcn-$2-$3-$1-r$4; shift 4
  local bin=.dev/$side/train_reddit; [ $side = ev ] && bin=.dev/bin/train_reddit
  env $([ $side = ev ] && echo GNN_X_EVENTS=1) timeout 60 $bin --data-dir $G --model gcn --layers 2 --hidden 128 --precision $prec --epochs 60 --seed 0 --no-baseline --no-profile --json $R/$tag.json --save /tmp/w3 "$@" > $R/$tag.log 2>&1
  echo "$tag rc $? t=$(el) $(grep -E 'median epoch' $R/$tag.log) $(grep -E 'test acc' $R/$tag.log | tail -1)"
}
for rep in 1 2 3; do for side in prev bin ev; do
  [ $(el) -gt 430 ] && break 2
  run $side cache bf16 $rep
done; for side in prev bin; do
  [ $rep -lt 3 ] && [ $(el) -lt 430 ] && run $side nocache bf16 $rep --no-input-cache && run $side nocache f32 $rep --no-input-cache
done; done
if [ $(el) -lt 480 ]; then
  A="--data-dir $G --model gcn --layers 2 --hidden 128 --precision bf16 --seed 0 --no-baseline"
  timeout 90 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-gcn.json --save /tmp/w2 > $R/ncu-gcn-rows.csv 2> $R/ncu-gcn.err; echo "ncu rc $? t=$(el)"; xz -9 $R/ncu-gcn-rows.csv
fi
cd $OUT && tar czf s27c1.tar.gz s27c1 && rm -rf s27c1; echo total $(el) s
