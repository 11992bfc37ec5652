//! Host side of the fused masked cross-entropy (`cuda/xent.cu`): one warp per row.

use super::Pass;
use crate::cuda::{f32_view, launched, u32_view, zeros};
use crate::ops::optional::Cuda;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::{CudaStorage, DType, Layout, Result, Shape};

const WARPS: u32 = 8;

fn cfg(n: usize) -> Result<LaunchConfig> {
    let blocks = u32::try_from(n.div_ceil(WARPS as usize).max(1))
        .map_err(|_| candle_core::Error::Msg("masked_cross_entropy: too many rows".into()))?;
    Ok(LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (32 * WARPS, 1, 1),
        shared_mem_bytes: 0,
    })
}

fn suffix(dt: DType) -> Result<&'static str> {
    Ok(match dt {
        DType::F32 => "f32",
        DType::BF16 => "bf16",
        DType::F16 => "f16",
        o => {
            candle_core::bail!("masked_cross_entropy: CUDA logits must be f32/bf16/f16, got {o:?}")
        }
    })
}

fn dims(xl: &Layout) -> Result<(usize, usize, i32, i32)> {
    if !xl.is_contiguous() {
        candle_core::bail!("masked_cross_entropy: logits must be contiguous");
    }
    let (n, c) = xl.shape().dims2()?;
    let as_i32 = |v: usize| {
        i32::try_from(v)
            .map_err(|_| candle_core::Error::Msg(format!("masked_cross_entropy: {v} exceeds i32")))
    };
    Ok((n, c, as_i32(n)?, as_i32(c)?))
}

/// Per-row losses `[N]` f32 ([`Pass::Loss`]), or `dx [N, C]` in the logits' dtype for row
/// weights `w` already times the upstream gradient ([`Pass::Grad`]).
pub(crate) fn run(
    pass: Pass,
    (x, xl): Cuda<'_>,
    (y, yl): Cuda<'_>,
    (w, wl): Cuda<'_>,
) -> Result<(CudaStorage, Shape)> {
    let (n, c, n_i, c_i) = dims(xl)?;
    let dev = x.device().clone();
    let yv = u32_view("masked_cross_entropy", y, yl)?;
    let wv = f32_view("masked_cross_entropy", w, wl)?;
    let dir = match pass {
        Pass::Loss => "fwd",
        Pass::Grad => "bwd",
    };
    let name = format!("xent_{dir}_{}", suffix(x.dtype())?);
    let func = crate::cuda::kernel(&dev, &name, &crate::cuda::XENT)?;
    macro_rules! go {
        ($T:ty) => {{
            let xv = x.as_cuda_slice::<$T>()?.slice(xl.start_offset()..);
            match pass {
                Pass::Loss => {
                    let out = zeros::<f32>(&dev, n)?;
                    let mut b = func.builder();
                    b.arg(&xv).arg(&yv).arg(&wv).arg(&out).arg(&n_i).arg(&c_i);
                    // SAFETY: x holds n * c contiguous elements, y / w / out hold n; labels
                    // >= c are caught in the kernel before indexing.
                    if n > 0 {
                        launched(unsafe { b.launch(cfg(n)?) }.map(|_| ()))?;
                    }
                    (CudaStorage::wrap_cuda_slice(out, dev), Shape::from(n))
                }
                Pass::Grad => {
                    // SAFETY: the kernel writes every element of every row (zeros for
                    // weight-0 rows).
                    let dx = unsafe { dev.alloc::<$T>((n * c).max(1))? };
                    if n > 0 {
                        let mut b = func.builder();
                        b.arg(&xv).arg(&yv).arg(&wv).arg(&dx).arg(&n_i).arg(&c_i);
                        // SAFETY: x and dx hold n * c contiguous elements, y / w hold n.
                        launched(unsafe { b.launch(cfg(n)?) }.map(|_| ()))?;
                    }
                    (CudaStorage::wrap_cuda_slice(dx, dev), xl.shape().clone())
                }
            }
        }};
    }
    Ok(match x.dtype() {
        DType::F32 => go!(f32),
        DType::BF16 => go!(half::bf16),
        DType::F16 => go!(half::f16),
        _ => unreachable!("checked by suffix"),
    })
}
