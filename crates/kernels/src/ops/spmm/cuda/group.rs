//! The row-group SpMM (`spmm_group_*` in `cuda/spmm.cu`, [`SpmmChoice::Group`]): sum/mean with
//! the result written once in the features' dtype, for graphs of short rows.
//!
//! [`SpmmChoice::Group`]: crate::ops::spmm::dispatch::SpmmChoice::Group

use super::i32_arg;
use crate::cuda::{launched, zeros};
use crate::device_graph::DeviceGraph;
use crate::ops::spmm::dispatch::group_shape;
use candle_core::cuda_backend::cudarc::driver::{
    CudaSlice, CudaView, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
use candle_core::cuda_backend::CudaDevice;
use candle_core::Result;

/// Warps per block of the launch.
const WARPS: usize = 8;

/// Runs the row-group kernel (`name` "f32" / "bf16" / "f16", the storage of `x`) into a new
/// `[n_rows, k]` buffer of `x`'s element type; `None` (nothing launched) where
/// [`group_shape`] refuses `k` at `offset`, for the caller to run the row kernel instead.
#[allow(clippy::too_many_arguments)]
pub(super) fn spmm_group<T: DeviceRepr + ValidAsZeroBits>(
    g: &DeviceGraph,
    dev: &CudaDevice,
    name: &str,
    xv: &CudaView<'_, T>,
    offset: usize,
    k: usize,
    vv: Option<&CudaView<'_, f32>>,
    mean: bool,
) -> Result<Option<CudaSlice<T>>> {
    let Some((lanes, tiles)) = group_shape(k, std::mem::size_of::<T>(), offset) else {
        return Ok(None);
    };
    let n = g.n_rows();
    g.record("spmm", "group");
    if n == 0 {
        return Ok(Some(zeros::<T>(dev, 0)?));
    }
    // SAFETY: left uninitialised; the launch below writes every element: each row has a lane
    // group in every column tile, and the groups' 16-byte stores cover columns 0..k exactly
    // (k is a multiple of the load width, `group_shape`).
    let out = unsafe { dev.alloc::<T>(n * k)? };
    let csr = g.cuda_csr()?;
    let func = crate::cuda::kernel(dev, &format!("spmm_group_{name}"), &crate::cuda::SPMM)?;
    let warps = n.div_ceil(32 / lanes);
    let cfg = LaunchConfig {
        grid_dim: (
            u32::try_from(warps.div_ceil(WARPS))
                .map_err(|_| candle_core::Error::Msg("spmm: grid too large".into()))?,
            i32_arg("column tiles", tiles)? as u32,
            1,
        ),
        block_dim: (32 * WARPS as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let (n_i, k_i, lanes_i) = (
        i32_arg("rows", n)?,
        i32_arg("k", k)?,
        i32_arg("lanes", lanes)?,
    );
    let (weighted, mean_i) = (vv.is_some() as i32, mean as i32);
    let mut b = func.builder();
    b.arg(&csr.indptr).arg(&csr.indices);
    match vv {
        Some(v) => b.arg(v),
        None => b.arg(&csr.indptr), // never read when `weighted` is 0
    };
    b.arg(xv)
        .arg(&out)
        .arg(&n_i)
        .arg(&k_i)
        .arg(&lanes_i)
        .arg(&weighted)
        .arg(&mean_i);
    // SAFETY: x has n_cols * k elements from a 16-byte-aligned start (k and the offset are
    // multiples of the 16-byte load width, `group_shape`; the public functions check the
    // shape); out has n * k; vals (if any) nnz; the CSR was validated on upload.
    launched(unsafe { b.launch(cfg) }.map(|_| ()))?;
    Ok(Some(out))
}
