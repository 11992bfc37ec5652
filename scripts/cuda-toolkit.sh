#!/usr/bin/env bash
# Makes a CUDA 13.0 build of this project possible on a machine with no GPU and no toolkit.
#
# It downloads NVIDIA's CUDA 13.0 component wheels from PyPI (nvcc, headers, runtime, cuBLAS,
# cuRAND, NVRTC, cuSPARSE), unpacks their nvidia/cu13 trees into one folder, adds the
# unversioned library symlinks the linker needs, and builds a stub libcuda.so (soname
# libcuda.so.1) from the driver entry points cudarc declares, so binaries link here and use
# the real driver on the GPU machine. Idempotent: a completed folder is reused.
#
# Usage:
#   scripts/cuda-toolkit.sh            # install (if needed), then print the environment
#   eval "$(scripts/cuda-toolkit.sh)"  # install and export PATH, CUDA_HOME, LIBRARY_PATH, ...
#   cargo build --release --features cuda
#
# With a real CUDA 13.0 toolkit installed (nvcc on PATH), none of this is needed.
# Folder: $GNN_CUDA_DIR, default ~/.cache/gnn-cuda-13.0. Needs python3 with pip, unzip, gcc.
set -euo pipefail

DIR="${GNN_CUDA_DIR:-$HOME/.cache/gnn-cuda-13.0}"
CU="$DIR/nvidia/cu13"
WHEELS=(
    nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88
    nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cuda-nvrtc==13.0.88
    nvidia-curand==10.4.0.35 nvidia-cublas==13.0.2.14 nvidia-cusparse==12.6.3.3
)

log() { echo "cuda-toolkit: $*" >&2; }

install() {
    for tool in python3 unzip gcc; do
        command -v "$tool" >/dev/null || { log "needs $tool"; exit 1; }
    done
    mkdir -p "$DIR/wheels"
    log "downloading ${#WHEELS[@]} wheels into $DIR/wheels (about 1 GB, once)"
    python3 -m pip download -q --no-deps --only-binary=:all: \
        --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$DIR/wheels" "${WHEELS[@]}"
    for w in "$DIR"/wheels/*.whl; do
        unzip -qo "$w" 'nvidia/*' -d "$DIR"
    done
    [ -x "$CU/bin/nvcc" ] || { log "nvcc missing after unpacking"; exit 1; }

    # Unversioned names for the linker (-lcublas, -lcudart, ...).
    (
        cd "$CU/lib"
        for lib in cublas cublasLt cudart nvrtc; do
            [ -e "lib$lib.so" ] || ln -s "$(ls "lib$lib.so."[0-9]* | sort | head -n 1)" "lib$lib.so"
        done
        [ -e libcurand.so ] || ln -s libcurand.so.10 libcurand.so
        [ -e libcusparse.so ] || ln -s libcusparse.so.12 libcusparse.so
    )

    # Stub driver: one empty function per entry point cudarc declares, real soname.
    local cudarc
    cudarc=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.* 2>/dev/null | sort | tail -n 1 || true)
    if [ -z "$cudarc" ]; then
        log "cudarc sources not found: running cargo fetch"
        (cd "$(dirname "$0")/.." && cargo fetch -q)
        cudarc=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.* | sort | tail -n 1)
    fi
    grep -ohP '^\s+(pub )?fn (cu\w+)\(' "$cudarc/src/driver/sys/"*.rs \
        | sed -E 's/^\s+(pub )?fn (cu\w+)\(/\2/' | sort -u \
        | awk '{print "void "$1"(void){}"}' > "$DIR/libcuda_stub.c"
    gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$CU/lib/libcuda.so" "$DIR/libcuda_stub.c"
    nccl_stub "$cudarc"
    touch "$DIR/.complete"
    log "ready in $DIR"
}

# Stub NCCL for the `nccl` feature's link step, the same way: one empty function per entry
# point cudarc declares, soname libnccl.so.2, so the GPU machine's real library
# (/usr/lib/x86_64-linux-gnu/libnccl.so.2) is the one loaded at run time.
nccl_stub() {
    grep -ohP 'pub unsafe fn (nccl\w+)\(' "$1/src/nccl/sys/"*.rs \
        | sed -E 's/pub unsafe fn (nccl\w+)\(/\1/' | sort -u \
        | awk '{print "void "$1"(void){}"}' > "$DIR/libnccl_stub.c"
    gcc -shared -fPIC -Wl,-soname,libnccl.so.2 -o "$CU/lib/libnccl.so" "$DIR/libnccl_stub.c"
}

[ -f "$DIR/.complete" ] || install
# Folders completed before the NCCL stub existed get it now.
if [ ! -f "$CU/lib/libnccl.so" ]; then
    cudarc=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.* 2>/dev/null | sort | tail -n 1 || true)
    [ -n "$cudarc" ] && nccl_stub "$cudarc"
fi

cat <<ENV
export PATH="$CU/bin:\$PATH"
export CUDA_HOME="$CU"
export CUDA_PATH="$CU"
export LIBRARY_PATH="$CU/lib\${LIBRARY_PATH:+:\$LIBRARY_PATH}"
export CUDA_COMPUTE_CAP="\${CUDA_COMPUTE_CAP:-90}"
ENV
