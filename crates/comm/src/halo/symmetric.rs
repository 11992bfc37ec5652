//! The fused partitioned aggregation of a symmetric operand:
//! [`HaloExchange::aggregate_symmetric`] over a rank's local graph held as column slices
//! ([`SymmetricOperand`]), the other ranks' rows arriving block by block around a ring while
//! the held block's slices multiply.

use super::ops::SymmetricAggregate;
use super::{pad_rows, HaloExchange, Mode};
use crate::error::{Error, Result};
use crate::Communicator;
use candle_core::{Device, Tensor};
use gnn_graph::{Csr, Exchange, LocalGraph};
use gnn_kernels::DeviceGraph;
use std::sync::Arc;

impl HaloExchange {
    /// Whether [`Self::aggregate_symmetric`] takes `reduce` of `dtype` rows here: on the
    /// all-gather exchange, sum, or mean outside f16 (its backward scales `dY` by `1/deg`
    /// before the exchange, in the rows' dtype: f16's range would underflow on long rows).
    pub fn aggregates_symmetric(
        &self,
        reduce: gnn_kernels::Reduce,
        dtype: candle_core::DType,
    ) -> bool {
        matches!(self.0.mode, Mode::AllGather { .. })
            && match reduce {
                gnn_kernels::Reduce::Sum => true,
                gnn_kernels::Reduce::Mean => dtype != candle_core::DType::F16,
                gnn_kernels::Reduce::Max | gnn_kernels::Reduce::Min => false,
            }
    }

    /// [`Self::aggregates_symmetric`] as an error for `op`, naming what it was asked.
    fn check_symmetric(
        &self,
        op: &'static str,
        reduce: gnn_kernels::Reduce,
        dtype: candle_core::DType,
    ) -> Result<()> {
        if self.aggregates_symmetric(reduce, dtype) {
            return Ok(());
        }
        Err(Error::Unsupported {
            op,
            what: format!(
                "{reduce:?} of {dtype:?} on the {} exchange: the all-gather, sum, or mean outside \
                 f16 only",
                self.kind()
            ),
        })
    }

    /// `Â[own, :] · X` for this rank's rows, from its own rows `x` (`[n_local, d]`), as one
    /// differentiable op, when the whole operand `Â` is symmetric in structure and values (a
    /// `reduce` of mean divides by the row length, `Â = D⁻¹ A`) and the exchange takes it
    /// ([`Self::aggregates_symmetric`]); `operand` is the local graph with its edge values
    /// ([`Self::symmetric_operand`], or [`SymmetricOperand::whole`]).
    ///
    /// Forward: every rank's rows of `x` (block by block around a ring on a sliced operand,
    /// all at once on a whole one), SpMM over the local graph. Backward: since
    /// `(Âᵀ dY)[own] = Â[own, :] dY` for a symmetric `Â` (`A D⁻¹ dY` for the mean), the same
    /// exchange of `dY` (the mean: `D⁻¹ dY`, in f32) and the *same* SpMM. Against
    /// [`Self::forward`] followed by the SpMM, the same bytes cross the link, but the local
    /// graph needs no transpose (as large as itself: the rank's rows with every column are
    /// rectangular) and no gathered `[N, d]` tensor stays alive from the forward to the
    /// backward (nor, on a sliced operand, exists at all: one or two blocks at a time).
    pub fn aggregate_symmetric(
        &self,
        operand: &SymmetricOperand,
        x: &Tensor,
        reduce: gnn_kernels::Reduce,
    ) -> Result<Tensor> {
        const OP: &str = "halo_aggregate";
        let p = &self.0;
        self.check_symmetric(OP, reduce, x.dtype())?;
        let mean = gnn_kernels::ops::spmm::transpose_operands(OP, reduce, operand.values())?;
        let Mode::AllGather { part } = &p.mode else {
            unreachable!("aggregates_symmetric holds only for the all-gather")
        };
        if operand.0.n_rows != p.n_local || operand.0.n_cols != part.parts() * part.max_len() {
            return Err(Error::Shape {
                op: OP,
                what: format!(
                    "a local graph of {} x {} for {} owned rows and {} gathered",
                    operand.0.n_rows,
                    operand.0.n_cols,
                    p.n_local,
                    part.parts() * part.max_len()
                ),
            });
        }
        p.check_rows(x)?;
        let out = operand.product(&p.comm, &x.detach().contiguous()?, mean)?;
        Ok(x.apply_op1(SymmetricAggregate {
            plan: p.clone(),
            operand: operand.clone(),
            mean,
            out: std::sync::Mutex::new(Some(out)),
        })?)
    }

