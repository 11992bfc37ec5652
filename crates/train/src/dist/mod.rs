//! Multi-device full-batch training (1-D partition, CAGNET's scheme): each rank owns a
//! contiguous, non-zero-balanced range of nodes ([`gnn_graph::RowPartition`]) with their rows
//! of `A`, `X`, the labels and the split (a METIS partition, whose parts are not ranges of the
//! loaded ids, is turned into ranges by renumbering the dataset once before the plan is made:
//! [`run()`]); every aggregation first brings in the halo rows
//! from their owners ([`gnn_comm::HaloExchange`], whose backward returns the halo
//! gradients); weights are replicated and their gradients summed over ranks every step. An
//! attention layer (GAT, transformer) exchanges its projected rows the same way (GAT's `W x`,
//! the transformer's keys and values) and runs its scores, edge softmax and weighted sum on
//! the rank's head-expanded local graph: a rank owns its rows' incoming edges, so each row's
//! softmax is local ([`ModelGraph::exchange`], [`ModelGraph::heads`]).
//!
//! Ranks are threads of one process, one device each ([`train_ranks`]); the communicator is
//! the only thing that changes between the in-process group of the CPU tests
//! ([`gnn_comm::LocalComm`]) and NCCL across GPUs. The losses, gradients and dropout
//! masks are those of single-device training on the whole graph, up to the order of float
//! sums (the equivalence tests check 1e-5). Each rank returns its trained model (replicated,
//! so rank 0's is the run's); [`train_ranks_with_control`] lets rank 0's epoch hook stop every
//! rank after the same epoch (a front door's Ctrl-C or callback). `NcclGroup` (feature `nccl`)
//! opens a list of GPUs and joins their NCCL group for these threads.
//!
//! One run from one config, what the `train_dist` example does, is [`run()`] ([`DistConfig`]);
//! where the ranks live and how they meet (threads, NCCL, one process per rank) is
//! [`Launch`]; what it prints and writes is in [`report`].
//!
//! Faults: no rank waits forever for one that failed. A rank whose training fails aborts its
//! communicator ([`gnn_comm::Communicator::abort`]): in-process, every other rank's next or
//! current collective fails at once naming it. Every rank's communicator sits behind a
//! [`gnn_comm::Watchdog`] ([`DistConfig::comm_timeout`]), so a rank killed or hung where
//! nothing reports it (an NCCL peer process gone) times the others out with an error naming
//! their rank, the epoch and phase, and the ranks they waited for. Rank 0 writes the
//! checkpoints (`TrainConfig::checkpoint_every`; the state is replicated, which every
//! checkpoint epoch checks), and a run resumes from one with any number of ranks.

use crate::data::DeviceData;
use crate::error::{Error, Result};
use crate::trainer::{EpochLog, TrainConfig, TrainReport};
use candle_core::{Device, Tensor};
use gnn_comm::{Communicator, HaloExchange};
use gnn_graph::{Dataset, Exchange, HaloStats, LocalGraph, RowPartition};
use gnn_kernels::{KernelPolicy, KernelsUsed};
use gnn_models::{ConvKind, Gnn, ModelConfig, ModelGraph, Operands};
use std::ops::{ControlFlow, Range};
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

mod launch;
pub mod memory;
pub mod report;
mod run;
pub mod setup;

#[cfg(feature = "nccl")]
pub use launch::NcclGroup;
pub use launch::{
    default_p2p_channels, Launch, ProcessRank, RankFlags, Rendezvous, P2P_CHANNELS, STUCK_GRACE,
};
pub use run::{run, DistConfig, DistOutcome};

/// The model kind's operands of a dataset's graph and their partition: computed once, shared
/// by every rank.
pub struct DistPlan {
    /// The model kind the operands are of.
    pub kind: ConvKind,
    /// The structure and edge values the model kind aggregates over, whole.
    pub operands: Operands,
    /// The node ranges of the ranks.
    pub partition: RowPartition,
    /// How the ranks exchange rows (chosen by volume unless forced).
    pub exchange: Exchange,
    /// Halo rows of every rank (the point-to-point volume the choice weighed).
    pub halo_sizes: Vec<usize>,
    /// The operand is symmetric (an undirected graph): the ranks' aggregations then need no
    /// transpose of their local graphs ([`ModelGraph::partitioned`]).
    pub symmetric: bool,
    /// Under the all-gather with a symmetric operand, each rank stores its local graph as
    /// column slices, one per rank's block of the gathered rows, cut further into slices of
    /// at most this many rows, when the model's every aggregation is a sum or mean
    /// ([`ModelGraph::partitioned`]'s `slice_rows`): the slices over the rank's own rows then
    /// run while the exchange is in flight. `None` keeps it whole. Default
    /// [`gnn_comm::GATHER_SLICE_ROWS`] (blocks not cut further).
    pub slice_rows: Option<usize>,
    /// Three or more ranks whose gathered operand is small keep the local graph whole
    /// although `slice_rows` asks for slices ([`WHOLE_GATHER_BYTES`]). Default on; off where
    /// the slicing was asked for (`train_dist --gather-slice-rows`).
    pub small_gather_whole: bool,
    /// Every fused symmetric aggregation (and its backward) runs over at most this many
    /// feature columns at a time ([`ModelGraph::with_feature_chunk`]): the received blocks
    /// and the SpMM's buffers shrink by the chunk's share of the width, the values are the
    /// same. `None` (the default): the whole width at once.
    pub feature_chunk: Option<usize>,
    /// After training, every rank computes its rows' logits (evaluation mode, the selected
    /// parameters) and rank 0 gathers all of them ([`RankOutcome::logits`]). Default off.
    pub gather_logits: bool,
    /// Labelled nodes (in any split) of every rank: where they are few the output layer
    /// runs on those rows alone ([`crate::trainer`]'s output rows), which the memory
    /// estimate counts.
    pub labelled: Vec<usize>,
    /// Where every rank's output layer runs on its labelled rows alone, the model is a GCN
    /// whose last hidden layer fuses with the output layer's aggregation, and the ranks
    /// aggregate through the fused symmetric all-gather, that aggregation covers the
    /// labelled rows alone ([`gnn_comm::SelectedAggregation`]: one reduce-scatter of those
    /// rows forward, one all-gather of their gradient backward, instead of a whole
    /// aggregation and exchange each way): [`Self::selects_output_aggregation`]. Default
    /// on; off keeps the whole aggregation and the selection after it.
    pub selected_output_aggregation: bool,
}

impl DistPlan {
    /// The operands of `kind` on `ds`'s graph, split into `parts` ranges balanced by non-zeros,
    /// exchanging rows as `exchange` says, or as [`Exchange::by_volume`] chooses when `None`.
    pub fn new(
        ds: &Dataset,
        kind: ConvKind,
        parts: usize,
        exchange: Option<Exchange>,
    ) -> Result<Self> {
        Self::with_partition(
            ds,
            kind,
            |csr| RowPartition::balanced_by_nnz(csr, parts),
            exchange,
        )
    }

    /// The operands of `kind` on `ds`'s graph under the ranges `partition` makes of them
    /// (e.g. the ranges of a renumbered METIS partition, [`gnn_graph::Renumbering`]), the
    /// exchange as in [`Self::new`].
    pub fn with_partition(
        ds: &Dataset,
        kind: ConvKind,
        partition: impl FnOnce(&gnn_graph::Csr) -> gnn_graph::Result<RowPartition>,
        exchange: Option<Exchange>,
    ) -> Result<Self> {
        let operands = setup::phase(
            || format!("operands of {kind}"),
            || Operands::new(&ds.graph, kind),
        )?;
        let partition = setup::phase(
            || "partition".into(),
            || partition(&operands.csr).map_err(gnn_kernels::Error::from),
        )?;
        if partition.bounds().last() != Some(&operands.csr.n_rows()) {
            return Err(Error::Invalid(format!(
                "a partition of {} nodes for a graph of {}",
                partition.bounds().last().copied().unwrap_or(0),
                operands.csr.n_rows()
            )));
        }
        let halo_sizes = setup::phase(
            || "halo sizes".into(),
            || partition.halo_sizes(&operands.csr),
        )
        .map_err(gnn_kernels::Error::from)?;
        let exchange =
            exchange.unwrap_or_else(|| Exchange::by_volume(&halo_sizes, partition.max_len()));
        // GCN's values D^-1/2 (A + I) D^-1/2 are symmetric wherever the structure is. An
        // attention layer weighs every edge by its own coefficients (alpha_ij is not
        // alpha_ji): its aggregation has no symmetric operand whatever the structure.
        let mut ids: Vec<u32> = [&ds.split.train, &ds.split.val, &ds.split.test]
            .into_iter()
            .flatten()
            .copied()
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let labelled = partition
            .bounds()
            .windows(2)
            .map(|w| {
                let below = |end: usize| ids.partition_point(|&i| (i as usize) < end);
                below(w[1]) - below(w[0])
            })
            .collect();
        let symmetric = !is_attention(kind)
            && setup::phase(|| "symmetry check".into(), || operands.csr.is_symmetric());
        Ok(Self {
            kind,
            operands,
            partition,
            exchange,
            halo_sizes,
            symmetric,
            slice_rows: Some(gnn_comm::GATHER_SLICE_ROWS),
            small_gather_whole: true,
            feature_chunk: None,
            gather_logits: false,
            labelled,
            selected_output_aggregation: true,
        })
    }

    /// Hands the operands back (the plan keeps empty ones), so that their memory is free
    /// while the dataset is renumbered; [`Self::renumbered_within`] derives them again.
    pub fn release_operands(&mut self) -> Result<()> {
        self.operands = Operands {
            csr: gnn_graph::Csr::empty(0, 0).map_err(gnn_kernels::Error::from)?,
            values: None,
        };
        Ok(())
    }

    /// This plan for `ds`, the dataset renumbered by `new_of_old`, an order that keeps every
    /// node inside its rank's range (as [`gnn_graph::reorder::degree_order_within`] does): the
    /// ranges, the halo sizes, the exchange, the symmetry and the labelled counts do not
    /// change under such an order, so only the operands are derived again (a new plan would
    /// also recount the halos and check the symmetry again: 36 of the 75 s the renumbering
    /// took at papers100M size). An order that moves a node out of its range is an error.
    pub fn renumbered_within(mut self, ds: &Dataset, new_of_old: &[u32]) -> Result<Self> {
        let bounds = self.partition.bounds();
        let n = bounds.last().copied().unwrap_or(0);
        if new_of_old.len() != n || ds.graph.n_rows() != n {
            return Err(Error::Invalid(format!(
                "a renumbering of {} nodes and a graph of {} for a plan of {n}",
                new_of_old.len(),
                ds.graph.n_rows()
            )));
        }
        for w in bounds.windows(2) {
            let range = w[0]..w[1];
            if let Some(v) = range
                .clone()
                .find(|&v| !range.contains(&(new_of_old[v] as usize)))
            {
                return Err(Error::Invalid(format!(
                    "the renumbering moves node {v} to {}, out of its rank's range {range:?}",
                    new_of_old[v]
                )));
            }
        }
        self.operands = setup::phase(
            || format!("operands of {}", self.kind),
            || Operands::new(&ds.graph, self.kind),
        )?;
        Ok(self)
    }

