//! What one rank of a distributed run holds at its peak, estimated before anything is
//! allocated ([`estimate`]), so that a run that cannot fit says so at once, naming what to
//! change, instead of failing deep inside an epoch with the allocator's out-of-memory error
//! (the pre-flight check of a distributed run); and the widest feature chunk of the partitioned aggregation that fits
//! ([`fit_feature_chunk`]).
//!
//! The estimate replays one training step at the granularity of `[rows, width]` tensors, as
//! candle runs it: every op's inputs stay alive until the backward ends (the *kept*
//! tensors); the backward takes the gradients in reverse order, each op's input gradients
//! first added into a fresh zero tensor (candle 0.11's accumulation: the gradient, the zeros
//! and the sum live at once); each op's own working memory comes on top (the partitioned
//! aggregation's received blocks and its SpMM buffers, an attached op's handed-over copy).
//! Besides the step: the features, the cached input aggregation, labels and loss weights,
//! and the local graph on the device. The step is replayed layer by layer for GCN and
//! GraphSAGE-mean with ReLU (the forms `gnn_models` runs on a partitioned graph, its lean
//! layers included); other models get a coarser bound ([`Estimate::exact`] false).
//!
//! The output layer's aggregation of the labelled rows alone
//! ([`DistPlan::selects_output_aggregation`], a `gnn_comm::SelectedAggregation`, GCN's and
//! GraphSAGE-mean's default) is not modelled: the estimate replays the whole aggregation
//! followed by the selection, which holds more (a whole `[n, hidden]` aggregation and its
//! exchange buffers, against the selected rows' `[P * block, hidden]` and the small resident
//! graphs `B` and `Bᵀ`), so it bounds such a run from above. On the CPU path the step's
//! highest point is 1-11 % under the estimate with the selection
//! (`crates/train/tests/dist_memory.rs`, papers scale 0.001, all-gather exchange); on 4 H100s, papers100M-sized graph, the peaks allocated were
//! 64.5 GiB (GCN 3x128, `bench/records/dist-papers/h100x4-2026-11-28-3`) and 60.7 GiB
//! (GraphSAGE 3x64, `h100x4-2026-11-28-2`) against estimates of 71.0 and 69.8.
//!
//! Validated against the CPU path, whose allocations a counting allocator sees
//! (`crates/train/tests/dist_memory.rs`): the kept tensors to the byte, the step's peak
//! within a few percent. The CUDA path differs only in the op-internal buffers (a received
//! block is a buffer of its own where the in-process ranks share the sender's; a half-
//! precision SpMM accumulates in an fp32 buffer and narrows), which the estimate counts from
//! the code.

use super::DistPlan;
use crate::trainer::TrainConfig;
use gnn_graph::Exchange;
use gnn_models::{Activation, ConvKind, ModelConfig};
use std::fmt::Write as _;

/// Where the ranks' tensors live, for the op-internal buffers that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A CUDA device: received rows are buffers of their own, half-precision SpMMs
    /// accumulate in fp32.
    Cuda,
    /// In-process ranks on the CPU: received rows are the sender's tensors.
    Cpu,
}

/// One rank's estimated memory.
#[derive(Debug, Clone)]
pub struct Estimate {
    /// The rank.
    pub rank: usize,
    /// Its rows.
    pub rows: usize,
    /// What lives for the whole run: `(what, bytes)`.
    pub resident: Vec<(String, u64)>,
    /// What a training step's forward leaves for its backward (activations, masks).
    pub kept: u64,
    /// The highest point of the step above the resident and kept bytes (gradients and
    /// the ops' working memory), and where it is reached.
    pub transient: (u64, String),
    /// The step was replayed layer by layer (GCN, GraphSAGE-mean with ReLU); false: a
    /// coarser bound (six `[rows, width]` tensors per layer).
    pub exact: bool,
}

impl Estimate {
    /// Resident bytes.
    pub fn resident_bytes(&self) -> u64 {
        self.resident.iter().map(|(_, b)| b).sum()
    }

    /// The estimated peak: resident, kept and the step's transient high point.
    pub fn peak(&self) -> u64 {
        self.resident_bytes() + self.kept + self.transient.0
    }

    /// A table of the components in GiB, one per line.
    pub fn table(&self) -> String {
        let g = |b: u64| b as f64 / (1u64 << 30) as f64;
        let mut s = String::new();
        for (what, b) in &self.resident {
            let _ = writeln!(s, "  {what:<44} {:>8.2} GiB", g(*b));
        }
        let _ = writeln!(
            s,
            "  {:<44} {:>8.2} GiB",
            "activations kept for the backward",
            g(self.kept)
        );
        let _ = writeln!(
            s,
            "  {:<44} {:>8.2} GiB",
            format!("step's transient high ({})", self.transient.1),
            g(self.transient.0)
        );
        let _ = write!(
            s,
            "  {:<44} {:>8.2} GiB{}",
            "peak",
            g(self.peak()),
            if self.exact {
                ""
            } else {
                " (coarse: not a layer-by-layer replay)"
            }
        );
        s
    }
}

/// A tensor of the replayed step (an index into [`Tape::sizes`]).
type Id = usize;

/// One op of the replayed step.
struct Op {
    name: String,
    /// Activation inputs: ids of earlier outputs, with whether each gets a gradient (the
    /// features and the cached aggregation are resident and get none: not listed).
    inputs: Vec<(Id, bool)>,
    /// Output bytes.
    out: u64,
    /// The forward's highest point above the tensors kept before it, its output included.
    fwd: u64,
    /// What the op holds from its forward to the end of the backward besides its inputs
    /// (an activation's mask).
    keeps: u64,
    /// The backward's highest point above the output's gradient and the gradients waiting,
    /// the input gradients it returns included (as they are made).
    bwd: u64,
}

/// The replayed step: tensors and ops in forward order.
struct Tape {
    sizes: Vec<u64>,
    /// Whether each output tracks (a parameter or a tracked input went into it).
    tracked: Vec<bool>,
    ops: Vec<Op>,
}

impl Tape {
    fn new() -> Self {
        Self {
            sizes: Vec::new(),
            tracked: Vec::new(),
            ops: Vec::new(),
        }
    }

    /// Adds `op`, which has parameters (`params`) or not (an aggregation); an input gets a
    /// gradient where it tracks. Returns its output's id (ops and outputs share indices).
    fn push(&mut self, params: bool, mut op: Op) -> Id {
        for (i, g) in &mut op.inputs {
            *g = self.tracked[*i];
        }
        self.tracked
            .push(params || op.inputs.iter().any(|&(_, g)| g));
        self.sizes.push(op.out);
        self.ops.push(op);
        self.ops.len() - 1
    }

