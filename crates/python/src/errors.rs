//! The engine's errors as Python exceptions.

use pyo3::exceptions::{
    PyFloatingPointError, PyMemoryError, PyOSError, PyRuntimeError, PyValueError,
};
use pyo3::PyErr;

/// `e` as the Python exception a caller can act on: bad settings or data `ValueError`, a
/// non-finite loss `FloatingPointError`, out of GPU memory `MemoryError`, a file `OSError`,
/// the rest (kernel or device failures) `RuntimeError`.
pub(crate) fn to_py(e: gnn_train::Error) -> PyErr {
    use gnn_train::Error as E;
    let msg = e.to_string();
    match e {
        E::Invalid(_) | E::CudaOnly { .. } | E::Graph(_) => PyValueError::new_err(msg),
        E::Model(gnn_models::Error::Config(_)) => PyValueError::new_err(msg),
        E::NonFinite { .. } => PyFloatingPointError::new_err(msg),
        E::OutOfMemory { .. } => PyMemoryError::new_err(msg),
        E::File { .. } | E::Io { .. } => PyOSError::new_err(msg),
        E::Model(gnn_models::Error::Checkpoint { .. }) => PyOSError::new_err(msg),
        _ => PyRuntimeError::new_err(msg),
    }
}

/// A model-crate error as a Python exception (see [`to_py`]).
pub(crate) fn model_err(e: gnn_models::Error) -> PyErr {
    to_py(gnn_train::Error::Model(e))
}