    /// Whether every rank builds the aggregation of its labelled rows alone for the output
    /// layer ([`Self::selected_output_aggregation`]) for `model` trained with `train`: the
    /// switch is on, the model a GCN whose structure lets its last hidden layer fuse with the
    /// output layer's aggregation ([`Gnn::fuses_output_aggregation`]) or a GraphSAGE-mean
    /// whose output layer aggregates first ([`Gnn::selects_mean_output_aggregation`]: the
    /// mean as a sum with `1/deg` values), the operand symmetric
    /// under the all-gather (the fused symmetric aggregation), and the output layer of
    /// *every* rank restricted to its labelled rows (the aggregation is collective: a rank
    /// that aggregated every row would leave the others waiting). Decided from the plan
    /// alone, the same on every rank.
    pub fn selects_output_aggregation(&self, model: &Gnn, train: &TrainConfig) -> bool {
        let m = model.config();
        // GCN: the last hidden layer's fused op runs it; GraphSAGE-mean: the output layer
        // calls it (its mean as `1/deg` values).
        let form = match (self.kind, m.kind) {
            (ConvKind::Gcn, ConvKind::Gcn) => {
                self.operands.values.is_some() && model.fuses_output_aggregation()
            }
            (ConvKind::SageMean, ConvKind::SageMean) => model.selects_mean_output_aggregation(),
            _ => false,
        };
        self.selected_output_aggregation
            && form
            && self.symmetric
            && self.exchange == Exchange::AllGather
            && (0..self.partition.parts()).all(|r| {
                let (rows, labelled) = (self.partition.range(r).len(), self.labelled[r]);
                crate::trainer::output::restricts(rows, labelled, m.out_dim, train.labelled_output)
            })
    }

    /// Every rank's output rows (local ids, ascending) where the output layer runs on the
    /// labelled rows alone: its train, validation and test nodes, or row 0 where it has none
    /// (as [`crate::LabelledOutput`] takes them from each rank's data).
    pub fn labelled_rows(&self, ds: &Dataset) -> Vec<Vec<u32>> {
        let mut ids: Vec<u32> = [&ds.split.train, &ds.split.val, &ds.split.test]
            .into_iter()
            .flatten()
            .copied()
            .collect();
        ids.sort_unstable();
        ids.dedup();
        (0..self.partition.parts())
            .map(|r| {
                let range = self.partition.range(r);
                let at = |end: usize| ids.partition_point(|&i| (i as usize) < end);
                let mut rows: Vec<u32> = ids[at(range.start)..at(range.end)]
                    .iter()
                    .map(|&i| (i as usize - range.start) as u32)
                    .collect();
                if rows.is_empty() && !range.is_empty() {
                    rows.push(0);
                }
                rows
            })
            .collect()
    }

    /// The column slices of at most this many rows every rank's local graph of `model` in
    /// `precision` is stored as ([`ModelGraph::partitioned`]'s `slice_rows`): `slice_rows`
    /// where every aggregation of the model is a sum or mean the fused symmetric op takes,
    /// `None` (the whole local graph) otherwise, and `None` too where the default (one slice
    /// per rank's block, or any size under [`Self::small_gather_whole`]) meets a small
    /// gathered operand on three or more ranks ([`WHOLE_GATHER_BYTES`]).
    pub fn slice_rows_for(
        &self,
        model: &ModelConfig,
        precision: crate::Precision,
    ) -> Option<usize> {
        // Slices only where nothing needs the whole local graph: sum/mean aggregations the
        // symmetric op takes (MaxK's SpGEMM, max and attention run on the whole graph).
        let only_symmetric = self.symmetric
            && !matches!(model.activation, gnn_models::Activation::MaxK { .. })
            && match model.kind {
                ConvKind::Gcn | ConvKind::Gin | ConvKind::Mlp => true,
                ConvKind::SageMean => precision.dtype() != candle_core::DType::F16,
                ConvKind::SagePool | ConvKind::Gat | ConvKind::Transformer => false,
            };
        // A mean over slices divides their sum by the whole rows' lengths afterwards, in f32
        // (three more passes over the output and two temporaries): GraphSAGE 2x128 at scale 1
        // ran 5.8 ms per epoch sliced (for the overlap) against 5.2 whole, on two H100s
        // (c6f0242:docs/perf/h100x2-2026-11-26-dist-overlap). A mean is sliced only where the
        // gathered rows outgrow one slice (never under the default, which does not cut blocks
        // further); whole, the SpMM divides by the row's length itself.
        // Under feature chunks (a run short of memory) a mean is sliced too: the ring holds two
        // blocks where the whole operand's all-gather holds every rank's.
        let gathered = self.partition.parts() * self.partition.max_len();
        // The default's ring on three or more ranks costs more than the exchange it hides
        // where the gathered operand is small ([`WHOLE_GATHER_BYTES`]); a run short of memory
        // (feature chunks) keeps it: the ring holds two blocks, the whole operand all.
        let widest = model.hidden.max(model.out_dim);
        let whole_pays = self.small_gather_whole
            && self.partition.parts() >= 3
            && self.feature_chunk.is_none()
            && gathered * widest * precision.dtype().size_in_bytes() <= WHOLE_GATHER_BYTES;
        self.slice_rows
            .filter(|_| only_symmetric && !whole_pays)
            .filter(|&r| {
                model.kind != ConvKind::SageMean || gathered > r || self.feature_chunk.is_some()
            })
    }

    /// Rank `rank`'s local graph.
    pub fn local(&self, rank: usize) -> Result<LocalGraph> {
        Ok(LocalGraph::build(&self.operands.csr, &self.partition, rank)
            .map_err(gnn_kernels::Error::from)?)
    }

    /// Rows, non-zeros and halo sizes of every rank under the plan's partition (what
    /// building every local graph would give, from the partition and the halo sizes alone).
    pub fn stats(&self) -> Result<HaloStats> {
        self.stats_of(&self.partition)
    }

    /// The same statistics for a partition of these operands into `parts` ranges balanced by
    /// non-zeros (other partition counts without rebuilding the operands).
    pub fn halo_stats(&self, parts: usize) -> Result<HaloStats> {
        let part = RowPartition::balanced_by_nnz(&self.operands.csr, parts)
            .map_err(gnn_kernels::Error::from)?;
        self.stats_of(&part)
    }

    /// The halo sizes of `part` over the operands: the plan's own where `part` is its
    /// partition, else one parallel pass over the edges ([`RowPartition::halo_sizes`]).
    pub fn halo_sizes_of(&self, part: &RowPartition) -> Result<Vec<usize>> {
        if *part == self.partition {
            return Ok(self.halo_sizes.clone());
        }
        Ok(part
            .halo_sizes(&self.operands.csr)
            .map_err(gnn_kernels::Error::from)?)
    }

    fn stats_of(&self, part: &RowPartition) -> Result<HaloStats> {
        // What `HaloStats::of` reads off the local graphs (their rows, non-zeros and halo
        // rows), without building them: each costs a pass over the whole graph.
        let nnz = part
            .nnz(self.operands.csr.indptr())
            .map_err(gnn_kernels::Error::from)?;
        Ok(HaloStats {
            parts: part.parts(),
            rows: (0..part.parts()).map(|r| part.range(r).len()).collect(),
            nnz,
            halo: self.halo_sizes_of(part)?,
        })
    }
}

/// The largest gathered operand (every rank's rows at the model's widest hidden or output
/// width, in bytes) whose fused all-gather aggregation runs whole rather than sliced by
/// default on three or more ranks ([`DistPlan::slice_rows_for`]).
///
/// The sliced form (a ring of per-rank blocks, each block's SpMM added into the sum) hides
/// the exchange behind the SpMM but adds passes over the output per block. On 4 H200s,
/// GCN 3x256 bf16 on the Reddit-shaped graph (scale 1: 232,965 rows at 256 columns, 119 MB
/// gathered) ran 9.49 ms per epoch sliced against 8.23 whole (the slowest rank's median
/// epoch, medians of 5 runs each); on 2 ranks sliced won, 11.68 against 12.66 ms (means of 2
/// runs; `bench/records/dist-scaling/h200x4-2026-11-28-2/slicing`). The scale-4 graph (477 MB
/// gathered) keeps the sliced form its 3.82x on 4 GPUs was measured with; the whole form is
/// unmeasured there, hence the bound between the two. The bound counts the epochs'
/// aggregations: the one-off aggregation of a cached input runs at the feature width (608
/// columns on Reddit, 283 MB) in the same form, once a run, and the memory estimate holds it
/// (`memory::estimate`, through [`DistPlan::slice_rows_for`]).
pub const WHOLE_GATHER_BYTES: usize = 256 << 20;

/// Whether `kind`'s layers are attention layers (GAT, transformer): each rank exchanges their
/// projected rows into the halo and runs their edge softmax on its head-expanded local graph.
pub fn is_attention(kind: ConvKind) -> bool {
    matches!(kind, ConvKind::Gat | ConvKind::Transformer)
}

/// What every rank trains: the model, the recipe, the initialisation seed and the feature
/// preprocessing (the same on every rank).
#[derive(Debug, Clone, Copy)]
pub struct Recipe<'a> {
    /// The model.
    pub model: &'a ModelConfig,
    /// The training recipe.
    pub train: &'a TrainConfig,
    /// Parameter initialisation seed.
    pub seed: u64,
    /// Divide each feature row by its sum first (GCN's bag-of-words preprocessing).
    pub row_normalize: bool,
    /// The kernel policy of every rank's graphs.
    pub kernels: KernelPolicy,
    /// Whether the ranks lay rows out on aligned widths.
    pub widths: Widths,
}

/// Whether a distributed run's ranks lay their rows out on aligned widths, as the
/// single-device trainer does on CUDA: the features zero-padded to
/// [`gnn_models::aligned_width`] columns ([`DeviceData::with_padded_features`]: cuBLAS's
/// aligned kernels for the first layer) and the output layer on aligned columns
/// ([`ModelGraph::with_padded_outputs`]). The values are the logical widths' up to rounding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Widths {
    /// The single-device trainer's rule: the features on CUDA devices, the output layer where
    /// [`gnn_models::padded_outputs_pay`] says.
    #[default]
    Auto,
    /// Both on every device, whatever the kind and precision: the CUDA layout on the CPU, for
    /// the tests that hold it to the logical one.
    Aligned,
    /// The logical widths everywhere.
    Logical,
}

impl Widths {
    /// `graph` and `data` (on one device) laid out for `kind` in `precision`: the output layer
    /// padded and the features padded where [`Self::on`] says. The ranks' layout, and the
    /// tests' single-device reference to it.
    pub(crate) fn lay_out(
        self,
        kind: ConvKind,
        precision: crate::Precision,
        graph: ModelGraph,
        data: DeviceData,
    ) -> Result<(ModelGraph, DeviceData)> {
        let (pad_features, pad_outputs) = self.on(kind, precision, data.x.device());
        let data = if pad_features {
            data.with_padded_features()?
        } else {
            data
        };
        Ok((graph.with_padded_outputs(pad_outputs), data))
    }