    /// `(kept bytes, the step's highest point above them, where)`.
    fn replay(&self) -> (u64, u64, String) {
        let n = self.ops.len();
        // Kept: every tensor some op reads, the last output (the loss's), the ops' masks.
        let mut kept = vec![false; n];
        for op in &self.ops {
            for &(i, _) in &op.inputs {
                kept[i] = true;
            }
        }
        if n > 0 {
            kept[n - 1] = true;
        }
        let keeps: u64 = self.ops.iter().map(|o| o.keeps).sum();
        let total: u64 = (0..n)
            .filter(|&i| kept[i])
            .map(|i| self.sizes[i])
            .sum::<u64>()
            + keeps;
        let mut high = (0u64, String::new());
        let mut note = |live: u64, what: String| {
            if live > high.0 {
                high = (live, what);
            }
        };
        // Forward: what is kept so far, plus the op's working memory and output.
        let mut so_far = 0u64;
        for (i, op) in self.ops.iter().enumerate() {
            note(so_far + op.fwd, format!("forward, {}", op.name));
            so_far += op.keeps + if kept[i] { self.sizes[i] } else { 0 };
        }
        // Backward: everything kept, the gradients waiting, the op's output gradient and
        // working memory; then its input gradients, accumulated one at a time (a first one
        // into zeros, candle's `or_insert` + `add`: the gradient, the zeros and the sum).
        let mut pending: Vec<Option<u64>> = vec![None; n];
        if n > 0 {
            pending[n - 1] = Some(self.sizes[n - 1]);
        }
        for (i, op) in self.ops.iter().enumerate().rev() {
            let Some(g_in) = pending[i].take() else {
                continue;
            };
            let waiting: u64 = pending.iter().flatten().sum();
            let base = total + waiting + g_in;
            note(base + op.bwd, format!("backward, {}", op.name));
            let returned: u64 = op
                .inputs
                .iter()
                .filter(|(_, g)| *g)
                .map(|&(j, _)| self.sizes[j])
                .sum();
            let mut stored = 0u64;
            for &(j, g) in &op.inputs {
                if !g {
                    continue;
                }
                let s = self.sizes[j];
                let first = pending[j].is_none();
                note(
                    base + returned + stored + if first { 2 * s } else { s },
                    format!("backward, {} (gradient accumulation)", op.name),
                );
                if first {
                    pending[j] = Some(s);
                    stored += s;
                }
            }
        }
        (total, high.0.saturating_sub(total), high.1)
    }
}

/// The shapes one rank's step works on.
struct Dims {
    /// Rows (this rank's nodes).
    n: u64,
    /// Rows of every rank's block under the all-gather (the longest range).
    m: u64,
    /// Ranks.
    parts: u64,
    /// Element bytes of features and activations.
    e: u64,
    target: Target,
    /// The fused symmetric aggregation runs (all-gather, symmetric operand).
    fused: bool,
    /// Its local graph is held as one slice per rank's block (the ring); else one
    /// all-gather of every block.
    ring: bool,
    /// Halo rows received per point-to-point exchange.
    halo: u64,
    /// The feature chunk of the fused aggregation (`None`: whole width).
    chunk: Option<u64>,
    /// Rows of the output layer: the labelled ones where the trainer restricts it to them
    /// ([`crate::trainer::output`]), else `n`.
    out_rows: u64,
}

impl Dims {
    fn t(&self, width: usize) -> u64 {
        self.n * width as u64 * self.e
    }

    /// The working memory of one aggregation of a `[n, d]` input, its result included (not
    /// its input): the fused op's exchange and SpMM buffers (per feature chunk), or the
    /// point-to-point path's SpMM (its exchanged rows are a tensor of their own).
    fn aggregation(&self, d: usize, mean: bool) -> u64 {
        let d = d as u64;
        let (n, m, e) = (self.n, self.m, self.e);
        let half = self.target == Target::Cuda && e == 2;
        // One SpMM of `w` columns: fp32 accumulation and the narrowed result on a CUDA device
        // in half precision; the result alone otherwise.
        let spmm = |w: u64| {
            if half {
                n * w * 4 + n * w * e
            } else {
                n * w * e
            }
        };
        if !self.fused {
            return spmm(d);
        }
        let w = self.chunk.filter(|&c| c < d).unwrap_or(d);
        // Chunked: the output being filled and the chunk's contiguous input.
        let chunked = if w < d { n * d * e + n * w * e } else { 0 };
        let pad = if n < m { m * w * e } else { 0 };
        let work = if self.ring {
            // Blocks received and held (a buffer each on a GPU, the sender's tensor in
            // process), the accumulator, a slice's result and their sum; a mean then divides
            // in f32.
            let blocks = match self.target {
                Target::Cuda => self.parts.saturating_sub(1).min(2) * m * w * e,
                Target::Cpu => 0,
            };
            let mean_pass = match (mean, half) {
                (false, _) => 0,
                (true, true) => 2 * n * w * 4,
                (true, false) => n * w * e,
            };
            blocks + n * w * e + spmm(w).max(2 * n * w * e).max(mean_pass)
        } else {
            // Every block gathered at once (the padded own block copied first), then the SpMM.
            pad + self.parts * m * w * e + spmm(w)
        };
        chunked + work
    }

    /// The fused op's forward: its working memory, then its result and the copy the op's
    /// forward hands over.
    fn aggregation_fwd(&self, d: usize, mean: bool) -> u64 {
        self.aggregation(d, mean).max(2 * self.t(d))
    }

    /// The fused op's backward (its result is the input's gradient): the forward's working
    /// memory on the output gradient, which a mean first divides by the row lengths (a
    /// scaled copy, made through f32 in half precision).
    fn aggregation_bwd(&self, d: usize, mean: bool) -> u64 {
        let scaled = if mean && self.fused { self.t(d) } else { 0 };
        scaled + self.aggregation(d, false)
    }

    /// Rows the point-to-point exchange makes for an aggregation of `d` columns (own + halo,
    /// kept as the SpMM's input); 0 under the fused aggregation.
    fn exchanged(&self, d: usize) -> u64 {
        if self.fused {
            0
        } else {
            (self.n + self.halo) * d as u64 * self.e
        }
    }
}

