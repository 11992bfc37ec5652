//! The graph operands a model consumes, derived from a host graph and uploaded once.

use crate::config::ConvKind;
use crate::error::{Error, Result};
use crate::timer::{Phase, PhaseSpan, PhaseTimes, Timer};
use candle_core::{Device, Tensor};
use gnn_comm::{HaloExchange, SelectedAggregation, SymmetricOperand};
use gnn_graph::{BuildOptions, Csr, LocalGraph, Normalization, SelfLoops};
use gnn_kernels::{
    rescale_rows, scale_rows, spgemm_bias, spmm, spmm_sampled, spmm_then, spmm_transposed_then,
    spmm_weighted, Cbsr, DeviceGraph, Epilogue, KernelPolicy, KernelsUsed, Reduce, Sampling,
};
use serde::{Deserialize, Serialize};

/// Which aggregation kernel the layers call. Training always uses [`Aggregation::Exact`];
/// the sampled estimate is an inference-time choice (it has no backward).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    /// Exact CSR SpMM ([`gnn_kernels::spmm`]).
    #[default]
    Exact,
    /// Edge-sampled estimate ([`gnn_kernels::spmm_sampled`]): sum and mean aggregations
    /// (GCN, GraphSAGE-mean, GIN); max (GraphSAGE-pool) has no estimator.
    Sampled(Sampling),
}

impl std::fmt::Display for Aggregation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exact => f.write_str("exact"),
            Self::Sampled(Sampling::EsBucket { s }) => write!(f, "bucket:{s}"),
            Self::Sampled(Sampling::EsFastRand { s }) => write!(f, "fastrand:{s}"),
            Self::Sampled(Sampling::Aes { w, .. }) => write!(f, "aes:{w}"),
        }
    }
}

impl std::str::FromStr for Aggregation {
    type Err = Error;
    /// `exact`, `bucket:S`, `fastrand:S` or `aes:W` (AES with the default bands).
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::Config(format!(
                "unknown aggregation `{s}` (exact, bucket:S, fastrand:S, aes:W)"
            ))
        };
        if s.eq_ignore_ascii_case("exact") {
            return Ok(Self::Exact);
        }
        let (kind, width) = s.split_once(':').ok_or_else(bad)?;
        let width: usize = width.trim().parse().map_err(|_| bad())?;
        Ok(Self::Sampled(match kind.to_ascii_lowercase().as_str() {
            "bucket" | "es-bucket" => Sampling::EsBucket { s: width },
            "fastrand" | "es-fastrand" => Sampling::EsFastRand { s: width },
            "aes" => Sampling::aes(width),
            _ => return Err(bad()),
        }))
    }
}

/// A device graph plus optional edge values, in the form one model kind expects:
///
/// | kind | structure | values |
/// |---|---|---|
/// | GCN | `A + I` (one self loop per node) | `D^-1/2 (A+I) D^-1/2` |
/// | GraphSAGE, GIN | `A` without self loops | none (mean / max / sum in the kernel) |
/// | GAT | `A + I`, and per head count its head-expanded graph ([`ModelGraph::heads`]) | none |
/// | transformer | `A` as given (PyG keeps the file's self loops), and its head-expanded graphs | none |
/// | MLP | `A` as given (unused) | none |
///
/// It is also the forward context a layer receives: its phase clock times the pass
/// ([`ModelGraph::phase`]).
pub struct ModelGraph {
    /// The structure on the device.
    pub graph: DeviceGraph,
    /// Edge values aligned with the structure, when the layer is weighted.
    pub values: Option<Tensor>,
    /// The kernel [`ModelGraph::aggregate`] calls (exact unless set for inference).
    pub aggregation: Aggregation,
    /// Head-expanded copies of `graph`, built on first use per head count.
    expanded: std::sync::Mutex<std::collections::HashMap<usize, DeviceGraph>>,
    /// A partitioned graph's exchange: its rows are this rank's, its columns own + halo.
    halo: Option<HaloExchange>,
    /// The global id of row 0 (a partitioned graph's first owned row; 0 otherwise).
    row_offset: usize,
    /// The global index of edge 0 (a partitioned graph's first edge in the whole operand's
    /// order; 0 otherwise).
    edge_offset: usize,
    /// A partitioned graph's local operand for [`HaloExchange::aggregate_symmetric`], when
    /// the whole operand is symmetric (structure and values) and the exchange the all-gather.
    symmetric: Option<SymmetricOperand>,
    /// `graph` is only the first column slice of `symmetric` (the local graph is stored as
    /// slices): every product but the symmetric aggregation is refused.
    sliced: bool,
    /// A partitioned graph's aggregation of the output layer's rows alone, for the training
    /// that restricts the output layer to them ([`Self::with_output_aggregation`]).
    output_aggregation: Option<SelectedAggregation>,
    /// The phase clock of the passes over this graph (off unless [`Self::set_phase_timing`]).
    timer: std::sync::Arc<Timer>,
    /// A whole graph's layers run their lean forms ([`Self::with_lean_layers`]).
    lean: bool,
    /// Lean output layers that multiply first, and GAT's one-head output layers, compute on
    /// an aligned width ([`Self::with_padded_outputs`]).
    pad_outputs: bool,
    /// GCN's normalisation as its diagonal factors (`D^-1/2`, f32), with the id of the
    /// `values` they stand for: a whole graph's fused sum then aggregates unweighted between
    /// two row scalings ([`Self::with_scaled_normalisation`]).
    gcn_scale: Option<(candle_core::TensorId, RowScales)>,
    /// Whether the fused sum takes [`Self::gcn_scale`] (on CUDA by default).
    scaled: bool,
    /// A graph restricted to some rows of another ([`Self::restricted_to_rows`]): those rows,
    /// for a layer's root term (its input's own rows, GraphSAGE's `W_r x_i`).
    rows: Option<crate::OutputRows>,
}

