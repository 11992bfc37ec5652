//! Host side of the CUDA sampled SpMM (`cuda/sampled.cu`).

use super::Sampling;
use crate::cuda::{f32_view, f32_view_opt, launched, zeros, SAMPLED_PTX};
use crate::device_graph::DeviceGraph;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::{CudaStorage, Layout, Result, Shape};

/// Launches the sampled aggregation; selection identical to [`Sampling::positions`].
pub(crate) fn spmm_sampled(
    g: &DeviceGraph,
    x: &CudaStorage,
    xl: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
    mean: bool,
    sampling: &Sampling,
) -> Result<(CudaStorage, Shape)> {
    let (_, k) = xl.shape().dims2()?;
    let n = g.n_rows();
    let dev = x.device().clone();
    let csr = g.cuda_csr()?;
    let xv = f32_view("spmm_sampled", x, xl)?;
    let vv = f32_view_opt("spmm_sampled", vals)?;
    let out = zeros::<f32>(&dev, n * k)?;
    if n > 0 && k > 0 {
        let (strategy, s, b) = match *sampling {
            Sampling::EsBucket { s } => (0i32, s, [0f64; 4]),
            Sampling::EsFastRand { s } => (1, s, [0f64; 4]),
            Sampling::Aes { w, bands } => (2, w, bands),
        };
        let s = i32::try_from(s)
            .map_err(|_| candle_core::Error::Msg(format!("spmm_sampled: width {s} too large")))?;
        let func = dev.get_or_load_custom_func("spmm_sampled", "gnn_sampled", SAMPLED_PTX)?;
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(8) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let (n_i, k_i, w_i, m_i) = (n as i32, k as i32, vv.is_some() as i32, mean as i32);
        let mut bld = func.builder();
        bld.arg(&csr.indptr).arg(&csr.indices);
        match &vv {
            Some(v) => bld.arg(v),
            None => bld.arg(&xv), // never read when unweighted
        };
        bld.arg(&xv)
            .arg(&out)
            .arg(&n_i)
            .arg(&k_i)
            .arg(&w_i)
            .arg(&m_i)
            .arg(&strategy)
            .arg(&s);
        bld.arg(&b[0]).arg(&b[1]).arg(&b[2]).arg(&b[3]);
        // SAFETY: buffers match the kernel signature; sampled positions stay inside each row
        // (checked on the host by `Sampling::positions` tests, same formulas).
        launched(unsafe { bld.launch(cfg) }.map(|_| ()))?;
    }
    Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from((n, k))))
}
