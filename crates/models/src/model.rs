//! A stack of convolutions with activation, optional LayerNorm and dropout between layers,
//! and its checkpoint format.
//!
//! Checkpoint: `<stem>.safetensors` holds the parameters (PyG names under `convs.<l>.` and
//! `norms.<l>.`) with the [`ModelConfig`] as JSON in the header metadata (key
//! `gnn.config`), and `<stem>.json` beside it repeats the config plus whatever the trainer
//! records (dataset, accuracy, command). Loading reads the config from the safetensors header,
//! so the weights file alone is enough.

use crate::config::{Activation, ConvKind, ModelConfig};
use crate::conv::{GatConv, GcnConv, GinConv, Linear, SageConv, TransformerConv};
use crate::dropout::DropoutRng;
use crate::error::{Error, Result};
use crate::graph::ModelGraph;
use crate::output::OutputRows;
use crate::params::{Init, ParamStore};
use crate::timer::Phase;
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::VarMap;
use gnn_kernels::Reduce;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One layer of a model.
enum Conv {
    Gcn(GcnConv),
    Sage(SageConv),
    Gin(GinConv),
    Gat(GatConv),
    Transformer(TransformerConv),
    Lin(Linear),
}

/// How a forward pass runs: training (dropout on) or evaluation. Where its time goes is
/// measured on the graph ([`ModelGraph::set_phase_timing`]).
pub struct Forward<'a> {
    /// Training mode: dropout active, the result differentiable; otherwise evaluation
    /// ([`Forward::eval`]).
    pub train: bool,
    /// Dropout masks (required when `train` and dropout > 0).
    pub rng: Option<&'a mut DropoutRng>,
    /// The first layer's aggregation of this input, from [`Gnn::input_aggregate`] on the same
    /// input and graph: the first layer then skips its sparse products (they are constant
    /// over epochs).
    pub input_aggregate: Option<&'a Tensor>,
    /// The rows of the output to compute (`None`: every node's); see [`crate::output`].
    pub output_rows: Option<&'a OutputRows>,
    /// The graph the output layer aggregates over, restricted to the rows it computes
    /// ([`ModelGraph::restricted_to_rows`]; `None`: the pass's graph); see
    /// [`Forward::with_output_graph`].
    pub output_graph: Option<&'a ModelGraph>,
    /// The aggregation the last hidden layer carried into the output layer holds the output
    /// rows alone (made by their [`OutputRows::aggregation`]): the output layer must not
    /// select them again. Set and read by [`Gnn::forward`] only.
    carried_rows: bool,
}

impl<'a> Forward<'a> {
    /// Evaluation mode: no dropout, and a result outside the autograd graph (each layer's
    /// output is detached, so the pass holds one layer's intermediates at a time). For
    /// gradients without dropout, train with dropout 0.
    pub fn eval() -> Self {
        Self {
            train: false,
            rng: None,
            input_aggregate: None,
            output_rows: None,
            output_graph: None,
            carried_rows: false,
        }
    }
    /// Training mode with dropout from `rng`.
    pub fn train(rng: &'a mut DropoutRng) -> Self {
        Self {
            train: true,
            rng: Some(rng),
            input_aggregate: None,
            output_rows: None,
            output_graph: None,
            carried_rows: false,
        }
    }
    /// The same pass, with the first layer reading `agg` (see [`Gnn::input_aggregate`]) when
    /// given.
    pub fn with_input_aggregate(mut self, agg: Option<&'a Tensor>) -> Self {
        self.input_aggregate = agg;
        self
    }
    /// The same pass, computing the output layer for `rows` only when given: the logits are
    /// then `[rows.len(), out_dim]`, row `i` node `rows[i]`'s.
    pub fn with_output_rows(mut self, rows: Option<&'a OutputRows>) -> Self {
        self.output_rows = rows;
        self
    }
    /// The same pass, its output layer aggregating over `graph` when given: the pass's graph
    /// restricted to some rows ([`ModelGraph::restricted_to_rows`]), whose logits alone it
    /// then computes (`[graph's rows, out_dim]`, row `i` the `i`-th restricted row's), its
    /// sparse products and their backward over those rows' edges only. For a training pass
    /// whose loss reads only those rows (the train nodes'); a model that cannot
    /// ([`Gnn::computes_output_on_restricted_graph`]) refuses the pass, as does one also given
    /// output rows.
    pub fn with_output_graph(mut self, graph: Option<&'a ModelGraph>) -> Self {
        self.output_graph = graph;
        self
    }
}

/// What [`Gnn::forward_offering_loss`] returns.
#[derive(Debug)]
pub enum PassOutput {
    /// The loss (a scalar f32), taken into the op that made the logits.
    Loss(Tensor),
    /// The logits, as [`Gnn::forward`] returns them: the caller takes their loss.
    Logits(Tensor),
}

/// Dropout at rate `p` for a layer to apply itself (MaxK's kept values, attention
/// coefficients): `Some` when training with `p > 0`, an error if training has no rng.
fn layer_dropout(
    rng: Option<&mut DropoutRng>,
    train: bool,
    p: f32,
) -> Result<Option<(&mut DropoutRng, f32)>> {
    match (train && p > 0.0, rng) {
        (true, Some(rng)) => Ok(Some((rng, p))),
        (true, None) => Err(Error::Config("training forward needs a dropout rng".into())),
        (false, _) => Ok(None),
    }
}

/// The header (tensor names, shapes, metadata) of the safetensors file `st`; the error text
/// is the problem alone, for the caller to wrap with the path.
fn read_header(st: &Path) -> std::result::Result<safetensors::tensor::Metadata, String> {
    let bytes = std::fs::read(st).map_err(|e| e.to_string())?;
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes)
        .map_err(|e| format!("not a safetensors file: {e}"))?;
    Ok(meta)
}

