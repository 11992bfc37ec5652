//! The peers our kernels are measured against, in the same process on the same stream
//! (features `cuda` and `verify`): median CUDA-event timing ([`time_ms`]) and cuSPARSE's CSR SpMM over a
//! [`DeviceGraph`]'s own buffers ([`Cusparse`]; descriptors and workspace created once, on
//! candle's stream), so both sides read identical operands.

use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use candle_core::cuda_backend::cudarc::driver::sys::CUevent_flags;
use candle_core::cuda_backend::cudarc::driver::{CudaStream, DevicePtr};
use candle_core::{Storage, Tensor};
use cudarc::cusparse::sys as cs;
use std::sync::Arc;

/// cuSPARSE's SpMM algorithm choice.
pub use cs::cusparseSpMMAlg_t as SpmmAlg;

fn bail<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::Harness(msg.into()))
}

/// Median CUDA-event time of `f` on `stream`, in ms, over `reps >= 1` timed runs.
pub fn time_ms(
    stream: &Arc<CudaStream>,
    reps: usize,
    mut f: impl FnMut() -> Result<()>,
) -> Result<f64> {
    if reps == 0 {
        return bail("timing needs at least one timed run for its median (reps = 0)");
    }
    for _ in 0..3 {
        f()?;
    }
    stream.synchronize().map_err(cuda)?;
    let mut ts = Vec::with_capacity(reps);
    for _ in 0..reps {
        let a = stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(cuda)?;
        f()?;
        let b = stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(cuda)?;
        b.synchronize().map_err(cuda)?;
        ts.push(a.elapsed_ms(&b).map_err(cuda)? as f64);
    }
    ts.sort_by(|a, b| a.total_cmp(b));
    Ok(ts[ts.len() / 2])
}

fn cuda(e: impl std::fmt::Debug) -> Error {
    Error::Harness(format!("CUDA event timing: {e:?}"))
}

fn ok(s: cs::cusparseStatus_t, what: &str) -> Result<()> {
    if s != cs::cusparseStatus_t::CUSPARSE_STATUS_SUCCESS {
        return bail(format!("cuSPARSE {what} failed: {s:?}"));
    }
    Ok(())
}

/// Raw device pointer of a contiguous f32 CUDA tensor (valid while the tensor lives).
fn ptr(t: &Tensor, stream: &Arc<CudaStream>) -> Result<u64> {
    let (st, l) = t.storage_and_layout();
    let Storage::Cuda(c) = &*st else {
        return bail("cuSPARSE peer: not a CUDA tensor");
    };
    let s = c.as_cuda_slice::<f32>()?;
    let (p, _sync) = s.device_ptr(stream);
    Ok(p + (l.start_offset() * 4) as u64)
}

/// A row-major `rows x k` cuSPARSE dense descriptor over `t`'s buffer.
///
/// # Safety
/// `t` must outlive the descriptor.
unsafe fn dense(
    t: &Tensor,
    rows: usize,
    k: usize,
    stream: &Arc<CudaStream>,
    what: &str,
) -> Result<cs::cusparseDnMatDescr_t> {
    dense_ordered(
        t,
        (rows, k),
        k,
        cs::cusparseOrder_t::CUSPARSE_ORDER_ROW,
        stream,
        what,
    )
}

/// A `dims` cuSPARSE dense descriptor over `t`'s buffer with leading dimension `ld`.
///
/// # Safety
/// `t` must outlive the descriptor.
unsafe fn dense_ordered(
    t: &Tensor,
    dims: (usize, usize),
    ld: usize,
    order: cs::cusparseOrder_t,
    stream: &Arc<CudaStream>,
    what: &str,
) -> Result<cs::cusparseDnMatDescr_t> {
    let mut d = std::ptr::null_mut();
    ok(
        cs::cusparseCreateDnMat(
            &mut d,
            dims.0 as i64,
            dims.1 as i64,
            ld as i64,
            ptr(t, stream)? as *mut _,
            cs::cudaDataType::CUDA_R_32F,
            order,
        ),
        what,
    )?;
    Ok(d)
}

