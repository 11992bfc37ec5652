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

/// Tuning knobs of the CUDA SpMM (for `bench_spmm --sweep`), all set through a graph's
/// [`crate::KernelPolicy`]: a forced tiling is checked against each call's shape and
/// alignment at launch, and an invalid one falls back to the built-in choice, so no setting
/// can make a kernel read out of bounds.
pub mod tuning {
    pub use super::dispatch::{narrow_shape, SpmmTiling, CFS, NARROW_MAX_LANES};
    pub use crate::policy::{ColumnBlock, SpmmKernel};
}
pub mod dispatch;
pub mod reference;

mod arg;
mod epilogue;
mod op;
use arg::{GatherArgOp, SpmmArgOp};
pub use epilogue::{spmm_then, spmm_transposed_then, Epilogue};
use op::SpmmOp;

use super::optional::{Cpu, CpuOut, Grads, OptionalInput, With, Without};
#[cfg(feature = "cuda")]
use super::optional::{Cuda, CudaOut};
use super::{check_device, check_float_or_half, cpu_slice, cpu_slice_opt};
use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp3, DType, Layout, Shape, Tensor, WithDType};
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
            let arg = x.apply_op1_no_bwd(&Without(SpmmArgOp {
                g: g.clone(),
                reduce,
            }))?;
            Ok(x.apply_op2(&arg, Without(GatherArgOp { g: g.clone() }))?)
        }
        _ => Ok(x.apply_op1(Without(SpmmOp {
            g: g.clone(),
            reduce,
        }))?),
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
                &With(SpmmArgOp {
                    g: g.clone(),
                    reduce,
                }),
            )?;
            Ok(x.apply_op3(&arg, &values, With(GatherArgOp { g: g.clone() }))?)
        }
        _ => Ok(x.apply_op2(
            &values,
            With(SpmmOp {
                g: g.clone(),
                reduce,
            }),
        )?),
    }
}

fn check_x(op: &'static str, g: &DeviceGraph, x: &Tensor) -> Result<Tensor> {
    check_device(op, g, x)?;
    check_float_or_half(op, "x", x)?;
    let dims = x.dims();
    if dims.len() != 2 || dims[0] != g.n_cols() {
        return Err(Error::shape(
            op,
            format!(
                "x has shape {dims:?}, expected [{}, K] (one row per source node)",
                g.n_cols()
            ),
        ));
    }
    Ok(x.contiguous()?)
}

fn check_values(op: &'static str, g: &DeviceGraph, x: &Tensor, v: &Tensor) -> Result<Tensor> {
    check_device(op, g, v)?;
    if v.dims() != [g.nnz()] {
        return Err(Error::shape(
            op,
            format!(
                "edge values have shape {:?}, expected [{}] (one per stored edge)",
                v.dims(),
                g.nnz()
            ),
        ));
    }
    // Half-precision features take fp32 edge values (the kernels accumulate in fp32).
    let half_x = matches!(x.dtype(), DType::BF16 | DType::F16);
    if v.dtype() != x.dtype() && !(half_x && v.dtype() == DType::F32) {
        return Err(Error::dtype(
            op,
            format!("edge values are {:?} but x is {:?}", v.dtype(), x.dtype()),
        ));
    }
    Ok(v.contiguous()?)
}

/// `Aᵀ dy` (mean: `Aᵀ D⁻¹ dy`, with constant edge `values` when given): the gradient that
/// [`spmm`] / [`spmm_weighted`] (sum or mean) of an `x` hands to `x` for the output gradient
/// `dy [g.n_rows(), K]`, over the graph's cached transpose. For ops that aggregate an
/// untracked input inside their own forward and differentiate through it themselves
/// (`gnn-models`' lean layers on a whole graph). Timed as the graph's backward aggregation.
pub fn spmm_transposed(
    g: &DeviceGraph,
    dy: &Tensor,
    values: Option<&Tensor>,
    reduce: Reduce,
) -> Result<Tensor> {
    const OP: &str = "spmm_transposed";
    let mean = transpose_operands(OP, reduce, values)?;
    check_device(OP, g, dy)?;
    check_float_or_half(OP, "dy", dy)?;
    let dims = dy.dims();
    if dims.len() != 2 || dims[0] != g.n_rows() {
        return Err(Error::shape(
            OP,
            format!(
                "dy has shape {dims:?}, expected [{}, K] (one row per output row)",
                g.n_rows()
            ),
        ));
    }
    let values = values.map(|v| check_values(OP, g, dy, v)).transpose()?;
    let _timer = g.backward_timer();
    Ok(transpose_product(g, dy, values.as_ref(), mean)?)
}

/// What an op that runs its own transpose-product backward (`Aᵀ dy`) takes: `reduce` sum or
/// mean (returns whether it is the mean) and constant edge values (a tracked `values` would
/// lose its gradient). Shared by [`crate::Aggregate`] and `gnn-comm`'s partitioned symmetric
/// aggregation.
pub fn transpose_operands(
    op: &'static str,
    reduce: Reduce,
    values: Option<&Tensor>,
) -> Result<bool> {
    let mean = match reduce {
        Reduce::Sum => false,
        Reduce::Mean => true,
        Reduce::Max | Reduce::Min => {
            return Err(Error::unsupported(
                op,
                format!("{reduce:?} has no transpose product; sum or mean only"),
            ))
        }
    };
    if values.is_some_and(|v| v.track_op()) {
        return Err(Error::unsupported(
            op,
            "edge values that track a gradient are not supported (constant only)",
        ));
    }
    Ok(mean)
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
    let half = dy.dtype() == DType::F16 || (dy.dtype() == DType::BF16 && values.is_some());
    if mean && half {
        // f16: the mean's 1/deg rides in fp32 edge values (times any constant edge values),
        // applied inside the kernel's fp32 accumulation; narrowing dy / deg to f16 would
        // underflow for long rows. bf16 (f32's exponent range) with constant edge values
        // likewise; without, it takes the row scaling below like f32.
        let err = |e: Error| candle_core::Error::Msg(e.to_string());
        let vt = match values {
            // Both factors in the transpose's order, each cached with the graph (the product
            // of a fresh `v * inv` would miss the one-entry cache and evict `v`'s entry on
            // every backward); permuting a product is the product of the permuted factors.
            Some(v) => {
                let vt = g.transposed_values(&v.to_dtype(DType::F32)?).map_err(err)?;
                (vt * g.transposed_inv_degree_edge_values().map_err(err)?)?
            }
            None => g.transposed_inv_degree_edge_values().map_err(err)?,
        };
        let gt = g.transpose_graph()?;
        let sum = SpmmOp {
            g: gt,
            reduce: Reduce::Sum,
        };
        return dy.contiguous()?.apply_op2_no_bwd(&vt, &With(sum));
    }
    let reduce = if mean { Reduce::Mean } else { Reduce::Sum };
    let op = SpmmOp {
        g: g.clone(),
        reduce,
    };
    let dy = op.scaled_grad(&dy.contiguous()?)?;
    let gt = g.transpose_graph()?;
    let sum = SpmmOp {
        g: gt,
        reduce: Reduce::Sum,
    };
    match values {
        None => dy.apply_op1_no_bwd(&Without(sum)),
        Some(v) => {
            let vt = g
                .transposed_values(v)
                .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
            dy.apply_op2_no_bwd(&vt, &With(sum))
        }
    }
}
