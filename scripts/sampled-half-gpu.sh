#!/usr/bin/env bash
# Issue 15: edge-sampled SpMM (ES/AES) with bf16/f16 features (fp32 accumulation, f32 edge
# values). gpu_check (the half-precision sampled kernels against an f64 CPU run on the rounded
# features, every strategy, sum and mean), then `infer` on the generated Reddit-shaped graph
# (scale 1, seed 0: the shipped weights' graph) with the shipped GCN and GraphSAGE weights,
# exact / aes:32 / fastrand:32, f32 against bf16 and f16. Binaries in .dev/bin: gpu_check,
# infer (--features nccl or cuda). One H100/H200.
set -uo pipefail
R=/tmp/sampledhalf/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
for p in ${PLAN:-check infer}; do
case $p in
check) step gpu_check timeout -s KILL 240 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json" ;;
infer)
    for m in gcn sage; do
        for agg in exact aes:32 fastrand:32; do
            for prec in f32 bf16 f16; do
                n="${m}_${agg/:/}_${prec}"
                step "$n" timeout -s KILL 120 /tmp/bin/infer --weights "weights/${m}-synthetic-reddit" \
                    --dataset reddit --scale 1 --seed 0 --aggregation "$agg" --precision "$prec" --out "$R/$n"
            done
        done
    done ;;
esac
done
grep -h "synthetic\|^gcn\|^sage" "$R"/*_*.log | grep -v "generated\|fastest" | sort -u > "$R/digest.txt"
cat "$R/digest.txt"
