//! Kernel benchmarks on the GPU (with `cuda` and `verify`), the bodies of the `bench_graphs`
//! and `bench_maxk` examples: our kernels against cuSPARSE in the same process, on the same
//! operands and stream, timed with CUDA events (medians after warm-up). Each prints a table
//! and writes JSON and an SVG chart. Their GPU-free parts build everywhere and are tested on
//! the CPU: the sweep's graphs ([`graph_set`]) and the dispatcher's verdicts ([`regret`]).

pub mod graph_set;
#[cfg(all(feature = "cuda", feature = "verify"))]
pub mod graphs;
#[cfg(all(feature = "cuda", feature = "verify"))]
pub mod maxk;
pub mod regret;

/// The first CUDA device, as a candle device and as the CUDA device the cuSPARSE peer takes
/// (its stream: `cuda_stream()`).
#[cfg(all(feature = "cuda", feature = "verify"))]
fn cuda_device() -> crate::Result<(candle_core::Device, candle_core::CudaDevice)> {
    let device = candle_core::Device::new_cuda(0)
        .map_err(|e| crate::Error::Invalid(format!("no CUDA device: {e}")))?;
    let candle_core::Device::Cuda(dev) = &device else {
        unreachable!("new_cuda returns a CUDA device")
    };
    let dev = dev.clone();
    // As in training: the pool keeps freed memory, so a timed call's output allocation is not
    // a page mapping after every synchronisation.
    crate::keep_freed_memory(&device)?;
    Ok((device, dev))
}