/// `model` at the widths its ranks take on a GPU ([`crate::dist::Widths::Auto`] on CUDA): the
/// features on [`gnn_models::aligned_width`] columns (Reddit's 602 on 608), and the output
/// layer there too where [`gnn_models::padded_outputs_pay_on_cuda`] says (41 classes on 48 in
/// half precision). The narrowed logits are charged at the aligned width as well: a slight
/// over-estimate.
fn gpu_widths(model: &ModelConfig, precision: crate::Precision) -> ModelConfig {
    let mut m = model.clone();
    m.in_dim = gnn_models::aligned_width(model.in_dim);
    if gnn_models::padded_outputs_pay_on_cuda(model.kind, precision.is_half()) {
        m.out_dim = gnn_models::aligned_width(model.out_dim);
    }
    m
}

/// The features' aggregation is cached (the trainer's input cache): what
/// `Gnn::input_aggregate_reduce` decides, from the config.
pub(crate) fn caches_input(model: &ModelConfig, train: &TrainConfig) -> bool {
    let maxk = matches!(model.activation, Activation::MaxK { .. })
        && model.layers > 1
        && !model.maxk_after_first;
    train.cache_input_aggregate
        && matches!(
            model.kind,
            ConvKind::Gcn | ConvKind::Gin | ConvKind::SageMean
        )
        && model.input_dropout == 0.0
        && !maxk
}

/// The edges of every attention layer's head-expanded local graph (`nnz` x the layer's heads:
/// [`ModelConfig::heads`] in the hidden layers, one in the last); `None` for the other models.
fn attention_edges(model: &ModelConfig, nnz: u64) -> Option<Vec<u64>> {
    matches!(model.kind, ConvKind::Gat | ConvKind::Transformer).then(|| {
        (0..model.layers)
            .map(|l| {
                let hidden = l + 1 < model.layers;
                let heads = if hidden { model.heads } else { 1 };
                let width = model.layer_dims(l).1 / heads;
                // A GAT layer whose shape the fused aggregation takes keeps nothing per edge
                // (gnn_kernels::gat_aggregate: per row and head one f32, counted nowhere).
                let fused = model.kind == ConvKind::Gat
                    && gnn_kernels::gat_aggregate_supports(heads, width);
                if fused {
                    0
                } else {
                    nnz * heads as u64
                }
            })
            .collect()
    })
}

/// Whether the step is replayed layer by layer for `model`.
fn replayable(model: &ModelConfig) -> bool {
    matches!(model.kind, ConvKind::Gcn | ConvKind::SageMean)
        && model.activation == Activation::Relu
        && !model.residual
        && !model.layer_norm
}

