#!/usr/bin/env bash
# Session 22, call 2 (one H200). bin = 8fa6e07 + GCN's normalisation as two row scalings around
# an unweighted SpMM (CUDA default) and the bf16 mean backward likewise; prev = 8fa6e07.
# (1) gpu_check of bin (scale_rows added); (2) gnn-train GPU tests (one_gpu, new scaled-GCN
# test); (3) A/B alternating prev/bin, 3 rounds: GCN 2x128 bf16 and f32 (input cache),
# GraphSAGE-mean 2x128 bf16, 60 epochs, same-graph files; (4) ncu of bin's GCN bf16 epoch.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s22c2; mkdir -p $R; cat .dev/GIT_HEAD .dev/prev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/prev/*.xz .dev/test/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 170 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep MISS $R/gpu_check.log | head -5; grep -c "scale_rows" $R/gpu_check.log; tail -1 $R/gpu_check.log
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 150 .dev/test/gnn_train_tests --test-threads 1 one_gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; grep -E "^test |result" $R/gpu-tests.log
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
for rep in 1 2 3; do for side in prev bin; do for cfg in gcn-bf16 gcn-f32 sage-bf16; do
  [ $(el) -gt 500 ] && break 3
  m=${cfg%-*}; p=${cfg#*-}
  timeout 60 .dev/$side/train_reddit --data-dir $G --model $m --layers 2 --hidden 128 --precision $p --epochs 60 --seed 0 --no-baseline --no-profile --json $R/$cfg-$side-r$rep.json --save /tmp/w3 > $R/$cfg-$side-r$rep.log 2>&1
  echo "$cfg $side r$rep rc $? t=$(el) $(grep -E 'median epoch' $R/$cfg-$side-r$rep.log)"
done; done; done
A="--data-dir $G --model gcn --layers 2 --hidden 128 --no-baseline --precision bf16 --seed 0"
[ $(el) -lt 520 ] && { timeout 70 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-gcn.json --save /tmp/w2 > $R/ncu-gcn-bin.csv 2> $R/ncu-gcn.err; echo "ncu rc $? t=$(el)"; xz -9 $R/ncu-gcn-bin.csv; }
cd $OUT && tar czf s22c2.tar.gz s22c2 && rm -rf s22c2; echo total $(el) s
