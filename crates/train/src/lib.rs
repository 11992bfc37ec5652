//! # gnn-train
//!
//! Full-batch training and inference pipelines on top of `gnn-models`: device data
//! ([`DeviceData`]), Adam/AdamW ([`optim`]), the trainer ([`train`]) with model selection on
//! validation accuracy and early stopping, and per-phase timing breakdowns
//! ([`breakdown::PhaseSums`]) printed as a table and serialisable to JSON; the inference
//! engine ([`Engine`]) with exact or edge-sampled aggregation and f32 or INT8 features
//! ([`HostFeatures`]).
#![deny(missing_docs)]

pub mod breakdown;
pub mod chart;
pub mod checkpoint;
pub mod data;
pub mod device;
pub mod error;
pub mod features;
pub mod infer;
pub mod optim;
pub mod progress;
pub mod trainer;

pub use breakdown::PhaseSums;
pub use checkpoint::TrainState;
pub use data::{accuracy, DeviceData};
pub use device::{device_memory_in_use, device_name, on_oom, pick_device};
pub use error::{Error, Result};
pub use features::{HostFeatures, LoadTimes};
pub use infer::{Engine, Inference};
pub use optim::{Adam, OptimizerKind};
pub use trainer::{
    masked_cross_entropy, predict, train, train_from, EpochLog, TrainConfig, TrainReport,
};
