//! MaxK-GNN (Peng et al., ASPLOS 2024): the MaxK nonlinearity, the CBSR feature format, the
//! forward SpGEMM over CBSR features and the backward SSpMM.
//!
//! - [`maxk`]: keep the `k` largest entries of each row of `h [N, D]` (IEEE total order; ties go
//!   to the lower column, so exactly `k` are kept). The result is CBSR: `data [N, k]` (the
//!   values, differentiable: the gradient flows to the kept entries only) and `index [N, k]`
//!   (their columns, ascending; `u8` when `D <= 256`, else `i16` holding columns below 1024,
//!   candle having no `u16`).
//! - [`spgemm`]: `out = A · dense(x)` for CBSR `x`, dense `[n_rows, D]` output, sum or mean,
//!   optional edge values. Per edge it reads `k` values and indices instead of `D` values.
//! - Backward of [`spgemm`] with respect to `data`: [`sspmm`], `(Aᵀ · dOut)` sampled at the
//!   CBSR pattern, `[n_cols, k]`: no dense `[n_cols, D]` gradient is formed.
//!
//! Edge values are constants here (GCN normalisation); a tracked value tensor is refused.
//! CUDA kernels take f32, bf16 and f16 values (`--precision`; half-precision data takes f32
//! edge values, and the SpGEMM / SSpMM accumulate in f32); the CPU takes f32 and f64.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use super::optional::{Cpu, CpuOut, Grads, OptionalInput, With, Without};
#[cfg(feature = "cuda")]
use super::optional::{Cuda, CudaOut};
use super::{check_device, check_float_or_half, cpu_slice, cpu_slice_opt};
use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use crate::ops::spmm::Reduce;
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{
    CpuStorage, CustomOp1, CustomOp2, CustomOp3, DType, Layout, Shape, Tensor, WithDType,
};

/// Largest row width MaxK handles (the GPU selection keeps a row in one warp's registers).
pub const MAX_WIDTH: usize = 1024;

mod cbsr;
pub(crate) mod ops;
pub use crate::ops::fused::maxk_layer::MaxkProduct;
pub use cbsr::Cbsr;
#[cfg(feature = "cuda")]
use ops::FusedMaxkOp;
use ops::{CbsrMoveOp, CbsrRowOp, SelectOp};

/// The index dtype of width `d`.
pub fn index_dtype(d: usize) -> DType {
    if d <= 256 {
        DType::U8
    } else {
        DType::I16
    }
}

/// MaxK of each row of `h [N, D]` as CBSR (see the module docs). `1 <= k <= D <= 1024`.
pub fn maxk(h: &Tensor, k: usize) -> Result<Cbsr> {
    const OP: &str = "maxk";
    check_float_or_half(OP, "h", h)?;
    let (_, d) = h
        .dims2()
        .map_err(|_| Error::shape(OP, format!("h has shape {:?}, expected [N, D]", h.dims())))?;
    if d > MAX_WIDTH {
        return Err(Error::unsupported(
            OP,
            format!("rows of {d} values; MaxK takes at most {MAX_WIDTH}"),
        ));
    }
    if k == 0 || k > d {
        return Err(Error::invalid(OP, format!("k = {k} must lie in 1..={d}")));
    }
    let h = h.contiguous()?;
    #[cfg(feature = "cuda")]
    if h.device().is_cuda() && matches!(h.dtype(), DType::F32 | DType::BF16 | DType::F16) {
        // One kernel selects and gathers; the index buffer is the op's output slot.
        let (n, _) = h.dims2()?;
        let index = Tensor::zeros((n, k), index_dtype(d), h.device())?;
        let data = h.apply_op1(FusedMaxkOp {
            k,
            d,
            index: index.clone(),
        })?;
        return Ok(Cbsr {
            data,
            index,
            dim: d,
        });
    }
    let index = h.detach().apply_op1_no_bwd(&SelectOp { k })?;
    let data = h.apply_op2(
        &index,
        CbsrMoveOp {
            k,
            d,
            scatter: false,
        },
    )?;
    Ok(Cbsr {
        data,
        index,
        dim: d,
    })
}

