//! The halo exchange of a 1-D partitioned graph, differentiable: the forward appends the halo
//! rows received from their owners to this rank's rows; the backward returns the halo rows'
//! gradients to their owners, who add them to the rows they sent.

use super::Communicator;
use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use crate::ops::maxk::Cbsr;
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, Device, Layout, Shape, Tensor};
use gnn_graph::{Csr, Exchange, LocalGraph, RowPartition};
use std::borrow::Cow;
use std::sync::Arc;

/// One rank's exchange plan (from its [`LocalGraph`]) and communicator, with the send lists on
/// the device.
#[derive(Debug, Clone)]
pub struct HaloExchange(Arc<Plan>);

#[derive(Debug)]
struct Plan {
    comm: Arc<dyn Communicator>,
    n_local: usize,
    mode: Mode,
}

#[derive(Debug, Clone)]
enum Mode {
    PointToPoint {
        /// Local rows to send to each rank (`u32`, on the device); `None` where empty.
        send: Vec<Option<Tensor>>,
        /// The backward's scatter-add as a sparse matrix: row `r` (a local row) lists the
        /// positions of `r` in the concatenated send lists, so `dx = S · back` sums the
        /// gradients coming back for each sent row with the SpMM kernel (row-parallel, no
        /// atomics; candle's CUDA `index_add` walks the indices serially). `None` when
        /// nothing is sent.
        scatter: Option<DeviceGraph>,
        send_counts: Vec<usize>,
        recv_counts: Vec<usize>,
    },
    AllGather {
        /// The partition: every rank's block is `part.max_len()` rows.
        part: RowPartition,
    },
}

impl HaloExchange {
    /// The point-to-point plan of `local` for the rank `comm` runs, its index lists uploaded
    /// to `device`.
    pub fn new(local: &LocalGraph, comm: Arc<dyn Communicator>, device: &Device) -> Result<Self> {
        check_rank(local, &comm)?;
        let upload = |v: &[u32]| -> Result<Option<Tensor>> {
            Ok((!v.is_empty())
                .then(|| Tensor::from_slice(v, v.len(), device))
                .transpose()?)
        };
        let send = local
            .send
            .iter()
            .map(|s| upload(s))
            .collect::<Result<Vec<_>>>()?;
        let all: Vec<u32> = local.send.iter().flatten().copied().collect();
        let scatter = if all.is_empty() {
            None
        } else {
            let n = local.n_local();
            let mut indptr = vec![0u32; n + 1];
            for &r in &all {
                indptr[r as usize + 1] += 1;
            }
            for i in 0..n {
                indptr[i + 1] += indptr[i];
            }
            let mut fill = indptr.clone();
            let mut cols = vec![0u32; all.len()];
            for (q, &r) in all.iter().enumerate() {
                cols[fill[r as usize] as usize] = q as u32;
                fill[r as usize] += 1;
            }
            let csr = gnn_graph::Csr::new_checked(n, all.len(), indptr, cols)?;
            Some(DeviceGraph::upload(&csr, device)?)
        };
        Ok(Self(Arc::new(Plan {
            comm,
            n_local: local.n_local(),
            mode: Mode::PointToPoint {
                scatter,
                send_counts: local.send.iter().map(Vec::len).collect(),
                recv_counts: local.recv_counts.clone(),
                send,
            },
        })))
    }

    /// The all-gather plan of `local` (built under `part`): every exchange gathers all ranks'
    /// rows, blocks padded to `part.max_len()`; the backward is one reduce-scatter. The local
    /// graph's structure for it is [`Self::local_csr`].
    pub fn all_gather(
        local: &LocalGraph,
        part: &RowPartition,
        comm: Arc<dyn Communicator>,
    ) -> Result<Self> {
        check_rank(local, &comm)?;
        if part.range(local.rank) != local.rows {
            return Err(Error::Shape {
                op: "halo",
                what: format!(
                    "rank {} owns {:?}, the partition says {:?}",
                    local.rank,
                    local.rows,
                    part.range(local.rank)
                ),
            });
        }
        Ok(Self(Arc::new(Plan {
            comm,
            n_local: local.n_local(),
            mode: Mode::AllGather { part: part.clone() },
        })))
    }

