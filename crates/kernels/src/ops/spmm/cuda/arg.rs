//! The max/min SpMM's argmax moves on the GPU: the output gathered through the winning edges,
//! and the backward's scatters to the winners (features and edge values).

use super::i32_arg;
use crate::cuda::{elementwise_cfg, f32_view_opt, launched, narrowed, u32_view, zeros, FloatView};
use crate::device_graph::DeviceGraph;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
use candle_core::{CudaStorage, Layout, Result, Shape};

/// `out[i,t] = a_p x[col_p,t]` at `p = arg[i,t]`, in `x`'s dtype (f32, bf16 or f16; f32 edge
/// values).
pub(crate) fn gather_arg(
    g: &DeviceGraph,
    x: &CudaStorage,
    xl: &Layout,
    arg: &CudaStorage,
    al: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
) -> Result<(CudaStorage, Shape)> {
    move_arg(g, Move::Gather, x, xl, arg, al, vals)
}

/// `dx[col_p,t] += a_p dy[i,t]` at `p = arg[i,t]`; `dx` has `n_cols` rows and `dy`'s dtype
/// (accumulated in fp32).
pub(crate) fn scatter_arg(
    g: &DeviceGraph,
    dy: &CudaStorage,
    dl: &Layout,
    arg: &CudaStorage,
    al: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
) -> Result<(CudaStorage, Shape)> {
    move_arg(g, Move::Scatter, dy, dl, arg, al, vals)
}

/// Which way [`move_arg`] moves values through the argmax.
#[derive(Clone, Copy, PartialEq)]
enum Move {
    /// Rows of `x` (`n_cols`) to the output's rows (`n_rows`).
    Gather,
    /// Rows of `dy` (`n_rows`) added into `dx`'s rows (`n_cols`).
    Scatter,
}

/// One launch of `<prefix>gather_arg` or `<prefix>scatter_arg` over the `n_rows * k` argmax
/// entries of `arg`, from `src` (`[_, k]`, f32 or half) into a zeroed fp32 buffer narrowed
/// to `src`'s dtype at the end.
fn move_arg(
    g: &DeviceGraph,
    way: Move,
    src: &CudaStorage,
    sl: &Layout,
    arg: &CudaStorage,
    al: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
) -> Result<(CudaStorage, Shape)> {
    let (op, kernel, rows) = match way {
        Move::Gather => ("spmm_gather_arg", "gather_arg", g.n_rows()),
        Move::Scatter => ("spmm_arg_scatter", "scatter_arg", g.n_cols()),
    };
    let (_, k) = sl.shape().dims2()?;
    let dev = src.device().clone();
    let csr = g.cuda_csr()?;
    let sv = FloatView::of(op, src, sl)?;
    let av = u32_view(op, arg, al)?;
    let vv = f32_view_opt(op, vals)?;
    let out = zeros::<f32>(&dev, rows * k)?;
    let total = g.n_rows() * k;
    if total > 0 {
        let name = format!("{}{kernel}", sv.prefix());
        let func = crate::cuda::kernel(&dev, &name, &crate::cuda::SPMM)?;
        let (k_i, w) = (i32_arg("k", k)?, vv.is_some() as i32);
        let mut b = func.builder();
        b.arg(&av).arg(&csr.indices);
        match &vv {
            Some(v) => b.arg(v),
            None => b.arg(&av), // never read when unweighted
        };
        sv.push(&mut b);
        b.arg(&out).arg(&total).arg(&k_i).arg(&w);
        // SAFETY: arg holds positions < nnz or NO_EDGE; `src` is [n_rows, k] (gather: [n_cols,
        // k], read at columns < n_cols), `out` has `rows * k` elements (scatter: written at
        // columns < n_cols).
        launched(unsafe { b.launch(elementwise_cfg(total)) }.map(|_| ()))?;
    }
    let shape = Shape::from((rows, k));
    Ok((narrowed(out, &dev, &shape, sv.dtype())?, shape))
}

/// `dv[p] += dy[i,t] x[col_p,t]` at `p = arg[i,t]`: f32 edge gradients (the edge values' dtype
/// under every feature precision).
pub(crate) fn edge_grad_arg(
    g: &DeviceGraph,
    dy: &CudaStorage,
    dl: &Layout,
    arg: &CudaStorage,
    al: &Layout,
    x: &CudaStorage,
    xl: &Layout,
) -> Result<(CudaStorage, Shape)> {
    let (_, k) = dl.shape().dims2()?;
    let dev = dy.device().clone();
    let csr = g.cuda_csr()?;
    let dyv = FloatView::of("spmm_arg_edge_grad", dy, dl)?;
    let av = u32_view("spmm_arg_edge_grad", arg, al)?;
    let xv = FloatView::of("spmm_arg_edge_grad", x, xl)?;
    if xv.dtype() != dyv.dtype() {
        candle_core::bail!(
            "spmm_arg_edge_grad: dy is {:?}, x is {:?}",
            dyv.dtype(),
            xv.dtype()
        );
    }
    let dv = zeros::<f32>(&dev, g.nnz())?;
    let total = g.n_rows() * k;
    if total > 0 {
        let name = format!("{}edge_grad_arg", dyv.prefix());
        let func = crate::cuda::kernel(&dev, &name, &crate::cuda::SPMM)?;
        let k_i = i32_arg("k", k)?;
        let mut b = func.builder();
        b.arg(&av).arg(&csr.indices);
        dyv.push(&mut b);
        xv.push(&mut b);
        b.arg(&dv).arg(&total).arg(&k_i);
        // SAFETY: positions < nnz; dv has nnz elements; dy is [n_rows, k], x [n_cols, k].
        launched(unsafe { b.launch(elementwise_cfg(total)) }.map(|_| ()))?;
    }
    Ok((CudaStorage::wrap_cuda_slice(dv, dev), Shape::from(g.nnz())))
}