fn check_cbsr(op: &'static str, x: &Cbsr, rows: usize) -> Result<()> {
    let k = x.k();
    let bad = |what: String| Err(Error::shape(op, what));
    if x.data.rank() != 2 || x.data.dim(0)? != rows {
        return bad(format!(
            "CBSR data {:?} must have {rows} rows",
            x.data.dims()
        ));
    }
    if x.index.dims() != x.data.dims() || x.index.dtype() != index_dtype(x.dim) {
        return bad(format!(
            "CBSR index {:?} {:?} must be {:?} {:?}",
            x.index.dims(),
            x.index.dtype(),
            x.data.dims(),
            index_dtype(x.dim)
        ));
    }
    if k > x.dim || x.dim > MAX_WIDTH {
        return bad(format!("k = {k} and D = {} out of range", x.dim));
    }
    Ok(())
}

/// Edge values: `[nnz]`, constant, of the data's dtype (or f32 for half-precision data: the
/// kernels multiply in f32).
fn check_values(op: &'static str, g: &DeviceGraph, v: Option<&Tensor>, dt: DType) -> Result<()> {
    if let Some(v) = v {
        let half = matches!(dt, DType::BF16 | DType::F16);
        if v.dims() != [g.nnz()] || !(v.dtype() == dt || half && v.dtype() == DType::F32) {
            return Err(Error::shape(
                op,
                format!(
                    "edge values {:?} {:?} must be [{}] {dt:?}{}",
                    v.dims(),
                    v.dtype(),
                    g.nnz(),
                    if half { " or F32" } else { "" }
                ),
            ));
        }
        if v.track_op() {
            return Err(Error::unsupported(
                op,
                "gradients for edge values are not supported; pass constant values",
            ));
        }
    }
    Ok(())
}

fn mean_of(op: &'static str, reduce: Reduce) -> Result<bool> {
    match reduce {
        Reduce::Sum => Ok(false),
        Reduce::Mean => Ok(true),
        other => Err(Error::unsupported(
            op,
            format!("{other:?} aggregation is not available over CBSR (sum and mean are)"),
        )),
    }
}

/// `out = A · dense(x)` (sum, or mean over each row's entries), `x` a CBSR with `n_cols` rows,
/// `values` optional constant edge values. Differentiable in `x.data` (backward: [`sspmm`]).
pub fn spgemm(
    g: &DeviceGraph,
    x: &Cbsr,
    values: Option<&Tensor>,
    reduce: Reduce,
) -> Result<Tensor> {
    spgemm_bias(g, x, values, reduce, None)
}

/// [`spgemm`] plus a bias `[D]` added to every output row, fused into the kernel's write-back
/// (one pass over the output instead of a broadcast add, and in the backward a column sum
/// instead of candle's broadcast reduction). Differentiable in `x.data` and `bias`.
pub fn spgemm_bias(
    g: &DeviceGraph,
    x: &Cbsr,
    values: Option<&Tensor>,
    reduce: Reduce,
    bias: Option<&Tensor>,
) -> Result<Tensor> {
    let op = spgemm_op(g, x, values, reduce, bias)?;
    let data = x.data.contiguous()?;
    let index = x.index.contiguous()?;
    Ok(match bias {
        Some(b) => data.apply_op3(&index, &b.contiguous()?, With(op))?,
        None => data.apply_op2(&index, Without(op))?,
    })
}

/// [`spgemm_bias`] plus `residual` (`[n_rows, D]`, the layer's input in a residual network):
/// `A · x + bias + residual` in one pass. The residual is the output's initial value, so the
/// separate add and its gradient accumulation leave the epoch; its gradient is `dOut`.
pub fn spgemm_bias_residual(
    g: &DeviceGraph,
    x: &Cbsr,
    values: Option<&Tensor>,
    reduce: Reduce,
    bias: &Tensor,
    residual: &Tensor,
) -> Result<Tensor> {
    const OP: &str = "spgemm";
    check_device(OP, g, residual)?;
    if residual.dims() != [g.n_rows(), x.dim] || residual.dtype() != x.data.dtype() {
        return Err(Error::shape(
            OP,
            format!(
                "residual {:?} {:?} must be [{}, {}] {:?}",
                residual.dims(),
                residual.dtype(),
                g.n_rows(),
                x.dim,
                x.data.dtype()
            ),
        ));
    }
    let op = spgemm_op(g, x, values, reduce, Some(bias))?;
    let data = x.data.contiguous()?;
    let op = ops::SpgemmResidualOp {
        op,
        index: x.index.contiguous()?,
    };
    Ok(data.apply_op3(&bias.contiguous()?, &residual.contiguous()?, op)?)
}