    /// The plan `exchange` names ([`Self::new`] or [`Self::all_gather`]).
    pub fn with(
        exchange: Exchange,
        local: &LocalGraph,
        part: &RowPartition,
        comm: Arc<dyn Communicator>,
        device: &Device,
    ) -> Result<Self> {
        match exchange {
            Exchange::PointToPoint => Self::new(local, comm, device),
            Exchange::AllGather => Self::all_gather(local, part, comm),
        }
    }

    /// This exchange with its own graph (the backward's scatter) under `g`'s kernel policy,
    /// recording into `g`'s record ([`DeviceGraph::with_policy_of`]).
    pub fn with_policy_of(&self, g: &DeviceGraph) -> Self {
        let mut mode = self.0.mode.clone();
        if let Mode::PointToPoint {
            scatter: Some(s), ..
        } = &mut mode
        {
            *s = s.with_policy_of(g);
        }
        Self(Arc::new(Plan {
            comm: self.0.comm.clone(),
            n_local: self.0.n_local,
            mode,
        }))
    }

    /// Which exchange this is.
    pub fn kind(&self) -> Exchange {
        match self.0.mode {
            Mode::PointToPoint { .. } => Exchange::PointToPoint,
            Mode::AllGather { .. } => Exchange::AllGather,
        }
    }

    /// `local`'s rows with the columns [`Self::forward`]'s output has: own + halo
    /// (point-to-point), or every rank's padded block (all-gather).
    pub fn local_csr<'a>(&self, local: &'a LocalGraph) -> Result<Cow<'a, Csr>> {
        Ok(match &self.0.mode {
            Mode::PointToPoint { .. } => Cow::Borrowed(&local.csr),
            Mode::AllGather { part } => Cow::Owned(local.gathered_columns(part)?),
        })
    }

    /// The communicator.
    pub fn comm(&self) -> &Arc<dyn Communicator> {
        &self.0.comm
    }

    /// Rows received per exchange.
    pub fn halo_rows(&self) -> usize {
        match &self.0.mode {
            Mode::PointToPoint { recv_counts, .. } => recv_counts.iter().sum(),
            Mode::AllGather { part } => (part.parts() - 1) * part.max_len(),
        }
    }

    /// `[n_local, d]` -> the rows the local graph's columns name: this rank's rows, then the
    /// halo rows in the local graph's column order (point-to-point), or every rank's rows
    /// in padded blocks (all-gather). Differentiable in `x` (the backward is collective too).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let p = &self.0;
        match &p.mode {
            Mode::PointToPoint { .. } => {
                let halo = p.gather_exchange(x)?;
                // Attaches the backward (halo gradients home) when x carries one; a copy
                // otherwise.
                let halo = x.apply_op2(&halo, ExchangeGrad(p.clone()))?;
                Ok(Tensor::cat(&[x, &halo], 0)?)
            }
            Mode::AllGather { .. } => {
                let all = p.comm.all_gather(&p.padded(&x.detach())?)?;
                Ok(x.apply_op2(&all, ExchangeGrad(p.clone()))?)
            }
        }
    }

    /// [`Self::forward`] for MaxK features: the halo rows' kept values (differentiable) and
    /// their columns.
    pub fn forward_cbsr(&self, c: &Cbsr) -> Result<Cbsr> {
        let p = &self.0;
        let data = self.forward(c.data())?;
        let index = match &p.mode {
            Mode::PointToPoint { .. } => {
                Tensor::cat(&[c.index(), &p.gather_exchange(c.index())?], 0)?
            }
            // Padding rows hold column 0: valid, and never read (no edge names them).
            Mode::AllGather { .. } => p.comm.all_gather(&p.padded(c.index())?)?,
        };
        Ok(Cbsr::from_rows_unchecked(data, index, c.dim()))
    }
}