/// The two diagonal factors of GCN's normalisation as a scaled sum takes them: `rows` scales
/// the sum's output rows, `cols` its input rows (`value(i, j) = rows[i] · cols[j]`). Both are
/// `D^-1/2` of the whole graph (`[N]`, f32); on a graph restricted to some rows
/// ([`ModelGraph::restricted_to_rows`]) `rows` holds those rows' factors alone.
#[derive(Clone)]
struct RowScales {
    rows: Tensor,
    cols: Tensor,
}

/// A partitioned graph's fused symmetric aggregation under one reduction
/// ([`ModelGraph::fused_aggregation`]), or its sum for the output rows alone
/// ([`FusedAggregation::selected`]), or a whole graph's own sum or mean (after
/// [`ModelGraph::with_lean_layers`]); cheap to clone (an op's backward holds it).
#[derive(Clone)]
pub struct FusedAggregation(Fused);

#[derive(Clone)]
enum Fused {
    /// Every row of this rank: [`HaloExchange::aggregate_symmetric`].
    Symmetric {
        halo: HaloExchange,
        operand: SymmetricOperand,
        reduce: Reduce,
    },
    /// This rank's selected rows only (a sum): [`SelectedAggregation`].
    Selected(SelectedAggregation),
    /// A whole graph's sum or mean: [`spmm`] / [`spmm_weighted`] forward,
    /// [`gnn_kernels::spmm_transposed`] backward; with `scale` (GCN's `D^-1/2`, standing for
    /// `values`: [`ModelGraph::with_scaled_normalisation`]) both unweighted, the inner row
    /// scaling a [`gnn_kernels::scale_rows`] and the outer one the SpMM's epilogue
    /// ([`gnn_kernels::spmm_then`], [`gnn_kernels::spmm_transposed_then`]).
    Whole {
        graph: DeviceGraph,
        values: Option<Tensor>,
        scale: Option<RowScales>,
        reduce: Reduce,
    },
}

impl FusedAggregation {
    /// The sum aggregation of the selected rows alone ([`SelectedAggregation`]): its
    /// [`Self::forward`] gives `(Â x)[S_r]`, `[|S_r|, K]` rows, not every row's.
    pub fn selected(agg: SelectedAggregation) -> Self {
        Self(Fused::Selected(agg))
    }

    /// Whether this is [`Self::selected`]'s form (its output holds the selected rows only).
    pub fn is_selected(&self) -> bool {
        matches!(self.0, Fused::Selected(_))
    }

    /// Whether this is a whole graph's GCN sum run unweighted between two row scalings
    /// ([`ModelGraph::with_scaled_normalisation`]).
    pub fn is_scaled(&self) -> bool {
        matches!(self.0, Fused::Whole { scale: Some(_), .. })
    }

    /// Whether this is a scaled sum ([`Self::is_scaled`]) that takes rows of `dtype` through
    /// its row scalings (every dtype but f16): where [`Self::forward_bias`] and
    /// [`Self::backward_widened`] answer.
    pub(crate) fn is_scaled_for(&self, dtype: candle_core::DType) -> bool {
        self.is_scaled() && dtype != candle_core::DType::F16
    }

    /// The graph and row factors of a scaled sum that takes `t` through them (not f16);
    /// `None` for the other forms.
    fn scaled_for(&self, t: &Tensor) -> Option<(&DeviceGraph, &RowScales)> {
        match &self.0 {
            Fused::Whole {
                graph,
                scale: Some(s),
                ..
            } if scales(t) => Some((graph, s)),
            _ => None,
        }
    }

    /// For a scaled sum ([`Self::is_scaled`]), [`Self::forward`] plus the bias `b [cols]` on
    /// its first `cols` columns, the outer row scaling, the bias and the narrowing in one
    /// pass ([`gnn_kernels::spmm_then`]): an output layer's aggregation on aligned columns.
    /// `None` for the other forms.
    pub(crate) fn forward_bias(
        &self,
        x: &Tensor,
        b: &Tensor,
        cols: usize,
    ) -> Result<Option<Tensor>> {
        let Some((graph, s)) = self.scaled_for(x) else {
            return Ok(None);
        };
        graph.record_form("spmm", "row-scaled");
        let xs = scale_rows(&x.detach(), &s.cols)?;
        let e = Epilogue {
            scale: Some(&s.rows),
            residual: None,
            bias: Some(b),
            cols,
        };
        Ok(Some(spmm_then(graph, &xs, Reduce::Sum, &e)?))
    }

    /// For a whole graph's unweighted, unscaled sum or mean (GraphSAGE's), [`Self::forward`]
    /// plus a residual `r` (the root term, `[R, K]` like the aggregation) and the bias
    /// `b [cols]` on its first `cols` columns, in one pass after the SpMM
    /// ([`gnn_kernels::spmm_then`]; in half precision read from its fp32 accumulation): an
    /// output layer's aggregation on aligned columns. `None` for the other forms.
    pub(crate) fn forward_residual_bias(
        &self,
        x: &Tensor,
        r: &Tensor,
        b: &Tensor,
        cols: usize,
    ) -> Result<Option<Tensor>> {
        let Fused::Whole {
            graph,
            values: None,
            scale: None,
            reduce: reduce @ (Reduce::Sum | Reduce::Mean),
        } = &self.0
        else {
            return Ok(None);
        };
        let e = Epilogue {
            scale: None,
            residual: Some(r),
            bias: Some(b),
            cols,
        };
        Ok(Some(spmm_then(graph, x, *reduce, &e)?))
    }

