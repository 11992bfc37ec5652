#!/usr/bin/env bash
# Issue 16: the symmetric aggregation's other blocks come around a ring of point-to-point steps
# (`Communicator::shift_overlapped`) instead of one all-gather, so a rank holds one received
# block (two from P = 3 on) instead of all P, and sends its rows unpadded. Two GPUs, GCN 4x256
# bf16: epoch time and per-rank peak before (.dev/prev/train_dist_prev.xz: 74405c1, the
# all-gather) and after, alternating, at scale 1 (PLAN s1) and scale 4 (PLAN s4); then (PLAN
# lim) the two-GPU capacity under an 8 GiB limit per GPU, ascending from 3.5 (the last limit:
# 3.25 trains, 3.5 fails) until the first failure, and one GPU at 2.125 (train_reddit; 2.0
# trains, 2.25 fails) to bracket the one-GPU limit more finely. Binaries: .dev/bin/train_dist,
# .dev/bin/train_reddit. nvidia-h200-x2.
set -uo pipefail
R=/tmp/distring/run
source scripts/device-lib.sh
[ -x /tmp/bin/train_dist_prev ] || { xz -dc .dev/prev/train_dist_prev.xz > /tmp/bin/train_dist_prev && chmod +x /tmp/bin/train_dist_prev; }
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
export NCCL_NVLS_ENABLE=0
G4=(--layers 4 --hidden 256 --residual --dropout 0.2 --precision bf16)
for p in ${PLAN:-warm s1 s4}; do
case $p in
warm) step warm_jit timeout -s KILL 150 /tmp/bin/train_dist --scale 0.05 --epochs 2 --nccl --ranks 2 --precision bf16 --json "$R/warm.json" ;;
s1)
    S=(--scale 1 --epochs 30 --seed 0 --nccl --ranks 2); i=0
    for b in train_dist_prev train_dist train_dist_prev train_dist; do
        n="s1_gcn4_${b}_$((++i))"
        step "$n" timeout -s KILL 150 /tmp/bin/$b "${S[@]}" "${G4[@]}" --json "$R/$n.json"
    done ;;
s4)
    S=(--scale 4 --epochs 20 --seed 0 --nccl --ranks 2)
    for b in train_dist_prev train_dist; do
        step "s4_gcn4_$b" timeout -s KILL 200 /tmp/bin/$b "${S[@]}" "${G4[@]}" --json "$R/s4_gcn4_$b.json"
    done ;;
lim)
    export GNN_CUDA_MEMORY_LIMIT_GIB=${LIMIT:-8}
    L=$GNN_CUDA_MEMORY_LIMIT_GIB
    for sc in ${DUAL_SCALES-3.5 3.75 4}; do
        S=(--scale "$sc" --epochs 2 --eval-every 2 --seed 0)
        step "lim${L}_s${sc}_ranks2" timeout -s KILL 200 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 "${G4[@]}" --json "$R/lim${L}_s${sc}_ranks2.json" || break
    done
    for sc in ${SINGLE_SCALES-2.125}; do
        S=(--scale "$sc" --epochs 2 --eval-every 2 --seed 0)
        step "lim${L}_s${sc}_single" timeout -s KILL 200 /tmp/bin/train_reddit "${S[@]}" --no-baseline "${G4[@]}" --json "$R/lim${L}_s${sc}_single.json" || break
    done
    unset GNN_CUDA_MEMORY_LIMIT_GIB ;;
diag)
    # Where the memory outside the allocator's accounting goes: GPU memory used (driver
    # view, nvidia-smi every 100 ms) of tiny runs (context, NCCL, cuBLAS), with and without
    # the ring's point-to-point connections; then scale 3.25 under the limit (peak in use per
    # rank) and 3.5 with the allocator's pool handing freed memory back at every
    # synchronisation (the driver's default) instead of keeping it.
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader -lms 100 > "$R/smi.csv" 2>&1 &
    SMI=$!
    T=(--scale 0.05 --epochs 3 --seed 0)
    echo "$(date +%s.%N) dist" >> "$R/marks.txt"
    step tiny_train_dist timeout -s KILL 100 /tmp/bin/train_dist "${T[@]}" --nccl --ranks 2 "${G4[@]}" --json "$R/tiny_train_dist.json"
    echo "$(date +%s.%N) prev" >> "$R/marks.txt"
    step tiny_train_dist_prev timeout -s KILL 100 /tmp/bin/train_dist_prev "${T[@]}" --nccl --ranks 2 "${G4[@]}" --json "$R/tiny_train_dist_prev.json"
    echo "$(date +%s.%N) single" >> "$R/marks.txt"
    step tiny_single timeout -s KILL 100 /tmp/bin/train_reddit "${T[@]}" --no-baseline "${G4[@]}" --json "$R/tiny_single.json"
    echo "$(date +%s.%N) end" >> "$R/marks.txt"
    kill $SMI
    export GNN_CUDA_MEMORY_LIMIT_GIB=8
    S=(--epochs 2 --eval-every 2 --seed 0 --nccl --ranks 2)
    step lim8_s3.25_ranks2 timeout -s KILL 200 /tmp/bin/train_dist --scale 3.25 "${S[@]}" "${G4[@]}" --json "$R/lim8_s3.25_ranks2.json"
    GNN_CUDA_POOL_RELEASE_THRESHOLD=0 step lim8_s3.5_ranks2_release timeout -s KILL 200 /tmp/bin/train_dist --scale 3.5 "${S[@]}" "${G4[@]}" --json "$R/lim8_s3.5_ranks2_release.json"
    unset GNN_CUDA_MEMORY_LIMIT_GIB ;;
