//! Typed errors of the kernels crate.

/// What can go wrong when calling an operator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input tensor has the wrong shape for the graph or the other inputs (rank, a
    /// dimension, an element count, an index out of the graph's range), or the inputs do not
    /// belong together (on different devices, a CBSR of another graph).
    #[error("{op}: {what}")]
    Shape {
        /// The operator.
        op: &'static str,
        /// What is wrong.
        what: String,
    },
    /// A valid request that this build, device or kernel does not do: half precision on the
    /// CPU, a width over a kernel's limit, an aggregation without a transpose product, a
    /// gradient for edge values, a kernel the policy names that cannot run this call.
    #[error("{op}: {what}")]
    Unsupported {
        /// The operator.
        op: &'static str,
        /// What is not supported, and what is.
        what: String,
    },
    /// A scalar argument or setting out of its range: a dropout probability outside
    /// `[0, 1)`, a non-positive epsilon, `k` outside `1..=D`, a negative slope, a setting
    /// that contradicts another.
    #[error("{op}: {what}")]
    InvalidArgument {
        /// The operator.
        op: &'static str,
        /// What is wrong, and the valid range.
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
    /// A failure in the benchmark and verification tools (`gnn_kernels::verify`, the cuSPARSE
    /// peer): a peer library call, a bad setting, a missing gradient.
    #[error("{0}")]
    Harness(String),
}

impl Error {
    /// An [`Error::Shape`].
    pub(crate) fn shape(op: &'static str, what: impl Into<String>) -> Self {
        Self::Shape {
            op,
            what: what.into(),
        }
    }

    /// An [`Error::Unsupported`].
    pub(crate) fn unsupported(op: &'static str, what: impl Into<String>) -> Self {
        Self::Unsupported {
            op,
            what: what.into(),
        }
    }

    /// An [`Error::InvalidArgument`].
    pub(crate) fn invalid(op: &'static str, what: impl Into<String>) -> Self {
        Self::InvalidArgument {
            op,
            what: what.into(),
        }
    }

    /// An [`Error::DType`].
    pub(crate) fn dtype(op: &'static str, what: impl Into<String>) -> Self {
        Self::DType {
            op,
            what: what.into(),
        }
    }
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
