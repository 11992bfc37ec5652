//! A linear layer's product `x · wᵀ` computed outside the autograd graph ([`LinearProduct`]),
//! optionally of an aggregation `Â h` ([`Aggregate`]), for the fused ops that consume it and
//! attach the gradients themselves: the bias + ReLU + dropout epilogue (`epilogue.rs`) and
//! MaxK-GNN's layer (`super::maxk_layer`).

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
mod epilogue;
mod untracked;

pub use untracked::{add_bias_relu_dropout_untracked, bias_relu_dropout_untracked, EpilogueMask};

use crate::device_graph::DeviceGraph;
use crate::error::Result;
use crate::ops::matmul::check_nt;
use crate::ops::spmm::{spmm, spmm_weighted, Reduce};
use candle_core::Tensor;

/// `x · wᵀ` computed outside the autograd graph, for an op that consumes it and attaches the
/// gradients itself ([`LinearProduct::bias_relu_dropout`]): the product is then a temporary,
/// not a tensor the graph holds until the backward. Made from an [`Aggregate`]
/// ([`LinearProduct::of_aggregate`]), the product is `(Â h) · wᵀ` and the op differentiates to
/// `h` itself.
pub struct LinearProduct {
    x: Tensor,
    w: Tensor,
    z: Tensor,
    agg: Option<AggregateParts>,
}

/// `Â h` (a sum or mean SpMM, optional constant edge values) computed outside the autograd
/// graph, remembering `h` and the graph, for a [`LinearProduct`] whose op returns `h`'s
/// gradient `Âᵀ dx` itself.
///
/// Composed, `matmul_nt(spmm(h))` puts the aggregation's output in candle's graph: its
/// gradient, like every tensor's first gradient in candle 0.11, is added into a fresh zero
/// tensor (a fill and an add of `[N, in]`), and so is the first of `h`'s. Inside one op the
/// chain `dz -> dx -> Âᵀ dx` stays in our hands: one gradient for `h` leaves the op.
pub struct Aggregate {
    h: Tensor,
    parts: AggregateParts,
}

/// What the op's backward needs of an [`Aggregate`].
pub(crate) struct AggregateParts {
    pub(crate) g: DeviceGraph,
    pub(crate) values: Option<Tensor>,
    pub(crate) mean: bool,
    /// `Â h`, untracked.
    pub(crate) a: Tensor,
}

impl Aggregate {
    /// `Â h` over `g` with `reduce` (sum or mean) and constant edge `values` (`[nnz]`; a
    /// tracked `values` is refused: its gradient would be lost), the SpMM run now.
    pub fn new(
        g: &DeviceGraph,
        h: &Tensor,
        values: Option<&Tensor>,
        reduce: Reduce,
    ) -> Result<Self> {
        let mean = crate::ops::spmm::transpose_operands("aggregate", reduce, values)?;
        let hd = h.detach();
        let a = match values {
            Some(v) => spmm_weighted(g, &hd, v, reduce)?,
            None => spmm(g, &hd, reduce)?,
        };
        Ok(Self {
            h: h.clone(),
            parts: AggregateParts {
                g: g.clone(),
                values: values.cloned(),
                mean,
                a,
            },
        })
    }

    /// `Â h` (untracked).
    pub fn value(&self) -> &Tensor {
        &self.parts.a
    }
}

impl LinearProduct {
    /// `x [N, in] · w [out, in]ᵀ`, the GEMM run now (untracked).
    pub fn new(x: &Tensor, w: &Tensor) -> Result<Self> {
        check_nt("linear", x, w)?;
        let z = x.detach().matmul(&w.detach().t()?)?;
        Ok(Self {
            x: x.clone(),
            w: w.clone(),
            z,
            agg: None,
        })
    }

    /// `(Â h) · wᵀ` from an [`Aggregate`], the GEMM run now (untracked); the consuming op's
    /// first input is `h`.
    pub fn of_aggregate(agg: Aggregate, w: &Tensor) -> Result<Self> {
        let a = &agg.parts.a;
        check_nt("linear", a, w)?;
        let z = a.matmul(&w.detach().t()?)?;
        Ok(Self {
            x: agg.h,
            w: w.clone(),
            z,
            agg: Some(agg.parts),
        })
    }

    /// `out`, the product's width.
    pub fn out_dim(&self) -> usize {
        self.z.dims().get(1).copied().unwrap_or(0)
    }

    /// The product's dtype (that of `x` and `w`).
    pub fn dtype(&self) -> candle_core::DType {
        self.z.dtype()
    }

    /// `(input, w, product, aggregation)`, for the consuming op: the input is `x`, or `h` of
    /// an [`Aggregate`].
    pub(crate) fn into_parts(self) -> (Tensor, Tensor, Tensor, Option<AggregateParts>) {
        (self.x, self.w, self.z, self.agg)
    }
}
