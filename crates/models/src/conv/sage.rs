//! GraphSAGE layer (Hamilton et al., 2017), mean or pool aggregator.
//!
//! Mean: `x'_i = W_l mean_{j in N(i)} x_j + b + W_r x_i`.
//! Pool: `x'_i = W_l max_{j in N(i)} relu(W_p x_j + b_p) + b + W_r x_i`.
//! Matrix form (mean): `X' = D^-1 A X W_l^T + X W_r^T + b`.
//!
//! Shapes: `x [N, in]` -> `[N, out]`; the graph has no self loops.
//! Parameters (PyG `SAGEConv`): `lin_l.weight [out, in]`, `lin_l.bias [out]`,
//! `lin_r.weight [out, in]`, and for pool `lin.weight [in, in]`, `lin.bias [in]`, drawn as
//! PyG's `Linear` draws them by default (`U(-1/sqrt(in), 1/sqrt(in))`, biases too). Glorot's
//! wider draw grows the activations about 2x per layer through the two terms, so a 4-layer
//! model started with logits large enough not to train (c6f0242:docs/perf/h100-2026-11-24-memory).
//!
//! Mean aggregation is linear, so when `out < in` the layer runs one GEMM with
//! `[W_l; W_r]` and aggregates the `W_l` half at width `out`.

use super::{lean, like, maxk_dropout, weight_like, Linear};
use crate::dropout::DropoutRng;
use crate::error::Result;
use crate::graph::ModelGraph;
use crate::params::ParamStore;
use crate::timer::Phase;
use candle_core::Tensor;
use gnn_kernels::Reduce;

/// GraphSAGE convolution.
pub struct SageConv {
    lin_l: Linear,
    lin_r: Linear,
    pool: Option<Linear>,
}

impl SageConv {
    /// Mean (`pool = false`) or pool aggregator.
    pub fn new(in_dim: usize, out_dim: usize, pool: bool, store: &ParamStore) -> Result<Self> {
        Ok(Self {
            lin_l: Linear::torch_default(in_dim, out_dim, true, &store.pp("lin_l"))?,
            lin_r: Linear::torch_default(in_dim, out_dim, false, &store.pp("lin_r"))?,
            pool: if pool {
                Some(Linear::torch_default(
                    in_dim,
                    in_dim,
                    true,
                    &store.pp("lin"),
                )?)
            } else {
                None
            },
        })
    }

    /// Output width.
    pub(crate) fn out_dim(&self) -> usize {
        self.lin_l.weight.dims2().map_or(0, |(o, _)| o)
    }

    /// Whether the layer has the mean aggregator.
    pub(crate) fn is_mean(&self) -> bool {
        self.pool.is_none()
    }

    /// Whether the layer (mean) aggregates its input before its products: `out >= in`.
    pub(crate) fn aggregates_first(&self) -> bool {
        let (o, i) = self.lin_l.weight.dims2().unwrap_or((0, 0));
        self.is_mean() && o >= i
    }

    /// Applies the layer; `agg`: its aggregation of `x`, precomputed ([`crate::Gnn::input_aggregate`]).
    pub fn forward(&self, g: &ModelGraph, x: &Tensor, agg: Option<&Tensor>) -> Result<Tensor> {
        let (y, b) = self.forward_unbiased(g, x, agg)?;
        let _t = g.phase(Phase::Elementwise);
        Ok(gnn_kernels::bias_add(&y, &b)?)
    }

    /// `l + r`, timed as element-wise work on `g`.
    fn add(g: &ModelGraph, l: Tensor, r: Tensor) -> Result<Tensor> {
        let _t = g.phase(Phase::Elementwise);
        Ok((l + r)?)
    }

