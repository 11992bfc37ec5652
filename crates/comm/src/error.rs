//! Typed errors of the communication crate.

/// What can go wrong in a collective call or a halo exchange.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A communication failure between ranks (a peer left, NCCL failed, mismatched calls).
    #[error("communication: {0}")]
    Comm(String),
    /// Tensors of the wrong shape for the exchange, the local graph or the other ranks.
    #[error("{op}: {what}")]
    Shape {
        /// The call.
        op: &'static str,
        /// What is wrong.
        what: String,
    },
    /// A combination the call does not implement (a dtype NCCL is not asked to carry, a
    /// tensor off the GPU for NCCL, a reduction the exchange cannot fuse).
    #[error("{op}: unsupported: {what}")]
    Unsupported {
        /// The call.
        op: &'static str,
        /// What is not supported.
        what: String,
    },
    /// An argument out of its range or inconsistent with the others (a ring step, a
    /// partition that does not match the local graph, a malformed NCCL id file).
    #[error("{op}: invalid argument: {what}")]
    InvalidArgument {
        /// The call.
        op: &'static str,
        /// What is wrong.
        what: String,
    },
    /// An error from an operator of the kernels crate (the local products).
    #[error(transparent)]
    Kernel(#[from] gnn_kernels::Error),
    /// An error from candle.
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// An error from the graph crate (building a local graph's slices).
    #[error(transparent)]
    Graph(#[from] gnn_graph::Error),
    /// The processes of a multi-process run could not meet ([`crate::TcpRendezvous`]).
    #[error("rendezvous: {0}")]
    Rendezvous(String),
    /// Another rank failed, panicked or left the group, so this rank's collectives cannot
    /// complete (the in-process group's poisoning, see [`crate::LocalComm`]).
    #[error("rank {rank} failed: {reason}")]
    PeerFailed {
        /// The rank that failed.
        rank: usize,
        /// What it said when it failed.
        reason: String,
    },
    /// A collective did not finish within the [`crate::Watchdog`]'s timeout; the
    /// communicator was aborted.
    #[error(
        "rank {rank}: {op} at {step} did not finish within {} s (waiting for {waiting}); the \
         communicator was aborted: a rank died or stalled",
        timeout.as_secs_f64()
    )]
    Timeout {
        /// This rank.
        rank: usize,
        /// The collective.
        op: &'static str,
        /// What the caller was doing ([`crate::Communicator::note_step`]).
        step: String,
        /// The ranks the collective waited for.
        waiting: String,
        /// The watchdog's timeout.
        timeout: std::time::Duration,
    },
    /// A collective of this rank failed; says where (the cause follows in the text).
    #[error("rank {rank} at {step}: {op} failed: {cause}")]
    Collective {
        /// This rank.
        rank: usize,
        /// The collective.
        op: &'static str,
        /// What the caller was doing ([`crate::Communicator::note_step`]).
        step: String,
        /// Why it failed.
        cause: Box<Error>,
    },
}

impl Error {
    /// The rank whose failure this error follows from, when it is a consequence of another
    /// rank's failure rather than a failure of its own (a root cause gives `None`).
    pub fn failed_peer(&self) -> Option<usize> {
        match self {
            Error::PeerFailed { rank, .. } => Some(*rank),
            Error::Collective { cause, .. } => cause.failed_peer(),
            _ => None,
        }
    }
}

/// Result alias of the communication crate.
pub type Result<T> = std::result::Result<T, Error>;

impl From<Error> for candle_core::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Candle(c) => c,
            Error::Kernel(k) => k.into(),
            other => candle_core::Error::wrap(other),
        }
    }
}
