#!/usr/bin/env bash
# Session 15 (one H100): the dispatch suite with the pool keeping freed memory; the standalone
# mesh driver (row groups / row windows without the engine around them) beside it.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
cat .dev/GIT_HEAD
W=/tmp/s15d; rm -rf $W; mkdir -p $W/proto
timeout 120 .dev/proto/mesh > $W/proto/mesh.log 2>&1; echo "mesh rc=$? t=$(el)"; cat $W/proto/mesh.log
timeout 440 python3 bench/run.py dispatch --machine h100 --out $W/rec --pack $W/dispatch.tar.gz 2>&1 | tail -4; echo "suite t=$(el)"
grep -h "mesh\|sparse-1M" $W/rec/dispatch/*/dispatch-r1.log | head -30
cd $W && rm -rf rec && tar czf $OUT/s15-dispatch.tar.gz . && ls -la $OUT; echo total $(el) s