impl HaloExchange {
    /// Whether [`Self::aggregate_symmetric`] takes `reduce` of `dtype` rows here: on the
    /// all-gather exchange, sum, or mean outside f16 (its backward scales `dY` by `1/deg`
    /// before the exchange, in the rows' dtype: f16's range would underflow on long rows).
    pub fn aggregates_symmetric(&self, reduce: crate::Reduce, dtype: candle_core::DType) -> bool {
        matches!(self.0.mode, Mode::AllGather { .. })
            && match reduce {
                crate::Reduce::Sum => true,
                crate::Reduce::Mean => dtype != candle_core::DType::F16,
                crate::Reduce::Max | crate::Reduce::Min => false,
            }
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
        reduce: crate::Reduce,
    ) -> Result<Tensor> {
        const OP: &str = "halo_aggregate";
        let p = &self.0;
        if !self.aggregates_symmetric(reduce, x.dtype()) {
            return Err(Error::Shape {
                op: OP,
                what: format!(
                    "{reduce:?} of {:?} on the {} exchange: the all-gather, sum, or mean outside \
                     f16 only",
                    x.dtype(),
                    self.kind()
                ),
            });
        }
        let mean = crate::ops::spmm::transpose_operands(OP, reduce, operand.values())?;
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
            return Err(Error::Shape {
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
            let g = DeviceGraph::upload(&c, device)?;
            let values = v
                .map(|v| Tensor::from_vec(v, c.nnz(), device))
                .transpose()?;
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
            let (c, v, w) = spare.ok_or_else(|| Error::Shape {
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
        })))
    }
}