    /// For a scaled sum, [`Self::backward`] of an output gradient on fewer columns than the
    /// forward's input (`dy [N, c]`, `c <= width`, zero beyond): the padding and the inner row
    /// scaling in one pass. `None` for the other forms.
    pub(crate) fn backward_widened(&self, dy: &Tensor, width: usize) -> Result<Option<Tensor>> {
        let Some((graph, s)) = self.scaled_for(dy) else {
            return Ok(None);
        };
        let dy = rescale_rows(dy, &s.rows, None, width)?;
        let e = Epilogue {
            scale: Some(&s.cols),
            ..Epilogue::width(width)
        };
        Ok(Some(spmm_transposed_then(graph, &dy, Reduce::Sum, &e)?))
    }

    /// `Â x` for this rank's rows (for its selected rows, [`Self::selected`]), untracked
    /// (what [`ModelGraph::aggregate`] computes, before any selection).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(match &self.0 {
            Fused::Symmetric {
                halo,
                operand,
                reduce,
            } => halo.aggregate_symmetric(operand, &x.detach(), *reduce)?,
            Fused::Selected(s) => s.forward(&x.detach())?,
            Fused::Whole {
                graph,
                scale: Some(s),
                ..
            } if scales(x) => {
                graph.record_form("spmm", "row-scaled");
                let xs = scale_rows(&x.detach(), &s.cols)?;
                let e = Epilogue {
                    scale: Some(&s.rows),
                    ..Epilogue::width(x.dim(1)?)
                };
                spmm_then(graph, &xs, Reduce::Sum, &e)?
            }
            Fused::Whole {
                graph,
                values,
                reduce,
                ..
            } => match values {
                Some(v) => spmm_weighted(graph, &x.detach(), v, *reduce)?,
                None => spmm(graph, &x.detach(), *reduce)?,
            },
        })
    }

    /// The gradient [`Self::forward`]'s input gets for the output gradient `dy`:
    /// [`HaloExchange::aggregate_symmetric_grad`] (or [`SelectedAggregation::backward`], or
    /// a whole graph's [`gnn_kernels::spmm_transposed`], scaled:
    /// [`gnn_kernels::spmm_transposed_then`]).
    /// Collective, like the forward.
    pub fn backward(&self, dy: &Tensor) -> Result<Tensor> {
        Ok(match &self.0 {
            Fused::Symmetric {
                halo,
                operand,
                reduce,
            } => halo.aggregate_symmetric_grad(operand, dy, *reduce)?,
            Fused::Selected(s) => s.backward(dy)?,
            Fused::Whole {
                graph,
                scale: Some(s),
                ..
            } if scales(dy) => {
                let dy = scale_rows(dy, &s.rows)?;
                let e = Epilogue {
                    scale: Some(&s.cols),
                    ..Epilogue::width(dy.dim(1)?)
                };
                spmm_transposed_then(graph, &dy, Reduce::Sum, &e)?
            }
            Fused::Whole {
                graph,
                values,
                reduce,
                ..
            } => gnn_kernels::spmm_transposed(graph, dy, values.as_ref(), *reduce)?,
        })
    }
}

/// Whether a scaled GCN sum takes `t` through its row scalings: every dtype but f16, whose
/// scaled rows could fall below its normal range (it keeps the edge values, applied in fp32).
fn scales(t: &Tensor) -> bool {
    t.dtype() != candle_core::DType::F16
}

/// The host-side operands of one model kind (structure and edge values, before upload):
/// what [`ModelGraph::new`] uploads, and what a multi-device run partitions.
#[derive(Debug, Clone)]
pub struct Operands {
    /// The structure the kind aggregates over (see [`ModelGraph`]'s table).
    pub csr: Csr,
    /// Edge values aligned with `csr` (GCN's normalisation), if the kind is weighted.
    pub values: Option<Vec<f32>>,
}

impl Operands {
    /// Derives the operands of `kind` from a square graph (row = target).
    pub fn new(csr: &Csr, kind: ConvKind) -> Result<Self> {
        let rebuild = |loops| {
            csr.rebuild(BuildOptions {
                symmetrize: false,
                dedup: true,
                self_loops: loops,
            })
            .map_err(gnn_kernels::Error::from)
        };
        Ok(match kind {
            ConvKind::Gat => Self::plain(rebuild(SelfLoops::Add)?),
            ConvKind::Gcn => {
                let a = rebuild(SelfLoops::Add)?;
                let v = Normalization::GcnSymmetric.edge_values(&a);
                Self {
                    csr: a,
                    values: Some(v),
                }
            }
            ConvKind::SageMean | ConvKind::SagePool | ConvKind::Gin => {
                if csr.self_loop_count() == 0 {
                    Self::plain(csr.clone())
                } else {
                    Self::plain(rebuild(SelfLoops::Remove)?)
                }
            }
            ConvKind::Mlp | ConvKind::Transformer => Self::plain(csr.clone()),
        })
    }

