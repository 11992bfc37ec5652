//! Host side of the CUDA GAT attention (`cuda/gat_attention.cu`).

use crate::cuda::{f32_view, launched, warp_per_row_cfg, zeros};
use crate::device_graph::DeviceGraph;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
use candle_core::{CudaStorage, Layout, Result, Shape};

/// `alpha` from the two score vectors.
pub(crate) fn forward(
    g: &DeviceGraph,
    (d, dl): (&CudaStorage, &Layout),
    (s, sl): (&CudaStorage, &Layout),
    slope: f64,
) -> Result<(CudaStorage, Shape)> {
    let dev = d.device().clone();
    let csr = g.cuda_csr()?;
    let dv = f32_view("gat_attention", d, dl)?;
    let sv = f32_view("gat_attention", s, sl)?;
    let out = zeros::<f32>(&dev, g.nnz())?;
    let n = g.n_rows();
    if n > 0 && g.nnz() > 0 {
        let func = crate::cuda::kernel(&dev, "gat_attention_fwd", &crate::cuda::GAT_ATTENTION)?;
        let (n_i, slope) = (n as i32, slope as f32);
        let mut b = func.builder();
        b.arg(&csr.indptr)
            .arg(&csr.indices)
            .arg(&dv)
            .arg(&sv)
            .arg(&out)
            .arg(&n_i)
            .arg(&slope);
        // SAFETY: s_dst has n_rows elements, s_src n_cols (checked by `gat_attention`), the
        // CSR's columns are < n_cols (validated on upload), out has nnz.
        launched(unsafe { b.launch(warp_per_row_cfg(n)) }.map(|_| ()))?;
    }
    Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from(g.nnz())))
}

/// `[ds_dst; dz]` from `[s_dst; s_src]`, alpha and dalpha.
pub(crate) fn backward(
    g: &DeviceGraph,
    (s, sl): (&CudaStorage, &Layout),
    (a, al): (&CudaStorage, &Layout),
    (d, dl): (&CudaStorage, &Layout),
    slope: f64,
) -> Result<(CudaStorage, Shape)> {
    const OP: &str = "gat_attention backward";
    let dev = a.device().clone();
    let csr = g.cuda_csr()?;
    let (n, nnz) = (g.n_rows(), g.nnz());
    let sv = f32_view(OP, s, sl)?;
    let av = f32_view(OP, a, al)?;
    let dv = f32_view(OP, d, dl)?;
    let mut out = zeros::<f32>(&dev, n + nnz)?;
    if n > 0 && nnz > 0 {
        let func = crate::cuda::kernel(&dev, "gat_attention_bwd", &crate::cuda::GAT_ATTENTION)?;
        let (n_i, slope) = (n as i32, slope as f32);
        let (s_dst, s_src) = sv.split_at(n);
        let (mut ds_dst, mut dz) = out.split_at_mut(n);
        let mut b = func.builder();
        b.arg(&csr.indptr)
            .arg(&csr.indices)
            .arg(&s_dst)
            .arg(&s_src)
            .arg(&av)
            .arg(&dv)
            .arg(&mut dz)
            .arg(&mut ds_dst)
            .arg(&n_i)
            .arg(&slope);
        // SAFETY: the scores hold n_rows + n_cols elements (built by the op's backward),
        // alpha/dalpha nnz, out n_rows + nnz (ds_dst then dz); columns < n_cols.
        launched(unsafe { b.launch(warp_per_row_cfg(n)) }.map(|_| ()))?;
    }
    Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from(n + nnz)))
}
