//! Typed errors of the graph crate.

use std::path::PathBuf;

/// Everything that can go wrong while building, validating or loading a graph or dataset.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A CSR/COO structure broke an invariant (row pointers, index range, sizes).
    #[error("invalid graph structure: {0}")]
    InvalidStructure(String),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// A file was read but its content is malformed or inconsistent.
    #[error("{}: field `{field}`: {problem}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// The field (array name, pickle key, column) that is wrong.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A dataset's parts disagree (labels vs nodes, split indices out of range, ...).
    #[error("dataset `{name}`: {problem}")]
    InvalidDataset {
        /// The dataset's name.
        name: String,
        /// What is inconsistent.
        problem: String,
    },
    /// A caller-supplied parameter is out of its domain.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A graph bound for the kernels (one device's graph, or one rank's share of a
    /// partitioned graph) holds more non-zeros than their 32-bit offsets address
    /// ([`crate::csr::MAX_KERNEL_NNZ`]). The host graph itself may be larger: partitioned
    /// over more ranks, each share fits.
    #[error(
        "{graph} has {nnz} non-zeros ({:.2} G); the kernels take 32-bit offsets (at most {} \
         non-zeros a device): use more ranks, so that each rank's share fits",
        giga(.nnz),
        crate::csr::MAX_KERNEL_NNZ
    )]
    TooManyNonZeros {
        /// Which graph: `the graph`, `rank 2's share`.
        graph: String,
        /// Its non-zeros.
        nnz: usize,
    },
}

/// `n` in billions (`5.1` for 5.1 G).
fn giga(n: &usize) -> f64 {
    *n as f64 / 1e9
}

/// Result alias of the graph crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn too_many_non_zeros(graph: &str, nnz: usize) -> Self {
        Error::TooManyNonZeros {
            graph: graph.to_string(),
            nnz,
        }
    }

    pub(crate) fn format(
        path: impl Into<PathBuf>,
        field: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        Error::Format {
            path: path.into(),
            field: field.into(),
            problem: problem.into(),
        }
    }
}
