#!/usr/bin/env bash
# Builds the Python package's CUDA wheel (`import gnn` with device="cuda" and, with NCCL,
# devices=[0, 1]) on the development machine, for a GPU machine that has no Rust toolchain and
# no network: maturin, release, --features nccl (CUDA + NCCL; --features cuda for CUDA alone),
# against scripts/cuda-toolkit.sh's CUDA 13.0 (no GPU needed to build), for the GPU machine's
# Python (3.12 by default), into .dev/python/ beside what scripts/bench-pack.sh packs.
#
# Usage: scripts/python-wheel.sh [--features cuda|nccl|cpu] [--python python3.12]
#
# On the GPU machine (the carried .dev), from the repository root:
#   python3 -m pip install --no-index --no-deps .dev/python/gnn-*.whl
#   export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib  # bench/run.py sets it
#   python3 -c 'import gnn; print(gnn.__version__, gnn.CUDA, gnn.NCCL)'
#   python3 bench/run.py python-overhead                 # the package against train_reddit
# The wheel links the CUDA 13.0 libraries, the driver (libcuda.so.1) and, with nccl,
# libnccl.so.2 from the system (not bundled: its tag is plain linux_x86_64). Maturin comes from
# $MATURIN or PATH, else a venv of its own under ~/.cache/gnn-tools. Uses $CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

FEATURES=nccl
PYTHON=${GNN_WHEEL_PYTHON:-python3.12}
while [ $# -gt 0 ]; do
    case $1 in
        --features) FEATURES=${2:?--features needs cuda, nccl or cpu}; shift 2 ;;
        --features=*) FEATURES=${1#--features=}; shift ;;
        --python) PYTHON=${2:?--python needs an interpreter}; shift 2 ;;
        --python=*) PYTHON=${1#--python=}; shift ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "python-wheel: unknown argument $1" >&2; exit 2 ;;
    esac
done
case $FEATURES in cuda|nccl|cpu) ;; *) echo "python-wheel: --features must be cuda, nccl or cpu" >&2; exit 2 ;; esac

if ! command -v cargo >/dev/null 2>&1; then
    echo "python-wheel: no cargo here: build the wheel on the development machine and carry .dev" >&2
    exit 1
fi
if ! "$PYTHON" -c 'import sys' >/dev/null 2>&1; then
    # A pyenv shim of a version not selected: that version's own executable.
    found=$(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/*/bin/"$PYTHON" 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$found" ] && "$found" -c 'import sys' >/dev/null 2>&1; then
        PYTHON=$found
    else
        echo "python-wheel: no working $PYTHON here (the wheel is built for that interpreter's" >&2
        echo "version, the GPU machine's: pass --python, or set GNN_WHEEL_PYTHON)" >&2
        exit 1
    fi
fi

MATURIN=${MATURIN:-$(command -v maturin || true)}
if [ -z "$MATURIN" ]; then
    TOOLS="$HOME/.cache/gnn-tools/maturin"
    if [ ! -x "$TOOLS/bin/maturin" ]; then
        python3 -m venv "$TOOLS"
        "$TOOLS/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.9,<2"
    fi
    MATURIN="$TOOLS/bin/maturin"
fi

ARGS=()
if [ "$FEATURES" != cpu ]; then
    eval "$(bash scripts/cuda-toolkit.sh)"
    ARGS+=(--features "$FEATURES")
fi
OUT=.dev/python
mkdir -p "$OUT"
rm -f "$OUT"/gnn-*.whl
# No auditwheel repair: it would copy the stub driver and the CUDA libraries into the wheel.
"$MATURIN" build --release --locked --strip --manifest-path crates/python/Cargo.toml \
    --interpreter "$PYTHON" --compatibility linux --auditwheel skip --out "$OUT" "${ARGS[@]}"
HEAD=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then HEAD="$HEAD+dirty"; fi
echo "$HEAD --features $FEATURES" > "$OUT/GIT_HEAD"
echo "python-wheel: $(du -sh "$OUT" | cut -f1) in $OUT ($HEAD, --features $FEATURES, $("$PYTHON" --version 2>&1)):"
ls -l "$OUT"
echo 'carry it with .dev ("carry": [".dev"]); the tree that travels must stay under 64 MiB'
