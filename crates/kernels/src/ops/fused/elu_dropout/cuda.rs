//! Host side of the CUDA bias + ELU + dropout (`cuda/dropout.cu`, beside the dropout kernels
//! whose mask it shares).

use crate::cuda::{elementwise_cfg, launched};
use crate::ops::dropout::cuda::{masked, per_dtype};
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
use candle_core::{CudaStorage, Layout, Result, Shape};

/// The forward (`bias_elu_dropout_*`): `x [N, D]` and `b [D]` contiguous.
pub(crate) fn bias_elu_dropout(
    x: &CudaStorage,
    xl: &Layout,
    b: &CudaStorage,
    bl: &Layout,
    p: f32,
    seed: u64,
) -> Result<(CudaStorage, Shape)> {
    masked(x, xl, Some((b, bl)), p, seed, "bias_elu_dropout")
}

/// Its backward (`bias_elu_dropout_bwd_*`): `dx` from the output `y` and `dy`, the mask
/// recomputed from `seed`.
pub(crate) fn bias_elu_dropout_bwd(
    y: &CudaStorage,
    yl: &Layout,
    dy: &CudaStorage,
    dl: &Layout,
    p: f32,
    seed: u64,
) -> Result<(CudaStorage, Shape)> {
    if !yl.is_contiguous() || !dl.is_contiguous() {
        candle_core::bail!("bias_elu_dropout: backward operands must be contiguous");
    }
    let dev = y.device().clone();
    let n = yl.shape().elem_count();
    let n_u = n as u64;
    let t = crate::ops::dropout::threshold(p);
    let scale = 1.0 / (1.0 - p as f64);
    macro_rules! run {
        ($T:ty, $S:ty, $suffix:expr) => {{
            let yv = y.as_cuda_slice::<$T>()?.slice(yl.start_offset()..);
            let dv = dy.as_cuda_slice::<$T>()?.slice(dl.start_offset()..);
            // SAFETY: the kernel writes all `n` elements.
            let out = unsafe { dev.alloc::<$T>(n.max(1))? };
            if n > 0 {
                let name = format!("bias_elu_dropout_bwd_{}", $suffix);
                let func = crate::cuda::kernel(&dev, &name, &crate::cuda::DROPOUT)?;
                let sc = scale as $S;
                let mut b = func.builder();
                b.arg(&yv)
                    .arg(&dv)
                    .arg(&out)
                    .arg(&n_u)
                    .arg(&seed)
                    .arg(&t)
                    .arg(&sc);
                // SAFETY: `y`, `dy` and `out` hold `n` elements; indices below `n` only.
                launched(unsafe { b.launch(elementwise_cfg(n)) }.map(|_| ()))?;
            }
            CudaStorage::wrap_cuda_slice(out, dev)
        }};
    }
    let out = per_dtype!(y.dtype(), "bias_elu_dropout_bwd", run);
    Ok((out, yl.shape().clone()))
}
