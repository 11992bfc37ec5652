//! # gnn-comm
//!
//! Communication between the ranks of a multi-device run, the floor between the kernels
//! (`gnn-kernels`) and the models (`gnn-models`): the [`Communicator`] trait, an in-process
//! implementation ([`LocalComm`]: threads and channels, for CPU tests and CPU runs), NCCL
//! under the `nccl` feature (`NcclComm`, `NcclId`), and the halo exchange a partitioned
//! graph's aggregation needs ([`HaloExchange`], differentiable, with the fused partitioned
//! aggregation [`HaloExchange::aggregate_symmetric`] over a [`SymmetricOperand`]).
//!
//! | item | does |
//! |---|---|
//! | [`Communicator`] | exchange, all-reduce, all-gather, ring shift, reduce-scatter among ranks |
//! | [`LocalComm`] | ranks as threads of one process, tensors through channels |
//! | `NcclComm` (feature `nccl`) | one rank per CUDA device through NCCL, on a stream of its own |
//! | [`HaloExchange`] | a rank's rows plus the halo rows its local graph names; gradients go home |
//! | [`SymmetricOperand`] | a local graph as column slices for the fused aggregation |
//! | [`SelectedAggregation`] | a symmetric operand's aggregation for a few selected rows only |
//! | [`Watchdog`] | any communicator with a timeout: a collective that hangs aborts the group |
//! | [`FaultyComm`] | any communicator that fails on purpose at a given epoch (fault tests) |
//! | [`TcpRendezvous`] | hands rank 0's NCCL id to the other processes over TCP |
//!
//! Every method is collective: all ranks call the same methods in the same order with
//! matching shapes. Training guarantees that by running the same model on every rank (the
//! backward walks the same graph in the same order).
//!
//! A rank that fails must not leave the others waiting: [`Communicator::abort`] gives up on
//! the group (the in-process group then fails every rank's calls at once, naming the failed
//! rank), and a [`Watchdog`] around any communicator aborts a collective that does not finish
//! within its timeout (a rank killed or stalled where nothing else can tell: NCCL over NVLink).
//!
//! The `cuda` feature builds the GPU paths of the ops; `nccl` adds the NCCL communicator
//! (links `libnccl.so.2`).
#![deny(missing_docs)]

pub mod error;
mod halo;
mod inject;
mod local;
#[cfg(feature = "nccl")]
mod nccl;
pub mod rendezvous;
mod watchdog;

pub use error::{Error, Result};
pub use halo::{HaloExchange, SelectedAggregation, SymmetricOperand, GATHER_SLICE_ROWS};
pub use inject::{Fault, FaultKind, FaultyComm};
pub use local::LocalComm;
#[cfg(feature = "nccl")]
pub use nccl::{NcclComm, NcclId};
pub use rendezvous::TcpRendezvous;
pub use watchdog::{StuckHook, Watchdog, DEFAULT_COMM_TIMEOUT};

use candle_core::Tensor;
use std::sync::atomic::{AtomicU64, Ordering};

/// Collective communication among `world()` ranks.
pub trait Communicator: Send + Sync + std::fmt::Debug {
    /// This rank (`0..world()`).
    fn rank(&self) -> usize;

    /// Number of ranks.
    fn world(&self) -> usize;

    /// Sends `sends[p]` (`[rows, d]`) to every rank `p != rank()` and returns, for every rank
    /// `p`, what `p` sent here: `[recv_rows[p], d]` with this rank's own `d` (entry `rank()` is
    /// `[0, d]`). Every tensor has the dtype and device of `sends[rank()]`, which is otherwise
    /// unused (pass an empty `[0, d]`).
    fn exchange(&self, sends: &[Tensor], recv_rows: &[usize]) -> Result<Vec<Tensor>>;

    /// The element-wise sum of `t` over all ranks, the same on every rank (bit for bit).
    fn all_reduce_sum(&self, t: &Tensor) -> Result<Tensor>;

