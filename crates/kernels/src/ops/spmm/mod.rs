//! SpMM over a CSR graph: `out[i] = reduce_{p in row i} a_p * x[col_p]`, with
//! reductions sum / mean / max / min and optional edge values `a` (GE-SpMM's "SpMM-like"
//! family). Row-major dense `x: [n_cols, K]` in, `[n_rows, K]` out, no preprocessing.
//!
//! Backward:
//! - sum / mean: `dx = A^T dy` (mean: `A^T (D^-1 dy)`) over the cached transpose, with the
//!   edge values permuted into transpose order; `da = SDDMM(dy, x)` on the pattern.
//! - max / min: when a gradient is needed, the forward records the winning edge per output
//!   entry (an argmax tensor) and the output is gathered through it, so backward scatters
//!   `dy` to the winners only (DGL's approach). Ties go to the first edge of the row. Empty
//!   rows produce 0 and pass no gradient.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

/// Tuning knobs of the CUDA SpMM (for `bench_spmm --sweep`): a forced tiling is checked
/// against each call's shape and alignment at launch, and an invalid one falls back to the
/// built-in choice, so no setting can make a kernel read out of bounds.
#[cfg(feature = "cuda")]
pub mod tuning {
    pub use super::cuda::{set_tiling_override, SpmmTiling, CFS};
}
pub mod reference;

use super::{check_device, check_float, cpu_slice, cpu_slice_opt};
use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Shape, Tensor, WithDType};
use serde::{Deserialize, Serialize};

/// How neighbour messages are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Reduce {
    /// Sum (GIN, GCN with normalised edge values).
    Sum,
    /// Mean over the row's entries (GraphSAGE-mean).
    Mean,
    /// Element-wise maximum (GraphSAGE-pool).
    Max,
    /// Element-wise minimum.
    Min,
}

/// `out[i] = reduce_{j in N(i)} x[j]`. `x` is `[g.n_cols(), K]`; the result is `[g.n_rows(), K]`.
pub fn spmm(g: &DeviceGraph, x: &Tensor, reduce: Reduce) -> Result<Tensor> {
    let x = check_x("spmm", g, x)?;
    match reduce {
        Reduce::Max | Reduce::Min if x.track_op() => {
            let arg = x.apply_op1_no_bwd(&SpmmArgOp {
                g: g.clone(),
                reduce,
            })?;
            Ok(x.apply_op2(&arg, GatherArgOp { g: g.clone() })?)
        }
        _ => Ok(x.apply_op1(SpmmOp {
            g: g.clone(),
            reduce,
        })?),
    }
}

/// `out[i] = reduce_{p in row i} values[p] * x[col_p]`; `values` is `[g.nnz()]`, aligned with
/// the CSR's entries (e.g. from [`gnn_graph::Normalization::edge_values`]).
pub fn spmm_weighted(
    g: &DeviceGraph,
    x: &Tensor,
    values: &Tensor,
    reduce: Reduce,
) -> Result<Tensor> {
    let x = check_x("spmm_weighted", g, x)?;
    let values = check_values("spmm_weighted", g, &x, values)?;
    match reduce {
        Reduce::Max | Reduce::Min if x.track_op() || values.track_op() => {
            let arg = x.apply_op2_no_bwd(
                &values,
                &SpmmArgOp {
                    g: g.clone(),
                    reduce,
                },
            )?;
            Ok(x.apply_op3(&arg, &values, GatherArgOp { g: g.clone() })?)
        }
        _ => Ok(x.apply_op2(
            &values,
            SpmmOp {
                g: g.clone(),
                reduce,
            },
        )?),
    }
}

fn check_x(op: &'static str, g: &DeviceGraph, x: &Tensor) -> Result<Tensor> {
    check_device(op, g, x)?;
    check_float(op, "x", x)?;
    let dims = x.dims();
    if dims.len() != 2 || dims[0] != g.n_cols() {
        return Err(Error::Shape {
            op,
            what: format!(
                "x has shape {dims:?}, expected [{}, K] (one row per source node)",
                g.n_cols()
            ),
        });
    }
    Ok(x.contiguous()?)
}

