//! With the `cuda` feature, compiles `cuda/*.cu` into `OUT_DIR` as fatbins holding SASS for
//! `CUDA_COMPUTE_CAP` (default 90, H100/H200) and PTX for newer GPUs; the ops embed them and
//! load them through `crate::cuda::kernel` (machine code: no driver JIT on a first run).
//! Without the feature nothing runs, so a CPU build never needs nvcc.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=cuda");
    println!("cargo:rerun-if-env-changed=CUDA_COMPUTE_CAP");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let cap = std::env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| "90".into());
    let nvcc = std::env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    for name in [
        "spmm",
        "sddmm",
        "sampled",
        "quant",
        "maxk",
        "dropout",
        "edge_softmax",
        "gat_attention",
        "gat_aggregate",
        "layer_norm",
        "xent",
        "adam",
        "column_sum",
        "cast_pad",
        "graph",
    ] {
        let src = PathBuf::from("cuda").join(format!("{name}.cu"));
        let fatbin = out.join(format!("{name}.fatbin"));
        let status = Command::new(&nvcc)
            .args([
                "--fatbin",
                "-O3",
                "-std=c++17",
                &format!("-gencode=arch=compute_{cap},code=[sm_{cap},compute_{cap}]"),
                "-o",
            ])
            .arg(&fatbin)
            .arg(&src)
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run `{nvcc}` to compile {}: {e}. Install a CUDA 13.0 toolkit, or run \
                     `eval \"$(scripts/cuda-toolkit.sh)\"` from the repository root first.",
                    src.display()
                )
            });
        assert!(status.success(), "nvcc failed on {}", src.display());
    }
}