    /// Every rank's `x` (`[m, d]`, the same shape and dtype on every rank) stacked in rank
    /// order: `[world() * m, d]`. The default runs through [`Self::exchange`].
    fn all_gather(&self, x: &Tensor) -> Result<Tensor> {
        let (m, d) = x.dims2()?;
        let (rank, world) = (self.rank(), self.world());
        let x = x.contiguous()?;
        let empty = Tensor::zeros((0, d), x.dtype(), x.device())?;
        let sends: Vec<Tensor> = (0..world)
            .map(|p| if p == rank { empty.clone() } else { x.clone() })
            .collect();
        let rows: Vec<usize> = (0..world).map(|p| if p == rank { 0 } else { m }).collect();
        let mut got = self.exchange(&sends, &rows)?;
        got[rank] = x;
        Ok(Tensor::cat(&got, 0)?)
    }

    /// One step of a ring: sends `x` (`[rows, d]`) to rank `(rank() + k) % world()` and
    /// returns the `[recv_rows, d]` rows that rank `(rank() - k) % world()` sent here, for `k`
    /// in `1..world()` (every rank calls it with the same `k`). `local` runs after the
    /// transfer has started and before it is waited for, so an implementation whose transfers
    /// run on their own (NCCL, on a stream of its own) overlaps the two; `local` must not need
    /// the result. `P - 1` steps deliver every other rank's rows one block at a time, so a
    /// consumer holds one or two blocks instead of all `P`. The default runs `local`, then
    /// [`Self::exchange`].
    fn shift_overlapped(
        &self,
        x: &Tensor,
        k: usize,
        recv_rows: usize,
        local: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Tensor> {
        let (dst, src) = ring_peers("comm shift", self.rank(), self.world(), k)?;
        local()?;
        let d = x.dim(1)?;
        let empty = Tensor::zeros((0, d), x.dtype(), x.device())?;
        let sends: Vec<Tensor> = (0..self.world())
            .map(|p| if p == dst { x.clone() } else { empty.clone() })
            .collect();
        let rows: Vec<usize> = (0..self.world())
            .map(|p| if p == src { recv_rows } else { 0 })
            .collect();
        Ok(self.exchange(&sends, &rows)?.swap_remove(src))
    }

    /// Block `rank()` (`[m, d]`) of the element-wise sum over ranks of `t` (`[world() * m,
    /// d]`). The default runs through [`Self::exchange`] and sums in rank order.
    fn reduce_scatter_sum(&self, t: &Tensor) -> Result<Tensor> {
        let (rows, d) = t.dims2()?;
        let (rank, world) = (self.rank(), self.world());
        if rows % world != 0 {
            return Err(crate::Error::Shape {
                op: "comm reduce_scatter",
                what: format!("{rows} rows do not split into {world} equal blocks"),
            });
        }
        let m = rows / world;
        let t = t.contiguous()?;
        let sends = (0..world)
            .map(|p| {
                if p == rank {
                    Ok(Tensor::zeros((0, d), t.dtype(), t.device())?)
                } else {
                    Ok(t.narrow(0, p * m, m)?)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let counts: Vec<usize> = (0..world).map(|p| if p == rank { 0 } else { m }).collect();
        let mut got = self.exchange(&sends, &counts)?;
        got[rank] = t.narrow(0, rank * m, m)?;
        let mut sum = got[0].clone();
        for g in &got[1..] {
            sum = (sum + g)?;
        }
        Ok(sum)
    }

    /// Bytes this rank has sent so far (exchanges and all-reduces).
    fn bytes_sent(&self) -> u64;

    /// Wall time spent inside this communicator's calls so far (waiting for peers included).
    fn time_spent(&self) -> std::time::Duration;

    /// Gives up on the group after a failure of this rank or a watchdog timeout: collectives
    /// in progress and later ones fail instead of waiting for ranks that will not come. The
    /// in-process group fails every rank's calls at once, naming this rank and `reason`; NCCL
    /// aborts this rank's communicator (`ncclCommAbort`), and the other ranks learn of it
    /// through their own watchdogs. Idempotent; the default does nothing.
    fn abort(&self, reason: &str) {
        let _ = reason;
    }

    /// An error the group has reported outside any call, if any: NCCL's asynchronous error
    /// (`ncclCommGetAsyncError`), another in-process rank's failure, or an abort. Polled by
    /// the [`Watchdog`] from its own thread, so it must not block. The default reports none.
    fn async_error(&self) -> Option<Error> {
        None
    }

    /// Runs `wait`, a wait for this rank's own device work (a stream synchronisation), as a
    /// call the group's [`Watchdog`] times like a collective: a kernel that never ends (as
    /// candle 0.11's element-wise kernels past `u32::MAX` elements do) then ends the run
    /// with an error naming the rank and the step, instead of leaving every rank spinning
    /// with no collective in flight for a watchdog to see. `what` names the wait. The
    /// default runs it unwatched.
    fn watch_wait(&self, what: &'static str, wait: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let _ = what;
        wait()
    }

    /// Tells the communicator what its caller is doing: training epoch `epoch` (0 before
    /// training), `phase` of it (`"forward"`, `"gradient all-reduce"`, ...). Errors of the
    /// collectives that follow name it; the default ignores it.
    fn note_step(&self, epoch: usize, phase: &'static str) {
        let _ = (epoch, phase);
    }
}

/// How an error names a step noted by [`Communicator::note_step`]: `epoch 3 (forward)`, or
/// `setup` before the first epoch.
pub fn step_name(epoch: usize, phase: &str) -> String {
    if epoch == 0 {
        phase.to_string()
    } else {
        format!("epoch {epoch} ({phase})")
    }
}

/// The ranks a ring step `k` ([`Communicator::shift_overlapped`]) sends to and receives
/// from: `(rank + k) % world` and `(rank - k) % world`; an error unless `k` is in `1..world`.
pub(crate) fn ring_peers(
    op: &'static str,
    rank: usize,
    world: usize,
    k: usize,
) -> Result<(usize, usize)> {
    if k == 0 || k >= world {
        return Err(crate::Error::InvalidArgument {
            op,
            what: format!("ring step {k} among {world} ranks (1..{world} are steps)"),
        });
    }
    Ok(((rank + k) % world, (rank + world - k) % world))
}

/// Checks the arguments of [`Communicator::exchange`] common to every implementation.
pub(crate) fn check_exchange(
    op: &'static str,
    rank: usize,
    world: usize,
    sends: &[Tensor],
    recv_rows: &[usize],
) -> Result<usize> {
    let bad = |what: String| Err(crate::Error::Shape { op, what });
    if sends.len() != world || recv_rows.len() != world {
        return bad(format!(
            "{} send tensors and {} receive counts for {world} ranks",
            sends.len(),
            recv_rows.len()
        ));
    }
    let d = match sends[rank].dims() {
        [_, d] => *d,
        other => return bad(format!("send tensors must be [rows, d], got {other:?}")),
    };
    for (p, s) in sends.iter().enumerate() {
        if s.rank() != 2 || s.dim(1)? != d || s.dtype() != sends[rank].dtype() {
            return bad(format!(
                "send to rank {p} is {:?} {:?}, expected [_, {d}] {:?}",
                s.dims(),
                s.dtype(),
                sends[rank].dtype()
            ));
        }
    }
    if recv_rows[rank] != 0 {
        return bad(format!(
            "rank {rank} expects {} rows from itself",
            recv_rows[rank]
        ));
    }
    Ok(d)
}

/// Byte and time counters shared by the implementations.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64, AtomicU64);

impl Counter {
    /// Runs `f`, adding its wall time.
    pub(crate) fn timed<R>(&self, f: impl FnOnce() -> R) -> R {
        let t = std::time::Instant::now();
        let r = f();
        self.1
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        r
    }
    /// Adds `d` to the time (a call timed in parts).
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    pub(crate) fn add_time(&self, d: std::time::Duration) {
        self.1.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }
    pub(crate) fn time(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.1.load(Ordering::Relaxed))
    }
    pub(crate) fn add(&self, t: &Tensor) {
        self.0.fetch_add(
            (t.elem_count() * t.dtype().size_in_bytes()) as u64,
            Ordering::Relaxed,
        );
    }
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    pub(crate) fn add_bytes(&self, bytes: u64) {
        self.0.fetch_add(bytes, Ordering::Relaxed);
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