    /// The layer without `lin_l`'s bias, and the bias in the output's dtype: the caller adds
    /// it (fused with the activation: [`gnn_kernels::bias_relu_dropout`]).
    pub fn forward_unbiased(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        agg: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor)> {
        let (out_dim, in_dim) = self.lin_l.weight.dims2()?;
        let bias = like(self.lin_l.bias.as_ref().expect("lin_l has a bias"), x)?;
        // The root term's input: `x`, or its rows that are the graph's on a graph restricted
        // to some rows.
        let own = g.own_rows_of(x)?;
        let root = own.as_ref().unwrap_or(x);
        if let (Some(a), None) = (agg, &self.pool) {
            let l = self.lin_l.forward_no_bias(g, a)?;
            let r = self.lin_r.forward_no_bias(g, root)?;
            return Ok((Self::add(g, l, r)?, bias));
        }
        if let Some(pool) = &self.pool {
            let p = pool.forward(g, x)?;
            let p = {
                let _t = g.phase(Phase::Elementwise);
                p.relu()?
            };
            let agg = {
                let _t = g.phase(Phase::Aggregation);
                g.aggregate(&p, Reduce::Max)?
            };
            let l = self.lin_l.forward_no_bias(g, &agg)?;
            let r = self.lin_r.forward_no_bias(g, root)?;
            return Ok((Self::add(g, l, r)?, bias));
        }
        let y = if let (true, Some(root)) = (out_dim < in_dim, &own) {
            // Multiplying first on a restricted graph: the neighbour product over every row,
            // the root product over the graph's rows alone.
            let hl = self.lin_l.forward_no_bias(g, x)?;
            let agg = {
                let _t = g.phase(Phase::Aggregation);
                g.aggregate(&hl, Reduce::Mean)?
            };
            let r = self.lin_r.forward_no_bias(g, root)?;
            Self::add(g, agg, r)?
        } else if out_dim < in_dim {
            let w = weight_like(
                &Tensor::cat(&[&self.lin_l.weight, &self.lin_r.weight], 0)?,
                x,
            )?;
            let h = {
                let _t = g.phase(Phase::Gemm);
                gnn_kernels::matmul_nt(x, &w)?
            };
            let (hl, hr) = (h.narrow(1, 0, out_dim)?, h.narrow(1, out_dim, out_dim)?);
            let agg = {
                let _t = g.phase(Phase::Aggregation);
                g.aggregate(&hl, Reduce::Mean)?
            };
            Self::add(g, agg, hr)?
        } else {
            let agg = {
                let _t = g.phase(Phase::Aggregation);
                g.aggregate(x, Reduce::Mean)?
            };
            let l = self.lin_l.forward_no_bias(g, &agg)?;
            let r = self.lin_r.forward_no_bias(g, root)?;
            Self::add(g, l, r)?
        };
        Ok((y, bias))
    }

    /// The lean form (mean aggregator; see [`ModelGraph::lean_layers`]):
    /// `act(W_l mean_j x_j + W_r x_i + b)` as one op ([`super::lean::pair`]) keeping `x`, the aggregation and the
    /// activation's mask instead of both products, their sum and the pre-activation. A
    /// layer that multiplies first aggregates its `W_l` product inside with the graph's fused
    /// aggregation (keeping `x` alone); `agg` given (the cached aggregation of the features)
    /// is held. `None` where it does not apply (pool; a layer that multiplies first without the
    /// fused aggregation).
    pub(crate) fn forward_lean(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        agg: Option<&Tensor>,
        act: lean::Act<'_>,
    ) -> Result<Option<Tensor>> {
        let (out_dim, in_dim) = self.lin_l.weight.dims2()?;
        if self.pool.is_some() {
            return Ok(None);
        }
        let bias = self.lin_l.bias.as_ref().expect("lin_l has a bias");
        let (w_l, w_r) = (&self.lin_l.weight, &self.lin_r.weight);
        let fused = g.fused_aggregation(Reduce::Mean, x.dtype());
        // A layer aggregating first does it in an op of its own, whose backward then runs
        // after this op's has returned (inside it, the output gradient and the pre-activation
        // gradient would be held through the aggregation's buffers too).
        let computed;
        let neighbour = match (agg, fused) {
            (Some(a), _) if !a.track_op() => lean::Neighbour::Constant(a),
            (Some(a), _) => lean::Neighbour::Tracked(a),
            (None, Some(f)) if out_dim < in_dim => lean::Neighbour::Product(f),
            (None, None) if out_dim < in_dim => return Ok(None),
            (None, _) => {
                let _t = g.phase(Phase::Aggregation);
                computed = g.aggregate(x, Reduce::Mean)?;
                lean::Neighbour::Tracked(&computed)
            }
        };
        Ok(Some(lean::pair(
            g,
            neighbour,
            w_l,
            x,
            g.restricted_rows(),
            w_r,
            bias,
            act,
        )?))
    }