    fn plain(csr: Csr) -> Self {
        Self { csr, values: None }
    }
}

impl ModelGraph {
    /// Derives and uploads the operands of `kind` from a square graph (row = target).
    pub fn new(csr: &Csr, kind: ConvKind, device: &Device) -> Result<Self> {
        let ops = Operands::new(csr, kind)?;
        let mut g = Self::plain(DeviceGraph::upload(&ops.csr, device)?);
        if let Some(v) = ops.values {
            let v = Tensor::from_vec(v, ops.csr.nnz(), device)?;
            // The values in the transpose's order, as every backward needs them, settled here
            // with the graph: GCN's are symmetric, so this keeps `v` and releases the
            // transpose's [nnz] permutation, whose build and check would otherwise peak
            // inside the first training epoch.
            g.graph.transposed_values(&v)?;
            if kind == ConvKind::Gcn {
                let s = gnn_graph::gcn_inv_sqrt_degrees(&ops.csr);
                let s = Tensor::from_vec(s, ops.csr.n_rows(), device)?;
                let scales = RowScales {
                    rows: s.clone(),
                    cols: s,
                };
                g.gcn_scale = Some((v.id(), scales));
                g.scaled = device.is_cuda();
            }
            g.values = Some(v);
        }
        Ok(g)
    }

    /// The same graph whose fused GCN sum (the lean layers' aggregation on a whole graph,
    /// [`Self::fused_aggregation`]) runs as `D^-1/2 · spmm(A + I, D^-1/2 · x)`: an unweighted
    /// SpMM between two row scalings ([`gnn_kernels::scale_rows`]), which reads no fp32 value
    /// per edge (on an H200 at K = 48 bf16, 1.66 ms against 1.82 for the weighted SpMM, the
    /// scalings about 10 µs each), instead of the SpMM over the normalised values. On by default
    /// on CUDA for every dtype but f16 (f16 keeps the values: its scaled rows could fall below
    /// its normal range; checked again on each tensor the sum takes); off on the CPU, where the
    /// composed and lean forms agree bit for bit.
    /// Only for [`Self::new`]'s own GCN values (a graph whose `values` were replaced keeps
    /// them). The sums equal the weighted ones up to rounding: each factor is rounded to f32
    /// where the values round their f64 product, and half precision rounds the scaled rows.
    pub fn with_scaled_normalisation(mut self, on: bool) -> Self {
        self.scaled = on;
        self
    }

    /// The rows `rows` (ascending, distinct) of this whole graph, every column kept: a
    /// `rows.len() x N` graph whose aggregation gives those rows alone (`(Â x)[rows]`) and
    /// whose backward is the transpose product over their edges only. A training pass hands
    /// it to its output layer ([`crate::Forward::with_output_graph`]) when the loss reads
    /// only these rows (the train nodes'): on the same-graph Reddit files (66 % of the nodes
    /// in the train split) the output layer's SpMM and its transpose then run over about
    /// 66 % of the edges, with the same result for those rows.
    ///
    /// The rows' structure and its transpose are uploaded anew (two `[nnz_rows]` index
    /// arrays) with their edge values; the kernel policy and record, the phase clock, the
    /// layer forms and GCN's row-scaled sum are this graph's. An error on a partitioned graph
    /// or under a sampled aggregation.
    pub fn restricted_to_rows(&self, rows: &[u32]) -> Result<Self> {
        if self.halo.is_some() || self.aggregation != Aggregation::Exact {
            return Err(Error::Config(format!(
                "only a whole graph under exact aggregation is restricted to some rows (this \
                 one is {}{})",
                if self.halo.is_some() {
                    "partitioned, "
                } else {
                    ""
                },
                self.aggregation
            )));
        }
        let n = self.graph.n_rows();
        crate::output::check_ascending(rows, "restricted rows")?;
        if let Some(&r) = rows.last().filter(|&&r| r as usize >= n) {
            return Err(Error::Config(format!(
                "restricted row {r} is out of range: the graph has {n} rows"
            )));
        }
        let parent = self.graph.csr();
        let csr = parent.select_rows(rows).map_err(gnn_kernels::Error::from)?;
        let device = self.graph.device();
        let values = match &self.values {
            Some(v) => {
                // The rows' edges are ranges of this graph's: their values, in that order.
                let mut edges = Vec::with_capacity(csr.nnz());
                for &r in rows {
                    edges.extend(parent.row_range(r as usize).map(|p| p as u32));
                }
                let edges = Tensor::from_vec(edges, csr.nnz(), device)?;
                Some(v.index_select(&edges, 0)?)
            }
            None => None,
        };
        let graph =
            DeviceGraph::from_arc(std::sync::Arc::new(csr), device)?.with_policy_of(&self.graph);
        // The transpose every backward runs on, built now rather than in the first epoch;
        // its edge permutation is dropped (the row-scaled sum reads no values; a weighted
        // backward rebuilds it once).
        graph.release_transpose_permutation()?;
        let mut g = Self::plain(graph);
        if let (Some((id, s)), Some(v), Some(mine)) = (&self.gcn_scale, &values, &self.values) {
            if mine.id() == *id {
                let ids = Tensor::from_slice(rows, rows.len(), device)?;
                let scales = RowScales {
                    rows: s.rows.index_select(&ids, 0)?,
                    cols: s.cols.clone(),
                };
                g.gcn_scale = Some((v.id(), scales));
            }
        }
        g.values = values;
        g.rows = Some(crate::OutputRows::new(rows, n, device)?);
        g.timer = self.timer.clone();
        g.lean = self.lean;
        g.pad_outputs = self.pad_outputs;
        g.scaled = self.scaled;
        Ok(g)
    }

