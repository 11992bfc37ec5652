#!/usr/bin/env bash
# Session 19, call 4 (one H200): (1) accuracy: GAT 2x64 bf16 on the gat-sparse files, 100
# epochs, seeds 0-2, base (.dev/base: 89edb1c) and bin (call 3's binary), alternating;
# (2) the headline suite's full-size GAT row (110 M non-zeros) at bin, ours and PyG, 2 reps.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s19c4; mkdir -p $R; cat .dev/GIT_HEAD .dev/base/GIT_HEAD | tee $R/heads.txt
for d in bin base; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph-hd50.log 2>&1; echo "graph hd50 rc $? t=$(el)"
A="--data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 --no-input-cache --no-baseline --no-profile --precision bf16 --epochs 100"
for seed in 0 1 2; do for side in base bin; do
  timeout 60 .dev/$side/train_reddit $A --seed $seed --json $R/acc-$side-s$seed.json --save /tmp/w > $R/acc-$side-s$seed.log 2>&1
  echo "== $side seed $seed rc $? $(grep -E 'median epoch' $R/acc-$side-s$seed.log | head -1 | sed 's/.*test/test/') | $(grep -E 'time to accuracy' $R/acc-$side-s$seed.log | sed 's/.*: epoch/epoch/')"
done; done
echo "t=$(el)"
left=$(( 575 - $(el) )); echo "headline gat with $left s"
timeout $left python3 bench/run.py headline --only gat-2x64 --reps 2 --out /tmp/s19h --pack $R/headline-gat.tar.gz 2>&1 | tail -12
echo "headline t=$(el)"
cd $OUT && tar czf s19c4.tar.gz s19c4 && rm -rf s19c4; echo total $(el) s
