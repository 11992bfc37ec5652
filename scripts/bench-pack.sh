#!/usr/bin/env bash
# Builds what bench/run.py runs on the GPU machine, on the development machine (the GPU machine
# has no Rust toolchain and no network; this script refuses to run there):
#   - the example binaries, release, --features cuda,verify (or nccl,verify), stripped and
#     xz-compressed into .dev/bin/<name>.xz (bench/run.py unpacks them there);
#   - the peer scripts of the anchors folder (same_graph.py, ...) into .dev/anchors/;
#   - the commit into .dev/GIT_HEAD ("+dirty" when tracked files differ from it), which the
#     records cite where the carried checkout has no .git.
# .dev is git-ignored: carry it to the GPU machine ("carry": [".dev"]), where commands run from
# the repository root, e.g. `python3 bench/run.py headline --only gcn-2x128`.
#
# Usage: scripts/bench-pack.sh [--features cuda|nccl] [EXAMPLE ...]  (verify is always added)
#   EXAMPLE defaults to the binaries the suites run: train_reddit bench_spmm bench_sddmm
#   bench_graphs.
# Anchors: $GNN_ANCHORS, default ../shared/anchors beside the repository. Uses
# $CARGO_TARGET_DIR (default target/) and scripts/cuda-toolkit.sh's CUDA 13.0 environment.
set -euo pipefail
cd "$(dirname "$0")/.."

FEATURES=cuda
EXAMPLES=()
while [ $# -gt 0 ]; do
    case $1 in
        --features) FEATURES=${2:?--features needs cuda or nccl}; shift 2 ;;
        --features=*) FEATURES=${1#--features=}; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        -*) echo "bench-pack: unknown option $1" >&2; exit 2 ;;
        *) EXAMPLES+=("$1"); shift ;;
    esac
done
case $FEATURES in cuda|nccl) ;; *) echo "bench-pack: --features must be cuda or nccl" >&2; exit 2 ;; esac
[ ${#EXAMPLES[@]} -gt 0 ] || EXAMPLES=(train_reddit bench_spmm bench_sddmm bench_graphs)

if ! command -v cargo >/dev/null 2>&1; then
    echo "bench-pack: no cargo here. This script builds on the development machine; on the GPU" >&2
    echo "machine run the packed binaries: python3 bench/run.py SUITE" >&2
    exit 1
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "bench-pack: a GPU is visible: this is meant for the development machine, not the GPU one" >&2
    exit 1
fi
ANCHORS=${GNN_ANCHORS:-../shared/anchors}
[ -f "$ANCHORS/same_graph.py" ] || { echo "bench-pack: no $ANCHORS/same_graph.py (set GNN_ANCHORS)" >&2; exit 1; }

eval "$(bash scripts/cuda-toolkit.sh)"
ARGS=()
for e in "${EXAMPLES[@]}"; do ARGS+=(--example "$e"); done
# verify: the bench_* examples and their cuSPARSE peer (see docs/src/gpu.md).
cargo build --release --locked --features "$FEATURES,verify" "${ARGS[@]}"

TARGET=${CARGO_TARGET_DIR:-target}
mkdir -p .dev/bin .dev/anchors
for e in "${EXAMPLES[@]}"; do
    strip -o ".dev/bin/$e.stripped" "$TARGET/release/examples/$e"
    xz -6 -T0 -c ".dev/bin/$e.stripped" > ".dev/bin/$e.xz.tmp"
    mv ".dev/bin/$e.xz.tmp" ".dev/bin/$e.xz"
    rm -f ".dev/bin/$e.stripped" ".dev/bin/$e" ".dev/bin/.$e.xz.sha256" # an unpacked copy must not travel
done
cp -f "$ANCHORS"/*.py .dev/anchors/
HEAD=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then HEAD="$HEAD+dirty"; fi
echo "$HEAD" > .dev/GIT_HEAD
echo "bench-pack: $(du -sh .dev | cut -f1) in .dev ($HEAD, --features $FEATURES,verify):"
ls -l .dev/bin .dev/anchors
echo 'carry it: "carry": [".dev"]; the tree that travels must stay under 64 MiB'
