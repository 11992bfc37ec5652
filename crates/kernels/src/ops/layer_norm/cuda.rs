//! Host side of the CUDA LayerNorm (`cuda/layer_norm.cu`): one warp per row, the row in
//! registers (`cpl` values per lane, the smallest power of two with `32 cpl >= d`).

use super::Pass;
use crate::cuda::{f32_view, launched, warp_per_row_cfg, zeros, FloatView};
use crate::ops::sddmm::cuda::sm_count;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{
    CudaView, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
use candle_core::cuda_backend::{CudaDType, CudaDevice};
use candle_core::{CudaStorage, Layout, Result, Shape};

/// Warps per block of the parameter-gradient kernel (`LN_WARPS`).
const WARPS: usize = 8;

/// Values per lane for rows of `d` (`d <= 1024`, checked by `layer_norm`).
fn cpl(d: usize) -> Result<usize> {
    [1, 2, 4, 8, 16, 32]
        .into_iter()
        .find(|c| 32 * c >= d)
        .ok_or_else(|| candle_core::Error::Msg(format!("layer_norm: rows of {d} exceed 1024")))
}

/// Runs `<prefix>layer_norm_{fwd,bwd}_c<cpl>` over the `[n, d]` rows of `x` (storage type T)
/// into a new output of T. `b` is the bias (f32) for the forward, `dy` (T) for the backward.
#[allow(clippy::too_many_arguments)]
fn row_kernel<T: CudaDType + DeviceRepr + ValidAsZeroBits>(
    dev: &CudaDevice,
    pass: Pass,
    prefix: &str,
    xv: &CudaView<'_, T>,
    wv: &CudaView<'_, f32>,
    b: &FloatView,
    (n, d): (usize, usize),
    eps: f64,
) -> Result<CudaStorage> {
    let out = zeros::<T>(dev, n * d)?;
    if n > 0 && d > 0 {
        let c = cpl(d)?;
        let name = match pass {
            Pass::Forward => format!("{prefix}layer_norm_fwd_c{c}"),
            Pass::Dx => format!("{prefix}layer_norm_bwd_c{c}"),
        };
        let func = crate::cuda::kernel(dev, &name, &crate::cuda::LAYER_NORM)?;
        let (n_i, d_i, eps_f) = (n as i32, d as i32, eps as f32);
        let mut bld = func.builder();
        bld.arg(xv).arg(wv);
        b.push(&mut bld);
        bld.arg(&out).arg(&n_i).arg(&d_i).arg(&eps_f);
        // SAFETY: x (and dy) are [n, d] of T, w (and the bias) [d] f32, out n * d of T; one
        // warp per row, lanes bounded by d <= 32 cpl.
        launched(unsafe { bld.launch(warp_per_row_cfg(n)) }.map(|_| ()))?;
    }
    Ok(CudaStorage::wrap_cuda_slice(out, dev.clone()))
}

/// Dispatches [`row_kernel`] on `x`'s storage type.
fn rows(
    pass: Pass,
    (x, xl): (&CudaStorage, &Layout),
    (w, wl): (&CudaStorage, &Layout),
    b: &FloatView,
    eps: f64,
) -> Result<(CudaStorage, Shape)> {
    let xv = FloatView::of("layer_norm", x, xl)?;
    let wv = f32_view("layer_norm", w, wl)?;
    let nd = xl.shape().dims2()?;
    let dev = x.device();
    let p = xv.prefix();
    let out = match &xv {
        FloatView::F32(v) => row_kernel(dev, pass, p, v, &wv, b, nd, eps)?,
        FloatView::Bf16(v) => row_kernel(dev, pass, p, v, &wv, b, nd, eps)?,
        FloatView::F16(v) => row_kernel(dev, pass, p, v, &wv, b, nd, eps)?,
    };
    Ok((out, xl.shape().clone()))
}

/// `y = (x - mean) rstd w + b`.
pub(crate) fn forward(
    x: (&CudaStorage, &Layout),
    w: (&CudaStorage, &Layout),
    (b, bl): (&CudaStorage, &Layout),
    eps: f64,
) -> Result<(CudaStorage, Shape)> {
    let bv = FloatView::of("layer_norm", b, bl)?;
    if !matches!(bv, FloatView::F32(_)) {
        candle_core::bail!(
            "layer_norm: the bias must be f32 on CUDA, got {:?}",
            bv.dtype()
        );
    }
    rows(Pass::Forward, x, w, &bv, eps)
}

/// `dx` for the output gradient `dy` (x's dtype).
pub(crate) fn backward_x(
    x: (&CudaStorage, &Layout),
    w: (&CudaStorage, &Layout),
    (g, gl): (&CudaStorage, &Layout),
    eps: f64,
) -> Result<(CudaStorage, Shape)> {
    let gv = FloatView::of("layer_norm backward", g, gl)?;
    if gv.dtype() != x.0.dtype() {
        candle_core::bail!(
            "layer_norm backward: dy is {:?}, x is {:?}",
            gv.dtype(),
            x.0.dtype()
        );
    }
    rows(Pass::Dx, x, w, &gv, eps)
}

/// `[blocks, 2, d]` f32 partial sums of `(dw; db)`, each block's rows added in a fixed order.
pub(crate) fn param_grads(
    (x, xl): (&CudaStorage, &Layout),
    (g, gl): (&CudaStorage, &Layout),
    eps: f64,
) -> Result<(CudaStorage, Shape)> {
    let xv = FloatView::of("layer_norm backward", x, xl)?;
    let gv = FloatView::of("layer_norm backward", g, gl)?;
    if gv.dtype() != xv.dtype() {
        candle_core::bail!(
            "layer_norm backward: dy is {:?}, x is {:?}",
            gv.dtype(),
            xv.dtype()
        );
    }
    let (n, d) = xl.shape().dims2()?;
    let dev = x.device();
    // Two blocks per SM at most, each summing a contiguous range of rows.
    let blocks = n.div_ceil(WARPS).min(2 * sm_count(dev)?);
    let out = zeros::<f32>(dev, blocks * 2 * d)?;
    if blocks > 0 && d > 0 {
        let rows_per_block = n.div_ceil(blocks);
        let name = format!("{}layer_norm_param_grads_c{}", xv.prefix(), cpl(d)?);
        let func = crate::cuda::kernel(dev, &name, &crate::cuda::LAYER_NORM)?;
        let (n_i, d_i, eps_f, r_i) = (n as i32, d as i32, eps as f32, rows_per_block as i32);
        let mut bld = func.builder();
        xv.push(&mut bld);
        gv.push(&mut bld);
        bld.arg(&out).arg(&n_i).arg(&d_i).arg(&eps_f).arg(&r_i);
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (32 * WARPS as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: x and dy are [n, d] of one storage type; out holds blocks * 2 * d floats,
        // block i writing only its own [2, d]; the blocks' row ranges cover n.
        launched(unsafe { bld.launch(cfg) }.map(|_| ()))?;
    }
    Ok((
        CudaStorage::wrap_cuda_slice(out, dev.clone()),
        Shape::from((blocks, 2, d)),
    ))
}
