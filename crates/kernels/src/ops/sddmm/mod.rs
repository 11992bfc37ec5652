//! SDDMM on a CSR pattern: `e[p] = <a[i], b[col_p]>` for every stored edge `p` of row `i`
//! (the sampled dense-dense product `(A1 A2^T) ∘ pattern`), optionally times an edge value
//! ([`sddmm_scaled`]). It is the gradient of SpMM with respect to edge values, and the score
//! function of attention layers.
//!
//! On the GPU it runs HP-SDDMM (Fan, Wang, Chu, IPDPS'23): every warp takes the same number
//! of edges across row boundaries, the number chosen per graph and device by the paper's
//! Dynamic Task Partition, with vectorised index and feature loads; see [`tuning`].
//!
//! Backward: `da = E b` (SpMM with the edge gradients as values), `db = E^T a` (over the
//! transpose, values permuted); with edge values `v`, `E` is `dE ∘ v` and `dv = dE ∘ (A B^T)`.
//!
//! Half precision (CUDA): `a` and `b` may be bf16 or f16; the products and sums are fp32 and
//! the result (and any edge values) is f32, as edge tensors are in every precision here (the
//! edge softmax and the weighted SpMM take them as fp32).

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
pub mod dispatch;

/// HP-SDDMM's knobs (for `bench_sddmm`): the kernel choice (a graph's
/// [`crate::KernelPolicy::sddmm`]), the partition rule, the shapes.
pub mod tuning {
    #[cfg(feature = "cuda")]
    pub use super::cuda::auto_npw;
    pub use crate::partition::{
        dynamic_task_partition, index_vector_width, HpShape, DTP_WAVES, HP_WARPS, NPW_CANDIDATES,
    };
    pub use crate::policy::SddmmKernel;
}

use super::optional::{Cpu, CpuOut, Grads, OptionalInput, With, Without};
#[cfg(feature = "cuda")]
use super::optional::{Cuda, CudaOut};
use super::{check_device, check_float_or_half, cpu_slice, cpu_slice_opt};
use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, DType, Layout, Shape, Tensor, WithDType};

/// `e[p] = <a[i], b[col_p]>`; `a` is `[n_rows, K]`, `b` is `[n_cols, K]`, the result `[nnz]`
/// (of their dtype for f32 / f64, f32 for bf16 / f16 features).
pub fn sddmm(g: &DeviceGraph, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (a, b) = check("sddmm", g, a, b)?;
    Ok(a.apply_op2(&b, Without(SddmmOp { g: g.clone() }))?)
}

/// `e[p] = <a[i], b[col_p]> * vals[p]` in one pass; `vals` is `[nnz]` of the features' dtype
/// (f32 for bf16 / f16 features). Gradients flow to all three inputs.
pub fn sddmm_scaled(g: &DeviceGraph, a: &Tensor, b: &Tensor, vals: &Tensor) -> Result<Tensor> {
    let (a, b) = check("sddmm_scaled", g, a, b)?;
    check_device("sddmm_scaled", g, vals)?;
    let want = edge_dtype(a.dtype());
    if vals.dims() != [g.nnz()] || vals.dtype() != want {
        return Err(Error::shape(
            "sddmm_scaled",
            format!(
                "values are {:?} {:?}, expected [{}] {:?}",
                vals.dims(),
                vals.dtype(),
                g.nnz(),
                want
            ),
        ));
    }
    let v = vals.contiguous()?;
    Ok(a.apply_op3(&b, &v, With(SddmmOp { g: g.clone() }))?)
}

/// [`sddmm`] without recording a backward (used inside other ops' backward passes).
pub(crate) fn sddmm_no_bwd(g: &DeviceGraph, a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    let (a, b) = check("sddmm", g, a, b)?;
    a.apply_op2_no_bwd(&b, &Without(SddmmOp { g: g.clone() }))
}

/// The dtype of edge tensors (scores, edge values) for features of `dtype`: fp32 under half
/// precision, else the features' own.
fn edge_dtype(dtype: DType) -> DType {
    match dtype {
        DType::BF16 | DType::F16 => DType::F32,
        d => d,
    }
}

