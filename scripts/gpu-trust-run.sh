#!/usr/bin/env bash
# Issue 12's GPU checks in one device call (see docs/perf/h100-2026-11-24-trust/README.md).
# Expects xz-compressed release binaries in .dev/bin (built on the dev machine with
# `--features cuda`): gpu_check, train_reddit, and the gnn-kernels lib test binary
# (`cargo test --release --features cuda -p gnn-kernels --lib --no-run`) as kernels_tests.
# Usage: scripts/gpu-trust-run.sh STEP...
#   steps: check20 checkfull unit oom nan determinism resume
set -uo pipefail
# The errors are the output under test: print them as a user sees them, without backtraces.
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
# Raw outputs live outside $OUT (the device returns only a few files); after every step they
# are packed into $OUT/results.tar.gz, so a run cut off by the time limit still returns them.
WORK=/tmp/trust
R=$WORK/run
source scripts/device-lib.sh
log() { echo "[$(date +%T)] $*" | tee -a "$R/summary.txt"; }

for step in "$@"; do
case $step in
check20)
    # 20 seeds of the random-graph checks (the flaky K = 1 sampled checks live there), then
    # one full run with the Reddit-shaped graph at scale 1.
    pass=0
    for s in $(seq 0 19); do
        if /tmp/bin/gpu_check --seed "$s" --reddit-scale 0 --json "$R/gpu_check_seed$s.json" > "$R/gpu_check_seed$s.log" 2>&1; then
            pass=$((pass + 1))
        fi
        log "gpu_check seed $s: $(grep -h 'checks,\|^Error' "$R/gpu_check_seed$s.log" | tr '\n' ' ')"
    done
    log "gpu_check random graphs: $pass/20 green"
    ;;
checkfull)
    # The random graphs and the Reddit-shaped graph at scale 1, default and deterministic
    # kernels.
    /tmp/bin/gpu_check --seed 0 --reddit-scale 1 --json "$R/gpu_check_full.json" > "$R/gpu_check_full.log" 2>&1
    log "gpu_check full (reddit scale 1), exit $?: $(tail -n 1 "$R/gpu_check_full.log")"
    /tmp/bin/gpu_check --seed 0 --reddit-scale 1 --deterministic --json "$R/gpu_check_full_det.json" > "$R/gpu_check_full_det.log" 2>&1
    log "gpu_check full --deterministic, exit $?: $(tail -n 1 "$R/gpu_check_full_det.log")"
    ;;
unit)
    /tmp/bin/kernels_tests --test-threads 1 > "$R/kernels_cuda_unit_tests.log" 2>&1
    log "gnn-kernels lib tests with --features cuda, exit $?: $(grep 'test result' "$R/kernels_cuda_unit_tests.log")"
    ;;
oom)
    # Impossible sizes: 50 M hidden units (120 GB of first-layer weights), then 60 K hidden
    # units on half the graph (28 GB per activation: fits the weights, not the epoch).
    /tmp/bin/train_reddit --scale 0.05 --hidden 50000000 --epochs 1 --no-baseline --json "$R/oom1.json" > "$R/oom_params.log" 2>&1
    log "oom (parameters), exit $?: $(grep '^Error' "$R/oom_params.log")"
    /tmp/bin/train_reddit --scale 0.5 --hidden 60000 --epochs 2 --no-baseline --json "$R/oom2.json" > "$R/oom_epoch.log" 2>&1
    log "oom (epoch), exit $?: $(grep '^Error' "$R/oom_epoch.log")"
    ;;
nan)
    /tmp/bin/train_reddit --scale 0.05 --lr 1e30 --epochs 30 --no-baseline --checkpoint "$R/nan-last-good" --json "$R/nan.json" > "$R/nan.log" 2>&1
    log "nan guard, exit $?: $(grep '^Error' "$R/nan.log")"
    ls -la "$R"/nan-last-good* >> "$R/nan.log" 2>&1
    ;;
determinism)
    # Same seed twice, with and without --deterministic: GCN 2x128 and GCN 4x256 MaxK-32 on
    # the full Reddit-shaped graph; compare the loss curves bit for bit.
    for m in "gcn2 --layers 2 --hidden 128" "maxk4 --layers 4 --hidden 256 --maxk 32"; do
        set -- $m; name=$1; shift
        for mode in plain det; do
            flag=""; [ $mode = det ] && flag="--deterministic"
            for rep in 1 2; do
                /tmp/bin/train_reddit --scale 1 "$@" --epochs 30 --no-baseline $flag --json "$R/det_${name}_${mode}_$rep.json" > "$R/det_${name}_${mode}_$rep.log" 2>&1
                log "determinism $name $mode run $rep, exit $?: $(grep 'median epoch' "$R/det_${name}_${mode}_$rep.log")"
            done
        done
    done
    ;;
resume)
    # Uninterrupted 20 epochs vs 10 epochs + checkpoint, resumed to 20; deterministic and not.
    for mode in det plain; do
        flag=""; [ $mode = det ] && flag="--deterministic"
        /tmp/bin/train_reddit --scale 1 --epochs 20 --no-baseline $flag --json "$R/resume_${mode}_full.json" > "$R/resume_${mode}_full.log" 2>&1
        /tmp/bin/train_reddit --scale 1 --epochs 10 --checkpoint-every 10 --checkpoint "$R/ck_$mode" --no-baseline $flag --json "$R/resume_${mode}_first.json" > "$R/resume_${mode}_first.log" 2>&1
        /tmp/bin/train_reddit --scale 1 --epochs 20 --resume "$R/ck_$mode" --checkpoint "$R/ck_$mode" --no-baseline $flag --json "$R/resume_${mode}_resumed.json" > "$R/resume_${mode}_resumed.log" 2>&1
        log "resume $mode, exit $?: $(grep 'resuming' "$R/resume_${mode}_resumed.log")"
        rm -f "$R"/ck_$mode.safetensors
    done
    ;;
esac
rm -f "$R"/*.safetensors
tar -czf "$OUT/results.tar.gz" -C "$WORK" run
cp "$R/summary.txt" "$OUT/summary.txt"
done