    /// The rows of the graph this one was restricted from that are this graph's rows
    /// ([`Self::restricted_to_rows`]); `None` on any other graph.
    pub(crate) fn restricted_rows(&self) -> Option<&crate::OutputRows> {
        self.rows.as_ref()
    }

    /// The rows of `x` (`[N, K]`, one per column of this graph) that are this graph's own rows:
    /// on a graph restricted to some rows ([`Self::restricted_to_rows`]) those rows
    /// (`[M, K]`, differentiable), for a layer's root term; `None` on any other graph, whose
    /// rows are `x`'s own.
    pub(crate) fn own_rows_of(&self, x: &Tensor) -> Result<Option<Tensor>> {
        self.rows
            .as_ref()
            .map(|r| {
                let _t = self.phase(Phase::Aggregation);
                r.select(x)
            })
            .transpose()
    }

    /// One rank's share of `ops` in a multi-device run: its rows of the operands (`local`,
    /// built from `ops.csr`), uploaded with the columns `halo` delivers, and the exchange
    /// that brings in the other ranks' rows before every aggregation. An attention layer
    /// exchanges its projected rows ([`Self::exchange`]) and runs on the head-expanded local
    /// graph ([`Self::heads`]): every row's edges are local, so is its edge softmax.
    ///
    /// `symmetric`: the whole operand is symmetric in structure and values (GCN's normalised
    /// `A + I` and GraphSAGE/GIN's `A` of an undirected graph). With the all-gather exchange,
    /// sum and mean aggregations then run as one op whose backward needs no transpose of the
    /// local graph and keeps no gathered rows ([`HaloExchange::aggregate_symmetric`]).
    ///
    /// `slice_rows`: with `symmetric` under the all-gather, store the local graph as column
    /// slices, one per rank's block of the gathered rows, cut further into at most this many
    /// rows ([`HaloExchange::symmetric_operand`]: the own block's slice runs while the
    /// exchange is in flight; same memory), for a model whose every aggregation is a sum or
    /// mean that op takes: the other products (MaxK's SpGEMM, max) need the whole local graph
    /// and are refused on a sliced one. `None` keeps it whole.
    pub fn partitioned(
        ops: &Operands,
        local: &LocalGraph,
        halo: HaloExchange,
        symmetric: bool,
        slice_rows: Option<usize>,
        device: &Device,
    ) -> Result<Self> {
        let values = match &ops.values {
            Some(v) => Some(v.get(local.edges.clone()).ok_or_else(|| {
                Error::Config(format!(
                    "local graph edges {:?} outside the operands' {} values",
                    local.edges,
                    v.len()
                ))
            })?),
            None => None,
        };
        let symmetric = symmetric && halo.kind() == gnn_graph::Exchange::AllGather;
        let mut g = match slice_rows.filter(|_| symmetric) {
            Some(rows) => {
                let op = halo.symmetric_operand(local, values, rows, device)?;
                let mut g = Self::plain(op.first_graph().clone());
                g.sliced = op.is_sliced();
                if !g.sliced {
                    g.values = op.first_values();
                }
                g.symmetric = Some(op);
                g
            }
            None => {
                let csr = halo.local_csr(local)?.into_owned();
                let mut g = Self::plain(DeviceGraph::from_arc(std::sync::Arc::new(csr), device)?);
                g.values = values
                    .map(|v| Tensor::from_slice(v, v.len(), device))
                    .transpose()?;
                // As in `new`: the values in the transpose's order settled with the graph, not
                // inside the first backward (at scale 4 on one rank that build's ~9 bytes per
                // non-zero, 7.7 GiB, landed on epoch 1's peak).
                if let Some(v) = &g.values {
                    g.graph.transposed_values(v)?;
                }
                if symmetric {
                    g.symmetric = Some(SymmetricOperand::whole(g.graph.clone(), g.values.clone()));
                }
                g
            }
        };
        g.halo = Some(halo);
        g.row_offset = local.rows.start;
        g.edge_offset = local.edges.start;
        Ok(g)
    }

    /// The same operands under the kernel `policy` (set once, after construction): the
    /// structure, its slices, the halo's scatter and every head-expanded copy then run under
    /// it, and all of them record into one record ([`Self::kernels_used`]).
    pub fn with_policy(mut self, policy: KernelPolicy) -> Self {
        self.graph = self.graph.with_policy(policy);
        self.halo = self.halo.map(|h| h.with_policy_of(&self.graph));
        self.symmetric = self.symmetric.map(|op| op.with_policy_of(&self.graph));
        self.output_aggregation = self
            .output_aggregation
            .map(|a| a.with_policy_of(&self.graph));
        self
    }

    /// The same operands whose partitioned aggregations run over at most `cols` feature
    /// columns at a time ([`SymmetricOperand::with_feature_chunk`]: less transient memory per
    /// aggregation, the same values); `None` keeps the whole width. Only the fused symmetric
    /// aggregation of a partitioned graph takes it; elsewhere a no-op.
    pub fn with_feature_chunk(mut self, cols: Option<usize>) -> Self {
        self.symmetric = self.symmetric.map(|op| op.with_feature_chunk(cols));
        self
    }

