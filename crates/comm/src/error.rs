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