    /// (pad the features, pad the output layer) for `kind` in `precision` on `device`.
    fn on(self, kind: ConvKind, precision: crate::Precision, device: &Device) -> (bool, bool) {
        match self {
            Widths::Auto => (
                device.is_cuda(),
                gnn_models::padded_outputs_pay(kind, device, precision.is_half()),
            ),
            Widths::Aligned => (true, true),
            Widths::Logical => (false, false),
        }
    }
}

/// One rank's model, graph share and data, ready for [`crate::trainer::train`].
pub struct Rank {
    /// The model (same initialisation on every rank: same config and seed).
    pub model: Gnn,
    /// This rank's rows of the operands, with the halo exchange.
    pub graph: ModelGraph,
    /// This rank's rows of the features, labels and split.
    pub data: DeviceData,
    /// Owned nodes.
    pub rows: Range<usize>,
    /// Halo rows received per exchange.
    pub halo: usize,
}

impl Rank {
    /// Sets up the rank `comm` runs on `device`.
    pub fn new(
        plan: &DistPlan,
        ds: &Dataset,
        recipe: Recipe<'_>,
        comm: Arc<dyn Communicator>,
        device: &Device,
    ) -> Result<Self> {
        if comm.world() != plan.partition.parts() {
            return Err(Error::Invalid(format!(
                "{} ranks for a partition into {}",
                comm.world(),
                plan.partition.parts()
            )));
        }
        // Every rank's share goes to the kernels (32-bit offsets; the whole graph may hold
        // more): all ranks refuse alike, naming the first share too big, before building any.
        plan.partition
            .check_kernel_shares(plan.operands.csr.indptr())?;
        let rank = comm.rank();
        let local = setup::phase(|| format!("rank {rank}: local graph"), || plan.local(rank))?;
        let rows = local.rows.clone();
        let halo = setup::phase(
            || format!("rank {rank}: {} plan", plan.exchange),
            || HaloExchange::with(plan.exchange, &local, &plan.partition, comm.clone(), device),
        )?;
        let n_halo = halo.halo_rows();
        let model = Gnn::new(recipe.model.clone(), device, recipe.seed)?;
        let graph = setup::phase(
            || format!("rank {rank}: operand on the device"),
            || {
                ModelGraph::partitioned(
                    &plan.operands,
                    &local,
                    halo,
                    plan.symmetric,
                    plan.slice_rows_for(recipe.model, recipe.train.precision),
                    device,
                )
            },
        )?;
        // The output layer's aggregation of the labelled rows alone, on every rank or none
        // (the plan decides for all of them; the graph's fused aggregation is the plan's).
        let reduce = if plan.kind == ConvKind::SageMean {
            gnn_kernels::Reduce::Mean
        } else {
            gnn_kernels::Reduce::Sum
        };
        let fused = graph
            .fused_aggregation(reduce, recipe.train.precision.dtype())
            .is_some();
        let selected = if fused && plan.selects_output_aggregation(&model, recipe.train) {
            // The sum's own values (GCN's normalisation), or the mean's `1/deg` of each
            // entry's column: `(mean x)[s] = Σ_i A[s, i] x[i] / deg(s)`, `A` symmetric.
            let values: std::borrow::Cow<[f32]> = match &plan.operands.values {
                Some(values) => values
                    .get(local.edges.clone())
                    .ok_or_else(|| {
                        Error::Invalid(format!(
                            "rank {rank}'s edges {:?} outside the operands' {} values",
                            local.edges,
                            values.len()
                        ))
                    })?
                    .into(),
                None => mean_values(&local, &plan.operands.csr).into(),
            };
            Some(setup::phase(
                || format!("rank {rank}: the output rows' aggregation"),
                || {
                    gnn_comm::SelectedAggregation::new(
                        &local,
                        &values,
                        &plan.partition,
                        &plan.labelled_rows(ds),
                        comm.clone(),
                        device,
                    )
                },
            )?)
        } else {
            None
        };
        let graph = match selected {
            Some(s) => graph.with_output_aggregation(s),
            None => graph,
        }
        .with_policy(recipe.kernels)
        .with_feature_chunk(plan.feature_chunk);
        drop(local);
        let (graph, data) = setup::phase(
            || format!("rank {rank}: features, labels and split on the device"),
            || {
                let data = DeviceData::partitioned(ds, rows.clone(), device, recipe.row_normalize)?
                    .with_precision(recipe.train.precision)?;
                recipe
                    .widths
                    .lay_out(recipe.model.kind, recipe.train.precision, graph, data)
            },
        )?;
        Ok(Self {
            model,
            graph,
            data,
            rows,
            halo: n_halo,
        })
    }
}

/// What one rank of [`train_ranks`] returns.
pub struct RankOutcome {
    /// The rank.
    pub rank: usize,
    /// Its nodes.
    pub rows: Range<usize>,
    /// Halo rows it received per exchange.
    pub halo: usize,
    /// Its training report (accuracies and losses are global, the same on every rank; times
    /// and memory are this rank's).
    pub report: TrainReport,
    /// The kernels its graph's ops ran.
    pub kernels_used: KernelsUsed,
    /// With [`DistPlan::gather_logits`], on rank 0: every node's logits `[N, C]` (f32, rows
    /// in the plan's node order, the dataset's as trained), from the selected parameters in
    /// evaluation mode; `None` elsewhere.
    pub logits: Option<Tensor>,
    /// Its model, trained: the parameters of the best validation epoch, restored as
    /// single-device training restores them (replicated: the same on every rank). Whole, not
    /// partitioned: it serves any graph ([`crate::Engine`]).
    pub model: Gnn,
}

impl std::fmt::Debug for RankOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankOutcome")
            .field("rank", &self.rank)
            .field("rows", &self.rows)
            .field("halo", &self.halo)
            .field("report", &self.report)
            .field("kernels_used", &self.kernels_used)
            .field("logits", &self.logits)
            .field("model", self.model.config())
            .finish()
    }
}

/// Makes rank `r`'s communicator on its device, inside the rank's thread (NCCL's join is
/// collective: every rank must be joining at the same time).
pub type CommFactory<'a> =
    dyn Fn(usize, &Device) -> gnn_comm::Result<Arc<dyn Communicator>> + Sync + 'a;

/// The in-process group as a [`CommFactory`]: rank `r` takes the group's `r`-th member.
pub fn local_comms(
    world: usize,
) -> impl Fn(usize, &Device) -> gnn_comm::Result<Arc<dyn Communicator>> + Sync {
    let slots: std::sync::Mutex<Vec<Option<gnn_comm::LocalComm>>> = std::sync::Mutex::new(
        gnn_comm::LocalComm::group(world)
            .into_iter()
            .map(Some)
            .collect(),
    );
    move |rank, _| {
        let c = slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(rank)
            .and_then(Option::take)
            .ok_or_else(|| gnn_comm::Error::InvalidArgument {
                op: "local communicator",
                what: format!("rank {rank} taken twice or out of range"),
            })?;
        Ok(Arc::new(c) as Arc<dyn Communicator>)
    }
}

/// Trains rank `comm.rank()` on `device`: the body of one rank's thread in [`train_ranks`],
/// and the whole of a process that runs one rank of a multi-process run. `on_epoch` sees its
/// epochs (the loss and accuracies are global, the same on every rank). With `resume`, it
/// continues from that checkpoint ([`crate::TrainState`], written by rank 0 of a run of the
/// same model and recipe, with any number of ranks), read by every rank onto its device.
pub fn train_rank(
    plan: &DistPlan,
    ds: &Dataset,
    recipe: Recipe<'_>,
    comm: Arc<dyn Communicator>,
    device: &Device,
    resume: Option<&Path>,
    mut on_epoch: impl FnMut(&EpochLog),
) -> Result<RankOutcome> {
    train_rank_with_control(plan, ds, recipe, comm, device, resume, |log| {
        on_epoch(log);
        ControlFlow::Continue(())
    })
}

/// [`train_rank`] whose `on_epoch` may end the run after an epoch, as
/// [`crate::train_with_control`]'s does. The next epoch's collectives need every rank, so
/// every rank must break after the same epoch: [`train_ranks_with_control`] sees to it.
pub fn train_rank_with_control(
    plan: &DistPlan,
    ds: &Dataset,
    recipe: Recipe<'_>,
    comm: Arc<dyn Communicator>,
    device: &Device,
    resume: Option<&Path>,
    on_epoch: impl FnMut(&EpochLog) -> ControlFlow<()>,
) -> Result<RankOutcome> {
    let rank = comm.rank();
    let r = Rank::new(plan, ds, recipe, comm.clone(), device)?;
    let state = resume
        .map(|p| crate::TrainState::load(p, device))
        .transpose()?;
    let report = crate::trainer::train_with_control(
        &r.model,
        &r.graph,
        &r.data,
        recipe.train,
        state.as_ref(),
        on_epoch,
    )?;
    let logits = if plan.gather_logits {
        gather_logits(plan, &r, comm.as_ref())?
    } else {
        None
    };
    Ok(RankOutcome {
        rank,
        rows: r.rows,
        halo: r.halo,
        report,
        kernels_used: r.graph.kernels_used(),
        logits,
        model: r.model,
    })
}

/// Every rank's logits of its rows (evaluation mode, the rank's current parameters), gathered:
/// `[N, C]` f32 on rank 0 in the plan's node order, `None` on the others. Collective: every
/// rank calls it (each block padded to the longest range for the all-gather).
fn gather_logits(plan: &DistPlan, r: &Rank, comm: &dyn Communicator) -> Result<Option<Tensor>> {
    let local = crate::trainer::predict(&r.model, &r.graph, &r.data.x)?
        .to_dtype(candle_core::DType::F32)?;
    let (rows, classes) = local.dims2()?;
    let m = plan.partition.max_len();
    let padded = if rows < m {
        let pad = Tensor::zeros((m - rows, classes), local.dtype(), local.device())?;
        Tensor::cat(&[&local, &pad], 0)?
    } else {
        local
    };
    let all = comm.all_gather(&padded)?;
    if comm.rank() != 0 {
        return Ok(None);
    }
    let blocks = (0..plan.partition.parts())
        .map(|q| all.narrow(0, q * m, plan.partition.range(q).len()))
        .collect::<candle_core::Result<Vec<_>>>()?;
    Ok(Some(Tensor::cat(&blocks, 0)?))
}

/// Trains on `ds` with one thread per device, rank `r` on `devices[r]` with the communicator
/// `make_comm(r, device)` makes, from the checkpoint `resume` when given ([`train_rank`]).
/// `on_epoch` sees rank 0's epochs (every rank logs the same global loss and accuracies). A
/// rank that fails calls `on_rank_error` with its rank and error, then aborts its
/// communicator ([`Communicator::abort`]): in-process that fails the others' collectives at
/// once, naming it; NCCL's collectives would wait for the missing rank until their watchdog
/// gives up, so an NCCL caller ends the process in `on_rank_error` (as torchrun does when a
/// worker fails). A rank that panics is an error of that rank. Returns the root cause: the
/// error of the rank that failed first.
#[allow(clippy::too_many_arguments)]
pub fn train_ranks(
    plan: &DistPlan,
    ds: &Dataset,
    recipe: Recipe<'_>,
    make_comm: &CommFactory<'_>,
    devices: &[Device],
    resume: Option<&Path>,
    on_epoch: impl Fn(&EpochLog) + Sync,
    on_rank_error: &(dyn Fn(usize, &Error) + Sync),
) -> Result<Vec<RankOutcome>> {
    let each = |rank: usize, log: &EpochLog| {
        if rank == 0 {
            on_epoch(log)
        }
        ControlFlow::Continue(())
    };
    run_ranks(
        plan,
        ds,
        recipe,
        make_comm,
        devices,
        resume,
        &each,
        &|_| {},
        on_rank_error,
    )
}

