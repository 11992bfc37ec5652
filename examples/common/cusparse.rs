//! Shared by the CUDA examples: median CUDA-event timing and a cuSPARSE CSR SpMM peer over a
//! [`DeviceGraph`]'s buffers (descriptors and workspace created once, on candle's stream).

use anyhow::{bail, Result};
use candle_core::cuda_backend::cudarc::driver::sys::CUevent_flags;
use candle_core::cuda_backend::cudarc::driver::{CudaStream, DevicePtr};
use candle_core::{Storage, Tensor};
use cudarc::cusparse::sys as cs;
use gnn::kernels::DeviceGraph;
use std::sync::Arc;

pub use cs::cusparseSpMMAlg_t as SpmmAlg;

/// Median CUDA-event time of `f` on `stream`, in ms, over `reps >= 1` timed runs.
pub fn time_ms(
    stream: &Arc<CudaStream>,
    reps: usize,
    mut f: impl FnMut() -> Result<()>,
) -> Result<f64> {
    if reps == 0 {
        bail!("--reps must be at least 1 (a median needs one timed run)");
    }
    for _ in 0..3 {
        f()?;
    }
    stream.synchronize()?;
    let mut ts = Vec::with_capacity(reps);
    for _ in 0..reps {
        let a = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        f()?;
        let b = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        b.synchronize()?;
        ts.push(a.elapsed_ms(&b)? as f64);
    }
    ts.sort_by(|a, b| a.total_cmp(b));
    Ok(ts[ts.len() / 2])
}

fn ok(s: cs::cusparseStatus_t, what: &str) -> Result<()> {
    if s != cs::cusparseStatus_t::CUSPARSE_STATUS_SUCCESS {
        bail!("cuSPARSE {what} failed: {s:?}");
    }
    Ok(())
}

/// Raw device pointer of a contiguous f32 CUDA tensor (valid while the tensor lives).
fn ptr(t: &Tensor, stream: &Arc<CudaStream>) -> Result<u64> {
    let (st, l) = t.storage_and_layout();
    let Storage::Cuda(c) = &*st else {
        bail!("not a CUDA tensor")
    };
    let s = c.as_cuda_slice::<f32>()?;
    let (p, _sync) = s.device_ptr(stream);
    Ok(p + (l.start_offset() * 4) as u64)
}

/// cuSPARSE CSR SpMM `C = A B` over our graph's device buffers.
pub struct Cusparse {
    handle: cs::cusparseHandle_t,
    a: cs::cusparseSpMatDescr_t,
}

impl Cusparse {
    pub fn new(g: &DeviceGraph, vals: &Tensor, stream: &Arc<CudaStream>) -> Result<Self> {
        let (indptr, indices) = g.cuda_buffers()?;
        let mut handle = std::ptr::null_mut();
        let mut a = std::ptr::null_mut();
        // SAFETY: plain cuSPARSE calls on live device buffers owned by `g` and `vals`, which
        // outlive the descriptor (both are kept by the caller for the whole benchmark).
        unsafe {
            ok(cs::cusparseCreate(&mut handle), "create")?;
            ok(
                cs::cusparseSetStream(handle, stream.cu_stream() as _),
                "set stream",
            )?;
            let (rp, _s1) = indptr.device_ptr(stream);
            let (ci, _s2) = indices.device_ptr(stream);
            ok(
                cs::cusparseCreateCsr(
                    &mut a,
                    g.n_rows() as i64,
                    g.n_cols() as i64,
                    g.nnz() as i64,
                    rp as *mut _,
                    ci as *mut _,
                    ptr(vals, stream)? as *mut _,
                    cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                    cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                    cs::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                    cs::cudaDataType::CUDA_R_32F,
                ),
                "create csr",
            )?;
        }
        Ok(Self { handle, a })
    }

    /// Prepares `C = A B` for row-major `b [n_cols, k]`, `c [n_rows, k]` with `alg`; returns a
    /// closure-ready plan (descriptors + workspace).
    pub fn plan(
        &self,
        b: &Tensor,
        c: &Tensor,
        alg: cs::cusparseSpMMAlg_t,
        dev: &candle_core::CudaDevice,
    ) -> Result<Plan> {
        let stream = dev.cuda_stream();
        let (rb, k) = b.dims2()?;
        let (rc, _) = c.dims2()?;
        let (mut db, mut dc) = (std::ptr::null_mut(), std::ptr::null_mut());
        let (alpha, beta) = (1f32, 0f32);
        let mut size = 0usize;
        // SAFETY: as in `new`; b and c outlive the plan.
        unsafe {
            ok(
                cs::cusparseCreateDnMat(
                    &mut db,
                    rb as i64,
                    k as i64,
                    k as i64,
                    ptr(b, &stream)? as *mut _,
                    cs::cudaDataType::CUDA_R_32F,
                    cs::cusparseOrder_t::CUSPARSE_ORDER_ROW,
                ),
                "dn B",
            )?;
            ok(
                cs::cusparseCreateDnMat(
                    &mut dc,
                    rc as i64,
                    k as i64,
                    k as i64,
                    ptr(c, &stream)? as *mut _,
                    cs::cudaDataType::CUDA_R_32F,
                    cs::cusparseOrder_t::CUSPARSE_ORDER_ROW,
                ),
                "dn C",
            )?;
            ok(
                cs::cusparseSpMM_bufferSize(
                    self.handle,
                    cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    &alpha as *const f32 as *const _,
                    self.a,
                    db,
                    &beta as *const f32 as *const _,
                    dc,
                    cs::cudaDataType::CUDA_R_32F,
                    alg,
                    &mut size,
                ),
                "buffer size",
            )?;
        }
        let work = dev.alloc_zeros::<u8>(size.max(1))?;
        Ok(Plan {
            db,
            dc,
            alg,
            work,
            stream,
        })
    }

    pub fn run(&self, p: &Plan) -> Result<()> {
        let (alpha, beta) = (1f32, 0f32);
        let (w, _s) = p.work.device_ptr(&p.stream);
        // SAFETY: descriptors and workspace from `plan`, all alive.
        unsafe {
            ok(
                cs::cusparseSpMM(
                    self.handle,
                    cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    &alpha as *const f32 as *const _,
                    self.a,
                    p.db,
                    &beta as *const f32 as *const _,
                    p.dc,
                    cs::cudaDataType::CUDA_R_32F,
                    p.alg,
                    w as *mut _,
                ),
                "spmm",
            )
        }
    }
}

pub struct Plan {
    db: cs::cusparseDnMatDescr_t,
    dc: cs::cusparseDnMatDescr_t,
    alg: cs::cusparseSpMMAlg_t,
    work: candle_core::cuda_backend::cudarc::driver::CudaSlice<u8>,
    stream: Arc<CudaStream>,
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: descriptors created in `plan`, destroyed once.
        unsafe {
            cs::cusparseDestroyDnMat(self.db);
            cs::cusparseDestroyDnMat(self.dc);
        }
    }
}

impl Drop for Cusparse {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        unsafe {
            cs::cusparseDestroySpMat(self.a);
            cs::cusparseDestroy(self.handle);
        }
    }
}
