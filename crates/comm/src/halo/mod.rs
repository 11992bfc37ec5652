//! The halo exchange of a 1-D partitioned graph, differentiable: the forward appends the halo
//! rows received from their owners to this rank's rows; the backward returns the halo rows'
//! gradients to their owners, who add them to the rows they sent.
//!
//! - this file: the exchange plans ([`HaloExchange`]: point-to-point or all-gather) and the
//!   differentiable forward of the rows;
//! - `symmetric`: the fused partitioned aggregation of a symmetric operand
//!   ([`HaloExchange::aggregate_symmetric`], [`SymmetricOperand`]);
//! - `selected`: the aggregation of a symmetric operand for a few selected rows
//!   ([`SelectedAggregation`]: a reduce-scatter forward, an all-gather backward, of the
//!   selected rows only);
//! - `ops`: the candle custom ops that carry the backward passes of the first two.

mod ops;
mod selected;
mod symmetric;
#[cfg(test)]
mod tests;

pub use selected::SelectedAggregation;
pub use symmetric::{SymmetricOperand, GATHER_SLICE_ROWS};

use crate::error::{Error, Result};
use crate::Communicator;
use candle_core::{Device, Tensor};
use gnn_graph::{Csr, Exchange, LocalGraph, RowPartition};
use gnn_kernels::{Cbsr, DeviceGraph};
use ops::ExchangeGrad;
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
            // Row r: the positions in the send buffers that carry local row r.
            let csr = gnn_graph::Csr::group_by_key(local.n_local(), &all)?;
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
            return Err(Error::InvalidArgument {
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

    /// Where this rank's own rows lie in [`Self::forward`]'s output (and among the local
    /// graph's columns, [`Self::local_csr`]): first under the point-to-point exchange, at this
    /// rank's padded block under the all-gather.
    pub fn own_rows(&self) -> std::ops::Range<usize> {
        let n = self.0.n_local;
        match &self.0.mode {
            Mode::PointToPoint { .. } => 0..n,
            Mode::AllGather { part } => {
                let start = self.0.comm.rank() * part.max_len();
                start..start + n
            }
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

fn check_rank(local: &LocalGraph, comm: &Arc<dyn Communicator>) -> Result<()> {
    if comm.rank() != local.rank || comm.world() != local.send.len() {
        return Err(Error::InvalidArgument {
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