/// [`train_ranks`] whose `on_epoch` (rank 0's epochs) may stop the run: after
/// `ControlFlow::Break(())` at epoch `e` every rank stops after epoch `e`, as early stopping
/// does (each restores the parameters of the best validation epoch so far, the same on every
/// rank), and the outcomes cover the epochs run. For front doors that stop on a user's request
/// (an interrupt, a callback). The other ranks wait at the end of each epoch for rank 0's
/// verdict on it: a host-side barrier where the epoch's loss has just been read to the host.
#[allow(clippy::too_many_arguments)]
pub fn train_ranks_with_control(
    plan: &DistPlan,
    ds: &Dataset,
    recipe: Recipe<'_>,
    make_comm: &CommFactory<'_>,
    devices: &[Device],
    resume: Option<&Path>,
    on_epoch: impl Fn(&EpochLog) -> ControlFlow<()> + Sync,
    on_rank_error: &(dyn Fn(usize, &Error) + Sync),
) -> Result<Vec<RankOutcome>> {
    let verdicts = Verdicts::default();
    let each = |rank: usize, log: &EpochLog| {
        if rank == 0 {
            let flow = on_epoch(log);
            verdicts.decide(log.epoch, flow.is_break());
            flow
        } else {
            verdicts.wait(log.epoch)
        }
    };
    // Rank 0 gone (done or failed): nobody waits for it any more (a failed rank 0 has aborted
    // the group, so the others' next collective fails).
    let ended = |rank: usize| {
        if rank == 0 {
            verdicts.close()
        }
    };
    run_ranks(
        plan,
        ds,
        recipe,
        make_comm,
        devices,
        resume,
        &each,
        &ended,
        on_rank_error,
    )
}

/// Rank 0's verdict on each epoch (go on, or stop after it), which the other ranks wait for
/// ([`train_ranks_with_control`]).
#[derive(Default)]
struct Verdicts {
    state: Mutex<VerdictState>,
    changed: Condvar,
}

#[derive(Default)]
struct VerdictState {
    /// The last epoch rank 0 decided.
    decided: usize,
    /// The epoch after which every rank stops.
    stop_after: Option<usize>,
    /// Rank 0 ended: no more verdicts come.
    closed: bool,
}

impl Verdicts {
    fn lock(&self) -> std::sync::MutexGuard<'_, VerdictState> {
        // Plain numbers: a panic elsewhere leaves nothing half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn decide(&self, epoch: usize, stop: bool) {
        let mut s = self.lock();
        s.decided = epoch;
        if stop {
            s.stop_after = Some(epoch);
        }
        self.changed.notify_all();
    }

    fn wait(&self, epoch: usize) -> ControlFlow<()> {
        let mut s = self.lock();
        while s.decided < epoch && !s.closed {
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        if s.stop_after == Some(epoch) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }
}

/// The body of [`train_ranks`] and [`train_ranks_with_control`]: rank `r`'s epochs go to
/// `on_epoch(r, log)`, and `ended(r)` runs when rank `r`'s training returned (or panicked).
#[allow(clippy::too_many_arguments)]
fn run_ranks(
    plan: &DistPlan,
    ds: &Dataset,
    recipe: Recipe<'_>,
    make_comm: &CommFactory<'_>,
    devices: &[Device],
    resume: Option<&Path>,
    on_epoch: &(dyn Fn(usize, &EpochLog) -> ControlFlow<()> + Sync),
    ended: &(dyn Fn(usize) + Sync),
    on_rank_error: &(dyn Fn(usize, &Error) + Sync),
) -> Result<Vec<RankOutcome>> {
    if devices.len() != plan.partition.parts() {
        return Err(Error::Invalid(format!(
            "{} devices for a partition into {}",
            devices.len(),
            plan.partition.parts()
        )));
    }
    // Each rank's outcome, when it ended, and (when it failed) the rank its communicator
    // says failed first. The root cause of a failed run is that rank's error (the in-process
    // group records the first rank that gave up on it); failing that, the error that came
    // first.
    type Ended = (Result<RankOutcome>, Instant, Option<usize>);
    let results: Vec<Ended> = std::thread::scope(|s| {
        let handles: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(rank, device)| {
                s.spawn(move || -> Ended {
                    let comm = match make_comm(rank, device) {
                        Ok(c) => c,
                        Err(e) => {
                            // It never joined: whatever the others say, the failure is its.
                            let (e, at) = (Error::from(e), Instant::now());
                            ended(rank);
                            on_rank_error(rank, &e);
                            return (Err(e), at, Some(rank));
                        }
                    };
                    // A panic is this rank's error like any other: caught while `comm` is
                    // still held, so that the abort below names it.
                    let train = AssertUnwindSafe(|| {
                        train_rank_with_control(
                            plan,
                            ds,
                            recipe,
                            comm.clone(),
                            device,
                            resume,
                            |log| on_epoch(rank, log),
                        )
                    });
                    let out = std::panic::catch_unwind(train).unwrap_or_else(|p| {
                        Err(Error::Invalid(format!(
                            "rank {rank} panicked: {}",
                            panic_text(p.as_ref())
                        )))
                    });
                    let at = Instant::now();
                    let Err(e) = &out else {
                        ended(rank);
                        return (out, at, None);
                    };
                    on_rank_error(rank, e);
                    comm.abort(&e.to_string());
                    ended(rank);
                    let first = comm.async_error().and_then(|e| e.failed_peer());
                    (out, at, first)
                })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(rank, h)| {
                h.join().unwrap_or_else(|p| {
                    let e = format!("rank {rank} panicked: {}", panic_text(p.as_ref()));
                    (Err(Error::Invalid(e)), Instant::now(), Some(rank))
                })
            })
            .collect()
    });
    let failed = |r: usize| results.get(r).is_some_and(|(o, _, _)| o.is_err());
    let root = results
        .iter()
        .filter_map(|(_, _, first)| *first)
        .find(|&r| failed(r))
        .or_else(|| {
            (0..results.len())
                .filter(|&r| failed(r))
                .min_by_key(|&r| results[r].1)
        });
    match root {
        Some(i) => Err(results
            .into_iter()
            .nth(i)
            .and_then(|(r, _, _)| r.err())
            .unwrap_or_else(|| Error::Invalid("a rank failed".into()))),
        None => results.into_iter().map(|(r, _, _)| r).collect(),
    }
}

/// The message of a panic's payload.
fn panic_text(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| p.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)")
}

