//! The training recipe: [`TrainConfig`], its defaults (the GCN paper's) and what may change
//! when a run is resumed.

use crate::optim::OptimizerKind;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Training hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// Maximum epochs.
    pub epochs: usize,
    /// Learning rate.
    pub lr: f64,
    /// Weight decay (L2 for Adam, decoupled for AdamW); LayerNorm parameters are exempt.
    pub weight_decay: f64,
    /// Update rule.
    pub optimizer: OptimizerKind,
    /// How the learning rate moves over the epochs.
    #[serde(default)]
    pub lr_schedule: crate::LrSchedule,
    /// Stop after this many evaluations without a better validation accuracy.
    pub patience: Option<usize>,
    /// Evaluate every this many epochs (and at the last one).
    pub eval_every: usize,
    /// Seed of dropout masks (the model's init seed is the model's).
    pub seed: u64,
    /// Measure the per-phase breakdown (synchronises the device around phases).
    pub profile: bool,
    /// Leading epochs left out of timing statistics.
    pub warmup: usize,
    /// Write a training checkpoint every this many epochs (0: never); see [`crate::checkpoint`].
    #[serde(default)]
    pub checkpoint_every: usize,
    /// Where checkpoints go (a stem: `<stem>.safetensors` + `<stem>.json`). Also where the
    /// last good state is saved when training stops on a non-finite loss or gradient.
    #[serde(default)]
    pub checkpoint: Option<PathBuf>,
    /// Storage precision of features and activations (the data must be uploaded in it, see
    /// [`crate::DeviceData::with_precision`]); f16 adds dynamic loss scaling.
    #[serde(default)]
    pub precision: crate::Precision,
    /// Let cuBLAS run f32 GEMMs on TF32 tensor cores (10-bit mantissa products, fp32
    /// accumulation), as torch's `allow_tf32`; CUDA only. Process-wide: set at the start of
    /// every run (see [`crate::device::set_tf32`]).
    #[serde(default)]
    pub tf32: bool,
    /// Compute the first layer's aggregation of the (constant) input once, in the first
    /// epoch, instead of in every forward and backward
    /// ([`gnn_models::Gnn::input_aggregate`]; exact up to rounding; applies to GCN,
    /// GraphSAGE-mean and GIN without input dropout or MaxK).
    #[serde(default = "yes")]
    pub cache_input_aggregate: bool,
    /// Compute the output layer for the labelled nodes (train, validation and test) alone
    /// where they are at most half of the nodes: the loss and the metrics read no other
    /// rows ([`gnn_models::output`]; exact up to rounding). Off computes every node's logits
    /// each epoch, as PyG and DGL do (and turns [`Self::train_rows_output`] off). Where the
    /// whole logits would pass [`gnn_models::MAX_TENSOR_ELEMENTS`] the labelled rows are
    /// taken regardless.
    #[serde(default = "yes")]
    pub labelled_output: bool,
    /// On one device, a GCN's, GraphSAGE's or GIN's training pass computes its output layer
    /// for the train nodes alone where they are at most 90 % of the nodes: the loss reads no
    /// other rows, so the layer's sparse product and its transpose run over those rows' edges
    /// alone (exact up to rounding; evaluation keeps the labelled or every row). Only with
    /// [`Self::labelled_output`].
    #[serde(default = "yes")]
    pub train_rows_output: bool,
}

fn yes() -> bool {
    true
}

impl TrainConfig {
    /// True when `other` trains the same way (everything but `epochs`, checkpointing,
    /// profiling, the input-aggregate cache and the labelled and train output rows equal): the condition for resuming a checkpoint
    /// made under `self`.
    pub fn same_recipe(&self, other: &TrainConfig) -> bool {
        let strip = |c: &TrainConfig| TrainConfig {
            epochs: 0,
            profile: false,
            checkpoint_every: 0,
            checkpoint: None,
            cache_input_aggregate: true,
            labelled_output: true,
            train_rows_output: true,
            ..c.clone()
        };
        strip(self) == strip(other)
    }

    /// Whether the training pass may compute its output layer for the train rows alone
    /// ([`Self::train_rows_output`] under [`Self::labelled_output`]).
    pub fn trains_rows(&self) -> bool {
        self.labelled_output && self.train_rows_output
    }
}

impl Default for TrainConfig {
    /// The GCN paper's recipe: Adam, lr 0.01, weight decay 5e-4, 200 epochs.
    fn default() -> Self {
        Self {
            epochs: 200,
            lr: 0.01,
            weight_decay: 5e-4,
            optimizer: OptimizerKind::Adam,
            lr_schedule: crate::LrSchedule::Constant,
            patience: None,
            eval_every: 1,
            seed: 0,
            profile: false,
            warmup: 3,
            checkpoint_every: 0,
            checkpoint: None,
            precision: crate::Precision::F32,
            tf32: false,
            cache_input_aggregate: true,
            labelled_output: true,
            train_rows_output: true,
        }
    }
}