    /// The gradient [`Self::aggregate_symmetric`] gives its input for the output gradient
    /// `dy` (`[n_local, d]`): `Âᵀ dy` for this rank's rows, which for the symmetric operand is
    /// the same exchange and SpMM as the forward (on `D⁻¹ dy` for a mean). For a fused op
    /// that runs the aggregation untracked inside its own forward and differentiates through
    /// it itself. Collective, like the forward.
    pub fn aggregate_symmetric_grad(
        &self,
        operand: &SymmetricOperand,
        dy: &Tensor,
        reduce: gnn_kernels::Reduce,
    ) -> Result<Tensor> {
        const OP: &str = "halo_aggregate";
        self.check_symmetric(OP, reduce, dy.dtype())?;
        let mean = gnn_kernels::ops::spmm::transpose_operands(OP, reduce, operand.values())?;
        super::ops::transpose_product(&self.0, operand, mean, dy)
    }

    /// The local graph of `local` under the all-gather (the columns of [`Self::local_csr`]),
    /// with its edge `values` (aligned with `local.csr`'s entries), uploaded for
    /// [`Self::aggregate_symmetric`] as column slices: every rank's block of the gathered
    /// rows on its own (so the slices over this rank's rows can run while the exchange is in
    /// flight), each cut further into slices of at most `slice_rows` rows (`usize::MAX`, the
    /// default [`GATHER_SLICE_ROWS`]: not cut further). Each slice's SpMM reads only its rows
    /// of the gathered features; the products add up. Narrower slices read an L2-sized part
    /// of the features each (at Reddit-shaped scale 4, four 233 K-row slices ran the SpMM
    /// 1.51x faster on an H100, adds included: `c6f0242:docs/perf/h100-2026-11-26-column-blocks`);
    /// the SpMM now gets that locality by itself (column-blocked schedule). Same device
    /// memory as the whole local graph.
    pub fn symmetric_operand(
        &self,
        local: &LocalGraph,
        values: Option<&[f32]>,
        slice_rows: usize,
        device: &Device,
    ) -> Result<SymmetricOperand> {
        if self.kind() != Exchange::AllGather {
            return Err(Error::Unsupported {
                op: "halo_aggregate",
                what: format!("a symmetric operand on the {} exchange", self.kind()),
            });
        }
        let Mode::AllGather { part } = &self.0.mode else {
            unreachable!("checked above: the all-gather")
        };
        let csr = self.local_csr(local)?;
        let n_cols = csr.n_cols();
        // Every rank's block of the gathered rows on its own, each cut evenly into pieces of
        // at most `slice_rows`: a slice then reads one owner's rows only, so this rank's own
        // slices can run while the others' rows are in flight. A block's padding (after a
        // shorter range's rows) is a window of its own that no edge reaches.
        let m = part.max_len();
        let mut bounds = vec![0];
        for b in 0..part.parts() {
            let len = part.range(b).len();
            let pieces = len.div_ceil(slice_rows.max(1)).max(1);
            bounds.extend((1..=pieces).map(|i| b * m + len * i / pieces));
            bounds.push((b + 1) * m);
        }
        bounds.dedup();
        if bounds.len() == 1 {
            // No rows at all: one empty slice (the graph's shape).
            bounds.push(n_cols);
        }
        // Within one block's rows (not its padding): what a slice may read.
        let real = |w: &[usize]| m == 0 || w[1] <= w[0] / m * m + part.range(w[0] / m).len();
        let upload = |c: Csr, v: Option<Vec<f32>>, w: &[usize]| -> Result<Slice> {
            let nnz = c.nnz();
            // The slice itself, not a copy (`DeviceGraph::upload` would clone it).
            let g = DeviceGraph::from_arc(Arc::new(c), device)?;
            let values = v.map(|v| Tensor::from_vec(v, nnz, device)).transpose()?;
            Ok(Slice {
                cols: w[0]..w[1],
                g,
                values,
            })
        };
        let mut slices = Vec::with_capacity(bounds.len());
        // An empty slice adds nothing, but one is kept if none has edges (the graph's shape).
        let mut spare = None;
        for ((c, v), w) in csr
            .column_blocks(&bounds, values)?
            .into_iter()
            .zip(bounds.windows(2))
        {
            if c.nnz() > 0 {
                slices.push(upload(c, v, w)?);
            } else if spare.is_none() && real(w) {
                spare = Some((c, v, w));
            }
        }
        if slices.is_empty() {
            let (c, v, w) = spare.ok_or_else(|| Error::InvalidArgument {
                op: "halo_aggregate",
                what: "a partition whose blocks have no rows".into(),
            })?;
            slices.push(upload(c, v, w)?);
        }
        // A slice never holds a whole row: a mean divides the summed slices by the row's length.
        let blocks = if m > 0 {
            let inv = csr.inverse_row_degrees();
            Some(Blocks {
                rows: m,
                lens: (0..part.parts()).map(|b| part.range(b).len()).collect(),
                inv_degrees: Tensor::from_vec(inv, (csr.n_rows(), 1), device)?,
            })
        } else {
            None
        };
        Ok(SymmetricOperand(Arc::new(OperandInner {
            n_rows: csr.n_rows(),
            n_cols,
            slices,
            blocks,
            feature_chunk: None,
        })))
    }
}

