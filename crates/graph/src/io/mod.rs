//! Dataset file formats.

pub mod dgl;
pub mod npz;
pub mod ogb;
pub mod pickle;
pub mod planetoid;