    /// This hidden layer (ReLU, `drop`) over a constant `x` and its cached mean `agg`, and
    /// the output layer `next` after it, multiplying first over `g_out`'s fused mean (on
    /// `g_out`'s restricted rows where it has them), as one op
    /// ([`lean::pair_hidden_and_output`]); `None` (nothing run, no mask seed drawn) where that
    /// does not apply (pool aggregators, a tracked input, no cached mean, an output layer
    /// that aggregates first, composed layers). With `loss`, the op returns the loss of the
    /// logits ([`lean::LossHead`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn forward_with_output(
        &self,
        next: &SageConv,
        g: &ModelGraph,
        g_out: &ModelGraph,
        x: &Tensor,
        agg: Option<&Tensor>,
        drop: Option<(&mut DropoutRng, f32)>,
        loss: Option<lean::LossHead<'_>>,
    ) -> Result<Option<Tensor>> {
        let Some(a) = agg.filter(|a| !a.track_op() && !x.track_op()) else {
            return Ok(None);
        };
        if self.pool.is_some() || next.pool.is_some() || !g.lean_layers() || !g_out.lean_layers() {
            return Ok(None);
        }
        let (out2, in2) = next.lin_l.weight.dims2()?;
        let f = match g_out.fused_aggregation(Reduce::Mean, x.dtype()) {
            Some(f) if out2 < in2 => f,
            _ => return Ok(None),
        };
        let params = |c: &SageConv| -> Result<(Tensor, Tensor, Tensor)> {
            let b =
                c.lin_l.bias.as_ref().ok_or_else(|| {
                    crate::Error::Config("a GraphSAGE layer without its bias".into())
                })?;
            Ok((c.lin_l.weight.clone(), c.lin_r.weight.clone(), b.clone()))
        };
        let ((wa1, wh1, b1), (wa2, wh2, b2)) = (params(self)?, params(next)?);
        g_out.graph.record_form("layer", "sage hidden+output");
        Ok(Some(lean::pair_hidden_and_output(
            g,
            g_out,
            a,
            x,
            (&wa1, &wh1, &b1),
            drop,
            f,
            g_out.restricted_rows(),
            (&wa2, &wh2, &b2),
            loss,
        )?))
    }

    /// MaxK-GNN order (mean aggregator): `mean_j dropout(MaxK(x W_l^T))_j + x_i W_r^T + b`,
    /// one GEMM for both products, the aggregation over CBSR (SpGEMM).
    pub fn forward_maxk(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        k: usize,
        drop: Option<(&mut DropoutRng, f32)>,
    ) -> Result<Tensor> {
        if self.pool.is_some() {
            return Err(crate::Error::Config(
                "MaxK is not defined for GraphSAGE-pool".into(),
            ));
        }
        let (out_dim, _) = self.lin_l.weight.dims2()?;
        let bias = self.lin_l.bias.as_ref().expect("lin_l has a bias");
        let w = Tensor::cat(&[&self.lin_l.weight, &self.lin_r.weight], 0)?;
        let h = {
            let _t = g.phase(Phase::Gemm);
            gnn_kernels::matmul_nt(x, &weight_like(&w, x)?)?
        };
        let (hl, hr) = (h.narrow(1, 0, out_dim)?, h.narrow(1, out_dim, out_dim)?);
        let c = maxk_dropout(g, &hl, k, drop)?;
        let agg = {
            let _t = g.phase(Phase::Aggregation);
            g.aggregate_cbsr(&c, Reduce::Mean)?
        };
        let _t = g.phase(Phase::Elementwise);
        Ok(gnn_kernels::bias_add_residual(&agg, &hr, &like(bias, x)?)?)
    }
}
