#!/usr/bin/env bash
# Session 15, first call (nvidia-h100-x4, ~8-9 min): --degree-within-parts on GPUs (246119f;
# checked on the CPU only), through the harness, then GraphSAGE's selected output mean.
# One tarball back ($OUT/s15-1.tar.gz) holding the record packs.
#  1. dist-papers 'gcn-3x128-s0.1*' (scale 0.1, GCN 3x128 bf16, 4 ranks): plain vs within.
#     Session 14 call 8: plain 83.95 ms (aggregation 64.3), the global degree order 241.7.
#     Prediction: within 60-65 ms (the one-GPU degree order cut the aggregation 1.75x).
#  2. dist-papers gcn-3x128-full-within (880.1 ms plain at 32 channels; aggregation 692 ms);
#     its log also times the parallel set-up of the selected rows (17-20 s a rank serial).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
cat .dev/GIT_HEAD
W=/tmp/s15a; rm -rf $W; mkdir -p $W
timeout 200 python3 bench/run.py dist-papers --only 'gcn-3x128-s0.1*' --machine h100x4 --out $W/rec1 --pack $W/papers-s01-within.tar.gz 2>&1 | tail -6; echo "s0.1 t=$(el)"
for f in $W/rec1/dist-papers/*/*.log; do echo "== $f"; grep -E "renumbered|degree order" $f | head -2; grep -A5 "^rank  rows" $f; grep -E "aggregation \(|communication" $f | head -2; done
timeout 200 python3 bench/run.py dist-papers --graphs-only --only gcn-3x128-full-within --machine h100x4 --out $W/rec0 > $W/graph.log 2>&1; echo "full graph t=$(el)"
left=$(( 560 - $(el) )); [ $left -gt 90 ] && timeout $left python3 bench/run.py dist-papers --only sage-3x64-full --machine h100x4 --out $W/rec3 --pack $W/papers-sage64-selected.tar.gz 2>&1 | tail -4; echo "sage t=$(el)"
for f in $W/rec3/dist-papers/*/*.log; do grep -E "output layer" $f | head -3; grep -A5 "^rank  rows" $f; grep -E "aggregation \(|communication" $f | head -2; done
left=$(( 575 - $(el) )); [ $left -gt 90 ] && timeout $left python3 bench/run.py dist-papers --only gcn-3x128-full-within --machine h100x4 --out $W/rec2 --pack $W/papers-full-within.tar.gz 2>&1 | tail -4; echo "full t=$(el)"
for f in $W/rec2/dist-papers/*/*.log; do grep -E "output rows' aggregation|degree order" $f | head -6; grep -A5 "^rank  rows" $f; grep -E "aggregation \(|communication" $f | head -2; done
cd $W && rm -rf rec0 rec1 rec2 rec3 && tar czf $OUT/s15-1.tar.gz . && ls -la $OUT; echo total $(el) s
