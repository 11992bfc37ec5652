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

use super::{bias_relu_dropout, lean, like, maxk_dropout, weight_like, Linear};
use crate::dropout::DropoutRng;
use crate::error::Result;
use crate::graph::{FusedAggregation, ModelGraph};
use crate::params::{Init, ParamStore};
use crate::timer::Phase;
use candle_core::Tensor;
use gnn_kernels::{Aggregate, LinearProduct, Reduce};

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

    /// Output width.
    pub fn out_dim(&self) -> usize {
        self.bias.dims().first().copied().unwrap_or(0)
    }

    /// Applies the layer; `agg`: its aggregation of `x`, precomputed ([`crate::Gnn::input_aggregate`]).
    pub fn forward(&self, g: &ModelGraph, x: &Tensor, agg: Option<&Tensor>) -> Result<Tensor> {
        let (y, b) = self.forward_unbiased(g, x, agg)?;
        let _t = g.phase(Phase::Elementwise);
        Ok(gnn_kernels::bias_add(&y, &b)?)
    }

    /// The layer without its bias, and the bias in the output's dtype: the caller adds it
    /// (fused with the activation: [`gnn_kernels::bias_relu_dropout`]).
    pub fn forward_unbiased(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        agg: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor)> {
        let (out_dim, in_dim) = self.lin.weight.dims2()?;
        let y = if let Some(a) = agg {
            self.lin.forward_no_bias(g, a)?
        } else if out_dim < in_dim {
            let h = self.lin.forward_no_bias(g, x)?;
            let _t = g.phase(Phase::Aggregation);
            g.aggregate(&h, Reduce::Sum)?
        } else {
            let h = {
                let _t = g.phase(Phase::Aggregation);
                g.aggregate(x, Reduce::Sum)?
            };
            self.lin.forward_no_bias(g, &h)?
        };
        let b = like(&self.bias, &y)?;
        Ok((y, b))
    }

    /// A hidden layer, `dropout(relu(layer(x)), p)` (`drop`: the rate and mask stream when
    /// training), plus `x` when `skip` holds `x` itself (a residual layer; taken, leaving
    /// `None`, when the add is fused here). Where the product comes last (`agg` given, or
    /// `out >= in`) the bias, ReLU and dropout ride on it
    /// ([`gnn_kernels::LinearProduct::bias_relu_dropout`]), so the autograd graph keeps no
    /// pre-activation `[N, out]` tensor for the backward; when the layer also aggregates its
    /// own input over an exact, whole graph, the aggregation joins the op
    /// ([`gnn_kernels::Aggregate`]) with the residual add: `x` gets one gradient, not three
    /// summed through zero-filled buffers. Otherwise the epilogue runs on the aggregation's
    /// output ([`gnn_kernels::bias_relu_dropout`]).
    pub fn forward_relu_dropout(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        agg: Option<&Tensor>,
        drop: Option<(&mut DropoutRng, f32)>,
        skip: &mut Option<Tensor>,
    ) -> Result<Tensor> {
        let (out_dim, in_dim) = self.lin.weight.dims2()?;
        let whole = g
            .exact_operands()
            .filter(|_| agg.is_none() && out_dim >= in_dim);
        if let Some((graph, values)) = whole {
            let a = {
                let _t = g.phase(Phase::Aggregation);
                Aggregate::new(graph, x, values, Reduce::Sum)?
            };
            let w = weight_like(&self.lin.weight, x)?;
            let z = {
                let _t = g.phase(Phase::Gemm);
                LinearProduct::of_aggregate(a, &w)?
            };
            let b = like(&self.bias, x)?;
            let residual = skip.take_if(|s| s.id() == x.id()).is_some();
            let _t = g.phase(Phase::Elementwise);
            return match (drop, residual) {
                (Some((rng, p)), residual) => rng.linear_bias_relu_dropout(z, &b, p, residual),
                (None, false) => Ok(z.bias_relu_dropout(&b, 0.0, 0)?),
                (None, true) => Ok(z.bias_relu_dropout_residual(&b, 0.0, 0)?),
            };
        }
        let a = match agg {
            Some(a) => Some(a.clone()),
            None if out_dim >= in_dim => {
                let _t = g.phase(Phase::Aggregation);
                Some(g.aggregate(x, Reduce::Sum)?)
            }
            None => None,
        };
        let Some(a) = a else {
            let (y, b) = self.forward_unbiased(g, x, None)?;
            return bias_relu_dropout(g, &y, &b, drop);
        };
        let w = weight_like(&self.lin.weight, &a)?;
        let z = {
            let _t = g.phase(Phase::Gemm);
            LinearProduct::new(&a, &w)?
        };
        let b = like(&self.bias, &a)?;
        let _t = g.phase(Phase::Elementwise);
        match drop {
            Some((rng, p)) => rng.linear_bias_relu_dropout(z, &b, p, false),
            None => Ok(z.bias_relu_dropout(&b, 0.0, 0)?),
        }
    }

    /// The lean form ([`super::lean::linear`]; see [`ModelGraph::lean_layers`]): `act(layer(x))` as one
    /// op over the product's input, the weight and the bias, keeping the input (and the
    /// activation's mask) but not the product, its aggregation or the pre-activation. With
    /// `next` (a hidden layer whose next layer aggregates its output first), that aggregation
    /// runs inside too and the op returns it, so the activation itself (which only that
    /// aggregation reads, and its backward does not) is not kept either; the product must
    /// then come last (`agg` given, or `out >= in`). A layer that multiplies first aggregates
    /// its product with the graph's fused aggregation. `None` where it does not apply (run the
    /// composed forms).
    pub(crate) fn forward_lean(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        agg: Option<&Tensor>,
        act: lean::Act<'_>,
        next: Option<FusedAggregation>,
    ) -> Result<Option<Tensor>> {
        if let Some(a) = self.product_input(g, x, agg)? {
            let (w, b) = (weight_like(&self.lin.weight, &a)?, like(&self.bias, &a)?);
            let agg = next.map_or(lean::Agg::None, lean::Agg::Activation);
            return Ok(Some(lean::linear(g, &a, &w, &b, act, agg)?));
        }
        let fused = g.fused_aggregation(Reduce::Sum, x.dtype());
        let (Some(f), None) = (fused, next) else {
            return Ok(None);
        };
        let (w, b) = (weight_like(&self.lin.weight, x)?, like(&self.bias, x)?);
        Ok(Some(lean::linear(
            g,
            x,
            &w,
            &b,
            act,
            lean::Agg::Product(f),
        )?))
    }

    /// This hidden layer (ReLU, `drop`) and the output layer `next` after it as one op
    /// ([`lean::hidden_and_output`]) where this layer's product comes last on an input that
    /// needs no gradient (`agg` given, or `out >= in` over a constant `x`) and `next`
    /// multiplies first over `g_out`'s scaled GCN sum of `x`'s dtype; `None` (nothing run, no
    /// mask seed drawn) otherwise. With `loss`, the op returns the loss of the logits
    /// ([`lean::LossHead`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn forward_with_output(
        &self,
        next: &GcnConv,
        g: &ModelGraph,
        g_out: &ModelGraph,
        x: &Tensor,
        agg: Option<&Tensor>,
        drop: Option<(&mut DropoutRng, f32)>,
        loss: Option<lean::LossHead<'_>>,
    ) -> Result<Option<Tensor>> {
        let dt = agg.unwrap_or(x).dtype();
        let f = match g_out.fused_aggregation(Reduce::Sum, dt) {
            Some(f) if f.is_scaled_for(dt) && g_out.lean_layers() => f,
            _ => return Ok(None),
        };
        let input_tracks = agg.map_or(x.track_op(), |a| a.track_op());
        if !next.multiplies_first(None) || self.multiplies_first(agg) || input_tracks {
            return Ok(None);
        }
        let Some(a) = self.product_input(g, x, agg)? else {
            return Ok(None);
        };
        g_out.graph.record_form("layer", "gcn hidden+output");
        let (w1, b1) = (weight_like(&self.lin.weight, &a)?, like(&self.bias, &a)?);
        // The output layer's parameters in the activation's dtype (its input is `a · w1ᵀ`'s
        // width, so no padding columns).
        let (w2, b2) = (like(&next.lin.weight, &a)?, like(&next.bias, &a)?);
        Ok(Some(lean::hidden_and_output(
            g, g_out, f, &a, &w1, &b1, drop, &w2, &b2, loss,
        )?))
    }

    /// Whether the layer multiplies before it aggregates (no precomputed aggregation and
    /// `out < in`).
    pub(crate) fn multiplies_first(&self, agg: Option<&Tensor>) -> bool {
        agg.is_none() && !self.aggregates_first()
    }

    /// The input of the layer's product when the product comes last: `agg` (the precomputed
    /// aggregation of `x`), or `Â x` when `out >= in`; `None` when the layer multiplies first.
    fn product_input(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        agg: Option<&Tensor>,
    ) -> Result<Option<Tensor>> {
        let (out_dim, in_dim) = self.lin.weight.dims2()?;
        Ok(match agg {
            Some(a) => Some(a.clone()),
            None if out_dim >= in_dim => {
                let _t = g.phase(Phase::Aggregation);
                Some(g.aggregate(x, Reduce::Sum)?)
            }
            None => None,
        })
    }

    /// Whether the layer aggregates its input before its product (with no precomputed
    /// aggregation): `out >= in`.
    pub(crate) fn aggregates_first(&self) -> bool {
        let (o, i) = (self.out_dim(), self.lin.weight.dim(1).unwrap_or(0));
        o >= i
    }

    /// MaxK-GNN order: `A · dropout(MaxK(x W^T)) + b`, the aggregation over CBSR (SpGEMM, with
    /// the bias fused); with `residual`, `+ residual` fused as well (a residual hidden layer).
    /// Over an exact, whole graph, with no residual or `x` itself as the residual, the layer
    /// is one op from `x` to the output ([`gnn_kernels::MaxkProduct::aggregate`]): the product
    /// is not kept for the backward, and `x` gets one gradient instead of two summed through
    /// zero-filled buffers (and the product's own).
    pub fn forward_maxk(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        k: usize,
        drop: Option<(&mut DropoutRng, f32)>,
        residual: Option<&Tensor>,
    ) -> Result<Tensor> {
        let own_residual = match residual {
            None => Some(false),
            Some(r) if r.id() == x.id() => Some(true),
            Some(_) => None,
        };
        if let (Some((graph, values)), Some(res)) = (g.exact_operands(), own_residual) {
            let w = weight_like(&self.lin.weight, x)?;
            let z = {
                let _t = g.phase(Phase::Gemm);
                LinearProduct::new(x, &w)?
            };
            let mut m = {
                let _t = g.phase(Phase::Elementwise);
                z.maxk(k)?
            };
            if let Some((rng, p)) = drop {
                let _t = g.phase(Phase::Elementwise);
                m = rng.maxk_dropout(m, p)?;
            }
            let b = like(&self.bias, x)?;
            let _t = g.phase(Phase::Aggregation);
            return Ok(m.aggregate(graph, values, Reduce::Sum, &b, res)?);
        }
        let h = self.lin.forward_no_bias(g, x)?;
        let c = maxk_dropout(g, &h, k, drop)?;
        // The bias (and residual) ride in the SpGEMM's output (no separate adds).
        let _t = g.phase(Phase::Aggregation);
        let b = like(&self.bias, &h)?;
        match residual {
            Some(r) => g.aggregate_cbsr_bias_residual(&c, Reduce::Sum, &b, r),
            None => g.aggregate_cbsr_bias(&c, Reduce::Sum, &b),
        }
    }
}
