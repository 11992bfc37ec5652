#!/usr/bin/env bash
# Session 28, call 2 (one H200). bin = bea40db + the training loss taken into the lean GCN /
# GraphSAGE hidden+output op (Gnn::forward_offering_loss: no zero fill + add of the logits'
# gradient) (uncommitted: GIT_HEAD). prev = bea40db's train_reddit.
# (1) gnn-train GPU tests (the trainer's fused-loss path against the whole output, f32/bf16/f16);
# (2) the headline same-graph files; (3) prev / bin alternating, 60 epochs: GCN 2x128 bf16
# (input cache + train rows) 3 rounds, GraphSAGE 2x128 bf16 3 rounds, GCN f32 1 round;
# (4) ncu of bin's GCN and GraphSAGE bf16 epochs.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s28c2; mkdir -p $R; cat .dev/GIT_HEAD .dev/prev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/prev/*.xz .dev/test/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 100 .dev/test/gnn_train_tests --test-threads 1 gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; grep -E "^test |result" $R/gpu-tests.log
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
run() { # side model precision rep
  local tag=$2-$3-$1-r$4
  timeout 60 .dev/$1/train_reddit --data-dir $G --model $2 --layers 2 --hidden 128 --precision $3 --epochs 60 --seed 0 --no-baseline --no-profile --json $R/$tag.json --save /tmp/w3 > $R/$tag.log 2>&1
  echo "$tag rc $? t=$(el) $(grep -E 'median epoch' $R/$tag.log) $(grep -E 'test acc' $R/$tag.log | tail -1)"
}
for rep in 1 2 3; do for side in prev bin; do
  [ $(el) -gt 380 ] && break 2
  run $side gcn bf16 $rep; run $side sage bf16 $rep
  [ $rep -eq 1 ] && run $side gcn f32 $rep
done; done
M="--clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum"
for m in gcn sage; do
  [ $(el) -gt 450 ] && break
  A="--data-dir $G --model $m --layers 2 --hidden 128 --precision bf16 --seed 0 --no-baseline"
  timeout 60 ncu $M .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-$m.json --save /tmp/w2 > $R/ncu-$m-rows.csv 2> $R/ncu-$m.err; echo "ncu $m rc $? t=$(el)"; xz -9 $R/ncu-$m-rows.csv
done
cd $OUT && tar czf s28c2.tar.gz s28c2 && rm -rf s28c2; echo total $(el) s
