//! Host side of the CUDA edge softmax (`cuda/edge_softmax.cu`).

use crate::cuda::{f32_view, launched, warp_per_row_cfg, zeros};
use crate::device_graph::DeviceGraph;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
use candle_core::{CudaStorage, Layout, Result, Shape};

/// Softmax of the edge scores `s` within each row.
pub(crate) fn forward(
    g: &DeviceGraph,
    s: &CudaStorage,
    l: &Layout,
) -> Result<(CudaStorage, Shape)> {
    let dev = s.device().clone();
    let csr = g.cuda_csr()?;
    let sv = f32_view("edge_softmax", s, l)?;
    let out = zeros::<f32>(&dev, g.nnz())?;
    let n = g.n_rows();
    if n > 0 && g.nnz() > 0 {
        let func = crate::cuda::kernel(&dev, "edge_softmax_fwd", &crate::cuda::EDGE_SOFTMAX)?;
        let n_i = n as i32;
        let mut b = func.builder();
        b.arg(&csr.indptr).arg(&sv).arg(&out).arg(&n_i);
        // SAFETY: s and out have nnz elements (checked by `edge_softmax`), indptr n + 1.
        launched(unsafe { b.launch(warp_per_row_cfg(n)) }.map(|_| ()))?;
    }
    Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from(g.nnz())))
}

/// `ds = alpha ∘ (dalpha - rowsum(alpha ∘ dalpha))`.
pub(crate) fn backward(
    g: &DeviceGraph,
    (a, al): (&CudaStorage, &Layout),
    (d, dl): (&CudaStorage, &Layout),
) -> Result<(CudaStorage, Shape)> {
    let dev = a.device().clone();
    let csr = g.cuda_csr()?;
    let av = f32_view("edge_softmax backward", a, al)?;
    let dv = f32_view("edge_softmax backward", d, dl)?;
    let out = zeros::<f32>(&dev, g.nnz())?;
    let n = g.n_rows();
    if n > 0 && g.nnz() > 0 {
        let func = crate::cuda::kernel(&dev, "edge_softmax_bwd", &crate::cuda::EDGE_SOFTMAX)?;
        let n_i = n as i32;
        let mut b = func.builder();
        b.arg(&csr.indptr).arg(&av).arg(&dv).arg(&out).arg(&n_i);
        // SAFETY: alpha, dalpha and out have nnz elements, indptr n + 1.
        launched(unsafe { b.launch(warp_per_row_cfg(n)) }.map(|_| ()))?;
    }
    Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from(g.nnz())))
}