/// The replayed step of GCN or GraphSAGE-mean (ReLU, no residual or LayerNorm) on a
/// partitioned graph, as `gnn_models` runs it there (its lean forms included).
fn gcn_sage_tape(model: &ModelConfig, cached: bool, d: &Dims) -> Tape {
    let mut tape = Tape::new();
    let bits = |w: usize| d.n * (w as u64).div_ceil(8);
    let sage = model.kind == ConvKind::SageMean;
    let mean = sage;
    // `dyᵀ` made contiguous for a weight gradient on the CPU (cuBLAS takes it transposed).
    let wgrad = |w: usize| if d.target == Target::Cpu { d.t(w) } else { 0 };
    // The current layer input: `None` for the features (untracked, resident).
    let mut x: Option<Id> = None;
    // A layer's aggregation of its input made by the layer before (GCN's fused hidden layers).
    let mut carried: Option<Id> = None;
    // An aggregation op of the input `x` (`width` columns), when the layer makes it.
    let aggregate = |tape: &mut Tape, x: Option<Id>, width: usize, what: String| -> Id {
        let ex = d.exchanged(width);
        tape.push(
            false,
            Op {
                name: what,
                inputs: x.map(|x| vec![(x, true)]).unwrap_or_default(),
                out: d.t(width) + ex,
                fwd: d.aggregation_fwd(width, mean) + ex,
                keeps: 0,
                bwd: d.aggregation_bwd(width, mean) + ex,
            },
        )
    };
    for l in 0..model.layers {
        let (i, o) = model.layer_dims(l);
        let last = l + 1 == model.layers;
        let given = (l == 0 && cached) || carried.is_some();
        // A GraphSAGE output layer on selected rows aggregates first where its whole rows'
        // two products would pass candle's element limit (`Gnn::output_layer_on`).
        let wide =
            last && sage && d.out_rows < d.n && gnn_models::products_pass_limit(d.n as usize, o);
        let product_last = given || o >= i || wide;
        // An output layer whose products come last runs them on its output rows alone.
        let rows = if last && product_last {
            d.out_rows
        } else {
            d.n
        };
        let (to, ti) = (rows * o as u64 * d.e, d.t(i));
        let mask = if last { 0 } else { bits(o) };
        // The product's input when it comes last: carried, cached (resident) or made here.
        let input = |tape: &mut Tape, carried: &mut Option<Id>| -> Option<Id> {
            match (carried.take(), l == 0 && cached) {
                (Some(a), _) => Some(a),
                (None, true) => None,
                (None, false) => Some(aggregate(
                    tape,
                    x,
                    i,
                    format!("layer {} aggregation", l + 1),
                )),
            }
        };
        // An input's gradient (`ti`) where the input tracks.
        let g = |tape: &Tape, x: Option<Id>| match x {
            Some(x) if tape.tracked[x] => ti,
            _ => 0,
        };
        let ids = |v: &[Option<Id>]| -> Vec<(Id, bool)> {
            v.iter().flatten().map(|&i| (i, true)).collect()
        };
        // The output layer's rows of its input `a` (an op of its own, `OutputRows::select`):
        // `[rows, i]` forward, the input's gradient scattered back to `[n, i]`.
        let select = |tape: &mut Tape, a: Option<Id>, l: usize| -> Option<Id> {
            if rows == d.n {
                return a;
            }
            let tracked = a.is_some_and(|a| tape.tracked[a]);
            Some(tape.push(
                true,
                Op {
                    name: format!("layer {} output rows", l + 1),
                    inputs: ids(&[a]),
                    out: rows * i as u64 * d.e,
                    fwd: rows * i as u64 * d.e,
                    keeps: 0,
                    bwd: if tracked { ti } else { 0 },
                },
            ))
        };
        if !sage {
            let next_first = !last && {
                let (ni, no) = model.layer_dims(l + 1);
                no >= ni
            };
            if product_last && (last || (next_first && d.fused)) {
                // `lean::linear`: the product, the bias (and activation: its mask), the next
                // layer's aggregation of it for a hidden layer, the result handed over.
                let a = input(&mut tape, &mut carried);
                let a = select(&mut tape, a, l);
                let hidden = !last;
                let fwd = (2 * to + mask)
                    .max(if hidden {
                        to + mask + d.aggregation_fwd(o, false)
                    } else {
                        0
                    })
                    .max(2 * to + mask);
                let bwd = if hidden {
                    d.aggregation(o, false)
                        .max(2 * to)
                        .max(to + wgrad(o) + g(&tape, a))
                } else {
                    wgrad(o) + g(&tape, a)
                };
                let name = if hidden {
                    format!("layer {} with layer {}'s aggregation", l + 1, l + 2)
                } else {
                    format!("layer {}", l + 1)
                };
                let out = tape.push(
                    true,
                    Op {
                        name,
                        inputs: ids(&[a]),
                        out: to,
                        fwd,
                        keeps: mask,
                        bwd,
                    },
                );
                if hidden {
                    carried = Some(out);
                }
                x = Some(out);
                continue;
            }
            if product_last {
                // The product and its epilogue (`LinearProduct`, mask as bits).
                let a = input(&mut tape, &mut carried);
                let a = select(&mut tape, a, l);
                let bwd = to + wgrad(o) + g(&tape, a);
                let out = tape.push(
                    true,
                    Op {
                        name: format!("layer {}", l + 1),
                        inputs: ids(&[a]),
                        out: to,
                        fwd: 2 * to + mask,
                        keeps: mask,
                        bwd,
                    },
                );
                x = Some(out);
                continue;
            }
            if d.fused {
                // `lean::linear` aggregating its product: product, aggregation, bias (and
                // activation), the result handed over.
                let fwd = (to + d.aggregation_fwd(o, false)).max(2 * to + mask);
                let bwd = (to + d.aggregation(o, false)).max(to + wgrad(o) + g(&tape, x));
                let out = tape.push(
                    true,
                    Op {
                        name: format!("layer {}", l + 1),
                        inputs: ids(&[x]),
                        out: to,
                        fwd,
                        keeps: mask,
                        bwd,
                    },
                );
                x = Some(out);
                continue;
            }
            // Composed: the product (an untracked input's handed over), its aggregation, the
            // bias (a broadcast add, whose bias gradient is first a full [n, out] tensor) or
            // the epilogue.
            let z = tape.push(
                true,
                Op {
                    name: format!("layer {} product", l + 1),
                    inputs: ids(&[x]),
                    out: to,
                    fwd: if x.is_none() { 2 * to } else { to },
                    keeps: 0,
                    bwd: g(&tape, x),
                },
            );
            let y = aggregate(
                &mut tape,
                Some(z),
                o,
                format!("layer {} aggregation", l + 1),
            );
            let out = tape.push(
                true,
                Op {
                    name: format!("layer {} bias", l + 1),
                    inputs: vec![(y, true)],
                    out: to,
                    fwd: to,
                    keeps: 0,
                    bwd: if last { 2 * to } else { to },
                },
            );
            x = Some(out);
            continue;
        }
        // An output layer's gradient is the op's own (no mask): no tensor of its own.
        let dz = if last { 0 } else { to };
        if product_last {
            // `lean::pair` over an aggregation op's output or the cached aggregation: both
            // products and their sum, the epilogue, the result handed over.
            let a = input(&mut tape, &mut carried);
            let (a, h) = (select(&mut tape, a, l), select(&mut tape, x, l));
            let bwd = dz + wgrad(o) + g(&tape, a) + g(&tape, h);
            let out = tape.push(
                true,
                Op {
                    name: format!("layer {}", l + 1),
                    inputs: ids(&[a, h]),
                    out: to,
                    fwd: 3 * to + mask,
                    keeps: mask,
                    bwd,
                },
            );
            x = Some(out);
            continue;
        }
        if d.fused {
            // `lean::pair` aggregating the neighbour product inside: both products, the
            // aggregation, the sum, the epilogue, the result handed over; backward, the
            // neighbour term's gradient back through the aggregation, added to the root's.
            let out = tape.push(
                true,
                Op {
                    name: format!("layer {}", l + 1),
                    inputs: ids(&[x]),
                    out: to,
                    fwd: 3 * to + d.aggregation_fwd(o, true).max(mask),
                    keeps: mask,
                    bwd: dz + d.aggregation_bwd(o, true).max(wgrad(o) + 3 * g(&tape, x)),
                },
            );
            x = Some(out);
            continue;
        }
        // Composed GraphSAGE multiplying first: [W_l; W_r] in one product, the W_l half
        // aggregated, the root half added, the bias (and activation).
        let h = tape.push(
            true,
            Op {
                name: format!("layer {} products", l + 1),
                inputs: ids(&[x]),
                out: 2 * to,
                fwd: if x.is_none() { 4 * to } else { 2 * to },
                keeps: 0,
                bwd: g(&tape, x),
            },
        );
        let agg = aggregate(
            &mut tape,
            Some(h),
            o,
            format!("layer {} aggregation", l + 1),
        );
        let y = tape.push(
            true,
            Op {
                name: format!("layer {} sum", l + 1),
                inputs: vec![(agg, true), (h, true)],
                out: to,
                fwd: to,
                keeps: 0,
                bwd: 0,
            },
        );
        let out = tape.push(
            true,
            Op {
                name: format!("layer {} bias", l + 1),
                inputs: vec![(y, true)],
                out: to,
                fwd: to,
                keeps: 0,
                bwd: if last { 2 * to } else { to },
            },
        );
        x = Some(out);
    }
    // The loss: per-row losses (f32) from the logits (weighted in f32 in its backward).
    if let Some(logits) = x {
        tape.push(
            true,
            Op {
                name: "loss".into(),
                inputs: vec![(logits, true)],
                out: d.out_rows * 4,
                fwd: d.out_rows * 4,
                keeps: 0,
                bwd: d.out_rows * 4 + d.out_rows * model.out_dim as u64 * d.e,
            },
        );
    }
    tape
}

