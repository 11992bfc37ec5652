//! Graph convolutions, one per file (PyG's parameter names).

pub mod gcn;
pub mod gin;
pub mod linear;
pub mod sage;

pub use gcn::GcnConv;
pub use gin::GinConv;
pub use linear::Linear;
pub use sage::SageConv;
