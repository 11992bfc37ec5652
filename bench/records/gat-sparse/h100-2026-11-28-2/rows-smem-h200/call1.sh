#!/usr/bin/env bash
# Session 18, call 1 (one H200): (1) gpu_check of .dev/bin (s17-rows-smem rebased on 752af11:
# GAT row constants in per-warp shared memory); (2) GAT 2x64 base (.dev/base, 752af11) vs bin,
# alternating, bf16 and f32 on the gat-sparse files (same_graph.py --half-deg 50, 23.2 M nnz)
# and bf16 on the generated Reddit-shaped graph; (3) the bf16 GAT accuracy question: 100
# epochs, seeds 0-2, session 16's binary (.dev/s16, 12cb8ac) vs 752af11 on the same-graph files.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s18c1; mkdir -p $R; cat .dev/bin/GIT_HEAD .dev/base/GIT_HEAD .dev/s16/GIT_HEAD
for d in bin base s16; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el); gat ok: $(grep gat_aggregate $R/gpu_check.log | grep -c ok)"; grep MISS $R/gpu_check.log | head; tail -1 $R/gpu_check.log
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph-hd50.log 2>&1; echo "graph hd50 rc $? t=$(el)"
timeout 60 /opt/torch/.venv/bin/python3 .dev/anchors/same_graph.py --dir /tmp/gnn-bench/same-graph --skip-pyg > $R/graph-same.log 2>&1; echo "graph same rc $? t=$(el)"
n=0
for prec in bf16 f32; do for side in base bin base bin; do n=$((n+1))
  timeout 60 .dev/$side/train_reddit --data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 \
    --precision $prec --epochs 20 --no-input-cache --seed 0 --no-baseline --json $R/hd50-$side-$prec-run$n.json --save /tmp/w > $R/hd50-$side-$prec-run$n.log 2>&1
  echo "== hd50 $side $prec rc $?"; grep -E "median epoch" $R/hd50-$side-$prec-run$n.log | head -1
done; done
echo "t=$(el)"
for s in 0 1 2; do for side in s16 base; do
  timeout 60 .dev/$side/train_reddit --data-dir /tmp/gnn-bench/same-graph --model gat --layers 2 --hidden 64 --heads 8 \
    --precision bf16 --epochs 100 --no-input-cache --seed $s --no-baseline --no-profile --json $R/acc-$side-s$s.json --save /tmp/w > $R/acc-$side-s$s.log 2>&1
  echo "== acc $side seed $s rc $?"; grep -E "epoch +(20|50|100)/|median epoch" $R/acc-$side-s$s.log
done; done
echo "t=$(el)"
for side in base bin base bin; do n=$((n+1))
  timeout 60 .dev/$side/train_reddit --model gat --layers 2 --hidden 64 --heads 8 --precision bf16 --epochs 20 --seed 0 \
    --no-baseline --json $R/reddit-$side-bf16-run$n.json --save /tmp/w > $R/reddit-$side-bf16-run$n.log 2>&1
  echo "== reddit $side rc $?"; grep -E "median epoch" $R/reddit-$side-bf16-run$n.log | head -1
  [ $(el) -gt 540 ] && break
done
cd $OUT && tar czf s18c1.tar.gz s18c1 && rm -rf s18c1; echo total $(el) s
