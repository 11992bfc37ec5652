//! Dataset file formats; [`auto`] detects which one a path holds.

pub mod auto;
pub mod dgl;
pub mod edge_list;
pub mod gnn_benchmark;
pub mod npz;
pub mod ogb;
pub mod pickle;
pub mod planetoid;
