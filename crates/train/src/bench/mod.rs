//! Kernel benchmarks on the GPU (builds with `cuda` and `verify`), the bodies of the
//! `bench_graphs` and `bench_maxk` examples: our kernels against cuSPARSE in the same process,
//! on the same operands and stream, timed with CUDA events (medians after warm-up). Each prints
//! a table and writes JSON and an SVG chart.

pub mod graphs;
pub mod maxk;

/// The first CUDA device, as a candle device and as the CUDA device the cuSPARSE peer takes
/// (its stream: `cuda_stream()`).
fn cuda_device() -> crate::Result<(candle_core::Device, candle_core::CudaDevice)> {
    let device = candle_core::Device::new_cuda(0)
        .map_err(|e| crate::Error::Invalid(format!("no CUDA device: {e}")))?;
    let candle_core::Device::Cuda(dev) = &device else {
        unreachable!("new_cuda returns a CUDA device")
    };
    let dev = dev.clone();
    Ok((device, dev))
}
