//! # gnn-graph
//!
//! Host-side graphs and datasets for the gnn engine; no tensors, no candle.
//!
//! - [`Csr`] / [`Coo`]: validated sparsity patterns (row = target, column = source; row
//!   offsets [`RowPtr`] 32-bit while the entries fit, 64-bit beyond), building
//!   from edge lists with de-duplication, symmetrisation and self-loop control, transpose
//!   with the edge permutation, degree statistics, node permutation.
//! - [`Normalization`]: GCN symmetric, mean and sum edge values.
//! - [`Dataset`]: graph + features + labels + split, with loaders for Planetoid
//!   ([`load_planetoid`]), DGL's Reddit ([`load_dgl_reddit`]), OGB node-property raw
//!   folders ([`load_ogb_node`]), gnn-benchmark `.npz` files ([`load_gnn_benchmark`]: PyG's
//!   CitationFull / Amazon / Coauthor), edge-list folders ([`load_edge_list_dir`]), one door
//!   that detects which of these a path holds ([`load_auto`]), gnn's own binary CSR format
//!   written once and memory-mapped on the next load ([`io::binary`]), and a seeded
//!   synthetic generator ([`generate()`]: Reddit- and papers100M-shaped graphs, built in
//!   parallel).
//! - [`RowPartition`] / [`LocalGraph`]: nnz-balanced 1-D row partitions with halo exchange
//!   lists, for multi-device training; [`NodeParts`] / [`metis()`]: partitions that follow the
//!   graph's communities (METIS, minimum edge cut), renumbered into ranges.
//!
//! Every loader returns a typed [`Error`] naming the file, the field and the problem.
#![deny(missing_docs)]

mod bits;
pub mod coo;
pub mod csr;
pub mod dataset;
pub mod error;
pub mod generate;
pub mod io;
pub mod louvain;
pub mod norm;
pub mod partition;
pub mod partitioner;
pub mod reorder;

pub use coo::{BuildOptions, Coo, SelfLoops};
pub use csr::{check_kernel_nnz, Csr, DegreeStats, Offset, OffsetWidth, RowPtr, MAX_KERNEL_NNZ};
pub use dataset::{Dataset, DatasetSummary, DenseMatrix, Features, SparseRows, Split};
pub use error::{Error, Result};
pub use generate::{generate, DegreeScaling, GenReport, SyntheticSpec};
pub use io::auto::{detect, load_auto, Format};
pub use io::dgl::load_dgl_reddit;
pub use io::edge_list::load_edge_list_dir;
pub use io::gnn_benchmark::load_gnn_benchmark;
pub use io::ogb::load_ogb_node;
pub use io::planetoid::load_planetoid;
pub use norm::{gcn_inv_sqrt_degrees, gcn_norm, mean_norm, Normalization};
pub use partition::{Exchange, HaloStats, LocalGraph, RowPartition};
pub use partitioner::{
    imbalance, metis, MetisOptions, MetisReport, NodeParts, Partitioner, Renumbering,
};
pub use reorder::Reorder;
