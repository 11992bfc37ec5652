//! # gnn-train
//!
//! Full-batch training and inference pipelines on top of `gnn-models`: device data
//! ([`DeviceData`]), Adam/AdamW ([`optim`]), the trainer ([`train`]) with model selection on
//! validation accuracy and early stopping; the inference engine ([`Engine`]) with exact or
//! edge-sampled aggregation and f32 or INT8 features ([`HostFeatures`]). The front doors the
//! examples are thin wrappers of: [`run`] (one training run from one config), [`sweep`]
//! (parameter sweeps), [`report`] (breakdown tables, JSON, the SVG charts), [`metrics`]
//! (ROC-AUC of two-class models, beside accuracy) and, with the `cli`
//! feature, `cli` (the shared command-line flags).
#![deny(missing_docs)]

pub mod bench;
pub mod checkpoint;
#[cfg(feature = "cli")]
pub mod cli;
pub mod data;
pub mod device;
pub mod dist;
pub mod error;
pub mod features;
pub mod infer;
pub mod metrics;
pub mod optim;
pub mod precision;
pub mod progress;
pub mod report;
pub mod run;
pub mod source;
pub mod sweep;
pub mod trainer;
pub mod warmup;

/// The Cora dataset of the repository's `data/` folder, for the unit tests.
#[cfg(test)]
pub(crate) fn test_cora() -> gnn_graph::Dataset {
    gnn_graph::load_planetoid(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/cora/raw"),
        "cora",
    )
    .unwrap()
}

pub use checkpoint::TrainState;
pub use data::{accuracy, DeviceData};
pub use device::{
    allocated_peak_bytes, device_memory_in_use, device_name, keep_freed_memory,
    limit_device_memory, on_oom, pick_device, prepare_device, reset_allocated_peak,
    MEMORY_LIMIT_ENV, POOL_RELEASE_THRESHOLD_ENV,
};
pub use error::{Error, Result};
pub use features::{HostFeatures, LoadTimes};
pub use infer::{Engine, Inference};
pub use optim::{Adam, LrSchedule, OptimizerKind};
pub use precision::{LossScale, Precision};
pub use report::PhaseSums;
pub use trainer::{
    masked_cross_entropy, predict, time_to_accuracy, train, train_from, train_with_control,
    EpochLog, LabelledOutput, PeakByPhase, TimeToAccuracy, TrainConfig, TrainReport, TTA_TOLERANCE,
};