fn check_values(op: &'static str, g: &DeviceGraph, x: &Tensor, v: &Tensor) -> Result<Tensor> {
    check_device(op, g, v)?;
    if v.dims() != [g.nnz()] {
        return Err(Error::Shape {
            op,
            what: format!(
                "edge values have shape {:?}, expected [{}] (one per stored edge)",
                v.dims(),
                g.nnz()
            ),
        });
    }
    if v.dtype() != x.dtype() {
        return Err(Error::DType {
            op,
            what: format!("edge values are {:?} but x is {:?}", v.dtype(), x.dtype()),
        });
    }
    Ok(v.contiguous()?)
}

/// `Aᵀ dy` (mean: `Aᵀ D⁻¹ dy`) with optional constant edge values: the gradient of a sum/mean
/// SpMM with respect to `x`, over the cached transpose. Shared by the SpMM backward and the
/// deterministic MaxK SSpMM.
pub(crate) fn transpose_product(
    g: &DeviceGraph,
    dy: &Tensor,
    values: Option<&Tensor>,
    mean: bool,
) -> candle_core::Result<Tensor> {
    let reduce = if mean { Reduce::Mean } else { Reduce::Sum };
    let op = SpmmOp {
        g: g.clone(),
        reduce,
    };
    let dy = op.scaled_grad(&dy.contiguous()?)?;
    let (gt, _) = g.transpose()?;
    let sum = SpmmOp {
        g: gt.clone(),
        reduce: Reduce::Sum,
    };
    match values {
        None => dy.apply_op1_no_bwd(&sum),
        Some(v) => {
            let vt = g
                .transposed_values(v)
                .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
            dy.apply_op2_no_bwd(&vt, &sum)
        }
    }
}

/// Forward op for every reduction, without argmax; backward for sum/mean.
struct SpmmOp {
    g: DeviceGraph,
    reduce: Reduce,
}

impl SpmmOp {
    fn cpu<T: WithDType>(
        &self,
        s: &CpuStorage,
        l: &Layout,
        v: Option<(&CpuStorage, &Layout)>,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (_, k) = l.shape().dims2()?;
        let x = cpu_slice::<T>("spmm", s, l)?;
        let vals = cpu_slice_opt::<T>("spmm", v)?;
        let csr = self.g.csr();
        let out = match self.reduce {
            Reduce::Sum => cpu::spmm_sum(csr, x, k, vals, false),
            Reduce::Mean => cpu::spmm_sum(csr, x, k, vals, true),
            Reduce::Max => cpu::spmm_extreme(csr, x, k, vals, true, false).0,
            Reduce::Min => cpu::spmm_extreme(csr, x, k, vals, false, false).0,
        };
        Ok((T::to_cpu_storage_owned(out), Shape::from((csr.n_rows(), k))))
    }

    /// `dy` scaled for the transpose product: `D^-1 dy` for mean, `dy` for sum.
    fn scaled_grad(&self, dy: &Tensor) -> candle_core::Result<Tensor> {
        match self.reduce {
            Reduce::Mean => dy.broadcast_mul(&self.g.inv_degrees(dy.dtype())?),
            Reduce::Sum => Ok(dy.clone()),
            Reduce::Max | Reduce::Min => {
                candle_core::bail!("spmm: max/min backward goes through the argmax path")
            }
        }
    }
}

impl CustomOp1 for SpmmOp {
    fn name(&self) -> &'static str {
        "spmm"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        let (out, _, shape) = cuda::spmm_fwd(&self.g, s, l, None, self.reduce, false)?;
        Ok((out, shape))
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!("spmm", s, cpu_fwd1(self, s, l))
    }
    fn bwd(&self, x: &Tensor, _res: &Tensor, dy: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let _timer = self.g.backward_timer();
        if !x.track_op() {
            return Ok(None);
        }
        Ok(Some(transpose_product(
            &self.g,
            dy,
            None,
            self.reduce == Reduce::Mean,
        )?))
    }
}