/// Gathered rows per column slice of [`HaloExchange::symmetric_operand`] in training:
/// unbounded, i.e. one slice per rank's block of the gathered rows (what the overlap of the
/// exchange needs). The L2 locality that cutting slices narrower bought (2^18-row slices:
/// `c6f0242:docs/perf/h100-2026-11-26-column-blocks`) now comes from the SpMM itself, which walks a
/// slice wider than [`gnn_kernels::schedule::COLUMN_BLOCK`] in column blocks without the adds:
/// scale-4 GCN 4x256 on two H100s 175.1 ms per epoch with one slice per block against 180.8
/// with 2^18-row slices (`c6f0242:docs/perf/h100x2-2026-11-26-dist-block-slices`).
pub const GATHER_SLICE_ROWS: usize = usize::MAX;

/// A rank's local graph (and edge values) for [`HaloExchange::aggregate_symmetric`], as one
/// or more column slices over the gathered rows. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SymmetricOperand(Arc<OperandInner>);

#[derive(Debug)]
struct OperandInner {
    n_rows: usize,
    n_cols: usize,
    /// Non-empty column ranges with their part of the graph (at least one slice).
    slices: Vec<Slice>,
    /// The slices follow the all-gather's blocks ([`HaloExchange::symmetric_operand`]);
    /// `None` for [`SymmetricOperand::whole`] (one slice, every column).
    blocks: Option<Blocks>,
    /// [`SymmetricOperand::with_feature_chunk`]: the product runs over at most this many
    /// feature columns at a time; `None`: all at once.
    feature_chunk: Option<usize>,
}

/// How a sliced operand lies over the all-gather's blocks.
#[derive(Debug, Clone)]
struct Blocks {
    /// Columns per rank's block (the longest range); no slice crosses a block boundary or
    /// reaches into a block's padding, so the product runs a block's slices on that rank's
    /// rows alone.
    rows: usize,
    /// Every rank's row count (its block's rows before the padding).
    lens: Vec<usize>,
    /// `1 / deg(row)` (`[n_rows, 1]`, f32) of the whole rows: a mean divides the summed
    /// slices by it.
    inv_degrees: Tensor,
}

#[derive(Debug)]
struct Slice {
    cols: std::ops::Range<usize>,
    g: DeviceGraph,
    values: Option<Tensor>,
}

