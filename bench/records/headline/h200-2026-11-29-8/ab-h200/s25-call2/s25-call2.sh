#!/usr/bin/env bash
# Session 25, call 2 (one H200). exp = 8e787c6 + spmm_narrow bf16 instantiated with U = 2, 6, 8
# edges in flight per lane (4 is the kernel's), picked by GNN_X_NARROW_U (an experiment, not
# committed). (1) GCN 2x128 bf16 default, U = 4, 2, 6, 8 alternating, 2 rounds; (2) ncu of
# bin's GraphSAGE 2x128 bf16 epoch; (3) whether nsys is installed.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s25c2; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/train_reddit.xz .dev/exp/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
which nsys ncu; ls /usr/local/cuda*/bin | grep -i nsys; ls /opt/nvidia 2>/dev/null
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
run() { # u rep
  local tag=gcn-bf16-u$1-r$2
  GNN_X_NARROW_U=$1 timeout 60 .dev/exp/train_reddit --data-dir $G --model gcn --layers 2 --hidden 128 --precision bf16 --epochs 60 --seed 0 --no-baseline --no-profile --json $R/$tag.json --save /tmp/w3 > $R/$tag.log 2>&1
  echo "$tag rc $? t=$(el) $(grep -E 'median epoch' $R/$tag.log)"
}
for rep in 1 2; do for u in 4 2 6 8; do run $u $rep; done; done
A="--data-dir $G --model sage --layers 2 --hidden 128 --precision bf16 --seed 0 --no-baseline"
timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-sage.json --save /tmp/w2 > $R/ncu-sage-rows.csv 2> $R/ncu-sage.err; echo "ncu rc $? t=$(el)"; xz -9 $R/ncu-sage-rows.csv
cd $OUT && tar czf s25c2.tar.gz s25c2 && rm -rf s25c2; echo total $(el) s
