//! Host side of the CUDA dropout (`cuda/dropout.cu`).

use crate::cuda::{elementwise_cfg, launched};
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
use candle_core::{CudaStorage, Layout, Result, Shape};

/// Runs `$run!(storage type, scale type, kernel suffix)` for `$dt`: f32, f64, and the half
/// types (whose scale travels, and applies, in fp32); any other dtype is `$op`'s error.
macro_rules! per_dtype {
    ($dt:expr, $op:expr, $run:ident) => {
        match $dt {
            candle_core::DType::F32 => $run!(f32, f32, "f32"),
            candle_core::DType::F64 => $run!(f64, f64, "f64"),
            candle_core::DType::BF16 => $run!(half::bf16, f32, "bf16"),
            candle_core::DType::F16 => $run!(half::f16, f32, "f16"),
            o => candle_core::bail!("{}: unsupported dtype {o:?}", $op),
        }
    };
}
pub(crate) use per_dtype;

/// One thread per element (grid-stride); f32, f64, bf16 and f16.
pub(crate) fn dropout(
    s: &CudaStorage,
    l: &Layout,
    p: f32,
    seed: u64,
) -> Result<(CudaStorage, Shape)> {
    masked(s, l, None, p, seed, "dropout")
}

/// Launches `<family>_<dtype>`, a kernel that writes every element of `out`, of the signature
/// `(x, out, n, seed, threshold, scale)`, or with a bias row `(x, b, out, n, d, seed,
/// threshold, scale)` (`x [N, d]`, `b [d]`).
pub(crate) fn masked(
    s: &CudaStorage,
    l: &Layout,
    bias: Option<(&CudaStorage, &Layout)>,
    p: f32,
    seed: u64,
    family: &str,
) -> Result<(CudaStorage, Shape)> {
    if !l.is_contiguous() || bias.is_some_and(|(_, bl)| !bl.is_contiguous()) {
        candle_core::bail!("{family}: operands must be contiguous");
    }
    let d = match bias {
        Some((_, bl)) => {
            let (_, d) = l.shape().dims2()?;
            if bl.shape().elem_count() != d {
                candle_core::bail!("{family}: bias {:?} for rows of {d}", bl.shape());
            }
            u32::try_from(d.max(1))
                .map_err(|_| candle_core::Error::Msg(format!("{family}: {d} columns")))?
        }
        None => 0,
    };
    let dev = s.device().clone();
    let n = l.shape().elem_count();
    let (t, n_u) = (super::threshold(p), n as u64);
    let scale = 1.0 / (1.0 - p as f64);
    macro_rules! run {
        ($T:ty, $S:ty, $suffix:expr) => {{
            let x = s.as_cuda_slice::<$T>()?.slice(l.start_offset()..);
            let bv = match bias {
                Some((b, bl)) => Some(b.as_cuda_slice::<$T>()?.slice(bl.start_offset()..)),
                None => None,
            };
            // SAFETY: `alloc` leaves the buffer uninitialised, and the kernel writes all `n`
            // elements (every index below `n` is visited by the grid-stride loop).
            let out = unsafe { dev.alloc::<$T>(n.max(1))? };
            if n > 0 {
                let name = format!("{family}_{}", $suffix);
                let func = crate::cuda::kernel(&dev, &name, &crate::cuda::DROPOUT)?;
                let sc = scale as $S;
                let mut b = func.builder();
                b.arg(&x);
                match &bv {
                    Some(bv) => b.arg(bv).arg(&out).arg(&n_u).arg(&d),
                    None => b.arg(&out).arg(&n_u),
                };
                b.arg(&seed).arg(&t).arg(&sc);
                // SAFETY: `x` (contiguous from its offset) and `out` hold `n` elements, the
                // bias `d` (read at `i % d`); the kernel reads and writes indices below `n`
                // only.
                launched(unsafe { b.launch(elementwise_cfg(n)) }.map(|_| ()))?;
            }
            CudaStorage::wrap_cuda_slice(out, dev)
        }};
    }
    let out = per_dtype!(s.dtype(), family, run);
    Ok((out, l.shape().clone()))
}