    /// [`Self::with_feature_chunk`]'s setting, where the graph has a fused aggregation.
    pub fn feature_chunk(&self) -> Option<usize> {
        self.symmetric
            .as_ref()
            .and_then(SymmetricOperand::feature_chunk)
    }

    /// The kernel policy the operands run under.
    pub fn policy(&self) -> &KernelPolicy {
        self.graph.policy()
    }

    /// The kernels the operands' ops have run so far.
    pub fn kernels_used(&self) -> KernelsUsed {
        self.graph.kernels_used()
    }

    /// The whole graph for a product other than the symmetric aggregation; an error on a
    /// partitioned graph stored as column slices.
    pub(crate) fn whole(&self) -> Result<&DeviceGraph> {
        if self.sliced {
            return Err(Error::Config(
                "this partitioned graph is stored as column slices for the symmetric \
                 aggregation (sum and mean of GCN, GraphSAGE, GIN); MaxK, max and sampled \
                 products need the whole local graph (build it with ModelGraph::partitioned's \
                 slice_rows = None)"
                    .into(),
            ));
        }
        Ok(&self.graph)
    }

    /// The global id of this graph's row 0: the first owned row of a partitioned graph, 0
    /// for a whole one (dropout masks and node ids are offset by it).
    pub fn row_offset(&self) -> usize {
        self.row_offset
    }

    /// The global index of this graph's edge 0 in the whole operand's edge order: the first
    /// edge of a partitioned graph's rows (its edges are a range of the whole graph's), 0 for
    /// a whole one (per-edge dropout masks are offset by it).
    pub fn edge_offset(&self) -> usize {
        self.edge_offset
    }

    /// Every tensor of `xs` (`[n_rows, d_k]`: rows of this graph's rows) with the rows this
    /// graph's columns name: the tensors themselves on a whole graph; on a partitioned one,
    /// this rank's rows and the halo rows from their owners, in one exchange of all of them
    /// ([`HaloExchange::forward`]: differentiable, the halo rows' gradients go home). This
    /// graph's own rows lie at [`Self::own_columns`] of each result.
    pub fn exchange(&self, xs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let Some(h) = &self.halo else {
            return Ok(xs.iter().map(|&x| x.clone()).collect());
        };
        if let [x] = xs {
            return Ok(vec![h.forward(x)?]);
        }
        let joined = h.forward(&Tensor::cat(xs, 1)?)?;
        let mut at = 0;
        xs.iter()
            .map(|x| {
                let w = x.dim(1)?;
                let part = joined.narrow(1, at, w)?.contiguous()?;
                at += w;
                Ok(part)
            })
            .collect()
    }

    /// Where this graph's own rows lie among the rows [`Self::exchange`] returns (and its
    /// columns): `0..n_rows` on a whole graph and under the point-to-point exchange, this
    /// rank's block under the all-gather.
    pub fn own_columns(&self) -> std::ops::Range<usize> {
        match &self.halo {
            Some(h) => h.own_rows(),
            None => 0..self.graph.n_rows(),
        }
    }

    /// Whether the layers over this graph run their lean forms (`conv::lean`: one op per
    /// layer keeping only what its backward reads): on a partitioned graph, and on a whole
    /// graph under exact aggregation after [`Self::with_lean_layers`] (the trainers set it:
    /// faster and smaller for GraphSAGE and GCN). Otherwise a whole graph keeps the composed
    /// forms, whose gradients it has always had bit for bit (the lean forms' weight
    /// gradients round differently).
    pub fn lean_layers(&self) -> bool {
        self.halo.is_some() || (self.lean && self.aggregation == Aggregation::Exact)
    }

    /// The same graph whose layers run their lean forms where it is whole, as on a
    /// partitioned graph ([`Self::lean_layers`]; [`Self::fused_aggregation`] then gives
    /// the whole graph's sum and mean): GraphSAGE's products, aggregation, bias and
    /// activation as one op, without the composed form's narrowed halves and their
    /// full-size gradient copies. Weight gradients round differently from the composed
    /// forms'. Sampled aggregation keeps the composed forms.
    pub fn with_lean_layers(mut self, on: bool) -> Self {
        self.lean = on;
        self
    }

    /// The same graph whose lean output layers that multiply first (GCN's and GraphSAGE's,
    /// `conv::lean`) and GAT's one-head layers compute on [`crate::aligned_width`] columns: the
    /// weight, bias and attention vectors padded with zeros, the logits narrowed back. cuBLAS then
    /// runs its aligned kernels for the output GEMMs (41 bf16 classes are 82-byte rows: its sm75
    /// fallback, 85 µs forward on an H200 at 233 K rows), the narrow SpMM needs no padded copy
    /// of its input and GAT's fused kernels take their vector loads. The values are the unpadded
    /// layer's (zero rows add nothing). The trainers set it where [`padded_outputs_pay`] says.
    pub fn with_padded_outputs(mut self, on: bool) -> Self {
        self.pad_outputs = on;
        self
    }

    /// Whether [`Self::with_padded_outputs`] is on.
    pub fn pads_outputs(&self) -> bool {
        self.pad_outputs
    }