fn check(op: &'static str, g: &DeviceGraph, a: &Tensor, b: &Tensor) -> Result<(Tensor, Tensor)> {
    for t in [a, b] {
        check_device(op, g, t)?;
        check_float_or_half(op, "input", t)?;
    }
    let (ad, bd) = (a.dims(), b.dims());
    if ad.len() != 2
        || bd.len() != 2
        || ad[0] != g.n_rows()
        || bd[0] != g.n_cols()
        || ad[1] != bd[1]
    {
        return Err(Error::shape(
            op,
            format!(
                "a {ad:?} and b {bd:?} must be [{}, K] and [{}, K]",
                g.n_rows(),
                g.n_cols()
            ),
        ));
    }
    if a.dtype() != b.dtype() {
        return Err(Error::dtype(
            op,
            format!("a is {:?}, b is {:?}", a.dtype(), b.dtype()),
        ));
    }
    Ok((a.contiguous()?, b.contiguous()?))
}

struct SddmmOp {
    g: DeviceGraph,
}

/// `e = (a b^T) ∘ pattern`, times the values when given.
fn sddmm_cpu<T: WithDType>(
    g: &DeviceGraph,
    (s1, l1): (&CpuStorage, &Layout),
    (s2, l2): (&CpuStorage, &Layout),
    vals: Option<(&CpuStorage, &Layout)>,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (_, k) = l1.shape().dims2()?;
    g.record("sddmm", "cpu");
    let a = cpu_slice::<T>("sddmm", s1, l1)?;
    let b = cpu_slice::<T>("sddmm", s2, l2)?;
    let v = cpu_slice_opt::<T>("sddmm", vals)?;
    let e = cpu::sddmm(g.csr(), a, b, k, v);
    Ok((T::to_cpu_storage_owned(e), Shape::from(g.nnz())))
}

impl OptionalInput<2> for SddmmOp {
    const NAMES: [&'static str; 2] = ["sddmm", "sddmm_scaled"];
    fn cpu(&self, [a, b]: [Cpu<'_>; 2], v: Option<Cpu<'_>>) -> CpuOut {
        dispatch_float!(self.name(v.is_some()), a.0, sddmm_cpu(&self.g, a, b, v))
    }
    #[cfg(feature = "cuda")]
    fn cuda(&self, [(s1, l1), (s2, l2)]: [Cuda<'_>; 2], v: Option<Cuda<'_>>) -> CudaOut {
        cuda::sddmm(&self.g, s1, l1, s2, l2, v)
    }
    fn bwd(&self, [a, b]: [&Tensor; 2], v: Option<&Tensor>, de: &Tensor) -> Grads<2> {
        let _timer = self.g.backward_timer();
        let de = de.contiguous()?;
        let Some(v) = v else {
            let (da, db) = input_grads(&self.g, a, b, &de)?;
            return Ok(([da, db], None));
        };
        let (da, db) = input_grads(&self.g, a, b, &(&de * &v.detach())?)?;
        let dv = if v.track_op() {
            Some((de * sddmm_no_bwd(&self.g, &a.detach(), &b.detach())?)?)
        } else {
            None
        };
        Ok(([da, db], dv))
    }
}

/// `da = E b`, `db = E^T a` for the edge gradients `de`.
fn input_grads(
    g: &DeviceGraph,
    a: &Tensor,
    b: &Tensor,
    de: &Tensor,
) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
    let da = if a.track_op() {
        Some(crate::ops::spmm::spmm_weighted(
            g,
            &b.detach(),
            de,
            crate::Reduce::Sum,
        )?)
    } else {
        None
    };
    let db = if b.track_op() {
        let (gt, perm) = g.transpose()?;
        let det = de.index_select(&perm, 0)?;
        Some(crate::ops::spmm::spmm_weighted(
            &gt,
            &a.detach(),
            &det,
            crate::Reduce::Sum,
        )?)
    } else {
        None
    };
    Ok((da, db))
}