#[cfg(test)]
mod attention_tests;
/// `1/deg(c)` for every entry of `local`'s graph, `deg(c)` the row length in `operand` (the
/// whole graph's) of the entry's column `c` (own columns first, then the halo's global ids):
/// the values under which a sum over a column's entries is that row's mean.
fn mean_values(local: &gnn_graph::LocalGraph, operand: &gnn_graph::Csr) -> Vec<f32> {
    use rayon::prelude::*;
    let n_own = local.rows.len();
    let global = |c: u32| -> usize {
        let c = c as usize;
        if c < n_own {
            local.rows.start + c
        } else {
            local.halo[c - n_own] as usize
        }
    };
    local
        .csr
        .indices()
        .par_iter()
        .map(|&c| 1.0 / operand.row_len(global(c)).max(1) as f32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trainer::{all_reduce_grads, train};
    use gnn_comm::LocalComm;
    use gnn_models::{Activation, DropoutRng, Forward};
    use std::collections::BTreeMap;

    use crate::test_cora as cora;

    /// A plan carried over a renumbering within the ranges equals a plan built afresh on the
    /// renumbered dataset; an order that leaves a range is refused, naming the node.
    #[test]
    fn a_plan_renumbered_within_its_ranges_equals_a_new_one() {
        let ds = cora();
        for kind in [ConvKind::Gcn, ConvKind::SageMean] {
            let plan = DistPlan::new(&ds, kind, 3, None).unwrap();
            let order =
                gnn_graph::reorder::degree_order_within(&ds.graph, &plan.partition).unwrap();
            let renumbered = ds.permute(&order).unwrap();
            let parts = plan.partition.clone();
            let fresh =
                DistPlan::with_partition(&renumbered, kind, |_| Ok(parts.clone()), None).unwrap();
            let mut carried = DistPlan::new(&ds, kind, 3, None).unwrap();
            carried.release_operands().unwrap();
            assert_eq!(carried.operands.csr.nnz(), 0);
            let carried = carried.renumbered_within(&renumbered, &order).unwrap();
            assert_eq!(carried.operands.csr, fresh.operands.csr, "{kind}");
            assert_eq!(carried.operands.values, fresh.operands.values, "{kind}");
            assert_eq!(carried.partition, fresh.partition);
            assert_eq!(carried.halo_sizes, fresh.halo_sizes);
            assert_eq!(carried.exchange, fresh.exchange);
            assert_eq!(carried.symmetric, fresh.symmetric);
            assert_eq!(carried.labelled, fresh.labelled);
            // Swapping the first node with the last moves both out of their ranges.
            let n = order.len();
            let mut bad: Vec<u32> = (0..n as u32).collect();
            bad.swap(0, n - 1);
            let e = match DistPlan::new(&ds, kind, 3, None)
                .unwrap()
                .renumbered_within(&ds.permute(&bad).unwrap(), &bad)
            {
                Ok(_) => panic!("an order out of the ranges was taken"),
                Err(e) => e.to_string(),
            };
            assert!(
                e.contains("moves node 0") && e.contains("out of its rank's range"),
                "{e}"
            );
        }
    }

    /// The models the equivalence covers: GCN, GraphSAGE-mean and GIN, ReLU and MaxK, with
    /// dropout (on the input and between layers), skip connections and LayerNorm.
    fn configs(ds: &Dataset) -> Vec<(&'static str, ModelConfig)> {
        let (f, c) = (ds.features.cols(), ds.num_classes);
        let base = |kind, layers| ModelConfig::new(kind, f, 24, c, layers, 0.5);
        let maxk = |kind| {
            let mut m = base(kind, 3);
            m.activation = Activation::MaxK { k: 5 };
            m.input_dropout = 0.0;
            m
        };
        let narrow = |kind| {
            let mut m = ModelConfig::new(kind, f, 6, c, 3, 0.5);
            m.input_dropout = 0.0;
            m
        };
        let mut deep = base(ConvKind::Gcn, 4);
        deep.residual = true;
        deep.layer_norm = true;
        let mut after_first = maxk(ConvKind::Gcn);
        after_first.maxk_after_first = true;
        // MaxK-32's recipe shape: ReLU first, MaxK after, skips fused into the SpGEMM.
        let mut maxk_residual = after_first.clone();
        maxk_residual.layers = 4;
        maxk_residual.residual = true;
        vec![
            ("gcn", base(ConvKind::Gcn, 2)),
            ("sage", base(ConvKind::SageMean, 2)),
            ("gin", base(ConvKind::Gin, 2)),
            ("gcn-4-residual-norm", deep),
            ("gcn-maxk", maxk(ConvKind::Gcn)),
            ("gcn-maxk-after-first", after_first),
            ("gcn-maxk-residual", maxk_residual),
            ("sage-maxk", maxk(ConvKind::SageMean)),
            ("gin-maxk", maxk(ConvKind::Gin)),
            // Narrower than Cora's 7 classes, the input aggregation cached: every layer
            // aggregates before its product, the lean forms of a partitioned graph (GCN's
            // hidden layers fused with the next aggregation, GraphSAGE's pair products, both
            // output layers) all run.
            ("gcn-3-narrow-cached", narrow(ConvKind::Gcn)),
            ("sage-3-narrow-cached", narrow(ConvKind::SageMean)),
            // Wider than the classes: the first and last layers multiply first, their lean
            // forms aggregating the product inside (under the all-gather).
            (
                "gcn-3-wide",
                ModelConfig::new(ConvKind::Gcn, f, 12, c, 3, 0.5),
            ),
            (
                "sage-3-wide",
                ModelConfig::new(ConvKind::SageMean, f, 12, c, 3, 0.5),
            ),
            ("gcn-4-narrow", {
                let mut m = narrow(ConvKind::Gcn);
                m.layers = 4;
                m.input_dropout = 0.5;
                m
            }),
        ]
    }

    /// Whether `configs`' entry `name` runs with the input aggregation cached.
    fn cached(name: &str) -> bool {
        name.ends_with("-cached")
    }

    type Grads = (f64, BTreeMap<String, Vec<f32>>);

    fn recipe<'a>(model: &'a ModelConfig, train: &'a TrainConfig) -> Recipe<'a> {
        Recipe {
            model,
            train,
            seed: 3,
            row_normalize: true,
            kernels: KernelPolicy::default(),
            widths: Widths::Auto,
        }
    }

    /// Loss and parameter gradients of one training forward/backward (dropout seed 7); with
    /// `cache`, the first layer reads the input's aggregation made beforehand (as the trainer
    /// does), where the model has one.
    pub(super) fn step(
        model: &Gnn,
        graph: &ModelGraph,
        data: &DeviceData,
        cache: bool,
    ) -> (Tensor, candle_core::backprop::GradStore) {
        step_on(model, graph, data, cache, false)
    }

    /// [`step`], the output layer on the labelled rows alone when `rows`.
    fn step_on(
        model: &Gnn,
        graph: &ModelGraph,
        data: &DeviceData,
        cache: bool,
        rows: bool,
    ) -> (Tensor, candle_core::backprop::GradStore) {
        // The rows carry the graph's aggregation of them alone where it has one (as the
        // trainer's `LabelledOutput::choose_on` does).
        let out = rows.then(|| {
            let o = crate::trainer::output::LabelledOutput::labelled(data).unwrap();
            match graph.output_aggregation() {
                Some(agg) => o.with_aggregation(agg).unwrap(),
                None => o,
            }
        });
        let data = out.as_ref().map_or(data, |o| &o.data);
        let mut rng = DropoutRng::new(7).with_row_offset(graph.row_offset() as u64);
        let agg = if cache {
            let a = model.input_aggregate(graph, &data.x).unwrap();
            assert!(a.is_some(), "no input aggregation to cache");
            a
        } else {
            None
        };
        let mut pass = Forward::train(&mut rng)
            .with_input_aggregate(agg.as_ref())
            .with_output_rows(out.as_ref().map(|o| &o.rows));
        let logits = model.forward(graph, &data.x, &mut pass).unwrap();
        let loss = crate::masked_cross_entropy(&logits, &data.labels, &data.train_weight).unwrap();
        let grads = loss.backward().unwrap();
        (loss, grads)
    }

    pub(super) fn flat(
        model: &Gnn,
        grads: &candle_core::backprop::GradStore,
    ) -> BTreeMap<String, Vec<f32>> {
        model
            .named_vars()
            .into_iter()
            .map(|(k, v)| {
                let g = grads
                    .get(v.as_tensor())
                    .unwrap_or_else(|| panic!("no grad for {k}"));
                (k, g.flatten_all().unwrap().to_vec1::<f32>().unwrap())
            })
            .collect()
    }

    fn whole(ds: &Dataset, cfg: &ModelConfig, cache: bool) -> Grads {
        let dev = Device::Cpu;
        let model = Gnn::new(cfg.clone(), &dev, 3).unwrap();
        let graph = ModelGraph::new(&ds.graph, cfg.kind, &dev).unwrap();
        let data = DeviceData::new(ds, &dev, true).unwrap();
        let (loss, grads) = step(&model, &graph, &data, cache);
        (
            loss.to_scalar::<f32>().unwrap() as f64,
            flat(&model, &grads),
        )
    }

    fn ranks(
        ds: &Dataset,
        cfg: &ModelConfig,
        parts: usize,
        exchange: Exchange,
        cache: bool,
    ) -> Vec<Grads> {
        let plan = DistPlan::new(ds, cfg.kind, parts, Some(exchange)).unwrap();
        ranks_of(plan, ds, cfg, cache)
    }

    /// `ds` renumbered so each of the `parts` METIS parts of `kind`'s operands is a range, and
    /// those ranges (what `run` does for `--partition metis`).
    pub(super) fn metis_renumbered(
        ds: &Dataset,
        kind: ConvKind,
        parts: usize,
    ) -> (Dataset, RowPartition) {
        let csr = Operands::new(&ds.graph, kind).unwrap().csr;
        let (p, _) = gnn_graph::metis(&csr, parts, &gnn_graph::MetisOptions::default()).unwrap();
        let ren = p.renumbering().unwrap();
        // Not the identity: some node moved (Cora's ids are no METIS partition).
        assert!(ren
            .new_of_old
            .iter()
            .enumerate()
            .any(|(o, &n)| o != n as usize));
        (ds.permute(&ren.new_of_old).unwrap(), ren.partition)
    }

    fn ranks_of(plan: DistPlan, ds: &Dataset, cfg: &ModelConfig, cache: bool) -> Vec<Grads> {
        ranks_on(plan, ds, cfg, cache, false)
    }

    /// [`ranks_of`], each rank's output layer on its labelled rows alone when `rows`.
    fn ranks_on(
        plan: DistPlan,
        ds: &Dataset,
        cfg: &ModelConfig,
        cache: bool,
        rows: bool,
    ) -> Vec<Grads> {
        ranks_counted(plan, ds, cfg, cache, rows, Widths::Auto)
            .into_iter()
            .map(|(g, _)| g)
            .collect()
    }

    /// [`ranks_on`] on `widths`, with each rank's count of calls of the output rows'
    /// aggregation ([`ModelGraph::output_aggregation`]; `None` where its graph carries none).
    fn ranks_counted(
        mut plan: DistPlan,
        ds: &Dataset,
        cfg: &ModelConfig,
        cache: bool,
        rows: bool,
        widths: Widths,
    ) -> Vec<(Grads, Option<usize>)> {
        let parts = plan.partition.parts();
        // Cora is undirected: under the all-gather the dense aggregations run as one op
        // (HaloExchange::aggregate_symmetric), under point-to-point as exchange + SpMM.
        assert!(plan.symmetric, "Cora's operands are symmetric");
        // Column slices of 500 gathered rows (Cora's 2,708 nodes in 6 or more), so the sliced
        // local graph runs wherever the model takes it (not MaxK: the whole graph there).
        plan.slice_rows = Some(500);
        plan.small_gather_whole = false;
        // Feature chunks of 16 columns (the hidden width 24 in two, GIN's 1,433 inputs in 90):
        // the same values as the whole width (the halo tests check bit for bit).
        plan.feature_chunk = Some(16);
        let train = TrainConfig::default();
        LocalComm::run_group(parts, |c| {
            let comm: Arc<dyn Communicator> = Arc::new(c);
            let recipe = Recipe {
                widths,
                ..recipe(cfg, &train)
            };
            let r = Rank::new(&plan, ds, recipe, comm.clone(), &Device::Cpu).unwrap();
            let aligned = widths == Widths::Aligned;
            assert_eq!(r.graph.pads_outputs(), aligned);
            let width = r.data.x.dim(1).unwrap();
            let logical = ds.features.cols();
            assert_eq!(
                width > logical,
                aligned && gnn_models::aligned_width(logical) > logical
            );
            let (loss, mut grads) = step_on(&r.model, &r.graph, &r.data, cache, rows);
            let vars = r.model.named_vars();
            let loss = all_reduce_grads(comm.as_ref(), &vars, &mut grads, &loss)
                .and_then(|l| Ok(l.to_vec1::<f32>()?[0] as f64))
                .unwrap();
            let calls = r.graph.output_aggregation().map(|a| a.forward_calls());
            ((loss, flat(&r.model, &grads)), calls)
        })
    }

    /// `|a - b| <= tol * max|b|` over each tensor.
    pub(super) fn assert_close(a: &[f32], b: &[f32], tol: f32, what: &str) {
        assert_eq!(a.len(), b.len(), "{what}");
        let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-30);
        let worst = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(
            worst <= tol * scale,
            "{what}: max diff {worst:e}, scale {scale:e}"
        );
    }

    #[test]
    fn partitions_give_the_single_device_losses_and_gradients() {
        let ds = cora();
        for (name, cfg) in configs(&ds) {
            let (loss, grads) = whole(&ds, &cfg, cached(name));
            for (parts, ex) in
                // P = 8: the eight-GPU layout of issue 41, on the in-process communicator.
                (1..=4)
                    .chain([8])
                    .flat_map(|p| [Exchange::PointToPoint, Exchange::AllGather].map(|e| (p, e)))
            {
                let got = ranks(&ds, &cfg, parts, ex, cached(name));
                for (r, (l, g)) in got.iter().enumerate() {
                    let what = format!("{name} P={parts} {ex} rank {r}");
                    assert!(
                        ((l - loss) / loss).abs() < 1e-5,
                        "{what}: loss {l} vs {loss}"
                    );
                    for (k, want) in &grads {
                        assert_close(&g[k], want, 1e-5, &format!("{what} d{k}"));
                    }
                    // Every rank holds the same (all-reduced) gradients, bit for bit.
                    assert_eq!(g, &got[0].1, "{what}");
                }
            }
        }
    }

    /// Ranks on aligned widths (the CUDA layout: Cora's 1,433 features padded to 1,440, the
    /// 7 classes of the output layer to 8) give the single-device losses and gradients of the
    /// logical widths, with the whole output and with each rank's labelled rows alone.
    #[test]
    fn aligned_widths_give_the_logical_widths_losses_and_gradients() {
        let ds = cora();
        for (name, cfg) in configs(&ds) {
            let (loss, grads) = whole(&ds, &cfg, cached(name));
            for (parts, ex, rows) in [
                (1, Exchange::AllGather, false),
                (2, Exchange::PointToPoint, false),
                (3, Exchange::AllGather, true),
                (4, Exchange::AllGather, false),
            ] {
                let plan = DistPlan::new(&ds, cfg.kind, parts, Some(ex)).unwrap();
                let got = ranks_counted(plan, &ds, &cfg, cached(name), rows, Widths::Aligned);
                for (r, ((l, g), _)) in got.iter().enumerate() {
                    let what = format!("{name} P={parts} {ex} rank {r} aligned rows={rows}");
                    assert!(
                        ((l - loss) / loss).abs() < 1e-5,
                        "{what}: loss {l} vs {loss}"
                    );
                    // The parameters keep their logical shapes.
                    assert_eq!(
                        g.keys().collect::<Vec<_>>(),
                        grads.keys().collect::<Vec<_>>(),
                        "{what}"
                    );
                    for (k, want) in &grads {
                        assert_close(&g[k], want, 1e-5, &format!("{what} d{k}"));
                    }
                }
            }
        }
    }

    /// The output layer on each rank's labelled rows alone (Cora: 1,640 of 2,708 nodes)
    /// gives the whole output's loss and gradients, on one device and partitioned, through
    /// every lean and composed form `configs` covers.
    #[test]
    fn labelled_output_rows_give_the_whole_outputs_losses_and_gradients() {
        let ds = cora();
        for (name, cfg) in configs(&ds) {
            let (loss, grads) = whole(&ds, &cfg, cached(name));
            // P = 4 and 8 give ranks with no labelled row (Cora's ranges at 4: 640, 0, 247,
            // 753): they select row 0, weight 0, in no split.
            for (parts, ex) in (1..=4)
                .chain([8])
                .flat_map(|p| [Exchange::PointToPoint, Exchange::AllGather].map(|e| (p, e)))
            {
                let plan = DistPlan::new(&ds, cfg.kind, parts, Some(ex)).unwrap();
                let got = ranks_on(plan, &ds, &cfg, cached(name), true);
                for (r, (l, g)) in got.iter().enumerate() {
                    let what = format!("{name} P={parts} {ex} rank {r} labelled rows");
                    assert!(
                        ((l - loss) / loss).abs() < 1e-5,
                        "{what}: loss {l} vs {loss}"
                    );
                    for (k, want) in &grads {
                        assert_close(&g[k], want, 1e-5, &format!("{what} d{k}"));
                    }
                }
            }
        }
    }

    /// Where every rank's output layer runs on its labelled rows alone (Cora with a sparse
    /// split: about one node in ten labelled, so every rank restricts), a GCN whose last
    /// hidden layer fuses with the output layer's aggregation aggregates those rows alone
    /// under the fused all-gather (`gnn_comm::SelectedAggregation`), and still gives the
    /// single-device whole output's loss and gradients; so does a GraphSAGE-mean whose output
    /// layer aggregates first. Point-to-point keeps the whole aggregation, as does a model
    /// whose output layer multiplies first.
    #[test]
    fn output_rows_aggregation_gives_the_whole_outputs_losses_and_gradients() {
        let mut ds = cora();
        ds.split.train.retain(|i| i % 4 == 0);
        ds.split.val.retain(|i| i % 6 == 0);
        ds.split.test.retain(|i| i % 6 == 0);
        let (f, c) = (ds.features.cols(), ds.num_classes);
        let narrow = |layers, input_dropout| {
            let mut m = ModelConfig::new(ConvKind::Gcn, f, 6, c, layers, 0.5);
            m.input_dropout = input_dropout;
            m
        };
        let sage = |hidden| {
            let mut m = ModelConfig::new(ConvKind::SageMean, f, hidden, c, 3, 0.5);
            m.input_dropout = 0.0;
            m
        };
        // (name, model, cached input aggregation, whether the output rows' aggregation runs)
        let cases = [
            ("gcn-3-narrow-cached", narrow(3, 0.0), true, true),
            // The last hidden layer aggregates its input itself (6 -> 6).
            ("gcn-3-narrow", narrow(3, 0.5), false, true),
            // The first layer is the last hidden one, reading the cached aggregation.
            ("gcn-2-narrow-cached", narrow(2, 0.0), true, true),
            // 12 -> 7: the output layer multiplies first; nothing to fuse with.
            (
                "gcn-3-wide",
                ModelConfig::new(ConvKind::Gcn, f, 12, c, 3, 0.5),
                false,
                false,
            ),
            // GraphSAGE-mean whose output layer aggregates first (6 -> 7): its mean of the
            // labelled rows alone (values 1/deg); 12 -> 7 multiplies first.
            ("sage-3-narrow", sage(6), true, true),
            ("sage-3-wide", sage(12), true, false),
        ];
        for (name, cfg, cache, selects) in cases {
            let (loss, grads) = whole(&ds, &cfg, cache);
            for (parts, ex) in (1..=4)
                .chain([8])
                .flat_map(|p| [Exchange::PointToPoint, Exchange::AllGather].map(|e| (p, e)))
            {
                let plan = DistPlan::new(&ds, cfg.kind, parts, Some(ex)).unwrap();
                let model = Gnn::new(cfg.clone(), &Device::Cpu, 3).unwrap();
                let chosen = plan.selects_output_aggregation(&model, &TrainConfig::default());
                let fused = selects && ex == Exchange::AllGather;
                assert_eq!(chosen, fused, "{name} P={parts} {ex}");
                let got = ranks_counted(plan, &ds, &cfg, cache, true, Widths::Auto);
                for (r, ((l, g), calls)) in got.iter().enumerate() {
                    let what = format!("{name} P={parts} {ex} rank {r} output rows' aggregation");
                    // Built on every rank or none, and run once by the one forward.
                    assert_eq!(*calls, fused.then_some(1), "{what}");
                    assert!(
                        ((l - loss) / loss).abs() < 1e-5,
                        "{what}: loss {l} vs {loss}"
                    );
                    for (k, want) in &grads {
                        assert_close(&g[k], want, 1e-5, &format!("{what} d{k}"));
                    }
                }
            }
        }
        // Off, the same plan keeps the whole aggregation.
        let mut plan = DistPlan::new(&ds, ConvKind::Gcn, 2, Some(Exchange::AllGather)).unwrap();
        plan.selected_output_aggregation = false;
        let cfg = narrow(3, 0.0);
        let got = ranks_counted(plan, &ds, &cfg, true, true, Widths::Auto);
        assert!(got.iter().all(|(_, calls)| calls.is_none()));
    }

    #[test]
    fn metis_partitions_give_the_single_device_losses_and_gradients() {
        let ds = cora();
        for (name, cfg) in configs(&ds) {
            for parts in (2..=4).chain([8]) {
                // Dropout masks follow the node ids: the single-device run to match is the one
                // on the renumbered graph.
                let (renumbered, ranges) = metis_renumbered(&ds, cfg.kind, parts);
                let (loss, grads) = whole(&renumbered, &cfg, cached(name));
                for ex in [Exchange::PointToPoint, Exchange::AllGather] {
                    let plan = DistPlan::with_partition(
                        &renumbered,
                        cfg.kind,
                        |_| Ok(ranges.clone()),
                        Some(ex),
                    )
                    .unwrap();
                    assert_eq!(plan.partition, ranges);
                    let got = ranks_of(plan, &renumbered, &cfg, cached(name));
                    for (r, (l, g)) in got.iter().enumerate() {
                        let what = format!("{name} metis P={parts} {ex} rank {r}");
                        assert!(
                            ((l - loss) / loss).abs() < 1e-5,
                            "{what}: loss {l} vs {loss}"
                        );
                        for (k, want) in &grads {
                            // A bias gradient sums the output gradient over Cora's 140 train
                            // nodes (ids 0..140): one range holds them all and sums them in
                            // the single-device order, METIS spreads them over ranks whose
                            // partial sums cancel to 1e-3 of a term (measured: up to 1.1e-4
                            // of the sum apart, every other gradient within 1e-6; 3.3e-4 for
                            // gcn-4-narrow's output bias, whose sum cancels to 7e-5, 2.4e-8
                            // apart, summed by the lean output layer's column sum).
                            let tol = if k.ends_with("bias") { 5e-4 } else { 1e-5 };
                            assert_close(&g[k], want, tol, &format!("{what} d{k}"));
                        }
                        assert_eq!(g, &got[0].1, "{what}");
                    }
                }
            }
        }
        // Without dropout the renumbering changes nothing but the summation order: the METIS
        // ranks reproduce the single-device step on the file's ids.
        let mut cfg = ModelConfig::new(
            ConvKind::Gcn,
            ds.features.cols(),
            24,
            ds.num_classes,
            2,
            0.0,
        );
        cfg.input_dropout = 0.0;
        let (loss, grads) = whole(&ds, &cfg, false);
        let (renumbered, ranges) = metis_renumbered(&ds, cfg.kind, 3);
        let plan = DistPlan::with_partition(&renumbered, cfg.kind, |_| Ok(ranges), None).unwrap();
        for (l, g) in ranks_of(plan, &renumbered, &cfg, false) {
            assert!(((l - loss) / loss).abs() < 1e-5, "loss {l} vs {loss}");
            for (k, want) in &grads {
                let tol = if k.ends_with("bias") { 3e-4 } else { 1e-5 };
                assert_close(&g[k], want, tol, &format!("no dropout d{k}"));
            }
        }
        // A partition of another node count is refused.
        let short = RowPartition::from_bounds(vec![0, 10], 10).unwrap();
        assert!(DistPlan::with_partition(&ds, ConvKind::Gcn, |_| Ok(short), None).is_err());
    }

    #[test]
    fn distributed_training_follows_the_single_device_run() {
        let ds = cora();
        let (f, c) = (ds.features.cols(), ds.num_classes);
        let mut maxk = ModelConfig::new(ConvKind::Gcn, f, 32, c, 3, 0.5);
        maxk.activation = Activation::MaxK { k: 8 };
        maxk.maxk_after_first = true;
        for (cfg, ex) in [
            (ModelConfig::new(ConvKind::Gcn, f, 16, c, 2, 0.5), None),
            (maxk, Some(Exchange::AllGather)),
        ] {
            let train = TrainConfig {
                epochs: 8,
                eval_every: 2,
                ..TrainConfig::default()
            };
            let dev = Device::Cpu;
            let model = Gnn::new(cfg.clone(), &dev, 3).unwrap();
            let graph = ModelGraph::new(&ds.graph, cfg.kind, &dev).unwrap();
            let data = DeviceData::new(&ds, &dev, true).unwrap();
            let want = train_single(&model, &graph, &data, &train);
            let plan = DistPlan::new(&ds, cfg.kind, 3, ex).unwrap();
            // Cora's halos at 3 parts are a small share of the graph.
            assert_eq!(ex.is_some(), plan.exchange == Exchange::AllGather);
            let comms = local_comms(3);
            let got = train_ranks(
                &plan,
                &ds,
                recipe(&cfg, &train),
                &comms,
                &[dev.clone(), dev.clone(), dev],
                None,
                |_| {},
                &|_, _| {},
            )
            .unwrap();
            follows_single_device(&got, &want, &format!("{:?}", cfg.activation));
            for o in &got {
                assert!(o.report.breakdown.comm_bytes > 0);
            }
        }
    }

    /// The trainer's own passes (training and evaluation) through the output rows'
    /// aggregation: Cora with a sparse split on three ranks under the all-gather, a GCN
    /// whose output layer aggregates first, trains as on one device.
    #[test]
    fn training_with_the_output_rows_aggregation_follows_the_single_device_run() {
        let mut ds = cora();
        ds.split.train.retain(|i| i % 2 == 0);
        ds.split.val.retain(|i| i % 5 == 0);
        ds.split.test.retain(|i| i % 5 == 0);
        let mut cfg =
            ModelConfig::new(ConvKind::Gcn, ds.features.cols(), 6, ds.num_classes, 3, 0.5);
        cfg.input_dropout = 0.0;
        let train = TrainConfig {
            epochs: 6,
            eval_every: 2,
            ..TrainConfig::default()
        };
        let dev = Device::Cpu;
        let data = DeviceData::new(&ds, &dev, true).unwrap();
        // GCN's output layer aggregates first; GraphSAGE-mean's (6 -> 7) reads its rows' mean
        // alone.
        for (kind, what) in [
            (ConvKind::Gcn, "output rows' aggregation"),
            (ConvKind::SageMean, "output rows' mean"),
        ] {
            cfg.kind = kind;
            let model = Gnn::new(cfg.clone(), &dev, 3).unwrap();
            let graph = ModelGraph::new(&ds.graph, kind, &dev).unwrap();
            let want = train_single(&model, &graph, &data, &train);
            let plan = DistPlan::new(&ds, kind, 3, Some(Exchange::AllGather)).unwrap();
            assert!(plan.selects_output_aggregation(&model, &train), "{what}");
            let got = train_ranks(
                &plan,
                &ds,
                recipe(&cfg, &train),
                &local_comms(3),
                &[dev.clone(), dev.clone(), dev.clone()],
                None,
                |_| {},
                &|_, _| {},
            )
            .unwrap();
            follows_single_device(&got, &want, what);
        }
    }

    /// Every rank's history is the single-device run's: as many logs, losses within 1e-4
    /// (relative), validation accuracies within two of Cora's 500 validation nodes (counts
    /// over the same nodes: equal unless a logit tie flips between summation orders).
    fn follows_single_device(got: &[RankOutcome], want: &TrainReport, what: &str) {
        for o in got {
            assert_eq!(o.report.history.len(), want.history.len(), "{what}");
            for (a, b) in o.report.history.iter().zip(&want.history) {
                let at = format!("{what} rank {} epoch {}", o.rank, a.epoch);
                assert!(
                    ((a.loss - b.loss) / b.loss).abs() < 1e-4,
                    "{at}: loss {} vs {}",
                    a.loss,
                    b.loss
                );
                if let (Some(x), Some(y)) = (a.acc, b.acc) {
                    assert!((x.1 - y.1).abs() <= 2.0 / 500.0, "{at}: val {x:?} vs {y:?}");
                }
            }
        }
    }

    /// Cora over two ranges on one GPU, each rank on a stream of its own (in-process
    /// communicator): the Planetoid split leaves rank 1 without a training or validation node
    /// and rank 0 without a test node, where `train(cora, device="cuda", devices=[0, 1])` from
    /// Python failed on rank 1 (`CUDA_ERROR_INVALID_VALUE`: an `index_select` over no ids,
    /// launched with a grid of zero blocks). The losses are the single-GPU run's (1e-3
    /// relative, `scripts/python-gpu-check.py`'s bound). Skipped without a GPU.
    #[cfg(feature = "cuda")]
    #[test]
    fn cora_over_two_ranges_trains_on_one_gpu() {
        let Ok(gpu) = Device::new_cuda(0) else {
            eprintln!("no CUDA device: skipped");
            return;
        };
        let ds = cora();
        let cfg = ModelConfig::new(
            ConvKind::Gcn,
            ds.features.cols(),
            16,
            ds.num_classes,
            2,
            0.5,
        );
        let train = TrainConfig {
            epochs: 10,
            eval_every: 5,
            ..TrainConfig::default()
        };
        let model = Gnn::new(cfg.clone(), &gpu, 3).unwrap();
        let graph = ModelGraph::new(&ds.graph, cfg.kind, &gpu).unwrap();
        let data = DeviceData::new(&ds, &gpu, true).unwrap();
        let want = train_single(&model, &graph, &data, &train);
        let plan = DistPlan::new(&ds, cfg.kind, 2, None).unwrap();
        let devices: Vec<Device> = (0..2)
            .map(|_| Device::new_cuda_with_stream(0).unwrap())
            .collect();
        let comms = local_comms(2);
        let got = train_ranks(
            &plan,
            &ds,
            recipe(&cfg, &train),
            &comms,
            &devices,
            None,
            |_| {},
            &|_, _| {},
        )
        .unwrap();
        for o in &got {
            assert_eq!(
                o.report.history.len(),
                want.history.len(),
                "rank {}",
                o.rank
            );
            for (a, b) in o.report.history.iter().zip(&want.history) {
                assert!(
                    ((a.loss - b.loss) / b.loss).abs() < 1e-3,
                    "rank {} epoch {}: loss {} vs {}",
                    o.rank,
                    a.epoch,
                    a.loss,
                    b.loss
                );
            }
        }
    }

    /// Cora with its graph held at 64-bit row offsets (forced: it is small), as a graph past
    /// 2^32 non-zeros is: the operands keep the width, the partition runs on it, each rank's
    /// share takes 32-bit offsets again, and the CPU kernels read either.
    #[test]
    fn a_graph_with_64_bit_offsets_trains_as_its_32_bit_twin() {
        use gnn_graph::OffsetWidth;
        let ds = cora();
        let mut wide = ds.clone();
        wide.graph = ds
            .graph
            .clone()
            .with_offset_width(OffsetWidth::U64)
            .unwrap();
        for (name, cfg) in configs(&ds).into_iter().take(5) {
            // One step on the whole graph: loss and every gradient, bit for bit.
            assert_eq!(
                whole(&wide, &cfg, cached(name)),
                whole(&ds, &cfg, cached(name)),
                "{name}"
            );
            let plan = DistPlan::new(&wide, cfg.kind, 3, None).unwrap();
            assert_eq!(plan.operands.csr.offset_width(), OffsetWidth::U64, "{name}");
            assert_eq!(plan.local(1).unwrap().csr.offset_width(), OffsetWidth::U32);
            for ex in [Exchange::PointToPoint, Exchange::AllGather] {
                assert_eq!(
                    ranks(&wide, &cfg, 3, ex, cached(name)),
                    ranks(&ds, &cfg, 3, ex, cached(name)),
                    "{name} {ex}"
                );
            }
        }
        // Training: the same loss curve and accuracies, epoch by epoch.
        let cfg = ModelConfig::new(
            ConvKind::Gcn,
            ds.features.cols(),
            16,
            ds.num_classes,
            2,
            0.5,
        );
        let train_cfg = TrainConfig {
            epochs: 6,
            eval_every: 2,
            ..TrainConfig::default()
        };
        let curve = |ds: &Dataset| {
            let dev = Device::Cpu;
            let model = Gnn::new(cfg.clone(), &dev, 3).unwrap();
            let graph = ModelGraph::new(&ds.graph, cfg.kind, &dev).unwrap();
            let data = DeviceData::new(ds, &dev, true).unwrap();
            let r = train_single(&model, &graph, &data, &train_cfg);
            r.history
                .iter()
                .map(|h| {
                    let acc = h.acc.map(|a| (a.0.to_bits(), a.1.to_bits(), a.2.to_bits()));
                    (h.loss.to_bits(), acc)
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(curve(&wide), curve(&ds));
    }

    #[test]
    fn a_stop_on_rank_0_stops_every_rank_after_that_epoch() {
        // Rank 0's hook breaks after epoch 3 of 8: every rank stops there (a rank that went on
        // alone would wait forever in epoch 4's exchange), with the full run's first 3
        // losses, and returns the same restored parameters.
        let ds = cora();
        let cfg = ModelConfig::new(
            ConvKind::Gcn,
            ds.features.cols(),
            16,
            ds.num_classes,
            2,
            0.5,
        );
        let train = TrainConfig {
            epochs: 8,
            ..TrainConfig::default()
        };
        let plan = DistPlan::new(&ds, cfg.kind, 3, None).unwrap();
        let devices = [Device::Cpu, Device::Cpu, Device::Cpu];
        let run = |stop_after: Option<usize>| {
            let comms = local_comms(3);
            train_ranks_with_control(
                &plan,
                &ds,
                recipe(&cfg, &train),
                &comms,
                &devices,
                None,
                |log| {
                    if Some(log.epoch) == stop_after {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                },
                &|_, _| {},
            )
            .unwrap()
        };
        let full = run(None);
        let stopped = run(Some(3));
        let loss = |o: &RankOutcome| o.report.history.iter().map(|h| h.loss).collect::<Vec<_>>();
        assert_eq!(loss(&full[0]).len(), 8);
        for o in &stopped {
            assert_eq!(o.report.epochs_run, 3, "rank {}", o.rank);
            assert_eq!(loss(o), loss(&full[0])[..3], "rank {}", o.rank);
        }
        // Replicated parameters: every rank's model is rank 0's.
        let params = |o: &RankOutcome| {
            o.model
                .named_vars()
                .into_iter()
                .map(|(k, v)| {
                    (
                        k,
                        v.as_tensor()
                            .flatten_all()
                            .unwrap()
                            .to_vec1::<f32>()
                            .unwrap(),
                    )
                })
                .collect::<BTreeMap<_, _>>()
        };
        for o in &stopped[1..] {
            assert_eq!(params(o), params(&stopped[0]), "rank {}", o.rank);
        }
        assert_ne!(params(&stopped[0]), params(&full[0]));
    }

    fn train_single(
        model: &Gnn,
        graph: &ModelGraph,
        data: &DeviceData,
        cfg: &TrainConfig,
    ) -> TrainReport {
        train(model, graph, data, cfg, |_| {}).unwrap()
    }

    #[test]
    fn a_failed_rank_is_reported_and_fails_the_run() {
        let ds = cora();
        let plan = DistPlan::new(&ds, ConvKind::Gcn, 2, None).unwrap();
        let cfg = ModelConfig::new(ConvKind::Gcn, ds.features.cols(), 8, ds.num_classes, 2, 0.5);
        let train = TrainConfig::default();
        // Rank 1 cannot join (its member of the group is dropped): rank 0's first exchange
        // then fails too, and both reach the hook.
        let members = std::sync::Mutex::new(LocalComm::group(2));
        let make = |rank: usize, _: &Device| -> gnn_comm::Result<Arc<dyn Communicator>> {
            let c = members.lock().unwrap().remove(0);
            if rank == 1 {
                drop(c);
                return Err(gnn_comm::Error::Comm("rank 1 has no device".into()));
            }
            Ok(Arc::new(c))
        };
        // Hand the members out in rank order whatever order the threads start in.
        let gate = std::sync::Mutex::new(0usize);
        let ordered = |rank: usize, d: &Device| loop {
            let mut next = gate.lock().unwrap();
            if *next == rank {
                *next += 1;
                return make(rank, d);
            }
            drop(next);
            std::thread::yield_now();
        };
        let failed = std::sync::Mutex::new(Vec::new());
        let e = train_ranks(
            &plan,
            &ds,
            recipe(&cfg, &train),
            &ordered,
            &[Device::Cpu, Device::Cpu],
            None,
            |_| {},
            &|rank, e: &Error| failed.lock().unwrap().push((rank, e.to_string())),
        )
        .unwrap_err();
        let mut failed = failed.into_inner().unwrap();
        failed.sort();
        assert_eq!(
            failed.iter().map(|f| f.0).collect::<Vec<_>>(),
            [0, 1],
            "{failed:?}"
        );
        assert!(failed[1].1.contains("no device"), "{failed:?}");
        assert!(!e.to_string().is_empty());
    }

    #[test]
    fn halo_stats_are_those_of_the_local_graphs() {
        let ds = cora();
        let plan = DistPlan::new(&ds, ConvKind::Gcn, 3, None).unwrap();
        for parts in 1..=5 {
            let part = RowPartition::balanced_by_nnz(&plan.operands.csr, parts).unwrap();
            let locals: Vec<_> = (0..parts)
                .map(|r| LocalGraph::build(&plan.operands.csr, &part, r).unwrap())
                .collect();
            assert_eq!(plan.halo_stats(parts).unwrap(), HaloStats::of(&locals));
        }
        assert_eq!(plan.stats().unwrap(), plan.halo_stats(3).unwrap());
    }

    /// The default slicing gives way to the whole operand on three or more ranks where the
    /// gathered operand is small; two ranks, slicing asked for, feature chunks and a
    /// gathered operand past [`WHOLE_GATHER_BYTES`] keep it.
    #[test]
    fn small_gathered_operands_aggregate_whole_on_three_or_more_ranks() {
        let ds = cora();
        let (f, c) = (ds.features.cols(), ds.num_classes);
        let gcn = ModelConfig::new(ConvKind::Gcn, f, 16, c, 2, 0.5);
        let bf16 = crate::Precision::Bf16;
        let plan =
            |parts| DistPlan::new(&ds, ConvKind::Gcn, parts, Some(Exchange::AllGather)).unwrap();
        let block = Some(gnn_comm::GATHER_SLICE_ROWS);
        assert_eq!(plan(2).slice_rows_for(&gcn, bf16), block);
        for parts in [3, 4, 8] {
            assert_eq!(plan(parts).slice_rows_for(&gcn, bf16), None, "P={parts}");
            let mut p = plan(parts);
            p.slice_rows = Some(500);
            assert_eq!(p.slice_rows_for(&gcn, bf16), None, "P={parts} 500");
            p.small_gather_whole = false;
            assert_eq!(
                p.slice_rows_for(&gcn, bf16),
                Some(500),
                "P={parts} asked for"
            );
            let mut p = plan(parts);
            p.feature_chunk = Some(8);
            assert_eq!(p.slice_rows_for(&gcn, bf16), block, "P={parts} chunks");
        }
        // Past the bound: Cora's ~2,708 gathered rows at a width whose bytes exceed it.
        let gathered = {
            let p = plan(4);
            p.partition.parts() * p.partition.max_len()
        };
        let mut wide = gcn.clone();
        wide.hidden = WHOLE_GATHER_BYTES / (2 * gathered) + 1;
        assert_eq!(plan(4).slice_rows_for(&wide, bf16), block);
        wide.hidden -= 1;
        assert_eq!(plan(4).slice_rows_for(&wide, bf16), None);
    }

    #[test]
    fn one_part_has_no_halo() {
        let ds = cora();
        let plan = DistPlan::new(&ds, ConvKind::Gcn, 1, None).unwrap();
        let stats = plan.stats().unwrap();
        assert_eq!(stats.halo, vec![0]);
    }

    /// Trains GCN on Cora over 3 in-process ranks, each communicator behind a watchdog of
    /// `timeout`, rank `fault.rank`'s failing as `fault` says (outside its watchdog, as the
    /// launches put it); returns the run's error, every rank's error with when it came, and
    /// the wall time.
    fn fail_run(
        fault: gnn_comm::Fault,
        timeout: std::time::Duration,
    ) -> (Error, Vec<(usize, String, Instant)>, std::time::Duration) {
        let ds = cora();
        let plan = DistPlan::new(&ds, ConvKind::Gcn, 3, None).unwrap();
        let cfg = ModelConfig::new(ConvKind::Gcn, ds.features.cols(), 8, ds.num_classes, 2, 0.5);
        let train = TrainConfig {
            epochs: 6,
            ..TrainConfig::default()
        };
        let local = local_comms(3);
        let make = |rank: usize, d: &Device| -> gnn_comm::Result<Arc<dyn Communicator>> {
            let c = Arc::new(gnn_comm::Watchdog::new(local(rank, d)?, timeout));
            Ok(gnn_comm::FaultyComm::wrap(c, fault))
        };
        let failed = std::sync::Mutex::new(Vec::new());
        let t = Instant::now();
        let e = train_ranks(
            &plan,
            &ds,
            recipe(&cfg, &train),
            &make,
            &[Device::Cpu, Device::Cpu, Device::Cpu],
            None,
            |_| {},
            &|rank, e: &Error| {
                failed
                    .lock()
                    .unwrap()
                    .push((rank, e.to_string(), Instant::now()))
            },
        )
        .unwrap_err();
        let took = t.elapsed();
        let mut failed = failed.into_inner().unwrap();
        failed.sort_by_key(|f| f.0);
        (e, failed, took)
    }

    #[test]
    fn a_failed_or_panicked_rank_fails_every_survivor_at_once_naming_it() {
        use gnn_comm::{Fault, FaultKind};
        for kind in [FaultKind::Error, FaultKind::Panic] {
            // A watchdog far longer than the test: the survivors learn of rank 1 from its
            // abort, not from a timeout.
            let fault = Fault {
                rank: 1,
                epoch: 3,
                kind,
            };
            let (e, failed, took) = fail_run(fault, std::time::Duration::from_secs(60));
            assert!(
                took < std::time::Duration::from_secs(30),
                "{kind:?}: {took:?}"
            );
            assert_eq!(failed.iter().map(|f| f.0).collect::<Vec<_>>(), [0, 1, 2]);
            // The run's error is the root cause, rank 1's own.
            let root = e.to_string();
            assert!(root.contains("fault injected: rank 1"), "{kind:?}: {root}");
            let dead = failed[1].2;
            for (rank, text, at) in [&failed[0], &failed[2]] {
                assert!(
                    text.starts_with(&format!("rank {rank} at epoch 3 ("))
                        && text.contains("rank 1 failed:")
                        && text.contains("fault injected: rank 1"),
                    "{kind:?} rank {rank}: {text}"
                );
                // After rank 1's failure (which precedes its abort), within moments.
                let after = at.saturating_duration_since(dead);
                assert!(
                    *at >= dead && after < std::time::Duration::from_secs(5),
                    "{kind:?} rank {rank}: {after:?}"
                );
            }
        }
    }

    #[test]
    fn checkpoints_check_that_the_ranks_state_is_replicated() {
        // Rank 1's gradient sums are nudged: its weights drift from rank 0's, and the first
        // checkpoint epoch says so instead of saving a state that would not restore it.
        #[derive(Debug)]
        struct Skewed(LocalComm);
        impl Communicator for Skewed {
            fn rank(&self) -> usize {
                self.0.rank()
            }
            fn world(&self) -> usize {
                self.0.world()
            }
            fn exchange(&self, s: &[Tensor], r: &[usize]) -> gnn_comm::Result<Vec<Tensor>> {
                self.0.exchange(s, r)
            }
            fn all_reduce_sum(&self, t: &Tensor) -> gnn_comm::Result<Tensor> {
                let sum = self.0.all_reduce_sum(t)?;
                if self.rank() == 1 && t.dtype() == candle_core::DType::F32 {
                    return Ok((sum * 1.001)?);
                }
                Ok(sum)
            }
            fn bytes_sent(&self) -> u64 {
                self.0.bytes_sent()
            }
            fn time_spent(&self) -> std::time::Duration {
                self.0.time_spent()
            }
        }
        let ds = cora();
        let plan = DistPlan::new(&ds, ConvKind::Gcn, 2, None).unwrap();
        let cfg = ModelConfig::new(ConvKind::Gcn, ds.features.cols(), 8, ds.num_classes, 2, 0.5);
        let dir = tempfile::tempdir().unwrap();
        let train = TrainConfig {
            epochs: 4,
            checkpoint_every: 2,
            checkpoint: Some(dir.path().join("state")),
            ..TrainConfig::default()
        };
        let members = std::sync::Mutex::new(
            LocalComm::group(2)
                .into_iter()
                .map(Some)
                .collect::<Vec<_>>(),
        );
        let make = |rank: usize, _: &Device| -> gnn_comm::Result<Arc<dyn Communicator>> {
            let c = members.lock().unwrap()[rank].take().unwrap();
            Ok(Arc::new(Skewed(c)))
        };
        let e = train_ranks(
            &plan,
            &ds,
            recipe(&cfg, &train),
            &make,
            &[Device::Cpu, Device::Cpu],
            None,
            |_| {},
            &|_, _| {},
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "after epoch 2, rank 1's parameters or optimiser state differ from rank 0's"
            ),
            "{e}"
        );
        assert!(!crate::checkpoint::state_paths(&dir.path().join("state"))
            .0
            .exists());
    }

    #[test]
    fn a_stalled_rank_times_every_survivor_out() {
        use gnn_comm::{Fault, FaultKind};
        let fault = Fault {
            rank: 1,
            epoch: 3,
            kind: FaultKind::Stall,
        };
        let timeout = std::time::Duration::from_millis(500);
        let (e, failed, took) = fail_run(fault, timeout);
        assert!(took < std::time::Duration::from_secs(30), "{took:?}");
        assert_eq!(failed.iter().map(|f| f.0).collect::<Vec<_>>(), [0, 1, 2]);
        // The first error is a survivor's timeout in epoch 3's forward, where rank 1 stalled.
        let root = e.to_string();
        assert!(
            (root.starts_with("rank 0: ") || root.starts_with("rank 2: "))
                && root.contains("at epoch 3 (forward) did not finish within 0.5 s"),
            "{root}"
        );
        let waiting = root
            .split("(waiting for ")
            .nth(1)
            .and_then(|w| w.split(')').next())
            .unwrap_or_default();
        assert!(
            waiting
                .trim_start_matches("ranks ")
                .trim_start_matches("rank ")
                .split(", ")
                .any(|r| r == "1"),
            "{root}"
        );
        for (rank, text, _) in &failed {
            assert!(
                text.contains("did not finish within 0.5 s"),
                "rank {rank}: {text}"
            );
        }
        // The stalled rank goes on once the group is aborted, and fails with the timeout.
        assert!(
            failed[1].1.starts_with("rank 1 at epoch 3 (forward)"),
            "{}",
            failed[1].1
        );
    }
}
