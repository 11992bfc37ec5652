//! GIN layer (Xu et al., 2019) with learnable eps.
//!
//! Node-wise: `x'_i = MLP((1 + eps) x_i + sum_{j in N(i)} x_j)`, `MLP = Lin -> ReLU -> Lin`.
//! Matrix form: `X' = MLP((A + (1 + eps) I) X)`.
//!
//! Shapes: `x [N, in]` -> `[N, out]`, the MLP's hidden width `mlp` (the model's hidden width
//! in every layer, so the last layer's MLP is `hidden -> hidden -> classes`: an MLP as narrow
//! as the class count, ReLU in between, went dead in 4-layer models and predicted one class);
//! the graph has no self loops. Parameters (PyG `GINConv(train_eps=True)`): `eps [1]`,
//! `nn.0.weight [mlp, in]`, `nn.0.bias [mlp]`, `nn.2.weight [out, mlp]`, `nn.2.bias [out]`,
//! drawn as torch's `nn.Linear` draws them (`U(-1/sqrt(in), 1/sqrt(in))`, biases too).
//!
//! With `mlp_norm` the MLP is `Lin -> LayerNorm -> ReLU -> Lin` (`norm.weight`, `norm.bias`
//! `[mlp]`), the place PyG's GIN examples put BatchNorm: the unnormalised sum grows with the
//! degree, and the norm takes that scale out before the ReLU.
//!
//! The MLP's first product is linear, so it is applied before aggregation (`A (X W^T) =
//! (A X) W^T`): the sum runs at width `out` instead of `in`, the bias is added after.

use super::{like, maxk_dropout, Linear};
use crate::dropout::DropoutRng;
use crate::error::Result;
use crate::graph::ModelGraph;
use crate::model::LayerNorm;
use crate::params::{Init, ParamStore};
use crate::timer::Phase;
use candle_core::Tensor;
use gnn_kernels::Reduce;

/// GIN convolution.
pub struct GinConv {
    eps: Tensor,
    nn0: Linear,
    nn2: Linear,
    norm: Option<LayerNorm>,
}

impl GinConv {
    /// Creates `eps` (0), `nn.0.*` (`in -> mlp`), `nn.2.*` (`mlp -> out`) and, with
    /// `mlp_norm`, `norm.*` under `store`.
    pub fn new(
        in_dim: usize,
        mlp_dim: usize,
        out_dim: usize,
        mlp_norm: bool,
        store: &ParamStore,
    ) -> Result<Self> {
        Ok(Self {
            eps: store.get("eps", &[1], Init::Zeros)?,
            nn0: Linear::torch_default(in_dim, mlp_dim, true, &store.pp("nn.0"))?,
            nn2: Linear::torch_default(mlp_dim, out_dim, true, &store.pp("nn.2"))?,
            norm: if mlp_norm {
                Some(LayerNorm::new(mlp_dim, &store.pp("norm"))?)
            } else {
                None
            },
        })
    }

    /// The MLP's middle on `z` (its first product, without the bias): bias, the optional
    /// LayerNorm, ReLU.
    fn middle(&self, z: Tensor) -> Result<Tensor> {
        let z = z.broadcast_add(&like(self.nn0.bias.as_ref().expect("bias"), &z)?)?;
        let z = match &self.norm {
            Some(n) => n.forward(&z)?,
            None => z,
        };
        Ok(z.relu()?)
    }

    /// Applies the layer; `agg`: its aggregation of `x`, precomputed ([`crate::Gnn::input_aggregate`]).
    pub fn forward(&self, g: &ModelGraph, x: &Tensor, agg: Option<&Tensor>) -> Result<Tensor> {
        let (out_dim, in_dim) = self.nn0.weight.dims2()?;
        // `agg + (1 + eps) h`, `h`'s rows those of the graph's rows (a graph restricted to
        // some rows: [`ModelGraph::restricted_to_rows`]).
        let combine = |h: &Tensor, agg: Tensor| -> Result<Tensor> {
            let own = g.own_rows_of(h)?;
            let h = own.as_ref().unwrap_or(h);
            let self_term = h.broadcast_mul(&like(&(self.eps.clone() + 1.0)?, h)?)?;
            Ok((agg + self_term)?)
        };
        let z = if agg.is_some() || out_dim <= in_dim {
            // The first product before the sum, so the sum and the element-wise work (eps's
            // gradient included) run at the MLP's width.
            let hx = self.nn0.forward_no_bias(g, x)?;
            let ha = match agg {
                // `(sum x) W`: a product of the precomputed sum instead of a sparse one.
                Some(a) => self.nn0.forward_no_bias(g, a)?,
                None => {
                    let _t = g.phase(Phase::Aggregation);
                    g.aggregate(&hx, Reduce::Sum)?
                }
            };
            let _t = g.phase(Phase::Elementwise);
            combine(&hx, ha)?
        } else {
            let agg = {
                let _t = g.phase(Phase::Aggregation);
                g.aggregate(x, Reduce::Sum)?
            };
            let z = {
                let _t = g.phase(Phase::Elementwise);
                combine(x, agg)?
            };
            self.nn0.forward_no_bias(g, &z)?
        };
        let h = {
            let _t = g.phase(Phase::Elementwise);
            self.middle(z)?
        };
        self.nn2.forward(g, &h)
    }

    /// MaxK-GNN order: `MLP`'s first product, MaxK, dropout, then the GIN sum over CBSR
    /// (SpGEMM) plus `(1 + eps)` times the node's own MaxK row, bias, (norm,) ReLU, second
    /// linear.
    pub fn forward_maxk(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        k: usize,
        drop: Option<(&mut DropoutRng, f32)>,
    ) -> Result<Tensor> {
        let h = self.nn0.forward_no_bias(g, x)?;
        let c = maxk_dropout(g, &h, k, drop)?;
        let agg = {
            let _t = g.phase(Phase::Aggregation);
            g.aggregate_cbsr(&c, Reduce::Sum)?
        };
        let h = {
            let _t = g.phase(Phase::Elementwise);
            let own = c.to_dense()?;
            let own = own.broadcast_mul(&like(&(self.eps.clone() + 1.0)?, &own)?)?;
            self.middle((agg + own)?)?
        };
        self.nn2.forward(g, &h)
    }
}
