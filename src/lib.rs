//! # gnn
//!
//! A full-batch GNN training and inference engine on candle. This crate re-exports the
//! workspace crates and owns the examples:
//!
//! - [`graph`] (`gnn-graph`): CSR/COO graphs, normalisation, datasets and loaders;
//! - [`kernels`] (`gnn-kernels`): sparse operators as candle custom ops;
//! - [`comm`] (`gnn-comm`): communicators (in-process, NCCL) and the halo exchange of a
//!   partitioned graph;
//! - [`models`] (`gnn-models`): GCN, GraphSAGE, GIN layers and models;
//! - [`train`] (`gnn-train`): trainer, metrics, timing breakdowns.
#![doc = include_str!("../README.md")]

pub use gnn_comm as comm;
pub use gnn_graph as graph;
pub use gnn_kernels as kernels;
pub use gnn_models as models;
pub use gnn_train as train;

/// The user guide's Rust examples (`docs/src/embedding.md`), run as doctests by `cargo test`.
#[cfg(doctest)]
#[doc = include_str!("../docs/src/embedding.md")]
pub struct GuideEmbedding;