impl SymmetricOperand {
    /// The whole local graph `g` (uploaded from [`HaloExchange::local_csr`]) as one slice,
    /// with its edge `values`: for a caller that keeps `g` for other products too.
    pub fn whole(g: DeviceGraph, values: Option<Tensor>) -> Self {
        Self(Arc::new(OperandInner {
            n_rows: g.n_rows(),
            n_cols: g.n_cols(),
            slices: vec![Slice {
                cols: 0..g.n_cols(),
                g,
                values,
            }],
            blocks: None,
            feature_chunk: None,
        }))
    }

    /// The same operand with every slice's graph under `g`'s kernel policy, recording into
    /// `g`'s record ([`DeviceGraph::with_policy_of`]).
    pub fn with_policy_of(&self, g: &DeviceGraph) -> Self {
        let slices = self
            .0
            .slices
            .iter()
            .map(|s| Slice {
                cols: s.cols.clone(),
                g: s.g.with_policy_of(g),
                values: s.values.clone(),
            })
            .collect();
        Self(Arc::new(OperandInner {
            n_rows: self.0.n_rows,
            n_cols: self.0.n_cols,
            slices,
            blocks: self.0.blocks.clone(),
            feature_chunk: self.0.feature_chunk,
        }))
    }

    /// The same operand whose products ([`HaloExchange::aggregate_symmetric`], forward and
    /// backward) run over at most `cols` feature columns at a time (`None` or 0: all at
    /// once): each chunk's rows are exchanged and multiplied on their own, its result copied
    /// into the output's columns. What a product holds besides its input and output, the
    /// received blocks and the SpMM's fp32 accumulator and result, shrinks by the chunk's
    /// share of the width; the bytes exchanged are the same, in more messages. Every value
    /// is the one the whole-width product gives (the columns of a product are independent).
    /// Every rank must use the same `cols` (the chunks' exchanges are collective).
    pub fn with_feature_chunk(&self, cols: Option<usize>) -> Self {
        let slices = self
            .0
            .slices
            .iter()
            .map(|s| Slice {
                cols: s.cols.clone(),
                g: s.g.clone(),
                values: s.values.clone(),
            })
            .collect();
        Self(Arc::new(OperandInner {
            n_rows: self.0.n_rows,
            n_cols: self.0.n_cols,
            slices,
            blocks: self.0.blocks.clone(),
            feature_chunk: cols.filter(|&c| c > 0),
        }))
    }

    /// [`Self::with_feature_chunk`]'s setting: `None` when products run at full width.
    pub fn feature_chunk(&self) -> Option<usize> {
        self.0.feature_chunk
    }

    /// The first slice's graph (the whole graph when there is one slice): its rows are the
    /// rank's rows, and it carries the backward timing of [`HaloExchange::aggregate_symmetric`].
    pub fn first_graph(&self) -> &DeviceGraph {
        &self.0.slices[0].g
    }

    /// Whether [`Self::first_graph`] is not all of the graph (cut into slices).
    pub fn is_sliced(&self) -> bool {
        !matches!(&self.0.slices[..], [s] if s.cols == (0..self.0.n_cols))
    }

    /// Column slices held.
    pub fn slice_count(&self) -> usize {
        self.0.slices.len()
    }

    /// The first slice's edge values (the whole graph's when there is one slice).
    pub fn first_values(&self) -> Option<Tensor> {
        self.values().cloned()
    }

    /// The first slice's edge values (all slices have values or none do).
    fn values(&self) -> Option<&Tensor> {
        self.0.slices[0].values.as_ref()
    }

    /// `1 / deg(row)` (`[n_rows, 1]`, f32) of the whole rows, which a mean divides by.
    pub(super) fn inv_degrees(&self) -> Result<Tensor> {
        Ok(match &self.0.blocks {
            Some(b) => b.inv_degrees.clone(),
            None => self.first_graph().inv_degrees(candle_core::DType::F32)?,
        })
    }

