#!/usr/bin/env bash
# Issue 13's GPU check of the front doors: the examples, now thin wrappers of gnn_train::run /
# sweep and gnn_kernels::verify / peer, run on the GPU and write what they wrote before.
# Expects xz-compressed release binaries (built with `--features cuda`) in .dev/bin:
# gpu_check, bench_spmm, bench_maxk, train_reddit, infer. Raw outputs go to
# $OUT/results.tar.gz (see docs/perf/h100-2026-11-24-front-doors/README.md).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}
R=/tmp/front/run
mkdir -p "$R" /tmp/bin
for f in .dev/bin/*.xz; do
    b=/tmp/bin/$(basename "$f" .xz)
    [ -x "$b" ] || { xz -dc "$f" > "$b" && chmod +x "$b"; }
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$R/gpu.txt" 2>&1
pack() { tar -czf "$OUT/results.tar.gz" -C /tmp/front run; }
step() {
    local name=$1; shift
    echo "[$(date +%T)] $name: $*" | tee -a "$R/summary.txt"
    "$@" > "$R/$name.log" 2>&1
    echo "[$(date +%T)] $name: exit $? | $(tail -n 2 "$R/$name.log" | tr '\n' ' ')" | tee -a "$R/summary.txt"
    pack
}
step gpu_check /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json"
step bench_spmm /tmp/bin/bench_spmm --k 32,128 --reps 10 --json "$R/bench_spmm.json"
step bench_maxk /tmp/bin/bench_maxk --k 32 --reps 10 --out "$R/bench_maxk"
step train_reddit /tmp/bin/train_reddit --epochs 30 --json "$R/train_reddit.json" --save "$R/gcn-reddit"
step infer /tmp/bin/infer --dataset reddit --weights "$R/gcn-reddit" --sweep --widths 32,128 \
    --strategies bucket,aes --reps 5 --out "$R/infer"
rm -f "$R"/gcn-reddit.safetensors
pack