fn cpu_fwd1<T: WithDType>(
    op: &SpmmOp,
    s: &CpuStorage,
    l: &Layout,
) -> candle_core::Result<(CpuStorage, Shape)> {
    op.cpu::<T>(s, l, None)
}
fn cpu_fwd2<T: WithDType>(
    op: &SpmmOp,
    s: &CpuStorage,
    l: &Layout,
    vs: &CpuStorage,
    vl: &Layout,
) -> candle_core::Result<(CpuStorage, Shape)> {
    op.cpu::<T>(s, l, Some((vs, vl)))
}

impl CustomOp2 for SpmmOp {
    fn name(&self) -> &'static str {
        "spmm_weighted"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        vs: &CudaStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (out, _, shape) = cuda::spmm_fwd(&self.g, s, l, Some((vs, vl)), self.reduce, false)?;
        Ok((out, shape))
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!("spmm_weighted", s, cpu_fwd2(self, s, l, vs, vl))
    }
    fn bwd(
        &self,
        x: &Tensor,
        v: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let _timer = self.g.backward_timer();
        let dy = dy.contiguous()?;
        let mean = self.reduce == Reduce::Mean;
        let dx = if x.track_op() {
            Some(transpose_product(&self.g, &dy, Some(v), mean)?)
        } else {
            None
        };
        let dv = if v.track_op() {
            let dy = self.scaled_grad(&dy)?;
            Some(crate::ops::sddmm::sddmm_no_bwd(&self.g, &dy, x)?)
        } else {
            None
        };
        Ok((dx, dv))
    }
}

/// Winning edge position per output entry of a max/min reduction (u32, `NO_EDGE` if empty).
struct SpmmArgOp {
    g: DeviceGraph,
    reduce: Reduce,
}

fn arg_cpu<T: WithDType>(
    op: &SpmmArgOp,
    s: &CpuStorage,
    l: &Layout,
    v: Option<(&CpuStorage, &Layout)>,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (_, k) = l.shape().dims2()?;
    let x = cpu_slice::<T>("spmm_arg", s, l)?;
    let vals = cpu_slice_opt::<T>("spmm_arg", v)?;
    let (_, arg) = cpu::spmm_extreme(op.g.csr(), x, k, vals, op.reduce == Reduce::Max, true);
    Ok((CpuStorage::U32(arg), Shape::from((op.g.n_rows(), k))))
}
fn arg_cpu1<T: WithDType>(
    op: &SpmmArgOp,
    s: &CpuStorage,
    l: &Layout,
) -> candle_core::Result<(CpuStorage, Shape)> {
    arg_cpu::<T>(op, s, l, None)
}
fn arg_cpu2<T: WithDType>(
    op: &SpmmArgOp,
    s: &CpuStorage,
    l: &Layout,
    vs: &CpuStorage,
    vl: &Layout,
) -> candle_core::Result<(CpuStorage, Shape)> {
    arg_cpu::<T>(op, s, l, Some((vs, vl)))
}

impl CustomOp1 for SpmmArgOp {
    fn name(&self) -> &'static str {
        "spmm_arg"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        let (_, arg, shape) = cuda::spmm_fwd(&self.g, s, l, None, self.reduce, true)?;
        arg.map(|a| (a, shape))
            .ok_or_else(|| candle_core::Error::Msg("spmm_arg: max/min only".into()))
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!("spmm_arg", s, arg_cpu1(self, s, l))
    }
}

impl CustomOp2 for SpmmArgOp {
    fn name(&self) -> &'static str {
        "spmm_arg_weighted"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        vs: &CudaStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (_, arg, shape) = cuda::spmm_fwd(&self.g, s, l, Some((vs, vl)), self.reduce, true)?;
        arg.map(|a| (a, shape))
            .ok_or_else(|| candle_core::Error::Msg("spmm_arg: max/min only".into()))
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!("spmm_arg_weighted", s, arg_cpu2(self, s, l, vs, vl))
    }
}

/// `out[i,t] = a_p x[col_p, t]` at `p = arg[i,t]`: the max/min output rebuilt from its argmax,
/// carrying the backward.
struct GatherArgOp {
    g: DeviceGraph,
}

fn u32_slice<'a>(s: &'a CpuStorage, l: &Layout) -> candle_core::Result<&'a [u32]> {
    cpu_slice::<u32>("spmm_gather_arg", s, l)
}