    /// The fused symmetric aggregation of a partitioned graph ([`HaloExchange::aggregate_symmetric`])
    /// as an owned handle, where `reduce` of `dtype` rows runs as that op here (exact
    /// aggregation, the all-gather exchange, a symmetric operand): for the layers' lean forms,
    /// ops that aggregate an untracked activation inside their own forward and differentiate
    /// through it themselves, so the graph keeps neither the activation nor the aggregation's
    /// input. On a whole graph after [`Self::with_lean_layers`], its own sum or mean (the
    /// SpMM forward, the transpose product backward). `None` elsewhere.
    pub fn fused_aggregation(
        &self,
        reduce: Reduce,
        dtype: candle_core::DType,
    ) -> Option<FusedAggregation> {
        match (&self.halo, &self.symmetric) {
            (Some(h), Some(op))
                if self.aggregation == Aggregation::Exact
                    && h.aggregates_symmetric(reduce, dtype) =>
            {
                Some(FusedAggregation(Fused::Symmetric {
                    halo: h.clone(),
                    operand: op.clone(),
                    reduce,
                }))
            }
            (None, _)
                if self.lean
                    && self.aggregation == Aggregation::Exact
                    && matches!(reduce, Reduce::Sum | Reduce::Mean) =>
            {
                let scale = self
                    .gcn_scale
                    .as_ref()
                    .filter(|(id, _)| {
                        self.scaled
                            && reduce == Reduce::Sum
                            && dtype != candle_core::DType::F16
                            && self.values.as_ref().is_some_and(|v| v.id() == *id)
                    })
                    .map(|(_, s)| s.clone());
                Some(FusedAggregation(Fused::Whole {
                    graph: self.graph.clone(),
                    values: self.values.clone(),
                    scale,
                    reduce,
                }))
            }
            _ => None,
        }
    }

    /// The same operands carrying `agg`, the aggregation of the rows the output layer is
    /// computed for (this rank's labelled rows), under this graph's kernel policy: a trainer
    /// that restricts the output layer to those rows hands it to the pass
    /// ([`crate::OutputRows::with_aggregation`]). Collective like every aggregation: every
    /// rank's graph must carry one, or none.
    pub fn with_output_aggregation(mut self, agg: SelectedAggregation) -> Self {
        self.output_aggregation = Some(agg.with_policy_of(&self.graph));
        self
    }

    /// [`Self::with_output_aggregation`]'s aggregation, if any.
    pub fn output_aggregation(&self) -> Option<&SelectedAggregation> {
        self.output_aggregation.as_ref()
    }

    /// The halo exchange of a partitioned graph ([`Self::partitioned`]).
    pub fn halo(&self) -> Option<&HaloExchange> {
        self.halo.as_ref()
    }

    /// The device graph and edge values when [`Self::aggregate`] is one exact SpMM over them
    /// (exact aggregation, not partitioned): what an op that runs the aggregation itself
    /// ([`gnn_kernels::Aggregate`]) needs; `None` otherwise.
    pub fn exact_operands(&self) -> Option<(&DeviceGraph, Option<&Tensor>)> {
        match (self.aggregation, &self.halo) {
            (Aggregation::Exact, None) => Some((&self.graph, self.values.as_ref())),
            _ => None,
        }
    }

    fn plain(graph: DeviceGraph) -> Self {
        Self {
            timer: std::sync::Arc::new(Timer::new(graph.device())),
            graph,
            values: None,
            aggregation: Aggregation::Exact,
            expanded: Default::default(),
            halo: None,
            row_offset: 0,
            edge_offset: 0,
            symmetric: None,
            sliced: false,
            output_aggregation: None,
            lean: false,
            pad_outputs: false,
            gcn_scale: None,
            scaled: false,
            rows: None,
        }
    }

