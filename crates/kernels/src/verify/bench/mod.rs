//! The kernel benchmarks behind the `bench_spmm` and `bench_sddmm` examples (feature `cuda`):
//! ours against cuSPARSE ([`crate::peer`]) on the Reddit-shaped graph, in the same process on
//! the same stream and operands, CUDA events, medians after warm-up. Each prints its table as
//! it goes and returns the JSON document the example writes (and `bench/run.py` reads).
//! Every timing stands beside its floors ([`crate::verify::floor`]): the gathered bytes' rate
//! and the time over the L1 gather floor and over the compulsory-HBM floor; each document
//! records the device model once (`floor_model`) and each row its `floor` and `vs_floor`.

mod sddmm;
mod spmm;

pub use sddmm::{sddmm, SddmmBench};
pub use spmm::{spmm, SpmmBench};

use crate::error::{Error, Result};
use crate::verify::floor::FloorModel;
use candle_core::cuda_backend::cudarc::driver::CudaStream;
use candle_core::cuda_backend::CudaDevice;
use candle_core::Device;
use std::sync::Arc;

/// How the rows are timed, as the documents say it.
const TIMING: &str = "CUDA events on candle's stream, median after 3 warm-ups; outputs allocated \
     per call from the stream-ordered pool (the examples keep its freed memory, as training does)";

/// The CUDA device behind `device` and its stream.
fn cuda(device: &Device) -> Result<(&CudaDevice, Arc<CudaStream>)> {
    match device {
        Device::Cuda(dev) => Ok((dev, dev.cuda_stream())),
        other => Err(Error::Harness(format!(
            "the kernel benchmarks run on a CUDA device, not {other:?}"
        ))),
    }
}

/// The floor model of `dev`'s GPU (by the name its driver gives), printed once.
pub fn floor_model(dev: &CudaDevice) -> Result<FloorModel> {
    let name = dev
        .cuda_stream()
        .context()
        .name()
        .map_err(|e| Error::Harness(format!("the GPU's name: {e:?}")))?;
    let m = FloorModel::for_gpu(&name);
    println!("{m}");
    Ok(m)
}

/// A JSON value of `v` (the documents' rows).
fn json(v: impl serde::Serialize) -> Result<serde_json::Value> {
    serde_json::to_value(v).map_err(|e| Error::Harness(format!("benchmark JSON: {e}")))
}