/// `(<stem>.safetensors, <stem>.json)`; a `.safetensors`/`.json` suffix on `path` is dropped
/// first, other dots are kept (`gcn-reddit@0.05` stays whole).
fn checkpoint_paths(path: &Path) -> (PathBuf, PathBuf) {
    let s = path.to_string_lossy();
    let stem = s
        .strip_suffix(".safetensors")
        .or_else(|| s.strip_suffix(".json"))
        .unwrap_or(&s);
    (
        PathBuf::from(format!("{stem}.safetensors")),
        PathBuf::from(format!("{stem}.json")),
    )
}

/// LayerNorm over the feature dimension, built from differentiable tensor ops.
///
/// candle-nn 0.11's `LayerNorm` takes a fused kernel for contiguous inputs that records no
/// backward (`apply_op3_no_bwd`), which would silently cut the gradient to every earlier
/// layer; this one is differentiable end to end.
pub(crate) struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f64,
}

impl LayerNorm {
    /// `weight` (ones) and `bias` (zeros) of width `dim` under `store`, eps 1e-5 (torch's).
    pub(crate) fn new(dim: usize, store: &ParamStore) -> Result<Self> {
        Ok(Self {
            weight: store.get("weight", &[dim], Init::Ones)?,
            bias: store.get("bias", &[dim], Init::Zeros)?,
            eps: 1e-5,
        })
    }

    /// One fused op each way ([`gnn_kernels::layer_norm`]): statistics in fp32 whatever the
    /// storage dtype (a bf16 row sum of 256 values would lose the mean's low bits), the result
    /// in `x`'s dtype; the parameters stay f32 (f64 for f64 input).
    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let pd = if x.dtype() == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        Ok(gnn_kernels::layer_norm(
            x,
            &self.weight.to_dtype(pd)?,
            &self.bias.to_dtype(pd)?,
            self.eps,
        )?)
    }
}

/// What [`Gnn::load_pyg_with`] cannot read off a PyG state_dict's tensor shapes.
#[derive(Debug, Clone, Copy, Default)]
pub struct PygLayout {
    /// Heads of the hidden attention layers (required for `TransformerConv`; checked for
    /// `GATConv`, whose `att_src` holds it).
    pub heads: Option<usize>,
    /// Non-linearity between layers (default: ELU for GAT, ReLU otherwise).
    pub activation: Option<Activation>,
}

/// A GCN / GraphSAGE / GIN / GAT / graph-transformer / MLP model.
pub struct Gnn {
    cfg: ModelConfig,
    convs: Vec<Conv>,
    norms: Vec<LayerNorm>,
    varmap: VarMap,
}

impl Gnn {
    /// Builds a model with seeded initial parameters on `device`.
    pub fn new(cfg: ModelConfig, device: &Device, seed: u64) -> Result<Self> {
        cfg.validate()?;
        let varmap = VarMap::new();
        let store = ParamStore::new(varmap.clone(), device, seed);
        let mut convs = Vec::with_capacity(cfg.layers);
        let mut norms = Vec::new();
        for l in 0..cfg.layers {
            let (i, o) = cfg.layer_dims(l);
            let s = store.pp("convs").pp(l);
            convs.push(match cfg.kind {
                ConvKind::Gcn => Conv::Gcn(GcnConv::new(i, o, &s)?),
                ConvKind::SageMean => Conv::Sage(SageConv::new(i, o, false, &s)?),
                ConvKind::SagePool => Conv::Sage(SageConv::new(i, o, true, &s)?),
                ConvKind::Gin => Conv::Gin(GinConv::new(i, cfg.hidden, o, cfg.mlp_norm, &s)?),
                ConvKind::Gat if l + 1 < cfg.layers => {
                    Conv::Gat(GatConv::new(i, o / cfg.heads, cfg.heads, true, &s)?)
                }
                ConvKind::Gat => Conv::Gat(GatConv::new(i, o, 1, false, &s)?),
                ConvKind::Transformer if l + 1 < cfg.layers => {
                    Conv::Transformer(TransformerConv::new(i, o / cfg.heads, cfg.heads, true, &s)?)
                }
                ConvKind::Transformer => {
                    Conv::Transformer(TransformerConv::new(i, o, 1, false, &s)?)
                }
                ConvKind::Mlp => Conv::Lin(Linear::torch_default(i, o, true, &s)?),
            });
            if cfg.layer_norm && l + 1 < cfg.layers {
                norms.push(LayerNorm::new(o, &store.pp("norms").pp(l))?);
            }
        }
        Ok(Self {
            cfg,
            convs,
            norms,
            varmap,
        })
    }

    /// The first layer's neighbourhood aggregation of the input `x`, to compute once and pass
    /// to every forward over the same `x` and graph ([`Forward::with_input_aggregate`]):
    /// `Â x` for GCN, the neighbour mean for GraphSAGE-mean, the neighbour sum for GIN. The
    /// input does not change between epochs, and these layers are linear in it before their
    /// first non-linearity (`Â (x W) = (Â x) W`), so the first layer's sparse products, forward
    /// and backward, become one product done once. Exact up to rounding.
    ///
    /// `None` where that does not hold: input dropout (a new mask every epoch), MaxK (its
    /// first layer selects before aggregating), sampled aggregation, and the other layer types.
    pub fn input_aggregate(&self, g: &ModelGraph, x: &Tensor) -> Result<Option<Tensor>> {
        match self.input_aggregate_reduce(g) {
            Some(reduce) => Ok(Some(g.aggregate(&x.detach(), reduce)?.detach())),
            None => Ok(None),
        }
    }

    /// The reduction [`Self::input_aggregate`] applies over `g`, `None` when it does not apply.
    pub fn input_aggregate_reduce(&self, g: &ModelGraph) -> Option<gnn_kernels::Reduce> {
        let reduce = match self.cfg.kind {
            ConvKind::Gcn | ConvKind::Gin => gnn_kernels::Reduce::Sum,
            ConvKind::SageMean => gnn_kernels::Reduce::Mean,
            _ => return None,
        };
        let maxk = matches!(self.cfg.activation, Activation::MaxK { .. })
            && self.cfg.layers > 1
            && !self.cfg.maxk_after_first;
        (self.cfg.input_dropout == 0.0 && !maxk && g.aggregation == crate::Aggregation::Exact)
            .then_some(reduce)
    }

