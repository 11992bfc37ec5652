//! GCN layer (Kipf & Welling, 2017).
//!
//! Matrix form: `X' = D^-1/2 (A + I) D^-1/2 X W^T + b`.
//! Node-wise: `x'_i = sum_{j in N(i) ∪ {i}} x_j W^T / sqrt(d_i d_j) + b`, `d` counting the loop.
//!
//! Shapes: `x [N, in]` -> `[N, out]`; the graph comes from
//! [`ModelGraph::new`](crate::ModelGraph::new) with [`ConvKind::Gcn`](crate::ConvKind::Gcn).
//! Parameters: `lin.weight [out, in]`, `bias [out]`.
//!
//! The product is associative, so the layer aggregates at the narrower of `in` and `out`:
//! `Â (X W^T)` when `out < in`, `(Â X) W^T` otherwise.

use super::{like, maxk_dropout, Linear};
use crate::dropout::DropoutRng;
use crate::error::Result;
use crate::graph::ModelGraph;
use crate::params::{Init, ParamStore};
use crate::timer::{Phase, Timer};
use candle_core::Tensor;
use gnn_kernels::Reduce;

/// GCN convolution.
pub struct GcnConv {
    lin: Linear,
    bias: Tensor,
}

impl GcnConv {
    /// Creates `lin.weight` and `bias` under `store`.
    pub fn new(in_dim: usize, out_dim: usize, store: &ParamStore) -> Result<Self> {
        Ok(Self {
            lin: Linear::new(in_dim, out_dim, false, &store.pp("lin"))?,
            bias: store.get("bias", &[out_dim], Init::Zeros)?,
        })
    }

    /// Applies the layer; `agg`: its aggregation of `x`, precomputed ([`crate::Gnn::input_aggregate`]).
    pub fn forward(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        agg: Option<&Tensor>,
        t: &Timer,
    ) -> Result<Tensor> {
        let (out_dim, in_dim) = self.lin.weight.dims2()?;
        let y = if let Some(a) = agg {
            self.lin.forward_no_bias(a, t)?
        } else if out_dim < in_dim {
            let h = self.lin.forward_no_bias(x, t)?;
            t.time(Phase::Aggregation, || g.aggregate(&h, Reduce::Sum))?
        } else {
            let h = t.time(Phase::Aggregation, || g.aggregate(x, Reduce::Sum))?;
            self.lin.forward_no_bias(&h, t)?
        };
        t.time(Phase::Elementwise, || {
            Ok(y.broadcast_add(&like(&self.bias, &y)?)?)
        })
    }

    /// MaxK-GNN order: `A · dropout(MaxK(x W^T)) + b`, the aggregation over CBSR (SpGEMM, with
    /// the bias fused).
    pub fn forward_maxk(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        k: usize,
        drop: Option<(&mut DropoutRng, f32)>,
        t: &Timer,
    ) -> Result<Tensor> {
        let h = self.lin.forward_no_bias(x, t)?;
        let c = maxk_dropout(&h, k, drop, t)?;
        // The bias rides in the SpGEMM's write-back (no separate broadcast add).
        t.time(Phase::Aggregation, || {
            g.aggregate_cbsr_bias(&c, Reduce::Sum, &like(&self.bias, &h)?)
        })
    }
}