/// A cuSPARSE handle on `stream` and a CSR descriptor of `g`'s structure whose values are
/// `vals` (f32, one per edge: the operand of SpMM, the output of SDDMM).
///
/// # Safety
/// `g`'s buffers and `vals` must outlive the descriptor.
unsafe fn csr_handle(
    g: &DeviceGraph,
    vals: &Tensor,
    stream: &Arc<CudaStream>,
) -> Result<(cs::cusparseHandle_t, cs::cusparseSpMatDescr_t)> {
    let (indptr, indices) = g.cuda_buffers()?;
    let (mut handle, mut d) = (std::ptr::null_mut(), std::ptr::null_mut());
    ok(cs::cusparseCreate(&mut handle), "create")?;
    ok(
        cs::cusparseSetStream(handle, stream.cu_stream() as _),
        "set stream",
    )?;
    let (rp, _s1) = indptr.device_ptr(stream);
    let (ci, _s2) = indices.device_ptr(stream);
    ok(
        cs::cusparseCreateCsr(
            &mut d,
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
    Ok((handle, d))
}

/// `max |a - b| / max |b|` computed on the device (f32): how far our result is from the
/// peer's, as the benchmarks print it.
pub fn rel_diff(a: &Tensor, b: &Tensor) -> Result<f64> {
    let d = (a - b)?.abs()?.max_all()?.to_scalar::<f32>()? as f64;
    let s = b.abs()?.max_all()?.to_scalar::<f32>()? as f64;
    Ok(d / s.max(1e-30))
}

/// cuSPARSE CSR SpMM `C = A B` over our graph's device buffers.
pub struct Cusparse {
    handle: cs::cusparseHandle_t,
    a: cs::cusparseSpMatDescr_t,
}

impl Cusparse {
    /// Describes `A` = `g`'s structure with edge values `vals` (f32, one per edge) to cuSPARSE.
    pub fn new(g: &DeviceGraph, vals: &Tensor, stream: &Arc<CudaStream>) -> Result<Self> {
        // SAFETY: `g`'s buffers and `vals` outlive the descriptor (both are kept by the
        // caller for the whole benchmark).
        let (handle, a) = unsafe { csr_handle(g, vals, stream)? };
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
        let (db, dc);
        let (alpha, beta) = (1f32, 0f32);
        let mut size = 0usize;
        // SAFETY: as in `new`; b and c outlive the plan.
        unsafe {
            db = dense(b, rb, k, &stream, "dn B")?;
            dc = dense(c, rc, k, &stream, "dn C")?;
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

    /// Runs `C = A B` as planned.
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

/// Dense descriptors and workspace of one `C = A B` shape.
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

/// The GCN layer's aggregation operand for a benchmark: `A + I` of `graph` with symmetric
/// normalisation, on `device`, with its edge values.
pub fn gcn_operand(
    graph: &gnn_graph::Csr,
    device: &candle_core::Device,
) -> Result<(gnn_graph::Csr, DeviceGraph, Tensor)> {
    let a = graph.rebuild(gnn_graph::BuildOptions {
        self_loops: gnn_graph::SelfLoops::Add,
        ..Default::default()
    })?;
    let g = DeviceGraph::upload(&a, device)?;
    let vals = gnn_graph::Normalization::GcnSymmetric.edge_values(&a);
    let vals = Tensor::from_vec(vals, a.nnz(), device)?;
    Ok((a, g, vals))
}

impl Cusparse {
    /// Median times (ms) of `C = A B` with cuSPARSE's default and CSR_ALG2 algorithms, `C`
    /// left holding the product.
    pub fn time_both(
        &self,
        b: &Tensor,
        c: &Tensor,
        dev: &candle_core::CudaDevice,
        reps: usize,
    ) -> Result<[f64; 2]> {
        let stream = dev.cuda_stream();
        let mut out = [0.0; 2];
        for (o, alg) in out.iter_mut().zip([
            SpmmAlg::CUSPARSE_SPMM_ALG_DEFAULT,
            SpmmAlg::CUSPARSE_SPMM_CSR_ALG2,
        ]) {
            let plan = self.plan(b, c, alg, dev)?;
            *o = time_ms(&stream, reps, || self.run(&plan))?;
        }
        Ok(out)
    }
}

/// cuSPARSE's CSR SDDMM `out = (A B^T) ∘ pattern(G)` for row-major `a [n_rows, K]` and
/// `b [n_cols, K]` (passed to cuSPARSE as the column-major `K x n_cols` matrix it is in
/// memory), writing the `nnz` values of `out`. Descriptors, workspace and cuSPARSE's
/// preprocessing are made once in [`CusparseSddmm::new`]; [`CusparseSddmm::run`] is the timed
/// call.
pub struct CusparseSddmm {
    handle: cs::cusparseHandle_t,
    c: cs::cusparseSpMatDescr_t,
    da: cs::cusparseDnMatDescr_t,
    db: cs::cusparseDnMatDescr_t,
    work: candle_core::cuda_backend::cudarc::driver::CudaSlice<u8>,
    stream: Arc<CudaStream>,
}

impl CusparseSddmm {
    /// Plans `out = (a b^T) ∘ pattern(g)`; `a`, `b` and `out` (f32, `[nnz]`) must outlive it.
    pub fn new(
        g: &DeviceGraph,
        a: &Tensor,
        b: &Tensor,
        out: &Tensor,
        dev: &candle_core::CudaDevice,
    ) -> Result<Self> {
        let stream = dev.cuda_stream();
        let (n, k) = a.dims2()?;
        let (m, kb) = b.dims2()?;
        if kb != k || n != g.n_rows() || m != g.n_cols() || out.dims() != [g.nnz()] {
            return bail(format!(
                "cuSPARSE SDDMM: a {:?}, b {:?}, out {:?} do not fit the {} x {} graph",
                a.dims(),
                b.dims(),
                out.dims(),
                g.n_rows(),
                g.n_cols()
            ));
        }
        let (alpha, beta) = (1f32, 0f32);
        let op = cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        let alg = cs::cusparseSDDMMAlg_t::CUSPARSE_SDDMM_ALG_DEFAULT;
        let mut size = 0usize;
        // SAFETY: plain cuSPARSE calls on live device buffers owned by `g`, `a`, `b` and `out`,
        // which the caller keeps alive for the descriptors' lifetime.
        let (handle, c) = unsafe { csr_handle(g, out, &stream)? };
        // SAFETY: as above.
        let (da, db) = unsafe {
            let da = dense(a, n, k, &stream, "dn A")?;
            let db = dense_ordered(
                b,
                (k, m),
                k,
                cs::cusparseOrder_t::CUSPARSE_ORDER_COL,
                &stream,
                "dn B",
            )?;
            ok(
                cs::cusparseSDDMM_bufferSize(
                    handle,
                    op,
                    op,
                    &alpha as *const f32 as *const _,
                    da as _,
                    db as _,
                    &beta as *const f32 as *const _,
                    c,
                    cs::cudaDataType::CUDA_R_32F,
                    alg,
                    &mut size,
                ),
                "sddmm buffer size",
            )?;
            (da, db)
        };
        let work = dev.alloc_zeros::<u8>(size.max(1))?;
        let me = Self {
            handle,
            c,
            da,
            db,
            work,
            stream,
        };
        me.call(true)?;
        Ok(me)
    }

    /// Runs the planned SDDMM (into `out`).
    pub fn run(&self) -> Result<()> {
        self.call(false)
    }

    /// cuSPARSE's preprocessing (once, in `new`) or the SDDMM itself: the same arguments.
    fn call(&self, preprocess: bool) -> Result<()> {
        let (alpha, beta) = (1f32, 0f32);
        let op = cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        let f = if preprocess {
            cs::cusparseSDDMM_preprocess as unsafe fn(_, _, _, _, _, _, _, _, _, _, _) -> _
        } else {
            cs::cusparseSDDMM
        };
        let (w, _s) = self.work.device_ptr(&self.stream);
        // SAFETY: descriptors and workspace from `new`, all alive.
        unsafe {
            ok(
                f(
                    self.handle,
                    op,
                    op,
                    &alpha as *const f32 as *const _,
                    self.da as _,
                    self.db as _,
                    &beta as *const f32 as *const _,
                    self.c,
                    cs::cudaDataType::CUDA_R_32F,
                    cs::cusparseSDDMMAlg_t::CUSPARSE_SDDMM_ALG_DEFAULT,
                    w as *mut _,
                ),
                if preprocess {
                    "sddmm preprocess"
                } else {
                    "sddmm"
                },
            )
        }
    }
}

impl Drop for CusparseSddmm {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        unsafe {
            cs::cusparseDestroyDnMat(self.da);
            cs::cusparseDestroyDnMat(self.db);
            cs::cusparseDestroySpMat(self.c);
            cs::cusparseDestroy(self.handle);
        }
    }
}