    /// The configuration.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// All trainable variables, by name.
    pub fn named_vars(&self) -> Vec<(String, Var)> {
        let data = self.varmap.data().lock().expect("VarMap lock poisoned");
        let mut v: Vec<(String, Var)> = data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Number of scalar parameters.
    pub fn num_params(&self) -> usize {
        self.named_vars().iter().map(|(_, v)| v.elem_count()).sum()
    }

    /// Logits `[N, out_dim]` for every node (`[M, out_dim]` for the `M` rows of
    /// [`Forward::with_output_rows`], when given). `g` is also the pass's context: its clock times
    /// the phases when on ([`ModelGraph::set_phase_timing`]).
    pub fn forward(&self, g: &ModelGraph, x: &Tensor, ctx: &mut Forward<'_>) -> Result<Tensor> {
        // Offered no loss, the pass returns its logits.
        let (PassOutput::Logits(y) | PassOutput::Loss(y)) = self.pass(g, x, ctx, None)?;
        Ok(y)
    }

    /// A training pass that offers its loss to the op making the logits: the masked
    /// cross-entropy ([`gnn_kernels::masked_cross_entropy`]) of [`Gnn::forward`]'s logits
    /// against `labels` (`[rows]` u32) with row weights `weight` (`[rows]` f32), one per
    /// logits row. Where the pass runs its last hidden layer and the output layer as one op
    /// (a training pass of a lean GCN or GraphSAGE-mean), the loss joins that op
    /// ([`PassOutput::Loss`]): the logits' gradient then goes straight to the op's backward,
    /// where candle would add it into a zero-filled `[rows, classes]` tensor first (a fill and
    /// an add, 28 us of a 3.1 ms GCN 2x128 bf16 epoch on an H200). Otherwise the logits
    /// ([`PassOutput::Logits`]), whose loss the caller takes. The loss and the gradients are
    /// the same either way.
    pub fn forward_offering_loss(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        ctx: &mut Forward<'_>,
        labels: &Tensor,
        weight: &Tensor,
    ) -> Result<PassOutput> {
        let head = crate::conv::lean::LossHead { labels, weight };
        self.pass(g, x, ctx, Some(head))
    }

    /// [`Gnn::forward`], offering `loss` to the op that makes the logits: the loss where that
    /// op took it, else the logits.
    fn pass(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        ctx: &mut Forward<'_>,
        loss: Option<crate::conv::lean::LossHead<'_>>,
    ) -> Result<PassOutput> {
        if ctx.train && g.aggregation != crate::Aggregation::Exact {
            return Err(Error::Config(format!(
                "{} aggregation is for inference only (it has no backward); train with exact",
                g.aggregation
            )));
        }
        let cols = x.dim(candle_core::D::Minus1)?;
        if !self.cfg.accepts_input_width(cols) {
            let (d, a) = (self.cfg.in_dim, crate::aligned_width(self.cfg.in_dim));
            let padded = if a > d {
                format!(" (or {a}, zero-padded)")
            } else {
                String::new()
            };
            return Err(Error::Config(format!(
                "input rows are {cols} wide; the model takes {d} features{padded}"
            )));
        }
        let mut h = x.clone();
        if let Some((rng, p)) =
            layer_dropout(ctx.rng.as_deref_mut(), ctx.train, self.cfg.input_dropout)?
        {
            let _t = g.phase(Phase::Elementwise);
            h = if cols > self.cfg.in_dim {
                // Padded features: the unpadded features' mask (masks are a function of the
                // stream and the element index alone, the same on every device), then the
                // zero columns again for the aligned products.
                let logical = h.narrow(1, 0, self.cfg.in_dim)?.contiguous()?;
                rng.dropout(&logical, p)?
                    .pad_with_zeros(1, 0, cols - self.cfg.in_dim)?
            } else {
                rng.dropout(&h, p)?
            };
        }
        let last = self.convs.len() - 1;
        let out_graph = ctx.output_graph;
        if out_graph.is_some() {
            if !self.computes_output_on_restricted_graph() {
                return Err(Error::Config(format!(
                    "a {}-layer {} model cannot compute its output layer on a restricted graph \
                     (GCN, GraphSAGE and GIN of two layers or more only)",
                    self.convs.len(),
                    self.cfg.kind
                )));
            }
            if ctx.output_rows.is_some() {
                return Err(Error::Config(
                    "a pass takes output rows or a restricted output graph, not both".into(),
                ));
            }
        }
        // A layer's aggregation of its input made by the layer before it (a lean GCN layer:
        // see `fused_into_next`).
        let mut carried: Option<Tensor> = None;
        ctx.carried_rows = false;
        for l in 0..=last {
            // Residual: a hidden layer whose input and output widths match adds its input
            // to its output (after activation and dropout), as PyG's DeepGCNLayer "res".
            let mut skip = (self.cfg.residual && l > 0 && l < last).then(|| h.clone());
            let given = if l == 0 {
                ctx.input_aggregate.cloned()
            } else {
                carried.take()
            };
            if let Some((Conv::Gcn(c), next)) =
                self.fused_into_next(l, g, out_graph, &h, ctx.output_rows)
            {
                let drop = layer_dropout(ctx.rng.as_deref_mut(), ctx.train, self.cfg.dropout)?;
                let act = crate::conv::lean::Act::Relu(drop);
                let rows_only = next.is_selected();
                if let Some(a) = c.forward_lean(g, &h, given.as_ref(), act, Some(next))? {
                    // Layer l + 1 reads only this aggregation of layer l's output (given as
                    // its precomputed aggregation), so the output itself is never made: `h`
                    // stands in for it with the same shape (the output rows' alone where the
                    // aggregation was of those rows).
                    let a = if ctx.train { a } else { a.detach() };
                    h = a.clone();
                    carried = Some(a);
                    ctx.carried_rows = rows_only;
                    continue;
                }
            }
            // A training pass's last hidden GCN or GraphSAGE layer and the output layer as one
            // op (no zero-filled accumulation of the hidden layer's output gradient).
            if ctx.train && l + 1 == last && ctx.output_rows.is_none() {
                let g_out = out_graph.unwrap_or(g);
                if let Some(y) =
                    self.hidden_and_output(l, g, g_out, &h, given.as_ref(), ctx, loss)?
                {
                    return Ok(match loss {
                        Some(_) => PassOutput::Loss(y),
                        None => PassOutput::Logits(y),
                    });
                }
            }
            // The output layer over the restricted graph when the pass has one.
            let gl = match out_graph {
                Some(o) if l == last => o,
                _ => g,
            };
            h = self.layer(l, gl, h, given.as_ref(), &mut skip, ctx)?;
            if let Some(s) = skip.filter(|s| s.dims() == h.dims()) {
                let _t = g.phase(Phase::Elementwise);
                h = (h + s)?;
            }
            if !ctx.train {
                // Nothing differentiates an evaluation: cut the graph so that this layer's
                // intermediates are freed now, not when the caller drops the logits (the
                // whole pass's activations were otherwise alive at once).
                h = h.detach();
            }
        }
        Ok(PassOutput::Logits(h))
    }

    /// Where hidden GCN layer `l`'s output is read only by layer `l + 1`'s aggregation of it,
    /// over a partitioned graph with the fused symmetric aggregation: that aggregation, for
    /// the lean op that runs layer `l` and it together and keeps the mask of layer `l`'s
    /// activation instead of the activation ([`GcnConv::forward_lean`]).
    /// ReLU layers without residuals or LayerNorm whose next layer aggregates first (and is
    /// the output layer or another ReLU layer); `None` otherwise. Where the next layer is the
    /// output layer and its `rows` carry their own aggregation ([`OutputRows::aggregation`]),
    /// that one: the aggregation of the output rows alone; where the pass has a restricted
    /// output graph (`out`, [`Forward::with_output_graph`]), that graph's.
    fn fused_into_next(
        &self,
        l: usize,
        g: &ModelGraph,
        out: Option<&ModelGraph>,
        h: &Tensor,
        rows: Option<&OutputRows>,
    ) -> Option<(&Conv, crate::graph::FusedAggregation)> {
        let last = self.convs.len() - 1;
        if !self.fuses_into_next(l) {
            return None;
        }
        let next = match out {
            Some(o) if l + 1 == last => o,
            _ => g,
        };
        let whole = next.fused_aggregation(gnn_kernels::Reduce::Sum, h.dtype())?;
        let agg = match rows.and_then(OutputRows::aggregation) {
            Some(selected) if l + 1 == last => {
                crate::graph::FusedAggregation::selected(selected.clone())
            }
            _ => whole,
        };
        Some((&self.convs[l], agg))
    }

    /// Hidden layer `l` (ReLU, no residual or LayerNorm) and the output layer after it as one
    /// op: GCN's ([`GcnConv::forward_with_output`]: this layer's product comes last on an
    /// input that needs no gradient, the output layer multiplies first over `g_out`'s scaled
    /// sum) and GraphSAGE-mean's ([`SageConv::forward_with_output`]: over the cached mean of
    /// a constant input, the output layer multiplying first); `None`, with nothing run,
    /// where that does not apply. With `loss`, the op returns the loss of the logits.
    #[allow(clippy::too_many_arguments)]
    fn hidden_and_output(
        &self,
        l: usize,
        g: &ModelGraph,
        g_out: &ModelGraph,
        h: &Tensor,
        agg: Option<&Tensor>,
        ctx: &mut Forward<'_>,
        loss: Option<crate::conv::lean::LossHead<'_>>,
    ) -> Result<Option<Tensor>> {
        if self.cfg.residual
            || self.norms.get(l).is_some()
            || self.activation(l) != Activation::Relu
        {
            return Ok(None);
        }
        // Lent, not drawn: a layer that does not run the op draws no mask seed.
        let drop = layer_dropout(ctx.rng.as_deref_mut(), ctx.train, self.cfg.dropout)?;
        match (self.convs.get(l), self.convs.get(l + 1)) {
            (Some(Conv::Gcn(c)), Some(Conv::Gcn(next))) => {
                c.forward_with_output(next, g, g_out, h, agg, drop, loss)
            }
            (Some(Conv::Sage(c)), Some(Conv::Sage(next))) => {
                c.forward_with_output(next, g, g_out, h, agg, drop, loss)
            }
            _ => Ok(None),
        }
    }

    /// The model's part of [`Self::fused_into_next`]'s conditions for layer `l` (the graph's
    /// is its fused aggregation).
    fn fuses_into_next(&self, l: usize) -> bool {
        let last = self.convs.len() - 1;
        let plain = self.cfg.kind == ConvKind::Gcn
            && l < last
            && !self.cfg.residual
            && self.norms.is_empty()
            && self.activation(l) == Activation::Relu
            && (l + 1 == last || self.activation(l + 1) == Activation::Relu);
        plain && matches!(self.convs.get(l + 1), Some(Conv::Gcn(next)) if next.aggregates_first())
    }

    /// Whether a training pass over a partitioned graph with the fused symmetric aggregation
    /// may run its output layer's aggregation for the output rows alone
    /// ([`OutputRows::with_aggregation`]): a GCN whose last hidden layer fuses with the output
    /// layer's aggregation (ReLU, no residual or LayerNorm, the output layer aggregating
    /// first) and gives that op the input of its product (it aggregates first too, or is
    /// the first layer, which may read the cached aggregation of the input). Where this is
    /// false, an aggregation carried by the output rows is never called.
    pub fn fuses_output_aggregation(&self) -> bool {
        let Some(l) = self.convs.len().checked_sub(2) else {
            return false;
        };
        let feeds = match &self.convs[l] {
            Conv::Gcn(c) => l == 0 || c.aggregates_first(),
            _ => false,
        };
        feeds && self.fuses_into_next(l)
    }

    /// Whether a pass may compute the output layer over a graph restricted to some rows
    /// ([`Forward::with_output_graph`]): a GCN, GraphSAGE (mean or pool) or GIN of two layers
    /// or more. A GCN layer reads the graph only through its aggregation; a GraphSAGE layer's
    /// root term and GIN's `(1 + eps) x` take the restricted rows of their input
    /// ([`ModelGraph::restricted_to_rows`]). Not the attention layers (their scores); not a
    /// one-layer model, whose output layer may read the cached aggregation of every row.
    pub fn computes_output_on_restricted_graph(&self) -> bool {
        matches!(
            self.cfg.kind,
            ConvKind::Gcn | ConvKind::SageMean | ConvKind::SagePool | ConvKind::Gin
        ) && self.convs.len() >= 2
    }

    /// Whether a training pass over a partitioned graph may run its output layer's mean
    /// aggregation for the output rows alone (a [`gnn_comm::SelectedAggregation`] whose
    /// values are `1/deg` of each row: `mean_j x_j = Σ_j x_j / deg`): a GraphSAGE-mean model
    /// of two layers or more without MaxK whose output layer aggregates its input first
    /// (`out >= in`). The output layer then reads that aggregation instead of aggregating
    /// every row and selecting (its root term still takes the rows' own `x`).
    pub fn selects_mean_output_aggregation(&self) -> bool {
        let Some(Conv::Sage(c)) = self.convs.last() else {
            return false;
        };
        self.convs.len() >= 2
            && c.is_mean()
            && c.aggregates_first()
            && !matches!(self.cfg.activation, Activation::MaxK { .. })
    }

    /// The activation after layer `l`: ReLU for the first layer of a MaxK-after-first model.
    fn activation(&self, l: usize) -> Activation {
        match self.cfg.activation {
            Activation::MaxK { .. } if l == 0 && self.cfg.maxk_after_first => Activation::Relu,
            a => a,
        }
    }

    /// Layer `l` with its norm, activation and dropout (the output layer has none); `agg`: the
    /// layer's aggregation of `h`, precomputed (first layer only); `skip`: the residual to add
    /// to the output, which a GCN layer may fuse (MaxK: into its SpGEMM; ReLU: into its
    /// aggregate-first epilogue), leaving `None`; the
    /// caller adds what is left.
    fn layer(
        &self,
        l: usize,
        g: &ModelGraph,
        h: Tensor,
        agg: Option<&Tensor>,
        skip: &mut Option<Tensor>,
        ctx: &mut Forward<'_>,
    ) -> Result<Tensor> {
        let conv = &self.convs[l];
        let last = l + 1 == self.convs.len();
        if last {
            if let Some(rows) = ctx.output_rows.take() {
                let y = self.output_layer_on(rows, l, g, h, agg, skip, ctx);
                ctx.output_rows = Some(rows);
                return y;
            }
        }
        let activation = self.activation(l);
        if let (Activation::MaxK { k }, false) = (activation, last) {
            return self.layer_maxk(l, g, h, k, skip, ctx);
        }
        // The output layer's lean form on a partitioned graph: its products, aggregation and
        // bias as one op (conv::lean).
        if last && g.lean_layers() {
            let bias = crate::conv::lean::Act::Bias;
            let lean = match conv {
                Conv::Gcn(c) => c.forward_lean(g, &h, agg, bias, None)?,
                Conv::Sage(c) => c.forward_lean(g, &h, agg, bias)?,
                _ => None,
            };
            if let Some(y) = lean {
                return Ok(y);
            }
        }
        // GCN and GraphSAGE hand back their bias, to ride in the activation's pass when ReLU
        // follows directly (no LayerNorm in between).
        let fuse = !last && self.norms.get(l).is_none() && activation == Activation::Relu;
        if fuse && g.lean_layers() {
            // The hidden layer's lean form: GraphSAGE's always, GCN's where it multiplies
            // first (a GCN layer whose product comes last keeps no more in its composed form).
            let drop = layer_dropout(ctx.rng.as_deref_mut(), ctx.train, self.cfg.dropout)?;
            let act = crate::conv::lean::Act::Relu(drop);
            let lean = match conv {
                Conv::Sage(c) => c.forward_lean(g, &h, agg, act)?,
                Conv::Gcn(c) if c.multiplies_first(agg) => c.forward_lean(g, &h, agg, act, None)?,
                _ => None,
            };
            if let Some(y) = lean {
                return Ok(y);
            }
        }
        if let (Conv::Gcn(c), true) = (conv, fuse) {
            let drop = layer_dropout(ctx.rng.as_deref_mut(), ctx.train, self.cfg.dropout)?;
            return c.forward_relu_dropout(g, &h, agg, drop, skip);
        }
        let unbiased = match conv {
            Conv::Sage(c) if fuse => Some(c.forward_unbiased(g, &h, agg)?),
            _ => None,
        };
        if let Some((y, b)) = unbiased {
            let drop = layer_dropout(ctx.rng.as_deref_mut(), ctx.train, self.cfg.dropout)?;
            return crate::conv::bias_relu_dropout(g, &y, &b, drop);
        }
        // A hidden GAT layer: its bias, ELU and dropout in one op each way (the attention
        // dropout is drawn inside the layer first, as in the composed order).
        if let (Conv::Gat(c), false, Activation::Elu, None) =
            (conv, last, activation, self.norms.get(l))
        {
            let att = layer_dropout(ctx.rng.as_deref_mut(), ctx.train, self.cfg.att_dropout)?;
            let (y, b) = c.forward_unbiased(g, &h, att)?;
            let drop = layer_dropout(ctx.rng.as_deref_mut(), ctx.train, self.cfg.dropout)?;
            let _t = g.phase(Phase::Elementwise);
            return match drop {
                Some((rng, p)) => rng.bias_elu_dropout(&y, &b, p),
                None => Ok(gnn_kernels::bias_elu_dropout(&y, &b, 0.0, 0)?),
            };
        }
        let mut h = match conv {
            Conv::Gcn(c) => c.forward(g, &h, agg)?,
            Conv::Sage(c) => c.forward(g, &h, agg)?,
            Conv::Gin(c) => c.forward(g, &h, agg)?,
            Conv::Gat(c) => {
                let drop = layer_dropout(ctx.rng.as_deref_mut(), ctx.train, self.cfg.att_dropout)?;
                c.forward(g, &h, drop)?
            }
            Conv::Transformer(c) => {
                let drop = layer_dropout(ctx.rng.as_deref_mut(), ctx.train, self.cfg.att_dropout)?;
                c.forward(g, &h, drop)?
            }
            Conv::Lin(c) => c.forward(g, &h)?,
        };
        if last {
            return Ok(h);
        }
        if let Some(norm) = self.norms.get(l) {
            let _t = g.phase(Phase::Elementwise);
            h = norm.forward(&h)?;
        }
        let drop = layer_dropout(ctx.rng.as_deref_mut(), ctx.train, self.cfg.dropout)?;
        let _t = g.phase(Phase::Elementwise);
        match (activation, drop) {
            // Training's hidden activation: ReLU and dropout in one pass each way.
            (Activation::Relu, Some((rng, p))) => rng.relu_dropout(&h, p),
            (activation, drop) => {
                h = match activation {
                    Activation::Relu => h.relu()?,
                    Activation::Elu => h.elu(1.0)?,
                    // Applied inside each layer but the last (above); never reached.
                    Activation::MaxK { .. } => h,
                };
                match drop {
                    Some((rng, p)) => rng.dropout(&h, p),
                    None => Ok(h),
                }
            }
        }
    }

    /// Output layer `l` for `rows` only ([`crate::output`]): a GCN or GraphSAGE-mean layer
    /// that aggregates before its products selects the aggregation's rows (and GraphSAGE its
    /// input's) and multiplies those; any other layer runs whole and its output's rows are
    /// selected.
    #[allow(clippy::too_many_arguments)]
    fn output_layer_on(
        &self,
        rows: &OutputRows,
        l: usize,
        g: &ModelGraph,
        h: Tensor,
        agg: Option<&Tensor>,
        skip: &mut Option<Tensor>,
        ctx: &mut Forward<'_>,
    ) -> Result<Tensor> {
        let select = |t: &Tensor| {
            let _t = g.phase(Phase::Aggregation);
            rows.select(t)
        };
        let aggregate = |reduce: Reduce| -> Result<Tensor> {
            match agg {
                Some(a) => Ok(a.clone()),
                None => {
                    let _t = g.phase(Phase::Aggregation);
                    g.aggregate(&h, reduce)
                }
            }
        };
        // The aggregation the layer before made of these rows alone (`Forward::carried_rows`).
        let carried_rows = std::mem::take(&mut ctx.carried_rows);
        match &self.convs[l] {
            Conv::Gcn(c) if carried_rows || agg.is_some() || c.aggregates_first() => {
                let a = if carried_rows {
                    agg.cloned().ok_or_else(|| {
                        Error::Config("the output rows' aggregation was not carried".into())
                    })?
                } else {
                    select(&aggregate(Reduce::Sum)?)?
                };
                if g.lean_layers() {
                    let bias = crate::conv::lean::Act::Bias;
                    if let Some(y) = c.forward_lean(g, &a, Some(&a), bias, None)? {
                        return Ok(y);
                    }
                }
                c.forward(g, &a, Some(&a))
            }
            // A GraphSAGE-mean layer that would multiply first aggregates first here too when
            // its whole rows' two products would pass the element limit.
            Conv::Sage(c)
                if c.is_mean()
                    && (c.aggregates_first()
                        || agg.is_some()
                        || crate::output::products_pass_limit(h.dim(0)?, c.out_dim())) =>
            {
                let a = match rows.aggregation() {
                    // The rows' own mean, collective on every rank (see
                    // `selects_mean_output_aggregation`); the cached input aggregation of a
                    // one-layer model never comes here with one.
                    Some(sel) if agg.is_none() && c.aggregates_first() => {
                        let _t = g.phase(Phase::Aggregation);
                        selected_mean(sel, &h)?
                    }
                    _ => select(&aggregate(Reduce::Mean)?)?,
                };
                let h = select(&h)?;
                if g.lean_layers() {
                    let bias = crate::conv::lean::Act::Bias;
                    if let Some(y) = c.forward_lean(g, &h, Some(&a), bias)? {
                        return Ok(y);
                    }
                }
                c.forward(g, &h, Some(&a))
            }
            _ => select(&self.layer(l, g, h, agg, skip, ctx)?),
        }
    }

    /// Hidden layer `l` of a MaxK model: linear -> MaxK -> dropout -> aggregation inside the
    /// layer; nothing after it but the optional LayerNorm.
    fn layer_maxk(
        &self,
        l: usize,
        g: &ModelGraph,
        mut h: Tensor,
        k: usize,
        skip: &mut Option<Tensor>,
        ctx: &mut Forward<'_>,
    ) -> Result<Tensor> {
        let conv = &self.convs[l];
        let drop = layer_dropout(ctx.rng.as_deref_mut(), ctx.train, self.cfg.dropout)?;
        // Without LayerNorm a GCN layer takes the residual into its SpGEMM when the widths
        // match (output rows = this graph's rows, width = the layer's out).
        let fits = match (conv, skip.as_ref()) {
            (Conv::Gcn(c), Some(s)) => {
                self.norms.get(l).is_none() && s.dims() == [g.graph.n_rows(), c.out_dim()]
            }
            _ => false,
        };
        let residual = if fits { skip.take() } else { None };
        h = match conv {
            Conv::Gcn(c) => c.forward_maxk(g, &h, k, drop, residual.as_ref())?,
            Conv::Sage(c) => c.forward_maxk(g, &h, k, drop)?,
            Conv::Gin(c) => c.forward_maxk(g, &h, k, drop)?,
            Conv::Lin(_) | Conv::Gat(_) | Conv::Transformer(_) => {
                return Err(Error::Config("MaxK needs a graph convolution".into()))
            }
        };
        match self.norms.get(l) {
            Some(norm) => {
                let _t = g.phase(Phase::Elementwise);
                norm.forward(&h)
            }
            None => Ok(h),
        }
    }

    /// Writes `<stem>.safetensors` (weights + config in the header) and `<stem>.json`
    /// (config + `info`). Returns the two paths.
    pub fn save(
        &self,
        stem: impl AsRef<Path>,
        info: serde_json::Value,
    ) -> Result<(PathBuf, PathBuf)> {
        let (st, js) = checkpoint_paths(stem.as_ref());
        if let Some(dir) = st.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::Checkpoint {
                path: dir.to_path_buf(),
                problem: e.to_string(),
            })?;
        }
        let cfg = serde_json::to_string(&self.cfg).map_err(|e| Error::Config(e.to_string()))?;
        let meta = HashMap::from([
            ("gnn.config".to_string(), cfg),
            ("format".to_string(), "gnn-v1".to_string()),
        ]);
        let vars = self.named_vars();
        let tensors: Vec<(String, Tensor)> = vars
            .into_iter()
            .map(|(k, v)| (k, v.as_tensor().clone()))
            .collect();
        safetensors::serialize_to_file(
            tensors.iter().map(|(k, t)| (k.as_str(), t)),
            Some(meta),
            &st,
        )
        .map_err(|e| Error::Checkpoint {
            path: st.clone(),
            problem: e.to_string(),
        })?;
        let doc = serde_json::json!({ "config": self.cfg, "weights": st.file_name().map(|s| s.to_string_lossy()), "info": info });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| Error::Config(e.to_string()))?;
        std::fs::write(&js, text + "\n").map_err(|e| Error::Checkpoint {
            path: js.clone(),
            problem: e.to_string(),
        })?;
        Ok((st, js))
    }

    /// Loads the weights of a PyG model of layer type `kind` saved with `safetensors.torch`
    /// (`save_file(model.state_dict(), path)`), for inference. The model must be a stack of
    /// PyG convolutions in a `convs` `ModuleList`, the shape this engine builds: `GCNConv`
    /// (`convs.<l>.lin.weight`, `convs.<l>.bias`), `SAGEConv` (`lin_l.weight`, `lin_l.bias`,
    /// `lin_r.weight`) or `GINConv` with `nn = Sequential(Linear, ReLU, Linear)` (`eps`,
    /// `nn.0.*`, `nn.2.*`), with ReLU between layers; `GATConv` (`lin.weight`, `att_src`,
    /// `att_dst`, `bias`; hidden layers `heads` heads concatenated, the last one head with
    /// `concat=False`) with ELU between layers, as the GAT paper. Widths, depth and GAT's heads
    /// are read from the tensor shapes; any tensor the model does not use (a BatchNorm, a head)
    /// is an error naming it, since ignoring it would change the model. Dropout is 0.
    /// `TransformerConv` stacks need their head count, which no tensor shape holds: use
    /// [`Gnn::load_pyg_with`].
    pub fn load_pyg(path: impl AsRef<Path>, kind: ConvKind, device: &Device) -> Result<Self> {
        Self::load_pyg_with(path, kind, PygLayout::default(), device)
    }

    /// [`Gnn::load_pyg`] with the wiring a PyG state_dict cannot say: the hidden layers' head
    /// count (required for `TransformerConv`: hidden layers `heads` heads concatenated, the last
    /// one head with `concat=False`, `root_weight=True`, `beta=False`; checked against the
    /// tensors for `GATConv`) and the activation between layers (default ReLU, ELU for GAT).
    pub fn load_pyg_with(
        path: impl AsRef<Path>,
        kind: ConvKind,
        layout: PygLayout,
        device: &Device,
    ) -> Result<Self> {
        let st = path.as_ref().to_path_buf();
        let bad = |problem: String| Error::Checkpoint {
            path: st.clone(),
            problem,
        };
        let meta = read_header(&st).map_err(bad)?;
        let shapes: HashMap<String, Vec<usize>> = meta
            .tensors()
            .iter()
            .map(|(k, t)| (k.clone(), t.shape.clone()))
            .collect();
        let layers = (0..)
            .take_while(|l| shapes.keys().any(|k| k.starts_with(&format!("convs.{l}."))))
            .count();
        if layers == 0 {
            return Err(bad(
                "no `convs.0.*` tensors: expected a PyG model whose convolutions are in a \
                 `convs` ModuleList"
                    .into(),
            ));
        }
        let (first, last) = match kind {
            ConvKind::Gcn | ConvKind::Gat => ("lin.weight", "lin.weight"),
            ConvKind::SageMean | ConvKind::SagePool => ("lin_l.weight", "lin_l.weight"),
            ConvKind::Gin => ("nn.0.weight", "nn.2.weight"),
            ConvKind::Transformer => ("lin_query.weight", "lin_query.weight"),
            ConvKind::Mlp => {
                return Err(bad(format!(
                    "loading PyG weights of a {kind} model is not supported; load GCN, SAGE, \
                     GIN, GAT or TransformerConv stacks"
                )))
            }
        };
        let heads = match (kind, layout.heads) {
            (ConvKind::Gat, given) if layers > 1 => {
                let h = match shapes.get("convs.0.att_src").map(Vec::as_slice) {
                    Some(&[1, h, _]) => h,
                    Some(s) => {
                        return Err(bad(format!(
                            "`convs.0.att_src` has shape {s:?}, expected [1, heads, channels]"
                        )))
                    }
                    None => {
                        return Err(bad(
                            "missing tensor `convs.0.att_src` for a gat model".into()
                        ))
                    }
                };
                if let Some(g) = given.filter(|&g| g != h) {
                    return Err(bad(format!(
                        "`convs.0.att_src` holds {h} heads, the layout says {g}"
                    )));
                }
                h
            }
            (ConvKind::Transformer, None) if layers > 1 => {
                return Err(bad(
                    "a TransformerConv stack's head count is not in its tensors: pass it \
                     (Gnn::load_pyg_with with PygLayout { heads: Some(h), .. })"
                        .into(),
                ))
            }
            (_, h) => h.unwrap_or(1),
        };
        let dims = |name: String| -> Result<(usize, usize)> {
            match shapes.get(&name).map(Vec::as_slice) {
                Some(&[o, i]) => Ok((o, i)),
                Some(s) => Err(bad(format!("`{name}` has shape {s:?}, expected [out, in]"))),
                None => Err(bad(format!("missing tensor `{name}` for a {kind} model"))),
            }
        };
        let (hidden, in_dim) = dims(format!("convs.0.{first}"))?;
        let (out_dim, _) = dims(format!("convs.{}.{last}", layers - 1))?;
        let hidden = if layers == 1 && kind != ConvKind::Gin {
            out_dim
        } else {
            hidden
        };
        let mut cfg = ModelConfig::new(kind, in_dim, hidden, out_dim, layers, 0.0);
        cfg.heads = heads;
        cfg.activation = layout.activation.unwrap_or(if kind == ConvKind::Gat {
            Activation::Elu
        } else {
            Activation::Relu
        });
        cfg.validate().map_err(|e| bad(e.to_string()))?;
        let mut model = Self::new(cfg, device, 0)?;
        let vars = model.named_vars();
        let mut extra: Vec<&String> = shapes
            .keys()
            .filter(|k| !vars.iter().any(|(n, _)| n == *k))
            .collect();
        extra.sort();
        if !extra.is_empty() {
            return Err(bad(format!(
                "tensors a {layers}-layer {kind} model does not use: {extra:?}"
            )));
        }
        if let Some((k, _)) = vars.iter().find(|(k, _)| !shapes.contains_key(k)) {
            return Err(bad(format!(
                "missing tensor `{k}` for a {layers}-layer {kind} model"
            )));
        }
        if let Some((k, v)) = vars.iter().find(|(k, v)| shapes[k] != v.dims()) {
            return Err(bad(format!(
                "`{k}` has shape {:?}, the model inferred from the file needs {:?}",
                shapes[k],
                v.dims()
            )));
        }
        model.varmap.load(&st).map_err(|e| bad(e.to_string()))?;
        Ok(model)
    }

    /// Loads a model saved by [`Gnn::save`] (`path` may be the stem or the `.safetensors`).
    pub fn load(path: impl AsRef<Path>, device: &Device) -> Result<Self> {
        let (st, _) = checkpoint_paths(path.as_ref());
        let bad = |problem: String| Error::Checkpoint {
            path: st.clone(),
            problem,
        };
        let meta = read_header(&st).map_err(bad)?;
        let cfg_text = meta
            .metadata()
            .as_ref()
            .and_then(|m| m.get("gnn.config"))
            .ok_or_else(|| bad("no `gnn.config` entry in the header metadata".into()))?;
        let cfg: ModelConfig =
            serde_json::from_str(cfg_text).map_err(|e| bad(format!("bad `gnn.config`: {e}")))?;
        cfg.validate()
            .map_err(|e| bad(format!("bad `gnn.config`: {e}")))?;
        // The model is allocated from the config before the weights are read, so the config
        // may not ask for more than the file holds: every layer has at least an `in x out`
        // weight matrix, and the tensors' sizes were checked against the file by the parser.
        let stored: usize = meta
            .tensors()
            .values()
            .map(|t| t.shape.iter().product::<usize>())
            .fold(0, usize::saturating_add);
        let needed = match cfg.layers {
            1 => cfg.in_dim.saturating_mul(cfg.out_dim),
            l => (l - 2)
                .saturating_mul(cfg.hidden.saturating_mul(cfg.hidden))
                .saturating_add(cfg.in_dim.saturating_mul(cfg.hidden))
                .saturating_add(cfg.hidden.saturating_mul(cfg.out_dim)),
        };
        if needed > stored {
            return Err(bad(format!(
                "`gnn.config` needs at least {needed} weights, the file holds {stored}"
            )));
        }
        let mut model = Self::new(cfg, device, 0)?;
        let names: Vec<String> = meta.tensors().keys().cloned().collect();
        for (k, _) in model.named_vars() {
            if !names.contains(&k) {
                return Err(bad(format!("missing tensor `{k}` required by the config")));
            }
        }
        model.varmap.load(&st).map_err(|e| bad(e.to_string()))?;
        Ok(model)
    }
}

/// `sel`'s aggregation of `h` (this rank's rows, `[n_own, K]`) as one differentiable op: the
/// selected rows' `[|S_r|, K]`, its backward [`gnn_comm::SelectedAggregation::backward`].
/// Collective: every rank calls it in the same pass.
fn selected_mean(sel: &gnn_comm::SelectedAggregation, h: &Tensor) -> Result<Tensor> {
    let f = crate::graph::FusedAggregation::selected(sel.clone());
    let y = f.forward(h)?;
    Ok(gnn_kernels::attach_backward(
        y,
        &[h],
        Box::new(move |_, dy| {
            let dx = f
                .backward(dy)
                .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
            Ok(vec![Some(dx)])
        }),
    )?)
}
