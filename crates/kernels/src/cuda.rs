//! CUDA plumbing shared by the ops: the embedded PTX, the device-resident CSR, launch helpers.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaView, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::{CudaDevice, WrapErr};
use candle_core::{CudaStorage, Layout, Result};
use gnn_graph::Csr;

/// PTX of `cuda/spmm.cu`.
pub const SPMM_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/spmm.ptx"));
/// PTX of `cuda/sddmm.cu`.
pub const SDDMM_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/sddmm.ptx"));
/// PTX of `cuda/maxk.cu`.
pub const MAXK_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/maxk.ptx"));
/// PTX of `cuda/quant.cu`.
pub const QUANT_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/quant.ptx"));
/// PTX of `cuda/dropout.cu`.
pub const DROPOUT_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/dropout.ptx"));
/// PTX of `cuda/edge_softmax.cu`.
pub const EDGE_SOFTMAX_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/edge_softmax.ptx"));
/// PTX of `cuda/gat_attention.cu`.
pub const GAT_ATTENTION_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/gat_attention.ptx"));
/// PTX of `cuda/adam.cu`.
pub const ADAM_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/adam.ptx"));
/// PTX of `cuda/xent.cu`.
pub const XENT_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/xent.ptx"));
/// PTX of `cuda/graph.cu`.
pub const GRAPH_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/graph.ptx"));
/// PTX of `cuda/sampled.cu`.
pub const SAMPLED_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/sampled.ptx"));

/// A CSR structure in device memory (uploaded once per [`crate::DeviceGraph`]).
pub struct CudaCsr {
    /// Row pointers, `n_rows + 1`.
    pub indptr: CudaSlice<u32>,
    /// Column indices, `nnz` (at least one slot so empty graphs still have a buffer).
    pub indices: CudaSlice<u32>,
}

impl CudaCsr {
    /// Copies `csr` to `dev`.
    pub fn upload(csr: &Csr, dev: &CudaDevice) -> Result<Self> {
        let indptr = dev.clone_htod(csr.indptr())?;
        let indices = if csr.nnz() == 0 {
            dev.alloc_zeros::<u32>(1)?
        } else {
            dev.clone_htod(csr.indices())?
        };
        Ok(Self { indptr, indices })
    }
}

impl CudaCsr {
    /// For a square graph with strictly increasing rows and a symmetric pattern: the edge
    /// permutation of its transpose (which is the graph itself; see `cuda/graph.cu`) as a
    /// `u32` tensor of length `nnz`, computed on the device. `None` when the graph is not
    /// square, a row is not strictly increasing, or the pattern is not symmetric.
    pub fn symmetric_perm(
        &self,
        csr: &Csr,
        dev: &CudaDevice,
    ) -> Result<Option<candle_core::Tensor>> {
        let (n, nnz) = (csr.n_rows(), csr.nnz());
        if n != csr.n_cols() || n > u32::MAX as usize {
            return Ok(None);
        }
        // SAFETY: the kernel writes every one of the nnz entries when it reports no failure,
        // and the buffer is dropped unread when it does.
        let perm = unsafe { dev.alloc::<u32>(nnz.max(1))? };
        let bad = dev.alloc_zeros::<u32>(1)?;
        if nnz > 0 {
            let func = dev.get_or_load_custom_func("symmetric_perm", "gnn_graph", GRAPH_PTX)?;
            let n32 = n as u32;
            let mut b = func.builder();
            b.arg(&self.indptr)
                .arg(&self.indices)
                .arg(&n32)
                .arg(&perm)
                .arg(&bad);
            // SAFETY: indptr has n + 1 entries and indices nnz, all < n (checked at load);
            // perm has nnz slots; one warp per row.
            launched(unsafe { b.launch(warp_per_row_cfg(n)) }.map(|_| ()))?;
        }
        if dev.clone_dtoh(&bad)?[0] != 0 {
            return Ok(None);
        }
        let storage = candle_core::Storage::Cuda(CudaStorage::wrap_cuda_slice(perm, dev.clone()));
        let t = candle_core::Tensor::from_storage(
            storage,
            nnz.max(1),
            candle_core::op::BackpropOp::none(),
            false,
        );
        Ok(Some(if nnz == 0 { t.narrow(0, 0, 0)? } else { t }))
    }
}

/// The f32 view of a contiguous CUDA storage from its layout's offset.
pub fn f32_view<'a>(op: &str, s: &'a CudaStorage, l: &Layout) -> Result<CudaView<'a, f32>> {
    if !l.is_contiguous() {
        candle_core::bail!("{op}: CUDA input must be contiguous");
    }
    Ok(s.as_cuda_slice::<f32>()
        .map_err(|_| {
            candle_core::Error::Msg(format!(
                "{op}: the CUDA kernels take f32, got {:?}",
                s.dtype()
            ))
        })?
        .slice(l.start_offset()..))
}

/// [`f32_view`] of optional edge values.
pub fn f32_view_opt<'a>(
    op: &str,
    v: Option<(&'a CudaStorage, &Layout)>,
) -> Result<Option<CudaView<'a, f32>>> {
    v.map(|(s, l)| f32_view(op, s, l)).transpose()
}

/// The u32 view of a contiguous CUDA storage.
pub fn u32_view<'a>(op: &str, s: &'a CudaStorage, l: &Layout) -> Result<CudaView<'a, u32>> {
    if !l.is_contiguous() {
        candle_core::bail!("{op}: CUDA input must be contiguous");
    }
    Ok(s.as_cuda_slice::<u32>()?.slice(l.start_offset()..))
}

/// Grid-stride configuration for `total` independent elements.
pub fn elementwise_cfg(total: usize) -> LaunchConfig {
    let blocks = total.div_ceil(256).clamp(1, 1 << 16) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One warp per row for `rows` rows, 8 warps (256 threads) per block: the row kernels
/// (edge softmax, GAT attention, the row SDDMM).
pub fn warp_per_row_cfg(rows: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows.div_ceil(8) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Allocates `len` zeroed elements (at least one, so zero-size outputs still have a buffer).
pub fn zeros<
    T: candle_core::cuda_backend::cudarc::driver::DeviceRepr
        + candle_core::cuda_backend::cudarc::driver::ValidAsZeroBits,
>(
    dev: &CudaDevice,
    len: usize,
) -> Result<CudaSlice<T>> {
    dev.alloc_zeros::<T>(len.max(1))
}

/// Maps a driver error into candle's.
pub fn launched(
    r: std::result::Result<(), candle_core::cuda_backend::cudarc::driver::DriverError>,
) -> Result<()> {
    r.w()
}
