#!/usr/bin/env bash
# Issue 15: why the MaxK SpGEMM / SSpMM do not speed up with half the bytes. Nsight Compute on
# bench_maxk's k = 32 kernels (Reddit-shaped graph, scale 1, D = 256, f32): speed of light,
# memory workload and occupancy of two SpGEMM and two SSpMM launches.
set -uo pipefail
R=/tmp/maxkncu/run
source scripts/device-lib.sh
step bench timeout -s KILL 200 /tmp/bin/bench_maxk --k 32 --reps 3 --out "$R/bench"
step ncu timeout -s KILL 300 ncu --kernel-name regex:"spgemm|sspmm" --launch-skip 4 --launch-count 4 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats /tmp/bin/bench_maxk --k 32 --reps 1 --out "$R/bench_ncu"
# The SpGEMM launches (the regex above reached only SSpMM launches after the skip).
step ncu_spgemm timeout -s KILL 300 ncu --kernel-name regex:"spgemm" --launch-skip 2 --launch-count 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats /tmp/bin/bench_maxk --k 32 --reps 1 --out "$R/bench_ncu2"
