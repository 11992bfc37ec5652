//! Host side of the fused masked cross-entropy (`cuda/xent.cu`): a warp per row, `XENT_U`
//! rows in flight per warp, warps striding the rows over a grid fixed by the row count.

use super::Pass;
use crate::cuda::{f32_view, launched, u32_view, zeros};
use crate::ops::optional::Cuda;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::{CudaStorage, DType, Layout, Result, Shape};

const WARPS: usize = 8;
/// Rows in flight per warp (`XENT_U` in the kernel).
const U: usize = 4;
/// The most blocks a pass launches (warps stride the rows beyond): the forward's partial
/// sums, one per block, are this many at most.
const MAX_BLOCKS: usize = 1024;

/// Blocks for `n` rows: a function of `n` alone, so that the forward's partial sums (one per
/// block, each over a fixed set of rows in a fixed order) are the same on every device.
fn blocks(n: usize) -> usize {
    n.div_ceil(WARPS * U).clamp(1, MAX_BLOCKS)
}

fn cfg(n: usize) -> Result<LaunchConfig> {
    let blocks = blocks(n) as u32;
    Ok(LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (32 * WARPS as u32, 1, 1),
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

/// The kernels' register width for `c` classes: rows of at most `32 R` classes in registers
/// (`R` 1, 2 or 4), 0 for the generic loop.
fn regs(c: usize) -> usize {
    match c {
        0..=32 => 1,
        33..=64 => 2,
        65..=128 => 4,
        _ => 0,
    }
}

/// Partial sums of the row losses `[P]` f32 (`P` = [`blocks`]; their sum is the loss,
/// [`Pass::Loss`]), or `dx [N, C]` in the logits' dtype for row weights `w` already times the
/// upstream gradient ([`Pass::Grad`]).
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
    let name = format!("xent_{dir}_{}_r{}", suffix(x.dtype())?, regs(c));
    let func = crate::cuda::kernel(&dev, &name, &crate::cuda::XENT)?;
    macro_rules! go {
        ($T:ty) => {{
            let xv = x.as_cuda_slice::<$T>()?.slice(xl.start_offset()..);
            match pass {
                Pass::Loss => {
                    let p = blocks(n);
                    let out = zeros::<f32>(&dev, p)?;
                    let mut b = func.builder();
                    b.arg(&xv).arg(&yv).arg(&wv).arg(&out).arg(&n_i).arg(&c_i);
                    // SAFETY: x holds n * c contiguous elements, y / w hold n, out one per
                    // block of cfg(n); labels >= c are caught in the kernel before indexing.
                    if n > 0 {
                        launched(unsafe { b.launch(cfg(n)?) }.map(|_| ()))?;
                    }
                    (CudaStorage::wrap_cuda_slice(out, dev), Shape::from(p))
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
