#!/usr/bin/env bash
# Session 26, call 2 (one H200). bin = 870ae09 + (1) the SpMM row epilogue generalised
# (spmm_then: factors, residual, bias, width), GraphSAGE's output layer taking its root term,
# bias and narrowing in it; (2) the cross-entropy tiles' walks in four independent chains
# (uncommitted: GIT_HEAD says); prev = 870ae09 (call 1's bin).
# (1) gnn-train GPU tests; (2) gpu_check (spmm_then sum/mean, both directions); (3) the
# headline same-graph files; (4) prev / bin in turn, 60 epochs, --no-profile: GCN and
# GraphSAGE 2x128 bf16, 3 rounds; f32 1 round; (5) ncu of bin's GraphSAGE and GCN bf16 epochs.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s26c2; mkdir -p $R; cat .dev/GIT_HEAD .dev/prev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/test/*.xz .dev/prev/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 170 .dev/test/gnn_train_tests --test-threads 1 one_gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; grep -E "^test |result" $R/gpu-tests.log
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep -c "spmm_then" $R/gpu_check.log; grep "spmm_then" $R/gpu_check.log | sort -k6 -g | tail -4; grep -iE "xent.*(150001|x129)" $R/gpu_check.log | head -8; grep -E "MISS|rror" $R/gpu_check.log | head -8; tail -1 $R/gpu_check.log; rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
G=/tmp/gnn-bench/same-graph
run() { # side model precision rep
  local tag=$2-$3-$1-r$4
  timeout 60 .dev/$1/train_reddit --data-dir $G --model $2 --layers 2 --hidden 128 --precision $3 --epochs 60 --seed 0 --no-baseline --no-profile --json $R/$tag.json --save /tmp/w3 > $R/$tag.log 2>&1
  echo "$tag rc $? t=$(el) $(grep -E 'median epoch' $R/$tag.log)"
}
for rep in 1 2 3; do for side in prev bin; do
  [ $(el) -gt 440 ] && break 2
  run $side sage bf16 $rep; run $side gcn bf16 $rep
  [ $rep -eq 1 ] && run $side sage f32 $rep
done; done
for m in sage gcn; do
  [ $(el) -gt 510 ] && break
  A="--data-dir $G --model $m --layers 2 --hidden 128 --precision bf16 --seed 0 --no-baseline"
  timeout 60 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-$m.json --save /tmp/w2 > $R/ncu-$m-rows.csv 2> $R/ncu-$m.err; echo "ncu $m rc $? t=$(el)"; xz -9 $R/ncu-$m-rows.csv
done
cd $OUT && tar czf s26c2.tar.gz s26c2 && rm -rf s26c2; echo total $(el) s