/// The checked SpGEMM op of [`spgemm_bias`] and [`spgemm_bias_residual`].
pub(crate) fn spgemm_op(
    g: &DeviceGraph,
    x: &Cbsr,
    values: Option<&Tensor>,
    reduce: Reduce,
    bias: Option<&Tensor>,
) -> Result<CbsrRowOp> {
    const OP: &str = "spgemm";
    let mean = mean_of(OP, reduce)?;
    check_device(OP, g, &x.data)?;
    check_float_or_half(OP, "CBSR data", &x.data)?;
    check_cbsr(OP, x, g.n_cols())?;
    check_values(OP, g, values, x.data.dtype())?;
    if let Some(b) = bias {
        check_device(OP, g, b)?;
        if b.dims() != [x.dim] || b.dtype() != x.data.dtype() {
            return Err(Error::shape(
                OP,
                format!(
                    "bias {:?} {:?} must be [{}] {:?}",
                    b.dims(),
                    b.dtype(),
                    x.dim,
                    x.data.dtype()
                ),
            ));
        }
    }
    Ok(CbsrRowOp {
        g: g.clone(),
        k: x.k(),
        d: x.dim,
        mean,
        backward: false,
        values: values.map(Tensor::contiguous).transpose()?,
    })
}

/// `(Aᵀ · dout)` at the pattern of `x` (`[n_cols, k]`): the gradient of [`spgemm`] with
/// respect to the CBSR data. `dout` is `[n_rows, D]`; only `x`'s index and width are used.
pub fn sspmm(
    g: &DeviceGraph,
    dout: &Tensor,
    x: &Cbsr,
    values: Option<&Tensor>,
    reduce: Reduce,
) -> Result<Tensor> {
    const OP: &str = "sspmm";
    let mean = mean_of(OP, reduce)?;
    check_device(OP, g, dout)?;
    check_device(OP, g, &x.index)?;
    check_float_or_half(OP, "dout", dout)?;
    let dim = x.dim;
    if dout.dims() != [g.n_rows(), dim] {
        return Err(Error::shape(
            OP,
            format!("dout {:?} must be [{}, {dim}]", dout.dims(), g.n_rows()),
        ));
    }
    if x.rows() != g.n_cols() {
        return Err(Error::shape(
            OP,
            format!(
                "CBSR pattern has {} rows, the graph {} columns",
                x.rows(),
                g.n_cols()
            ),
        ));
    }
    check_values(OP, g, values, dout.dtype())?;
    Ok(sspmm_raw(
        g,
        &dout.contiguous()?,
        &x.index.contiguous()?,
        x.k(),
        dim,
        values,
        mean,
    )?)
}

fn sspmm_raw(
    g: &DeviceGraph,
    dout: &Tensor,
    index: &Tensor,
    k: usize,
    d: usize,
    values: Option<&Tensor>,
    mean: bool,
) -> candle_core::Result<Tensor> {
    if g.policy().deterministic && dout.device().is_cuda() {
        // No atomics: the dense transpose product (one warp per output row) sampled at the
        // pattern. Costs a dense `[n_cols, D]` temporary.
        g.record("sspmm", "transpose");
        let dense = crate::ops::spmm::transpose_product(g, dout, values, mean)?;
        return dense.apply_op2_no_bwd(
            index,
            &CbsrMoveOp {
                k,
                d,
                scatter: false,
            },
        );
    }
    g.record(
        "sspmm",
        if dout.device().is_cuda() {
            "cbsr"
        } else {
            "cpu"
        },
    );
    let op = CbsrRowOp {
        g: g.clone(),
        k,
        d,
        mean,
        backward: true,
        values: values.map(Tensor::contiguous).transpose()?,
    };
    dout.apply_op2_no_bwd(index, &Without(op))
}
