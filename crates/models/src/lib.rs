//! # gnn-models
//!
//! GCN, GraphSAGE (mean / pool) and GIN layers on the `gnn-kernels` aggregation ops, a model
//! builder ([`Gnn`], configured by a serialisable [`ModelConfig`]), seeded initialisation
//! and dropout, and safetensors checkpoints with the config stored beside the weights.
//!
//! Layers know graphs and tensors, not datasets: a [`ModelGraph`] carries the device graph
//! (and edge values) a model kind needs.
#![deny(missing_docs)]

pub mod config;
pub mod conv;
pub mod dropout;
pub mod error;
pub mod graph;
pub mod model;
pub mod output;
pub mod params;
pub mod timer;

pub use config::{aligned_width, Activation, ConvKind, ModelConfig};
pub use dropout::DropoutRng;
pub use error::{Error, Result};
pub use graph::{
    padded_outputs_pay, padded_outputs_pay_on_cuda, Aggregation, FusedAggregation, ModelGraph,
    Operands,
};
pub use model::{Forward, Gnn, PassOutput, PygLayout};
pub use output::{check_elements, products_pass_limit, OutputRows, MAX_TENSOR_ELEMENTS};
pub use params::{Init, ParamStore};
pub use timer::{Phase, PhaseSpan, PhaseTimes};