/// Gathered rows per column slice of [`HaloExchange::symmetric_operand`] in training:
/// unbounded, i.e. one slice per rank's block of the gathered rows (what the overlap of the
/// exchange needs). The L2 locality that cutting slices narrower bought (2^18-row slices:
/// `c6f0242:docs/perf/h100-2026-11-26-column-blocks`) now comes from the SpMM itself, which walks a
/// slice wider than [`crate::schedule::COLUMN_BLOCK`] in column blocks without the adds:
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
        }))
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

    /// `Â[own, :] · all`, where `all` is every rank's `own` (`[n_local, d]`, this rank's
    /// rows) in the all-gather's padded layout, a mean dividing by the whole row's length: one
    /// SpMM per slice over its rows, the products added in `own`'s dtype. When the slices
    /// follow the blocks, the other ranks' rows come one block at a time around a ring
    /// ([`Communicator::shift_overlapped`]), each block's slices running while the next block
    /// is in flight (this rank's own first): the rank holds at most two received blocks, not
    /// all `P` (at `P = 2`, one), and sends its rows unpadded. Otherwise one all-gather.
    fn product(&self, comm: &Arc<dyn Communicator>, own: &Tensor, mean: bool) -> Result<Tensor> {
        let reduce = |mean| {
            if mean {
                crate::Reduce::Mean
            } else {
                crate::Reduce::Sum
            }
        };
        let run = |s: &Slice, x: &Tensor, r| match &s.values {
            Some(v) => crate::spmm_weighted(&s.g, x, v, r),
            None => crate::spmm(&s.g, x, r),
        };
        let Some(blocks) = &self.0.blocks else {
            let m = self.0.n_cols / comm.world();
            let all = comm.all_gather(&pad_rows(own, m)?)?;
            if let [s] = &self.0.slices[..] {
                if s.cols == (0..self.0.n_cols) {
                    return run(s, &all, reduce(mean));
                }
            }
            return Err(Error::Shape {
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
        let acc = acc.ok_or_else(|| Error::Shape {
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

/// [`HaloExchange::aggregate_symmetric`]'s op: its forward hands over the output computed
/// outside candle's graph (held until then, so that the graph keeps only the copy), its
/// backward gathers the output gradient and runs the local SpMM again.
struct SymmetricAggregate {
    plan: Arc<Plan>,
    operand: SymmetricOperand,
    mean: bool,
    out: std::sync::Mutex<Option<Tensor>>,
}

impl SymmetricAggregate {
    fn take(&self) -> candle_core::Result<Tensor> {
        self.out
            .lock()
            .map_err(|_| candle_core::Error::Msg("halo_aggregate: lock poisoned".into()))?
            .take()
            .ok_or_else(|| candle_core::Error::Msg("halo_aggregate: forward ran twice".into()))
    }
}

impl candle_core::CustomOp1 for SymmetricAggregate {
    fn name(&self) -> &'static str {
        "halo_aggregate"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = self.take()?;
        let (s, l) = out.storage_and_layout();
        match &*s {
            candle_core::Storage::Cpu(s) => copy(s, l),
            _ => candle_core::bail!("halo_aggregate: the output is not on the CPU"),
        }
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        _: &candle_core::CudaStorage,
        _: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let out = self.take()?;
        let (s, l) = out.storage_and_layout();
        match &*s {
            candle_core::Storage::Cuda(s) => copy(s, l),
            _ => candle_core::bail!("halo_aggregate: the output is not on the GPU"),
        }
    }

    fn bwd(&self, x: &Tensor, _res: &Tensor, dy: &Tensor) -> candle_core::Result<Option<Tensor>> {
        if !x.track_op() {
            return Ok(None);
        }
        let p = &self.plan;
        let dy = dy.contiguous()?;
        let msg = |e: Error| candle_core::Error::Msg(e.to_string());
        let dy = if self.mean {
            let inv = match &self.operand.0.blocks {
                Some(b) => b.inv_degrees.clone(),
                None => self
                    .operand
                    .first_graph()
                    .inv_degrees(candle_core::DType::F32)
                    .map_err(msg)?,
            };
            dy.to_dtype(candle_core::DType::F32)?
                .broadcast_mul(&inv)?
                .to_dtype(dy.dtype())?
        } else {
            dy
        };
        p.check_rows(&dy).map_err(msg)?;
        // The exchange runs inside the timed span (overlapped with the own slices): its time
        // is the communicator's, not the aggregation's.
        let (g, c0) = (self.operand.first_graph(), p.comm.time_spent());
        let timer = g.backward_timer();
        let dx = self.operand.product(&p.comm, &dy, false).map_err(msg)?;
        drop(timer);
        g.deduct_backward_time(p.comm.time_spent().saturating_sub(c0));
        Ok(Some(dx))
    }
}

fn check_rank(local: &LocalGraph, comm: &Arc<dyn Communicator>) -> Result<()> {
    if comm.rank() != local.rank || comm.world() != local.send.len() {
        return Err(Error::Shape {
            op: "halo",
            what: format!(
                "local graph of rank {} of {} used by rank {} of {}",
                local.rank,
                local.send.len(),
                comm.rank(),
                comm.world()
            ),
        });
    }
    Ok(())
}

impl Plan {
    fn check_rows(&self, x: &Tensor) -> Result<usize> {
        let (n, d) = x.dims2()?;
        if n != self.n_local {
            return Err(Error::Shape {
                op: "halo",
                what: format!("x has {n} rows, this rank owns {}", self.n_local),
            });
        }
        Ok(d)
    }

    /// `x` (`[n_local, d]`) padded with zero rows to the all-gather's block.
    fn padded(&self, x: &Tensor) -> Result<Tensor> {
        self.check_rows(x)?;
        let Mode::AllGather { part } = &self.mode else {
            unreachable!("padding is the all-gather's")
        };
        pad_rows(x, part.max_len())
    }

    /// The halo rows `[halo, d]` received for `x`'s rows (no gradient; point-to-point).
    fn gather_exchange(&self, x: &Tensor) -> Result<Tensor> {
        let d = self.check_rows(x)?;
        let Mode::PointToPoint {
            send, recv_counts, ..
        } = &self.mode
        else {
            unreachable!("the send lists are the point-to-point exchange's")
        };
        let x = x.detach().contiguous()?;
        let empty = Tensor::zeros((0, d), x.dtype(), x.device())?;
        let sends = send
            .iter()
            .map(|s| match s {
                Some(idx) => Ok(x.index_select(idx, 0)?),
                None => Ok(empty.clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        let got = self.comm.exchange(&sends, recv_counts)?;
        Ok(Tensor::cat(&got, 0)?)
    }
}

/// `x` (`[n, d]`, `n <= m`) with zero rows after it up to `m` rows, contiguous.
fn pad_rows(x: &Tensor, m: usize) -> Result<Tensor> {
    let (n, d) = x.dims2()?;
    Ok(if m == n {
        x.contiguous()?
    } else {
        let pad = Tensor::zeros((m - n, d), x.dtype(), x.device())?;
        Tensor::cat(&[x, &pad], 0)?
    })
}

/// `(x, received) -> received` whose backward returns the received rows' gradients to their
/// owners and adds what comes back onto `x`: the point-to-point path sends `d halo` home and
/// scatter-adds it onto the sent rows; the all-gather path reduce-scatters the gradient of
/// every block (this rank's own block included).
struct ExchangeGrad(Arc<Plan>);

fn copy<S: BackendStorage>(s: &S, l: &Layout) -> candle_core::Result<(S, Shape)> {
    if !l.is_contiguous() || l.start_offset() != 0 {
        candle_core::bail!("halo: the received rows must be a fresh contiguous tensor");
    }
    Ok((s.try_clone(l)?, l.shape().clone()))
}

impl CustomOp2 for ExchangeGrad {
    fn name(&self) -> &'static str {
        "halo_exchange"
    }
    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        s: &CpuStorage,
        l: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        copy(s, l)
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        _: &candle_core::CudaStorage,
        _: &Layout,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        copy(s, l)
    }
    fn bwd(
        &self,
        x: &Tensor,
        _received: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let p = &self.0;
        let d = dy.dim(1)?;
        let dy = dy.contiguous()?;
        let dx = match &p.mode {
            Mode::PointToPoint {
                scatter,
                send_counts,
                recv_counts,
                ..
            } => {
                // Split d halo by owner (the halo groups are contiguous, in rank order).
                let mut at = 0;
                let sends = recv_counts
                    .iter()
                    .map(|&c| {
                        let t = dy.narrow(0, at, c)?;
                        at += c;
                        Ok(t)
                    })
                    .collect::<candle_core::Result<Vec<_>>>()?;
                let back = p.comm.exchange(&sends, send_counts)?;
                match scatter {
                    Some(s) => crate::spmm(s, &Tensor::cat(&back, 0)?, crate::Reduce::Sum)?,
                    None => Tensor::zeros((p.n_local, d), dy.dtype(), dy.device())?,
                }
            }
            Mode::AllGather { .. } => p
                .comm
                .reduce_scatter_sum(&dy)?
                .narrow(0, 0, p.n_local)?
                .contiguous()?,
        };
        Ok((x.track_op().then_some(dx), None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::LocalComm;
    use crate::{spmm, spmm_weighted, DeviceGraph, Reduce};
    use candle_core::{DType, Var};
    use gnn_graph::{BuildOptions, Coo, SelfLoops};

    fn graph(n: usize, m: usize, seed: u64) -> Csr {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % n as u64) as u32
        };
        // A hub (row 0 reaches a third of the nodes) plus random edges, and isolated nodes
        // (no edges beyond the self loop) at the end.
        let mut src: Vec<u32> = (1..n as u32 / 3).collect();
        let mut dst = vec![0u32; src.len()];
        for _ in 0..m {
            let (a, b) = (next(), next());
            if (a as usize) < n - 5 && (b as usize) < n - 5 {
                src.push(a);
                dst.push(b);
            }
        }
        Coo::new(n, src, dst)
            .unwrap()
            .to_csr(BuildOptions {
                symmetrize: true,
                dedup: true,
                self_loops: SelfLoops::Add,
            })
            .unwrap()
    }

    /// Runs `f(local graph, its structure under the exchange, exchange)` on `parts` threads
    /// and returns the results.
    fn on_ranks<R: Send>(
        g: &Csr,
        parts: usize,
        exchange: Exchange,
        f: impl Fn(&LocalGraph, &DeviceGraph, &HaloExchange) -> R + Sync,
    ) -> Vec<R> {
        let part = RowPartition::balanced_by_nnz(g, parts).unwrap();
        std::thread::scope(|s| {
            let hs: Vec<_> = LocalComm::group(parts)
                .into_iter()
                .map(|c| {
                    let (part, f) = (&part, &f);
                    s.spawn(move || {
                        let local = LocalGraph::build(g, part, c.rank()).unwrap();
                        let comm: Arc<dyn Communicator> = Arc::new(c);
                        let h =
                            HaloExchange::with(exchange, &local, part, comm, &Device::Cpu).unwrap();
                        assert_eq!(h.kind(), exchange);
                        let lg = h.local_csr(&local).unwrap();
                        let lg = DeviceGraph::upload(&lg, &Device::Cpu).unwrap();
                        f(&local, &lg, &h)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    fn close(a: &[f32], b: &[f32], what: &str) {
        assert_eq!(a.len(), b.len(), "{what}");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
                "{what}[{i}]: {x} vs {y}"
            );
        }
    }

    /// `y = Â x` over the whole graph and `d(sum(y * w))/dx`: the reference.
    fn whole_graph(
        g: &Csr,
        x: &Tensor,
        w: &Tensor,
        vals: Option<&Tensor>,
        reduce: Reduce,
    ) -> (Tensor, Tensor) {
        let whole = DeviceGraph::upload(g, x.device()).unwrap();
        let xv = Var::from_tensor(x).unwrap();
        let y = match vals {
            Some(v) => spmm_weighted(&whole, &xv, v, reduce).unwrap(),
            None => spmm(&whole, &xv, reduce).unwrap(),
        };
        let grads = (&y * w).unwrap().sum_all().unwrap().backward().unwrap();
        let dx = grads.get(&xv).unwrap().clone();
        (y, dx)
    }

    /// One rank's `(rows, y, dx)`: `y = aggregate(its rows of x)`, `dx` of `sum(y * w)`.
    fn rank_pass(
        local: &LocalGraph,
        x: &Tensor,
        w: &Tensor,
        aggregate: impl FnOnce(&Tensor) -> Tensor,
    ) -> (std::ops::Range<usize>, Tensor, Tensor) {
        let r = local.rows.clone();
        let xl = Var::from_tensor(&x.narrow(0, r.start, r.len()).unwrap()).unwrap();
        let y = aggregate(&xl);
        let wl = w.narrow(0, r.start, r.len()).unwrap();
        let grads = (&y * &wl).unwrap().sum_all().unwrap().backward().unwrap();
        let dx = grads.get(&xl).unwrap().clone();
        (r, y, dx)
    }

    /// Every rank's rows of `y` and `dx` against the whole graph's.
    fn check_ranks(
        got: Vec<(std::ops::Range<usize>, Tensor, Tensor)>,
        y: &Tensor,
        dx: &Tensor,
        what: &str,
    ) {
        let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (r, y_l, dx_l) in got {
            let part = |t: &Tensor| flat(&t.narrow(0, r.start, r.len()).unwrap());
            let what = format!("{what} rows {r:?}");
            close(&flat(&y_l), &part(y), &what);
            close(&flat(&dx_l), &part(dx), &what);
        }
    }

    #[test]
    fn partitioned_spmm_and_its_gradient_match_the_whole_graph() {
        let (n, d) = (120, 37);
        let g = graph(n, 500, 3);
        let dev = Device::Cpu;
        let x = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
        let w = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
        let vals = Tensor::randn(0f32, 1.0, g.nnz(), &dev).unwrap();
        for reduce in [Reduce::Sum, Reduce::Mean, Reduce::Max] {
            for weighted in [false, true] {
                let (y, dx) = whole_graph(&g, &x, &w, weighted.then_some(&vals), reduce);
                for (parts, exchange) in (1..=4)
                    .flat_map(|p| [Exchange::PointToPoint, Exchange::AllGather].map(|e| (p, e)))
                {
                    let got = on_ranks(&g, parts, exchange, |local, lg, h| {
                        rank_pass(local, &x, &w, |xl| {
                            let full = h.forward(xl).unwrap();
                            if weighted {
                                let v = vals
                                    .narrow(0, local.edges.start, local.edges.len())
                                    .unwrap();
                                spmm_weighted(lg, &full, &v, reduce).unwrap()
                            } else {
                                spmm(lg, &full, reduce).unwrap()
                            }
                        })
                    });
                    let what = format!("{reduce:?} weighted={weighted} P={parts} {exchange}");
                    check_ranks(got, &y, &dx, &what);
                }
            }
        }
    }

    #[test]
    fn symmetric_operand_of_a_graph_without_rows() {
        let g = Csr::empty(0, 0).unwrap();
        let dev = Device::Cpu;
        on_ranks(&g, 1, Exchange::AllGather, |local, _, h| {
            let op = h.symmetric_operand(local, None, 7, &dev).unwrap();
            assert_eq!((op.slice_count(), op.first_graph().n_rows()), (1, 0));
            let x = Tensor::zeros((0, 3), candle_core::DType::F32, &dev).unwrap();
            for reduce in [Reduce::Sum, Reduce::Mean] {
                let y = h.aggregate_symmetric(&op, &x, reduce).unwrap();
                assert_eq!(y.dims(), &[0, 3]);
            }
        });
    }

    #[test]
    fn symmetric_aggregation_matches_the_whole_graph_both_ways() {
        let (n, d) = (120, 37);
        let g = graph(n, 500, 4);
        assert!(g.is_symmetric());
        let dev = Device::Cpu;
        let x = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
        let w = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
        // Symmetric edge values: a function of the unordered pair.
        let mut v = Vec::with_capacity(g.nnz());
        for i in 0..n {
            for &j in g.row(i) {
                let (a, b) = (i.min(j as usize) as f32, i.max(j as usize) as f32);
                v.push(((a * 0.37 + b * 0.11).sin() + 1.5) * 0.3);
            }
        }
        let vals = Tensor::from_vec(v.clone(), g.nnz(), &dev).unwrap();
        for reduce in [Reduce::Sum, Reduce::Mean] {
            for weighted in [false, true] {
                let (y, dx) = whole_graph(&g, &x, &w, weighted.then_some(&vals), reduce);
                // The whole local graph, and column slices: many small ones (some empty:
                // padding rows and rows of no edge), a few, and slices no wider than 1 row.
                for slice_rows in [None, Some(7), Some(45), Some(1)] {
                    for parts in 1..=4 {
                        let got = on_ranks(&g, parts, Exchange::AllGather, |local, lg, h| {
                            let lv = weighted.then(|| &v[local.edges.clone()]);
                            let op = match slice_rows {
                                None => SymmetricOperand::whole(
                                    lg.clone(),
                                    lv.map(|v| Tensor::from_slice(v, v.len(), &dev).unwrap()),
                                ),
                                Some(r) => h.symmetric_operand(local, lv, r, &dev).unwrap(),
                            };
                            assert_eq!(op.first_graph().n_rows(), local.rows.len());
                            assert!(op.is_sliced() || op.slice_count() == 1);
                            // Cut at every rank's block: sliced from two ranks on.
                            let cut = slice_rows.is_some_and(|r| parts > 1 || r < n);
                            assert_eq!(op.is_sliced(), cut);
                            if matches!(slice_rows, Some(1 | 7)) {
                                assert!(op.slice_count() > 2, "{}", op.slice_count());
                            }
                            // Max has no transpose product: refused.
                            let xl = x.narrow(0, local.rows.start, local.rows.len()).unwrap();
                            assert!(h.aggregate_symmetric(&op, &xl, Reduce::Max).is_err());
                            rank_pass(local, &x, &w, |xl| {
                                h.aggregate_symmetric(&op, xl, reduce).unwrap()
                            })
                        });
                        check_ranks(
                            got,
                            &y,
                            &dx,
                            &format!(
                                "{reduce:?} weighted={weighted} P={parts} slices of {slice_rows:?}"
                            ),
                        );
                    }
                }
            }
        }
        // The point-to-point exchange has no padded layout for it.
        let refused = on_ranks(&g, 2, Exchange::PointToPoint, |local, lg, h| {
            let xl = x.narrow(0, local.rows.start, local.rows.len()).unwrap();
            let op = SymmetricOperand::whole(lg.clone(), None);
            h.aggregate_symmetric(&op, &xl, Reduce::Sum).is_err()
                && h.symmetric_operand(local, None, 8, &dev).is_err()
        });
        assert!(refused.into_iter().all(|e| e));
        // An operand of another rank's shape is refused, not read out of bounds.
        let refused = on_ranks(&g, 2, Exchange::AllGather, |local, _, h| {
            let other = graph(n, 200, 9);
            let wrong = SymmetricOperand::whole(DeviceGraph::upload(&other, &dev).unwrap(), None);
            let xl = x.narrow(0, local.rows.start, local.rows.len()).unwrap();
            h.aggregate_symmetric(&wrong, &xl, Reduce::Sum).is_err()
        });
        assert!(refused.into_iter().all(|e| e));
    }

    #[test]
    fn cbsr_rows_travel_with_their_columns() {
        let (n, d, k) = (90, 40, 7);
        let g = graph(n, 300, 5);
        let dev = Device::Cpu;
        let x = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
        let whole = DeviceGraph::upload(&g, &dev).unwrap();
        let xv = Var::from_tensor(&x).unwrap();
        let y = crate::spgemm(&whole, &crate::maxk(&xv, k).unwrap(), None, Reduce::Sum).unwrap();
        let dx = y.sqr().unwrap().sum_all().unwrap().backward().unwrap();
        let dx = dx.get(&xv).unwrap().clone();
        let got: Vec<_> = [Exchange::PointToPoint, Exchange::AllGather]
            .into_iter()
            .flat_map(|ex| {
                on_ranks(&g, 3, ex, |local, lg, h| {
                    let r = local.rows.clone();
                    let xl = Var::from_tensor(&x.narrow(0, r.start, r.len()).unwrap()).unwrap();
                    let c = h.forward_cbsr(&crate::maxk(&xl, k).unwrap()).unwrap();
                    assert_eq!(c.rows(), lg.csr().n_cols());
                    assert_eq!(c.index().dtype(), DType::U8);
                    let y = crate::spgemm(lg, &c, None, Reduce::Sum).unwrap();
                    let grads = y.sqr().unwrap().sum_all().unwrap().backward().unwrap();
                    (r, y, grads.get(&xl).unwrap().clone())
                })
            })
            .collect();
        for (r, y_l, dx_l) in got {
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            close(
                &flat(&y_l),
                &flat(&y.narrow(0, r.start, r.len()).unwrap()),
                "spgemm",
            );
            close(
                &flat(&dx_l),
                &flat(&dx.narrow(0, r.start, r.len()).unwrap()),
                "dx",
            );
        }
    }
}
