//! Host side of the CUDA GAT node scores (`cuda/gat_attention.cu`, `gat_scores_*`).

use super::Plan;
use crate::cuda::{f32_view, launched, row_tiled_cfg, warp_columns, FloatView, GAT_ATTENTION};
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
use candle_core::{CudaStorage, DType, Layout, Result, Shape};

/// The kernel-name suffix of a storage type.
fn suffix(dtype: DType) -> Result<&'static str> {
    Ok(match dtype {
        DType::F32 => "f32",
        DType::BF16 => "bf16",
        DType::F16 => "f16",
        d => candle_core::bail!("gat_scores: the CUDA kernels take f32, bf16 or f16, got {d:?}"),
    })
}

/// Rows of `l`'s `[n, hf]` shape (`[2, n, h]` scores: `dims[1]`).
fn rows(l: &Layout, dim: usize) -> usize {
    l.shape().dims().get(dim).copied().unwrap_or(0)
}

/// Most row blocks of the forward and the features' gradient (they stride over the rows).
const MAX_BLOCKS: usize = 4096;

/// `[2, n, heads]` f32 scores from `xs [n, heads * width]` and `att [2 heads width]` f32.
pub(super) fn forward(
    (x, xl): (&CudaStorage, &Layout),
    (a, al): (&CudaStorage, &Layout),
    p: Plan,
) -> Result<(CudaStorage, Shape)> {
    const OP: &str = "gat_scores";
    let xv = FloatView::of(OP, x, xl)?;
    let att = f32_view(OP, a, al)?;
    let dev = x.device().clone();
    let n = rows(xl, 0);
    let total = 2 * n * p.heads;
    // SAFETY: the kernel writes all `total` elements.
    let out = unsafe { dev.alloc::<f32>(total.max(1))? };
    if n > 0 {
        let name = format!("gat_scores_fwd_{}", suffix(xv.dtype())?);
        let func = crate::cuda::kernel(&dev, &name, &GAT_ATTENTION)?;
        let (n64, h, f) = (n as i64, p.heads as i32, p.width as i32);
        let mut b = func.builder();
        xv.push(&mut b);
        b.arg(&att).arg(&out).arg(&n64).arg(&h).arg(&f);
        // One thread per row and head.
        let cfg = row_tiled_cfg(n, p.heads, p.heads, MAX_BLOCKS)?;
        // SAFETY: `xs` holds n * h * f elements, `att` 2 h f, `out` 2 n h; indices below those.
        launched(unsafe { b.launch(cfg) }.map(|_| ()))?;
    }
    Ok((
        CudaStorage::wrap_cuda_slice(out, dev),
        Shape::from((2, n, p.heads)),
    ))
}

/// `dxs [n, heads * width]` of `dtype` from `ds [2, n, heads]` and `att`, both f32.
pub(super) fn dx(
    (d, dl): (&CudaStorage, &Layout),
    (a, al): (&CudaStorage, &Layout),
    p: Plan,
    dtype: DType,
) -> Result<(CudaStorage, Shape)> {
    const OP: &str = "gat_scores backward";
    let ds = f32_view(OP, d, dl)?;
    let att = f32_view(OP, a, al)?;
    let dev = d.device().clone();
    let (n, hf) = (rows(dl, 1), p.heads * p.width);
    let total = n * hf;
    let (n64, h, f) = (n as i64, p.heads as i32, p.width as i32);
    macro_rules! run {
        ($T:ty) => {{
            // SAFETY: the kernel writes all `total` elements.
            let out = unsafe { dev.alloc::<$T>(total.max(1))? };
            if total > 0 {
                let name = format!("gat_scores_dx_{}", suffix(dtype)?);
                let func = crate::cuda::kernel(&dev, &name, &GAT_ATTENTION)?;
                let mut b = func.builder();
                b.arg(&ds).arg(&att).arg(&out).arg(&n64).arg(&h).arg(&f);
                let cfg = row_tiled_cfg(n, hf, warp_columns(hf), MAX_BLOCKS)?;
                // SAFETY: `ds` holds 2 n h elements, `att` 2 h f, `out` n h f.
                launched(unsafe { b.launch(cfg) }.map(|_| ()))?;
            }
            CudaStorage::wrap_cuda_slice(out, dev)
        }};
    }
    let out = match dtype {
        DType::F32 => run!(f32),
        DType::BF16 => run!(half::bf16),
        DType::F16 => run!(half::f16),
        d => candle_core::bail!("{OP}: the CUDA kernels take f32, bf16 or f16, got {d:?}"),
    };
    Ok((out, Shape::from((n, hf))))
}

/// Most row blocks of the attention vectors' gradient: its partial sums are then at most
/// `1024 x 2 H F` floats, summed by one GEMM row.
const DATT_MAX_BLOCKS: usize = 1024;

/// Per-block partial sums `[blocks, 2 heads width]` (f32) of both attention vectors'
/// gradients from `xs` and `ds [2, n, heads]`.
pub(super) fn datt(
    (x, xl): (&CudaStorage, &Layout),
    (d, dl): (&CudaStorage, &Layout),
    p: Plan,
) -> Result<(CudaStorage, Shape)> {
    const OP: &str = "gat_scores backward";
    let xv = FloatView::of(OP, x, xl)?;
    let ds = f32_view(OP, d, dl)?;
    let dev = x.device().clone();
    let (n, hf) = (rows(xl, 0), p.heads * p.width);
    let cols = warp_columns(hf);
    let mut cfg = row_tiled_cfg(n, hf, cols, DATT_MAX_BLOCKS)?;
    // Both sides' per-thread sums, for the block's column sums.
    cfg.shared_mem_bytes = (2 * (256 / cols) * cols * 4) as u32;
    let blocks = cfg.grid_dim.0 as usize;
    // SAFETY: every block writes its 2 hf entries (threads of columns below hf), zeros when
    // it has no rows.
    let out = unsafe { dev.alloc::<f32>(blocks * 2 * hf)? };
    let name = format!("gat_scores_datt_{}", suffix(xv.dtype())?);
    let func = crate::cuda::kernel(&dev, &name, &GAT_ATTENTION)?;
    let (n64, h, f) = (n as i64, p.heads as i32, p.width as i32);
    let mut b = func.builder();
    xv.push(&mut b);
    b.arg(&ds).arg(&out).arg(&n64).arg(&h).arg(&f);
    // SAFETY: `xs` holds n h f elements, `ds` 2 n h, `out` blocks * 2 h f; the grid matches.
    launched(unsafe { b.launch(cfg) }.map(|_| ()))?;
    Ok((
        CudaStorage::wrap_cuda_slice(out, dev),
        Shape::from((blocks, 2 * hf)),
    ))
}