p2p)
    # The ring's point-to-point steps make NCCL connect p2p channels (diag: +320 MiB per GPU
    # of NCCL's own memory at its default of up to 64 channels). Capped at few channels
    # (NCCL_MAX_P2P_NCHANNELS): NCCL's memory (tiny runs, nvidia-smi every 100 ms), the
    # epoch at scale 1 (alternating with the default) and scale 4, and the capacity under
    # the 8 GiB limit.
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader -lms 100 > "$R/smi_p2p.csv" 2>&1 &
    SMI=$!
    T=(--scale 0.05 --epochs 3 --seed 0 --nccl --ranks 2)
    for c in default 4 1; do
        echo "$(date +%s.%N) $c" >> "$R/marks_p2p.txt"
        if [ $c = default ]; then
            step tiny_p2p_$c timeout -s KILL 100 /tmp/bin/train_dist "${T[@]}" "${G4[@]}" --json "$R/tiny_p2p_$c.json"
        else
            NCCL_MAX_P2P_NCHANNELS=$c step tiny_p2p_$c timeout -s KILL 100 /tmp/bin/train_dist "${T[@]}" "${G4[@]}" --json "$R/tiny_p2p_$c.json"
        fi
        sleep 1
    done
    echo "$(date +%s.%N) end" >> "$R/marks_p2p.txt"
    kill $SMI
    S=(--scale 1 --epochs 30 --seed 0 --nccl --ranks 2); i=0
    for c in default 4 default 4; do
        n="s1_p2p_${c}_$((++i))"
        if [ $c = default ]; then
            step "$n" timeout -s KILL 150 /tmp/bin/train_dist "${S[@]}" "${G4[@]}" --json "$R/$n.json"
        else
            NCCL_MAX_P2P_NCHANNELS=$c step "$n" timeout -s KILL 150 /tmp/bin/train_dist "${S[@]}" "${G4[@]}" --json "$R/$n.json"
        fi
    done
    export NCCL_MAX_P2P_NCHANNELS=4 GNN_CUDA_MEMORY_LIMIT_GIB=8
    for sc in ${DUAL_SCALES-3.25 3.5 3.75}; do
        S=(--scale "$sc" --epochs 2 --eval-every 2 --seed 0 --nccl --ranks 2)
        step "lim8_s${sc}_ranks2_p2p4" timeout -s KILL 200 /tmp/bin/train_dist "${S[@]}" "${G4[@]}" --json "$R/lim8_s${sc}_ranks2_p2p4.json" || break
    done
    unset GNN_CUDA_MEMORY_LIMIT_GIB
    S=(--scale 4 --epochs 20 --seed 0 --nccl --ranks 2)
    step s4_gcn4_p2p4 timeout -s KILL 200 /tmp/bin/train_dist "${S[@]}" "${G4[@]}" --json "$R/s4_gcn4_p2p4.json"
    unset NCCL_MAX_P2P_NCHANNELS ;;
nch)
    # NCCL's collective channels capped too (NCCL_MAX_NCHANNELS: the gradient all-reduce is
    # the only collective GCN's symmetric aggregation leaves): NCCL's memory (tiny run), the
    # scale-1 epoch, and the capacity under the 8 GiB limit from 3.5.
    export NCCL_MAX_P2P_NCHANNELS=4 NCCL_MAX_NCHANNELS=4
    step tiny_nch4 timeout -s KILL 100 /tmp/bin/train_dist --scale 0.05 --epochs 3 --seed 0 --nccl --ranks 2 "${G4[@]}" --json "$R/tiny_nch4.json"
    step s1_nch4 timeout -s KILL 150 /tmp/bin/train_dist --scale 1 --epochs 30 --seed 0 --nccl --ranks 2 "${G4[@]}" --json "$R/s1_nch4.json"
    export GNN_CUDA_MEMORY_LIMIT_GIB=8
    for sc in ${DUAL_SCALES-3.5 3.75}; do
        S=(--scale "$sc" --epochs 2 --eval-every 2 --seed 0 --nccl --ranks 2)
        step "lim8_s${sc}_ranks2_nch4" timeout -s KILL 200 /tmp/bin/train_dist "${S[@]}" "${G4[@]}" --json "$R/lim8_s${sc}_ranks2_nch4.json" || break
    done
    unset GNN_CUDA_MEMORY_LIMIT_GIB NCCL_MAX_P2P_NCHANNELS NCCL_MAX_NCHANNELS ;;
esac
done
for f in "$R"/*.log; do echo "== $(basename "$f")"; grep -i -A3 "^rank  rows\|out of memory\|test acc\|peak device memory" "$f"; done
