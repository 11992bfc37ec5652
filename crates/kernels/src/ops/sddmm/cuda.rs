//! Host side of the CUDA SDDMM (`cuda/sddmm.cu`).

use crate::cuda::{f32_view, launched, zeros, SDDMM_PTX};
use crate::device_graph::DeviceGraph;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::{CudaStorage, Layout, Result, Shape};

/// `e[p] = <a[i], b[col_p]>`.
pub(crate) fn sddmm(
    g: &DeviceGraph,
    a: &CudaStorage,
    al: &Layout,
    b: &CudaStorage,
    bl: &Layout,
) -> Result<(CudaStorage, Shape)> {
    let (_, k) = al.shape().dims2()?;
    let dev = a.device().clone();
    let csr = g.cuda_csr()?;
    let av = f32_view("sddmm", a, al)?;
    let bv = f32_view("sddmm", b, bl)?;
    let e = zeros::<f32>(&dev, g.nnz())?;
    let n = g.n_rows();
    if n > 0 && g.nnz() > 0 {
        let func = dev.get_or_load_custom_func("sddmm_rows", "gnn_sddmm", SDDMM_PTX)?;
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(8) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let (n_i, k_i) = (n as i32, k as i32);
        let mut bld = func.builder();
        bld.arg(&csr.indptr)
            .arg(&csr.indices)
            .arg(&av)
            .arg(&bv)
            .arg(&e)
            .arg(&n_i)
            .arg(&k_i);
        // SAFETY: a is [n_rows, k], b is [n_cols, k] (checked by `sddmm`), e has nnz elements.
        launched(unsafe { bld.launch(cfg) }.map(|_| ()))?;
    }
    Ok((CudaStorage::wrap_cuda_slice(e, dev), Shape::from(g.nnz())))
}