fn gather_cpu<T: WithDType>(
    op: &GatherArgOp,
    s: &CpuStorage,
    l: &Layout,
    a: &CpuStorage,
    al: &Layout,
    v: Option<(&CpuStorage, &Layout)>,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (_, k) = l.shape().dims2()?;
    let x = cpu_slice::<T>("spmm_gather_arg", s, l)?;
    let arg = u32_slice(a, al)?;
    let vals = cpu_slice_opt::<T>("spmm_gather_arg", v)?;
    let out = cpu::gather_arg(op.g.csr(), x, k, arg, vals);
    Ok((
        T::to_cpu_storage_owned(out),
        Shape::from((op.g.n_rows(), k)),
    ))
}
fn gather_cpu2<T: WithDType>(
    op: &GatherArgOp,
    s: &CpuStorage,
    l: &Layout,
    a: &CpuStorage,
    al: &Layout,
) -> candle_core::Result<(CpuStorage, Shape)> {
    gather_cpu::<T>(op, s, l, a, al, None)
}
fn gather_cpu3<T: WithDType>(
    op: &GatherArgOp,
    s: &CpuStorage,
    l: &Layout,
    a: &CpuStorage,
    al: &Layout,
    vs: &CpuStorage,
    vl: &Layout,
) -> candle_core::Result<(CpuStorage, Shape)> {
    gather_cpu::<T>(op, s, l, a, al, Some((vs, vl)))
}

impl GatherArgOp {
    fn dx(&self, dy: &Tensor, arg: &Tensor, v: Option<&Tensor>) -> candle_core::Result<Tensor> {
        refuse_atomics_if_deterministic(dy)?;
        let op = ArgScatterOp { g: self.g.clone() };
        match v {
            Some(v) => dy.apply_op3_no_bwd(arg, v, &op),
            None => dy.apply_op2_no_bwd(arg, &op),
        }
    }
}

impl CustomOp2 for GatherArgOp {
    fn name(&self) -> &'static str {
        "spmm_gather_arg"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        a: &CudaStorage,
        al: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::gather_arg(&self.g, s, l, a, al, None)
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        a: &CpuStorage,
        al: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!("spmm_gather_arg", s, gather_cpu2(self, s, l, a, al))
    }
    fn bwd(
        &self,
        x: &Tensor,
        arg: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let _timer = self.g.backward_timer();
        let dx = if x.track_op() {
            Some(self.dx(&dy.contiguous()?, arg, None)?)
        } else {
            None
        };
        Ok((dx, None))
    }
}

impl CustomOp3 for GatherArgOp {
    fn name(&self) -> &'static str {
        "spmm_gather_arg_weighted"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        a: &CudaStorage,
        al: &Layout,
        vs: &CudaStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::gather_arg(&self.g, s, l, a, al, Some((vs, vl)))
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        a: &CpuStorage,
        al: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!(
            "spmm_gather_arg_weighted",
            s,
            gather_cpu3(self, s, l, a, al, vs, vl)
        )
    }
    fn bwd(
        &self,
        x: &Tensor,
        arg: &Tensor,
        v: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let _timer = self.g.backward_timer();
        let dy = dy.contiguous()?;
        let dx = if x.track_op() {
            Some(self.dx(&dy, arg, Some(v))?)
        } else {
            None
        };
        let dv = if v.track_op() {
            refuse_atomics_if_deterministic(&dy)?;
            Some(dy.apply_op3_no_bwd(arg, x, &ArgEdgeGradOp { g: self.g.clone() })?)
        } else {
            None
        };
        Ok((dx, None, dv))
    }
}

/// The max/min backward scatters with float atomics on the GPU: in deterministic mode it is
/// refused instead of silently breaking the promise.
fn refuse_atomics_if_deterministic(dy: &Tensor) -> candle_core::Result<()> {
    if crate::deterministic() && dy.device().is_cuda() {
        candle_core::bail!(
            "deterministic mode: the max/min aggregation backward (GraphSAGE-pool) uses float \
             atomics on the GPU and has no deterministic kernel yet; use sum/mean models \
             (GCN, GraphSAGE-mean, GIN, MaxK) or train without --deterministic"
        )
    }
    Ok(())
}

