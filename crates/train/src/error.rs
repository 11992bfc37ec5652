//! Typed errors of the training crate.

/// What can go wrong in a pipeline.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad training settings or data that does not fit the model.
    #[error("{0}")]
    Invalid(String),
    /// From the model.
    #[error(transparent)]
    Model(#[from] gnn_models::Error),
    /// From a kernel.
    #[error(transparent)]
    Kernel(#[from] gnn_kernels::Error),
    /// From the communication between ranks.
    #[error(transparent)]
    Comm(#[from] gnn_comm::Error),
    /// From the graph/dataset layer.
    #[error(transparent)]
    Graph(#[from] gnn_graph::Error),
    /// From candle.
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// A feature or weight file that cannot be read as expected.
    #[error("{path}: {problem}")]
    File {
        /// The file.
        path: String,
        /// What is wrong (naming the field when one is at fault).
        problem: String,
    },
    /// Training produced a NaN or infinite loss or gradient. (The examples add the flags
    /// that may help: `gnn_train::cli::hint`.)
    #[error(
        "non-finite value at epoch {epoch}: {tensor}; training stopped{}. A lower learning \
         rate, row-normalised features or LayerNorm between layers may keep it finite",
        checkpoint.as_ref().map(|p| format!(" (the state before this epoch is saved in {p})")).unwrap_or_default()
    )]
    NonFinite {
        /// 1-based epoch.
        epoch: usize,
        /// Which tensor: the loss, or the gradient of a named parameter.
        tensor: String,
        /// Where the last good state was saved, if a checkpoint path was set.
        checkpoint: Option<String>,
        /// The loss went non-finite under f16 precision, whose range ends at 65504: an
        /// activation may have overflowed where bf16 would not.
        f16_range: bool,
    },
    /// The GPU ran out of memory. (The examples add the flags that may help:
    /// `gnn_train::cli::hint`.)
    #[error(
        "out of GPU memory while {what}{}; the device has {} free of {}",
        bytes.map(|b| format!(" ({} requested)", crate::device::gib(b))).unwrap_or_default(),
        free.map(crate::device::gib).unwrap_or_else(|| "?".into()),
        total.map(crate::device::gib).unwrap_or_else(|| "?".into())
    )]
    OutOfMemory {
        /// What was being allocated or run.
        what: String,
        /// Bytes requested, when known.
        bytes: Option<u64>,
        /// Free device memory after the failure, bytes.
        free: Option<u64>,
        /// Device memory in all, bytes.
        total: Option<u64>,
    },
    /// A setting that needs a CUDA device on a run without one.
    #[error("{what} runs on a CUDA device only, and this run is on the CPU")]
    CudaOnly {
        /// The setting, e.g. `precision bf16`.
        what: String,
    },
    /// Writing a report failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// Result alias of the training crate.
pub type Result<T> = std::result::Result<T, Error>;