    /// `Â[own, :] · all`, where `all` is every rank's `own` (`[n_local, d]`, this rank's
    /// rows) in the all-gather's padded layout, a mean dividing by the whole row's length: one
    /// SpMM per slice over its rows, the products added in `own`'s dtype. When the slices
    /// follow the blocks, the other ranks' rows come one block at a time around a ring
    /// ([`Communicator::shift_overlapped`]), each block's slices running while the next block
    /// is in flight (this rank's own first): the rank holds at most two received blocks, not
    /// all `P` (at `P = 2`, one), and sends its rows unpadded. Otherwise one all-gather.
    /// Under [`Self::with_feature_chunk`], all of that runs once per column chunk.
    pub(super) fn product(
        &self,
        comm: &Arc<dyn Communicator>,
        own: &Tensor,
        mean: bool,
    ) -> Result<Tensor> {
        let d = own.dim(1)?;
        let Some(w) = self.0.feature_chunk.filter(|&w| w < d) else {
            return self.product_columns(comm, own, mean);
        };
        // Column chunks: each one's product on its own, copied into its columns of the output
        // and freed before the next (one chunk's blocks and SpMM buffers at a time).
        let out = Tensor::zeros((self.0.n_rows, d), own.dtype(), own.device())?;
        for c0 in (0..d).step_by(w) {
            let part = own.narrow(1, c0, w.min(d - c0))?.contiguous()?;
            let y = self.product_columns(comm, &part, mean)?.contiguous()?;
            drop(part);
            out.slice_set(&y, 1, c0)?;
        }
        Ok(out)
    }

    /// [`Self::product`] over all of `own`'s columns at once.
    fn product_columns(
        &self,
        comm: &Arc<dyn Communicator>,
        own: &Tensor,
        mean: bool,
    ) -> Result<Tensor> {
        let reduce = |mean| {
            if mean {
                gnn_kernels::Reduce::Mean
            } else {
                gnn_kernels::Reduce::Sum
            }
        };
        let run = |s: &Slice, x: &Tensor, r| match &s.values {
            Some(v) => gnn_kernels::spmm_weighted(&s.g, x, v, r),
            None => gnn_kernels::spmm(&s.g, x, r),
        };
        let Some(blocks) = &self.0.blocks else {
            let m = self.0.n_cols / comm.world();
            let all = comm.all_gather(&pad_rows(own, m)?)?;
            if let [s] = &self.0.slices[..] {
                if s.cols == (0..self.0.n_cols) {
                    return Ok(run(s, &all, reduce(mean))?);
                }
            }
            return Err(Error::InvalidArgument {
                op: "halo_aggregate",
                what: "a sliced operand without the all-gather's blocks".into(),
            });
        };
        let (rank, world, m) = (comm.rank(), comm.world(), blocks.rows);
        let mut acc: Option<Tensor> = None;
        // The slices of block `b` on its rows `x` (`[lens[b], d]`), added onto `acc`.
        let block = |acc: &mut Option<Tensor>, b: usize, x: &Tensor| -> Result<()> {
            for s in self.0.slices.iter().filter(|s| s.cols.start / m == b) {
                let x = x.narrow(0, s.cols.start - b * m, s.cols.len())?;
                let y = run(s, &x, reduce(false))?;
                *acc = Some(match acc.take() {
                    Some(a) => (a + y)?,
                    None => y,
                });
            }
            Ok(())
        };
        // Step k brings block `rank - k` while the block before it is multiplied.
        let mut held: Option<(usize, Tensor)> = None;
        for k in 1..world {
            let src = (rank + world - k) % world;
            let got = comm.shift_overlapped(own, k, blocks.lens[src], &mut || match &held {
                None => block(&mut acc, rank, own),
                Some((b, x)) => block(&mut acc, *b, x),
            })?;
            held = Some((src, got));
        }
        match held {
            None => block(&mut acc, rank, own)?,
            Some((b, x)) => block(&mut acc, b, &x)?,
        }
        let acc = acc.ok_or_else(|| Error::InvalidArgument {
            op: "halo_aggregate",
            what: "a symmetric operand without slices".into(),
        })?;
        Ok(if mean {
            acc.to_dtype(candle_core::DType::F32)?
                .broadcast_mul(&blocks.inv_degrees)?
                .to_dtype(acc.dtype())?
        } else {
            acc
        })
    }
}
