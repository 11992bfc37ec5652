//! Typed errors of the models crate.

use std::path::PathBuf;

/// What can go wrong when building, running, saving or loading a model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is inconsistent.
    #[error("invalid model config: {0}")]
    Config(String),
    /// A checkpoint file is missing, unreadable or does not match the config.
    #[error("{}: {problem}", path.display())]
    Checkpoint {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// An operator failed.
    #[error(transparent)]
    Kernel(#[from] gnn_kernels::Error),
    /// Communication between ranks failed (a partitioned graph's halo exchange).
    #[error(transparent)]
    Comm(#[from] gnn_comm::Error),
    /// candle failed.
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

/// Result alias of the models crate.
pub type Result<T> = std::result::Result<T, Error>;
