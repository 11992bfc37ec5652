//! Typed errors of the kernels crate.

/// What can go wrong when calling an operator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input tensor has the wrong shape for the graph or the other inputs.
    #[error("{op}: {what}")]
    Shape {
        /// The operator.
        op: &'static str,
        /// What is wrong.
        what: String,
    },
    /// An input tensor has an unsupported or mismatched dtype.
    #[error("{op}: {what}")]
    DType {
        /// The operator.
        op: &'static str,
        /// What is wrong.
        what: String,
    },
    /// The tensor and the graph live on different devices.
    #[error("{op}: tensor on {tensor:?} but graph uploaded to {graph:?}")]
    Device {
        /// The operator.
        op: &'static str,
        /// Where the tensor is.
        tensor: candle_core::DeviceLocation,
        /// Where the graph is.
        graph: candle_core::DeviceLocation,
    },
    /// An error from candle.
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// An error from the graph crate.
    #[error(transparent)]
    Graph(#[from] gnn_graph::Error),
    /// A failure in the benchmark and verification tools ([`crate::verify`], the cuSPARSE
    /// peer): a peer library call, a bad setting, a missing gradient.
    #[error("{0}")]
    Harness(String),
}

/// Result alias of the kernels crate.
pub type Result<T> = std::result::Result<T, Error>;

impl From<Error> for candle_core::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Candle(c) => c,
            other => candle_core::Error::wrap(other),
        }
    }
}
