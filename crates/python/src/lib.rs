//! # gnn-python
//!
//! The engine's Python package, `import gnn` (built by maturin from `pyproject.toml`; the
//! pure-Python half is `python/gnn`). This crate is its native module `gnn._native`: thin
//! bindings over the library crates, which stay the source of truth.
//!
//! - [`data`]: `Data` from NumPy arrays (validated as the file loaders validate, every bad
//!   input a `TypeError` / `ValueError` naming the array, index and value), `load` for every
//!   format `gnn_graph::load_auto` reads, the generated Reddit-shaped graph;
//! - [`train`](mod@train): `train` over `gnn_train::train_with_control`, the GIL released, a
//!   per-epoch hook for the callback, the progress display and Ctrl-C; with `devices`, over
//!   several ranks (`gnn_train::dist::train_ranks_with_control`: CPU threads over the
//!   in-process communicator, or one GPU each over NCCL);
//! - [`model`]: `Model` (predict, logits, evaluate, save, state_dict) over
//!   `gnn_train::Engine`, `load_model`, `from_pyg_state_dict`.
#![deny(missing_docs)]

mod args;
mod arrays;
pub mod data;
mod device;
mod dist;
mod errors;
mod json;
pub mod model;
pub mod train;

use pyo3::prelude::*;

/// The native module `gnn._native`.
#[pymodule(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<data::Data>()?;
    m.add_class::<model::Model>()?;
    m.add_function(wrap_pyfunction!(data::load, m)?)?;
    m.add_function(wrap_pyfunction!(data::reddit_shaped, m)?)?;
    m.add_function(wrap_pyfunction!(train::train, m)?)?;
    m.add_function(wrap_pyfunction!(model::load_model, m)?)?;
    m.add_function(wrap_pyfunction!(model::from_pyg_state_dict, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("CUDA", cfg!(feature = "cuda"))?;
    m.add("NCCL", cfg!(feature = "nccl"))?;
    Ok(())
}
