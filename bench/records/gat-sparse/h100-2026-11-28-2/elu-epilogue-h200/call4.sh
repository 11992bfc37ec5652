#!/usr/bin/env bash
# Session 18, call 4 (one H200): (1) gpu_check of .dev/bin (7d47abb + the fused bias + ELU +
# dropout of GAT's hidden layer); (2) GAT 2x64 base (.dev/base: call 3's binary, whose GAT path
# is 7d47abb's) vs bin, alternating, bf16 and f32 on the gat-sparse files and bf16 on the
# generated Reddit-shaped graph; (3) the gat-sparse harness at bin (ours and PyG, 3 reps).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s18c4; mkdir -p $R; cat .dev/GIT_HEAD .dev/base/GIT_HEAD
for d in bin base; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el); elu ok: $(grep bias_elu_dropout $R/gpu_check.log | grep -c ok)"; grep MISS $R/gpu_check.log | head; tail -1 $R/gpu_check.log
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph-hd50.log 2>&1; echo "graph hd50 rc $? t=$(el)"
n=0
for prec in bf16 f32; do for side in base bin base bin; do n=$((n+1))
  timeout 60 .dev/$side/train_reddit --data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 \
    --precision $prec --epochs 20 --no-input-cache --seed 0 --no-baseline --json $R/hd50-$side-$prec-run$n.json --save /tmp/w > $R/hd50-$side-$prec-run$n.log 2>&1
  echo "== hd50 $side $prec rc $? $(grep -E 'median epoch' $R/hd50-$side-$prec-run$n.log | head -1 | sed 's/.*test/test/')"
  grep -E "^activation|^backward dense" $R/hd50-$side-$prec-run$n.log | head -2
done; done
for side in base bin base bin; do n=$((n+1))
  timeout 60 .dev/$side/train_reddit --model gat --layers 2 --hidden 64 --heads 8 --precision bf16 --epochs 20 --seed 0 \
    --no-baseline --json $R/reddit-$side-bf16-run$n.json --save /tmp/w > $R/reddit-$side-bf16-run$n.log 2>&1
  echo "== reddit $side rc $? $(grep -E 'median epoch' $R/reddit-$side-bf16-run$n.log | head -1 | sed 's/.*test/test/')"
done
echo "t=$(el)"
left=$(( 585 - $(el) )); [ $left -gt 120 ] && timeout $left python3 bench/run.py gat-sparse --reps 3 --out /tmp/s18g --pack $R/gat-sparse.tar.gz 2>&1 | tail -12
echo "gat-sparse t=$(el)"
cd $OUT && tar czf s18c4.tar.gz s18c4 && rm -rf s18c4; echo total $(el) s