    /// Opens a span of `phase` on this graph's clock: the time until the span is dropped is
    /// added to the phase when timing is on (`let _t = g.phase(Phase::Gemm);`).
    pub fn phase(&self, phase: Phase) -> PhaseSpan<'_> {
        self.timer.phase(phase)
    }

    /// Turns the forward passes' phase timing on or off ([`Self::phase`]). The clock belongs
    /// to the graph: passes over it on several threads at once would share it.
    pub fn set_phase_timing(&self, on: bool) {
        self.timer.set_enabled(on);
    }

    /// The phase times gathered since the last call, reset to zero (on a CUDA device this
    /// waits for the last recorded event), or the first error a span met.
    pub fn take_phase_times(&self) -> Result<PhaseTimes> {
        self.timer.take()
    }

    /// The graph with each row repeated per head ([`gnn_graph::Csr::expand_heads`]), on the
    /// same device, built once per head count. Row `i * heads + h` is head `h` of row `i`,
    /// column `j * heads + h` head `h` of column `j`: on a partitioned graph, the local rows
    /// by the exchanged columns ([`Self::exchange`]'s rows, `heads` per row), its edges the
    /// range from `heads * edge_offset()` of the whole head-expanded graph's.
    pub fn heads(&self, heads: usize) -> Result<DeviceGraph> {
        if heads == 1 {
            return Ok(self.whole()?.clone());
        }
        self.whole()?;
        let mut map = self.expanded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(g) = map.get(&heads) {
            return Ok(g.with_policy_of(&self.graph));
        }
        let csr = self
            .graph
            .csr()
            .expand_heads(heads)
            .map_err(gnn_kernels::Error::from)?;
        let g = DeviceGraph::upload(&csr, self.graph.device())?.with_policy_of(&self.graph);
        map.insert(heads, g.clone());
        Ok(g)
    }

    /// Aggregates `x` with the graph's values (if any) under `reduce`, with the kernel
    /// [`Self::aggregation`] names.
    pub fn aggregate(&self, x: &Tensor, reduce: Reduce) -> Result<Tensor> {
        if let (Some(h), Some(op)) = (&self.halo, &self.symmetric) {
            if self.aggregation == Aggregation::Exact && h.aggregates_symmetric(reduce, x.dtype()) {
                return Ok(h.aggregate_symmetric(op, x, reduce)?);
            }
        }
        let x = match &self.halo {
            Some(h) => h.forward(x)?,
            None => x.clone(),
        };
        self.aggregate_exchanged(&x, reduce)
    }

    /// [`Self::aggregate`] of rows that already hold the halo (on a partitioned graph).
    fn aggregate_exchanged(&self, x: &Tensor, reduce: Reduce) -> Result<Tensor> {
        Ok(match (self.aggregation, &self.values) {
            (Aggregation::Exact, Some(v)) => spmm_weighted(self.whole()?, x, v, reduce)?,
            (Aggregation::Exact, None) => spmm(self.whole()?, x, reduce)?,
            (Aggregation::Sampled(s), v) => {
                if !matches!(reduce, Reduce::Sum | Reduce::Mean) {
                    return Err(Error::Config(format!(
                        "{reduce:?} aggregation (GraphSAGE-pool) has no sampled estimator; \
                         use exact aggregation for this model"
                    )));
                }
                spmm_sampled(self.whole()?, x, v.as_ref(), reduce, s)?
            }
        })
    }

    /// Aggregates MaxK features given in CBSR (the forward SpGEMM; its backward is the
    /// SSpMM). Under a sampled aggregation the features are densified first.
    pub fn aggregate_cbsr(&self, x: &Cbsr, reduce: Reduce) -> Result<Tensor> {
        self.aggregate_cbsr_with(x, reduce, None)
    }

    /// [`Self::aggregate_cbsr`] plus `bias [D]` on every row, fused into the SpGEMM under
    /// exact aggregation (a broadcast add otherwise).
    pub fn aggregate_cbsr_bias(&self, x: &Cbsr, reduce: Reduce, bias: &Tensor) -> Result<Tensor> {
        self.aggregate_cbsr_with(x, reduce, Some(bias))
    }

    /// [`Self::aggregate_cbsr_bias`] plus `residual` (this graph's output rows, the layer's
    /// input of a residual network), fused into the SpGEMM under exact aggregation.
    pub fn aggregate_cbsr_bias_residual(
        &self,
        x: &Cbsr,
        reduce: Reduce,
        bias: &Tensor,
        residual: &Tensor,
    ) -> Result<Tensor> {
        let x = self.exchanged_cbsr(x)?;
        match self.aggregation {
            Aggregation::Exact => Ok(gnn_kernels::spgemm_bias_residual(
                self.whole()?,
                &x,
                self.values.as_ref(),
                reduce,
                bias,
                residual,
            )?),
            Aggregation::Sampled(_) => {
                let y = self.aggregate_exchanged(&x.to_dense()?, reduce)?;
                Ok((y.broadcast_add(bias)? + residual)?)
            }
        }
    }

    /// `x` with the halo rows of the other ranks (`x` itself on a whole graph); refused on
    /// every rank alike, before the exchange, where the graph is not whole.
    fn exchanged_cbsr(&self, x: &Cbsr) -> Result<Cbsr> {
        self.whole()?;
        Ok(match &self.halo {
            Some(h) => h.forward_cbsr(x)?,
            None => x.clone(),
        })
    }

    fn aggregate_cbsr_with(
        &self,
        x: &Cbsr,
        reduce: Reduce,
        bias: Option<&Tensor>,
    ) -> Result<Tensor> {
        let x = self.exchanged_cbsr(x)?;
        match self.aggregation {
            Aggregation::Exact => Ok(spgemm_bias(
                self.whole()?,
                &x,
                self.values.as_ref(),
                reduce,
                bias,
            )?),
            Aggregation::Sampled(_) => {
                let y = self.aggregate_exchanged(&x.to_dense()?, reduce)?;
                Ok(match bias {
                    Some(b) => y.broadcast_add(b)?,
                    None => y,
                })
            }
        }
    }
}

/// Whether the trainers put `kind`'s output layer on aligned columns
/// ([`ModelGraph::with_padded_outputs`]) on `device` in half precision (`half`) or f32.
///
/// On CUDA only, and there in half precision for every kind and in f32 for GAT. One H200, base
/// and padded alternating in one call (bench/records/dist-scaling/h100-2026-11-28-sage-kernels/padded-outputs-h200
/// and bench/records/gat-sparse/h200-2026-11-28/walks-h200):
/// GraphSAGE 2x128 bf16 6.06 -> 5.93 ms, GCN 2x128 bf16 5.20 -> 5.17; GAT 2x64 on the
/// gat-sparse files, with the fused kernels' vector walks, 12.5 -> 10.9 ms in bf16 and
/// 19.2 -> 16.5 in f32.
/// GCN and GraphSAGE lose in f32 (GCN 8.84 -> 9.27: 17 % more gathered bytes and no unaligned
/// path to avoid), so they stay unpadded there.
pub fn padded_outputs_pay(kind: ConvKind, device: &Device, half: bool) -> bool {
    device.is_cuda() && padded_outputs_pay_on_cuda(kind, half)
}

/// [`padded_outputs_pay`] on a CUDA device, without one (what a GPU's memory estimate
/// charges).
pub fn padded_outputs_pay_on_cuda(kind: ConvKind, half: bool) -> bool {
    half || kind == ConvKind::Gat
}