/// `dx[col_p, t] += a_p dy[i, t]` at `p = arg[i,t]`.
struct ArgScatterOp {
    g: DeviceGraph,
}

fn scatter_cpu<T: WithDType>(
    op: &ArgScatterOp,
    s: &CpuStorage,
    l: &Layout,
    a: &CpuStorage,
    al: &Layout,
    v: Option<(&CpuStorage, &Layout)>,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (_, k) = l.shape().dims2()?;
    let dy = cpu_slice::<T>("spmm_arg_scatter", s, l)?;
    let arg = u32_slice(a, al)?;
    let vals = cpu_slice_opt::<T>("spmm_arg_scatter", v)?;
    let n_src = op.g.n_cols();
    let dx = cpu::scatter_arg(op.g.csr(), dy, k, arg, vals);
    Ok((T::to_cpu_storage_owned(dx), Shape::from((n_src, k))))
}
fn scatter_cpu2<T: WithDType>(
    op: &ArgScatterOp,
    s: &CpuStorage,
    l: &Layout,
    a: &CpuStorage,
    al: &Layout,
) -> candle_core::Result<(CpuStorage, Shape)> {
    scatter_cpu::<T>(op, s, l, a, al, None)
}
fn scatter_cpu3<T: WithDType>(
    op: &ArgScatterOp,
    s: &CpuStorage,
    l: &Layout,
    a: &CpuStorage,
    al: &Layout,
    vs: &CpuStorage,
    vl: &Layout,
) -> candle_core::Result<(CpuStorage, Shape)> {
    scatter_cpu::<T>(op, s, l, a, al, Some((vs, vl)))
}

impl CustomOp2 for ArgScatterOp {
    fn name(&self) -> &'static str {
        "spmm_arg_scatter"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        a: &CudaStorage,
        al: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::scatter_arg(&self.g, s, l, a, al, None)
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        a: &CpuStorage,
        al: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!("spmm_arg_scatter", s, scatter_cpu2(self, s, l, a, al))
    }
}

impl CustomOp3 for ArgScatterOp {
    fn name(&self) -> &'static str {
        "spmm_arg_scatter_weighted"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        a: &CudaStorage,
        al: &Layout,
        vs: &CudaStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::scatter_arg(&self.g, s, l, a, al, Some((vs, vl)))
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        a: &CpuStorage,
        al: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!(
            "spmm_arg_scatter_weighted",
            s,
            scatter_cpu3(self, s, l, a, al, vs, vl)
        )
    }
}

/// Edge-value gradient of a weighted max/min: `da[p] = sum_{t : arg[i,t]=p} dy[i,t] x[col_p,t]`.
struct ArgEdgeGradOp {
    g: DeviceGraph,
}

fn edge_grad_cpu<T: WithDType>(
    op: &ArgEdgeGradOp,
    s: &CpuStorage,
    l: &Layout,
    a: &CpuStorage,
    al: &Layout,
    xs: &CpuStorage,
    xl: &Layout,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (_, k) = l.shape().dims2()?;
    let dy = cpu_slice::<T>("spmm_arg_edge_grad", s, l)?;
    let arg = u32_slice(a, al)?;
    let x = cpu_slice::<T>("spmm_arg_edge_grad", xs, xl)?;
    let dv = cpu::edge_grad_arg(op.g.csr(), dy, x, k, arg);
    Ok((T::to_cpu_storage_owned(dv), Shape::from(op.g.nnz())))
}

impl CustomOp3 for ArgEdgeGradOp {
    fn name(&self) -> &'static str {
        "spmm_arg_edge_grad"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        a: &CudaStorage,
        al: &Layout,
        xs: &CudaStorage,
        xl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::edge_grad_arg(&self.g, s, l, a, al, xs, xl)
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        a: &CpuStorage,
        al: &Layout,
        xs: &CpuStorage,
        xl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!(
            "spmm_arg_edge_grad",
            s,
            edge_grad_cpu(self, s, l, a, al, xs, xl)
        )
    }
}