/// What the estimate needs of one rank's share of a plan: its shapes and how it exchanges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankShape {
    /// The rank.
    pub rank: usize,
    /// Its rows (nodes).
    pub rows: usize,
    /// Rows of every rank's block under the all-gather (the longest range).
    pub block_rows: usize,
    /// Ranks.
    pub parts: usize,
    /// Non-zeros of its rows of the operand.
    pub nnz: u64,
    /// Halo rows it receives per point-to-point exchange.
    pub halo: usize,
    /// The aggregation is the fused symmetric one (all-gather, symmetric operand).
    pub fused: bool,
    /// Its local graph is held as one slice per rank's block (the ring of blocks); else one
    /// all-gather of every block.
    pub ring: bool,
    /// The operand has edge values (GCN's normalisation).
    pub weighted: bool,
    /// The fused aggregation's feature chunk ([`DistPlan::feature_chunk`]).
    pub feature_chunk: Option<usize>,
    /// Its labelled rows ([`DistPlan::labelled`]; its rows when unknown).
    pub labelled: usize,
}

impl RankShape {
    /// Rank `rank`'s shape under `plan` for `model` in `precision`.
    pub fn of(
        plan: &DistPlan,
        model: &ModelConfig,
        precision: crate::Precision,
        rank: usize,
    ) -> Self {
        let part = &plan.partition;
        let rows = part.range(rank);
        let csr = &plan.operands.csr;
        let fused = plan.exchange == Exchange::AllGather && plan.symmetric;
        Self {
            rank,
            rows: rows.len(),
            block_rows: part.max_len(),
            parts: part.parts(),
            nnz: rows.clone().map(|r| csr.row(r).len() as u64).sum(),
            halo: plan.halo_sizes.get(rank).copied().unwrap_or(0),
            fused,
            ring: fused && plan.slice_rows_for(model, precision).is_some(),
            weighted: plan.operands.values.is_some(),
            feature_chunk: plan.feature_chunk,
            labelled: plan.labelled.get(rank).copied().unwrap_or(rows.len()),
        }
    }
}

/// Rank `rank`'s estimate for `model` trained with `train` under `plan` on `target`.
pub fn estimate(
    plan: &DistPlan,
    model: &ModelConfig,
    train: &TrainConfig,
    rank: usize,
    target: Target,
) -> Estimate {
    estimate_shape(
        &RankShape::of(plan, model, train.precision, rank),
        model,
        train,
        target,
    )
}

/// The estimate of one rank of shape `shape` (what [`estimate`] computes from a plan; for
/// sizes no plan is built for, as the papers100M-sized graph's on a small machine).
pub fn estimate_shape(
    shape: &RankShape,
    model: &ModelConfig,
    train: &TrainConfig,
    target: Target,
) -> Estimate {
    let logical = model;
    let model = &gpu_widths(model, train.precision);
    let n = shape.rows as u64;
    let nnz = shape.nnz;
    let e = train.precision.dtype().size_in_bytes() as u64;
    let (fused, ring) = (shape.fused, shape.ring);
    let d = Dims {
        n,
        m: shape.block_rows as u64,
        parts: shape.parts as u64,
        e,
        target,
        fused,
        ring,
        halo: shape.halo as u64,
        chunk: shape.feature_chunk.map(|c| c as u64),
        out_rows: crate::trainer::output::output_rows(
            shape.rows,
            shape.labelled,
            logical.out_dim,
            train.labelled_output,
        ) as u64,
    };
    let cached = caches_input(model, train);
    let mut resident = vec![
        (
            format!("features [{n} x {}]", model.in_dim),
            d.t(model.in_dim),
        ),
        ("labels and loss weights".to_string(), n * 8),
    ];
    if cached {
        resident.push((
            format!("cached input aggregation [{n} x {}]", model.in_dim),
            d.t(model.in_dim),
        ));
    }
    // The local graph: column indices (and GCN's f32 edge values) per non-zero, row pointers
    // per slice (one per rank's block on the ring), 1/deg per row where a mean or the slices
    // need it; the point-to-point path also builds its transpose (and an edge permutation).
    let slices = if ring { shape.parts as u64 } else { 1 };
    let values = if shape.weighted { 4 } else { 0 };
    let mut graph = nnz * (4 + values) + slices * (n + 1) * 4 + n * 4;
    if !fused {
        let cols = n + d.halo;
        graph += nnz * 8 + (cols + 1) * 4;
    }
    resident.push((format!("local graph ({nnz} non-zeros)"), graph));
    if d.out_rows < n {
        // The selection matrix (row pointers and a column per selected row) and its
        // transpose's row pointers, built for the backward.
        let select = (d.out_rows + 1) * 4 + d.out_rows * 8 + (n + 1) * 4;
        resident.push((
            format!("output rows selection ({} rows)", d.out_rows),
            select,
        ));
    }
    let params: u64 = (0..model.layers)
        .map(|l| {
            let (i, o) = model.layer_dims(l);
            ((2 * i + 1) * o) as u64
        })
        .sum();
    // Master weights, Adam's two moments, gradients, the best epoch's copy.
    resident.push(("parameters and optimiser state".into(), params * 4 * 5));
    let (kept, transient, exact) = if replayable(model) {
        let (kept, high, at) = gcn_sage_tape(model, cached, &d).replay();
        // The first epoch makes the input cache before its forward: the aggregation of the
        // features, nothing else alive but the resident data.
        let cache = if cached {
            d.aggregation_fwd(model.in_dim, model.kind == ConvKind::SageMean)
        } else {
            0
        };
        let (high, at) = if cache > kept + high {
            (cache - kept, "the input cache's aggregation".to_string())
        } else {
            (high, at)
        };
        (kept, (high, at), true)
    } else {
        // Six [n, width] tensors per layer kept, two layers' worth of gradients and the
        // widest aggregation's buffers on top.
        let widths: Vec<usize> = (0..model.layers)
            .map(|l| model.layer_dims(l).1.max(model.layer_dims(l).0))
            .collect();
        let mut kept: u64 = widths.iter().map(|&w| 6 * d.t(w)).sum();
        let widest = widths.iter().copied().max().unwrap_or(0);
        let mut high = 4 * d.t(widest) + d.aggregation(widest, true) + d.exchanged(widest);
        if let Some(per_edge) = attention_edges(model, nnz) {
            // Per layer, over its head-expanded local graph (nnz x heads edges), in 4-byte
            // words per edge: three resident (the expanded graph's column ids, its row
            // structure's share and the edge permutation of its transpose), three kept for the
            // backward (the attention, its dropped copy, the dropout mask) and two at the
            // backward's high (the gradients of the attention and of the scores). Checked
            // against GAT 2x64 (8 heads), head-expanded (before the fused aggregation), on the
            // Reddit-shaped graph, bf16, 1/2/4 H100s
            // (bench/records/dist-scaling/h100x4-2026-11-27-3, scores from an f32 GEMM: peaks
            // allocated 29.73 / 16.95 / 8.60 GiB; before this term the estimate said 5.4 /
            // 2.8 / 1.5): an upper bound by 5-19 %. GAT now runs those shapes fused (no such
            // term: 0 edges here; the test below); the term stays for TransformerConv and GAT
            // shapes outside the fused kernels, not measured since.
            let words = |w: u64| per_edge.iter().map(|&edges| w * edges * 4).sum::<u64>();
            if words(3) > 0 {
                resident.push(("head-expanded local graphs".to_string(), words(3)));
            }
            kept += words(3);
            high += per_edge
                .iter()
                .map(|&edges| 2 * edges * 4)
                .max()
                .unwrap_or(0);
        }
        (kept, (high, "coarse bound".to_string()), false)
    };
    Estimate {
        rank: shape.rank,
        rows: shape.rows,
        resident,
        kept,
        transient,
        exact,
    }
}

/// Every rank's estimate; the largest peak first is what a budget must hold.
pub fn estimate_all(
    plan: &DistPlan,
    model: &ModelConfig,
    train: &TrainConfig,
    target: Target,
) -> Vec<Estimate> {
    (0..plan.partition.parts())
        .map(|r| estimate(plan, model, train, r, target))
        .collect()
}

/// The largest peak of `estimates` (the rank a budget must hold).
pub fn worst(estimates: &[Estimate]) -> Option<&Estimate> {
    estimates.iter().max_by_key(|e| e.peak())
}

/// The feature chunks [`fit_feature_chunk`] tries after the whole width, widest first: the
/// powers of two below the model's widest aggregation, down to [`MIN_FEATURE_CHUNK`].
pub fn chunk_candidates(model: &ModelConfig) -> Vec<usize> {
    let widest = (0..model.layers)
        .map(|l| {
            let (i, o) = model.layer_dims(l);
            i.max(o)
        })
        .max()
        .unwrap_or(0);
    let mut c = widest.next_power_of_two() / 2;
    let mut out = Vec::new();
    while c >= MIN_FEATURE_CHUNK {
        out.push(c);
        c /= 2;
    }
    out
}

/// The narrowest feature chunk tried: 16 columns (32 bytes of a bf16 row).
pub const MIN_FEATURE_CHUNK: usize = 16;

/// What a CUDA rank keeps off its budget besides its tensors: the context, cuBLAS's
/// workspace, NCCL's buffers at up to 4 point-to-point channels and the allocator's slack
/// (2 GiB). More channels take [`nccl_p2p_reserve`] on top.
pub const CUDA_RESERVE: u64 = 2 << 30;

/// NCCL's device memory for point-to-point channels beyond the 4 that [`CUDA_RESERVE`]
/// covers, per rank of `ranks` on devices of their own: buffers for each channel and peer,
/// connected on first use (the ring exchange reaches every peer). Measured on 4 H100s
/// (papers100M-sized GCN 3x128, `bench/records/dist-papers/h100x4-2026-11-27-7`): at 32
/// channels each GPU held 1.03 GiB more than at 4 with the same 64.55 GiB allocated, 12.6
/// MiB per extra channel and peer; 13 MiB is charged.
pub fn nccl_p2p_reserve(channels: usize, ranks: usize) -> u64 {
    const PER_CHANNEL_AND_PEER: u64 = 13 << 20;
    channels.saturating_sub(4) as u64 * ranks.saturating_sub(1) as u64 * PER_CHANNEL_AND_PEER
}

/// The widest feature chunk (whole width first, then [`chunk_candidates`]) under which
/// `fits` holds for every rank's estimate, where the aggregation is the fused one: sets
/// `plan.feature_chunk` to it and returns it with the estimates (`None`: the whole width).
/// At the whole width the plan's own form is tried first; where that is the whole gathered
/// operand of a small gather ([`DistPlan::small_gather_whole`] on three or more ranks), the
/// sliced ring at the whole width next (it holds two blocks where the whole form holds every
/// rank's: `plan.small_gather_whole` is then turned off), before any chunk.
/// Where none fits, `Err` with the narrowest chunk's estimates (the plan keeps that chunk).
pub fn fit_feature_chunk(
    plan: &mut DistPlan,
    model: &ModelConfig,
    train: &TrainConfig,
    target: Target,
    fits: impl Fn(&[Estimate]) -> bool,
) -> std::result::Result<(Option<usize>, Vec<Estimate>), Vec<Estimate>> {
    let fused = plan.exchange == Exchange::AllGather && plan.symmetric;
    let whole = plan.small_gather_whole;
    // (feature chunk, small gathers whole)
    let mut tries = vec![(None, whole)];
    if fused {
        if whole {
            tries.push((None, false));
        }
        tries.extend(
            chunk_candidates(model)
                .into_iter()
                .map(|c| (Some(c), whole)),
        );
    }
    let mut last = Vec::new();
    for (chunk, small_whole) in tries {
        plan.feature_chunk = chunk;
        plan.small_gather_whole = small_whole;
        last = estimate_all(plan, model, train, target);
        if fits(&last) {
            return Ok((chunk, last));
        }
    }
    Err(last)
}

/// The refusal of a run that needs `need` bytes where `budget` are allowed: `worst` is the
/// largest rank's estimate (`shared`: the in-process ranks share the memory, and `need` is
/// their sum), `chunk` the feature chunk last tried. Says what to change.
pub fn refusal(
    worst: &Estimate,
    need: u64,
    budget: u64,
    shared: bool,
    chunk: Option<usize>,
    model: &ModelConfig,
    ranks: usize,
) -> String {
    let g = |b: u64| b as f64 / (1u64 << 30) as f64;
    let who = if shared {
        format!(
            "the {ranks} in-process ranks would need an estimated {:.1} GiB together",
            g(need)
        )
    } else {
        format!(
            "rank {} would need an estimated {:.1} GiB at its peak",
            worst.rank,
            g(need)
        )
    };
    let chunks = match chunk {
        Some(c) => format!(
            "the fused aggregation already runs in {c}-column feature chunks (--feature-chunk)"
        ),
        None => "or the fused aggregation in feature chunks (--feature-chunk 32)".into(),
    };
    format!(
        "{who}, above the {:.1} GiB allowed (--max-memory; default the GPU's memory less 2 \
         GiB, and NCCL's point-to-point buffers past 4 channels). Rank {}'s estimate ({} \
         rows):\n{}\nTo fit: {}a narrower model (--hidden {}), a partition with smaller halos \
         (--partition metis), {chunks}. --max-memory 0 skips this check.",
        g(budget),
        worst.rank,
        worst.rows,
        worst.table(),
        if shared {
            "ranks on devices of their own (--nccl), ".to_string()
        } else {
            format!("more ranks (--ranks {}), ", ranks * 2)
        },
        (model.hidden / 2).max(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Precision;

    /// One rank of the papers100M-sized graph on 4 ranks (range partition of the random ids:
    /// every block is nearly the whole halo): 111,059,956 nodes, 3.34 G non-zeros of GCN's
    /// `A + I` (3.23 G of `A` for GraphSAGE), balanced by non-zeros.
    fn papers_rank(kind: ConvKind, chunk: Option<usize>) -> RankShape {
        let gcn = kind == ConvKind::Gcn;
        RankShape {
            rank: 0,
            rows: 27_764_989,
            block_rows: 27_900_000,
            parts: 4,
            nnz: if gcn { 835_000_000 } else { 807_000_000 },
            halo: 83_000_000,
            fused: true,
            // GraphSAGE's mean takes the ring under feature chunks only.
            ring: gcn || chunk.is_some(),
            weighted: gcn,
            feature_chunk: chunk,
            // 1.39 % of the nodes carry a label (train, validation and test).
            labelled: 385_000,
        }
    }

    fn papers_model(kind: ConvKind, hidden: usize) -> ModelConfig {
        let mut m = ModelConfig::new(kind, 128, hidden, 172, 3, 0.5);
        m.input_dropout = 0.0;
        m
    }

    const GIB: u64 = 1 << 30;

    /// GAT 2x64 (8 heads) on the Reddit-shaped graph, bf16, ranges over 1, 2 and 4 GPUs, the
    /// fused aggregation (no per-edge term): the coarse bound holds each rank's measured peak
    /// allocated (bench/records/dist-scaling/h200x4-2026-11-28: 1.95 / 1.40 / 0.94 GiB) from
    /// above, by at most 3x (5.37 / 2.82 / 1.54 GiB: six kept `[n, width]` tensors a layer
    /// where the fused layer keeps its input, output and per-head scores).
    #[test]
    fn attention_estimates_bound_the_measured_gat_peaks() {
        let train = TrainConfig {
            precision: Precision::Bf16,
            ..TrainConfig::default()
        };
        let mut model = ModelConfig::new(ConvKind::Gat, 602, 64, 41, 2, 0.5);
        model.heads = 8;
        // (ranks, rows, halo rows, measured peak allocated in GiB); non-zeros balanced.
        for (parts, rows, halo, measured) in [
            (1usize, 232_965usize, 0usize, 1.95),
            (2, 116_569, 116_569, 1.40),
            (4, 58_113, 175_368, 0.94),
        ] {
            let shape = RankShape {
                rank: 0,
                rows,
                block_rows: rows,
                parts,
                nnz: 114_543_559 / parts as u64,
                halo,
                fused: false,
                ring: false,
                weighted: false,
                feature_chunk: None,
                labelled: rows,
            };
            let est = estimate_shape(&shape, &model, &train, Target::Cuda);
            let gib = est.peak() as f64 / GIB as f64;
            println!(
                "GAT 2x64 on {parts}: estimate {gib:.2} GiB, measured {measured}\n{}",
                est.table()
            );
            assert!(!est.exact);
            assert!(
                gib >= measured && gib <= 3.0 * measured,
                "{parts} ranks: {gib:.2} GiB"
            );
        }
    }

    #[test]
    fn papers100m_3x128_fits_an_h100_rank_in_feature_chunks() {
        let train = TrainConfig {
            precision: Precision::Bf16,
            ..TrainConfig::default()
        };
        // What a rank may use: an 80 GB H100's 78 GiB (a 141 GB H200's 139 GiB) less the
        // reserve.
        // NCCL ranks also keep the point-to-point channels' buffers (32 channels, 4 ranks).
        let nccl = nccl_p2p_reserve(32, 4);
        let (h100, h200) = (
            78 * GIB - CUDA_RESERVE - nccl,
            139 * GIB - CUDA_RESERVE - nccl,
        );
        // The smallest card each fits with 32-column chunks; GraphSAGE 3x256 fits neither.
        for (kind, hidden, fits) in [
            (ConvKind::Gcn, 64, Some(h100)),
            (ConvKind::Gcn, 128, Some(h100)),
            (ConvKind::Gcn, 256, Some(h200)),
            (ConvKind::SageMean, 64, Some(h100)),
            (ConvKind::SageMean, 128, Some(h200)),
            (ConvKind::SageMean, 256, None),
        ] {
            let model = papers_model(kind, hidden);
            let at =
                |chunk| estimate_shape(&papers_rank(kind, chunk), &model, &train, Target::Cuda);
            let (whole, chunked) = (at(None), at(Some(32)));
            let by_chunk: Vec<String> = [None, Some(128), Some(64), Some(32), Some(16)]
                .into_iter()
                .map(|c| format!("{c:?}: {:.1}", at(c).peak() as f64 / GIB as f64))
                .collect();
            println!(
                "{kind} 3x{hidden} GiB by feature chunk: {}",
                by_chunk.join(", ")
            );
            println!(
                "{kind} 3x{hidden}: whole width {:.1} GiB, 32-column chunks {:.1} GiB\n{}",
                whole.peak() as f64 / GIB as f64,
                chunked.peak() as f64 / GIB as f64,
                chunked.table()
            );
            assert!(whole.exact && chunked.exact);
            // Chunks only take from the step's transient high.
            assert!(chunked.peak() <= whole.peak(), "{kind} 3x{hidden}");
            assert_eq!(chunked.kept, whole.kept);
            let what = format!("{kind} 3x{hidden}: {} GiB", chunked.peak() / GIB);
            match fits {
                Some(budget) => {
                    assert!(chunked.peak() < budget, "{what}");
                    // And not the card below it.
                    assert!(budget == h100 || chunked.peak() > h100, "{what}");
                }
                None => assert!(chunked.peak() > h200, "{what}"),
            }
        }
        // Without the chunks GCN 3x128 holds two blocks of 27.9 M x 128 bf16 rows (6.6 GiB
        // each) and more per aggregation: above an H100's budget.
        let model = papers_model(ConvKind::Gcn, 128);
        let whole = estimate_shape(
            &papers_rank(ConvKind::Gcn, None),
            &model,
            &train,
            Target::Cuda,
        );
        assert!(whole.peak() > h100, "{}", whole.peak() / GIB);
        assert_eq!(chunk_candidates(&model), [128, 64, 32, 16]);
    }

    /// Issue 41's papers100M-sized runs on 8 ranks (before any 8-GPU run): one rank of the
    /// range partition holds 13.9 M nodes, 417 M non-zeros of GCN's operand (404 M of
    /// GraphSAGE's) and about 193 K labelled nodes; every 256-wide tensor then stays under
    /// candle's element limit (GraphSAGE's output layer aggregating first: its whole rows'
    /// two products, `[13.9 M x 344]`, would pass it). GCN 3x256 fits an H100 rank in
    /// 32-column chunks (55.4 GiB); GraphSAGE 3x256 (76.0 GiB) passes an H100's budget (76 GiB
    /// less NCCL's 2.49 GiB at 32 point-to-point channels and 7 peers) and fits an H200's.
    #[test]
    fn papers100m_3x256_on_8_ranks() {
        let train = TrainConfig {
            precision: Precision::Bf16,
            ..TrainConfig::default()
        };
        // NCCL ranks also keep the point-to-point channels' buffers (32 channels, 8 ranks).
        let nccl = nccl_p2p_reserve(32, 8);
        let (h100, h200) = (
            78 * GIB - CUDA_RESERVE - nccl,
            139 * GIB - CUDA_RESERVE - nccl,
        );
        let rank = |kind: ConvKind| {
            let gcn = kind == ConvKind::Gcn;
            RankShape {
                rank: 0,
                rows: 13_882_495,
                block_rows: 13_950_000,
                parts: 8,
                nnz: if gcn { 417_500_000 } else { 403_500_000 },
                halo: 95_000_000,
                fused: true,
                ring: true,
                weighted: gcn,
                feature_chunk: Some(32),
                labelled: 192_500,
            }
        };
        for (kind, card) in [(ConvKind::Gcn, h100), (ConvKind::SageMean, h200)] {
            let model = papers_model(kind, 256);
            let est = estimate_shape(&rank(kind), &model, &train, Target::Cuda);
            let gib = est.peak() as f64 / GIB as f64;
            println!(
                "{kind} 3x256 on 8 ranks, 32-column chunks: {gib:.1} GiB\n{}",
                est.table()
            );
            assert!(est.exact);
            assert!(est.peak() < card, "{kind}: {gib:.1} GiB");
            assert!(
                card == h100 || est.peak() > h100,
                "{kind}: {gib:.1} GiB fits an H100"
            );
            let shape = rank(kind);
            let cached = caches_input(&model, &train);
            crate::trainer::output::check_tensor_sizes(
                &model,
                shape.rows,
                shape.nnz as usize,
                shape.labelled,
                cached,
                None,
                "fix",
            )
            .expect("under the element limit on 8 ranks");
        }
    }

    /// On three or more ranks with a small gathered operand (the whole form by default), a
    /// budget the whole form passes but the sliced ring at the whole width meets takes the
    /// ring, not a feature chunk; a roomy budget keeps the whole form, a tight one goes on to
    /// chunks. Cora with a GCN 3x1024 on 6 ranks, where the ring's two blocks hold less than
    /// the six of the whole form (with 64 columns on 3 ranks the ring's slices cost more:
    /// 8.05 against 8.04 MB).
    #[test]
    fn the_unchunked_ring_is_tried_before_feature_chunks() {
        let ds = crate::test_cora();
        let (f, c) = (ds.features.cols(), ds.num_classes);
        let gcn = ModelConfig::new(ConvKind::Gcn, f, 1024, c, 3, 0.5);
        let train = TrainConfig {
            precision: Precision::Bf16,
            ..TrainConfig::default()
        };
        let plan = || {
            let p = DistPlan::new(&ds, ConvKind::Gcn, 6, Some(Exchange::AllGather)).unwrap();
            assert!(p.small_gather_whole && p.slice_rows_for(&gcn, train.precision).is_none());
            p
        };
        let peak = |p: &DistPlan| {
            estimate_all(p, &gcn, &train, Target::Cuda)
                .iter()
                .map(Estimate::peak)
                .max()
                .unwrap_or(0)
        };
        let whole = peak(&plan());
        let mut sliced = plan();
        sliced.small_gather_whole = false;
        let ring = peak(&sliced);
        assert!(ring < whole, "ring {ring} whole {whole}");
        // Room for the ring, not for the whole form: the ring at the whole width.
        let mut p = plan();
        let fits = |all: &[Estimate]| all.iter().all(|e| e.peak() <= ring);
        let (chunk, _) = fit_feature_chunk(&mut p, &gcn, &train, Target::Cuda, fits)
            .unwrap_or_else(|_| panic!("the ring fits"));
        assert_eq!(chunk, None);
        assert!(!p.small_gather_whole && p.slice_rows_for(&gcn, train.precision).is_some());
        // Room for the whole form: it stays.
        let mut p = plan();
        let roomy = |all: &[Estimate]| all.iter().all(|e| e.peak() <= whole);
        assert!(fit_feature_chunk(&mut p, &gcn, &train, Target::Cuda, roomy).is_ok());
        assert!(p.small_gather_whole && p.feature_chunk.is_none());
        // Less room than the ring at the whole width needs: a chunk.
        let mut p = plan();
        let tight = |all: &[Estimate]| all.iter().all(|e| e.peak() < ring);
        if let Ok((chunk, _)) = fit_feature_chunk(&mut p, &gcn, &train, Target::Cuda, tight) {
            assert!(chunk.is_some());
        }
    }

    /// NCCL's point-to-point reserve: nothing past the 4 channels the fixed reserve covers or
    /// on one rank; the measured 4-GPU growth from 4 to 32 channels (1.03 GiB) is covered.
    #[test]
    fn nccl_reserve_grows_with_channels_and_peers() {
        assert_eq!(nccl_p2p_reserve(4, 8), 0);
        assert_eq!(nccl_p2p_reserve(1, 4), 0);
        assert_eq!(nccl_p2p_reserve(32, 1), 0);
        let four = nccl_p2p_reserve(32, 4);
        assert_eq!(four, 28 * 3 * (13 << 20));
        assert!(four as f64 >= 1.03 * GIB as f64, "{four}");
        assert_eq!(nccl_p2p_reserve(32, 8), four / 3 * 7);
    }
}
