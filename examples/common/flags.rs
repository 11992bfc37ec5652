//! The training flags of the training examples (`train_cora`, `train_reddit`, `maxk_sweep`),
//! defined once and flattened into each example's arguments. Their defaults follow the
//! dataset family (Planetoid-sized graphs use the GCN paper's recipe, Reddit-sized ones
//! the MaxK-GNN / PyG benchmark recipe), so the varying ones are optional here and each
//! example resolves them against its [`Recipe`].

use gnn::train::OptimizerKind;

/// An example's defaults for the flags whose default depends on it.
#[allow(dead_code)] // each example reads the fields it needs
pub struct Recipe {
    /// `--layers`.
    pub layers: usize,
    /// `--hidden`.
    pub hidden: usize,
    /// `--epochs`.
    pub epochs: usize,
    /// `--weight-decay`.
    pub weight_decay: f64,
    /// `--input-dropout`; `None`: the hidden dropout (Kipf & Welling's GCN).
    pub input_dropout: Option<f32>,
    /// `--eval-every`.
    pub eval_every: usize,
}

/// Model and optimiser flags shared by the training examples.
#[derive(clap::Args, Debug, Clone)]
pub struct TrainFlags {
    /// Layers [default: 2; maxk_sweep 4].
    #[arg(long)]
    pub layers: Option<usize>,
    /// Hidden width [default: train_cora 16, train_reddit 128, maxk_sweep 256].
    #[arg(long)]
    pub hidden: Option<usize>,
    /// Epochs [default: train_cora and maxk_sweep 200, train_reddit 60].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Learning rate.
    #[arg(long, default_value_t = 0.01)]
    pub lr: f64,
    /// Dropout on hidden representations.
    #[arg(long, default_value_t = 0.5)]
    pub dropout: f32,
    /// Dropout on the input features [default: train_cora the hidden dropout, maxk_sweep 0.5
    /// on Cora, 0 on Reddit-sized graphs].
    #[arg(long)]
    pub input_dropout: Option<f32>,
    /// Weight decay [default: 5e-4 on Planetoid-sized graphs, 0 on Reddit-sized ones].
    #[arg(long)]
    pub weight_decay: Option<f64>,
    /// Optimizer: adam (L2 decay) or adamw (decoupled).
    #[arg(long, default_value = "adam")]
    pub optimizer: OptimizerKind,
    /// LayerNorm between layers.
    #[arg(long)]
    pub layer_norm: bool,
    /// Evaluate every this many epochs [default: train_cora 1, the others 5].
    #[arg(long)]
    pub eval_every: Option<usize>,
    /// Run on the CPU even when a CUDA device is available.
    #[arg(long)]
    pub cpu: bool,
}

/// The shared flags with every default filled in.
#[allow(dead_code)] // each example reads the fields it needs
#[derive(Debug, Clone)]
pub struct Resolved {
    pub layers: usize,
    pub hidden: usize,
    pub epochs: usize,
    pub lr: f64,
    pub dropout: f32,
    pub input_dropout: f32,
    pub weight_decay: f64,
    pub optimizer: OptimizerKind,
    pub layer_norm: bool,
    pub eval_every: usize,
    pub cpu: bool,
}

impl TrainFlags {
    /// Fills the optional flags from `r`.
    pub fn resolve(&self, r: &Recipe) -> Resolved {
        Resolved {
            layers: self.layers.unwrap_or(r.layers),
            hidden: self.hidden.unwrap_or(r.hidden),
            epochs: self.epochs.unwrap_or(r.epochs),
            lr: self.lr,
            dropout: self.dropout,
            input_dropout: self
                .input_dropout
                .or(r.input_dropout)
                .unwrap_or(self.dropout),
            weight_decay: self.weight_decay.unwrap_or(r.weight_decay),
            optimizer: self.optimizer,
            layer_norm: self.layer_norm,
            eval_every: self.eval_every.unwrap_or(r.eval_every),
            cpu: self.cpu,
        }
    }
}

/// The MaxK-GNN flag of the single-run training examples.
#[derive(clap::Args, Debug, Clone)]
pub struct MaxkFlag {
    /// MaxK-GNN non-linearity keeping K entries per row (instead of ReLU): linear -> MaxK ->
    /// dropout -> SpGEMM aggregation in every layer but the last (GCN, sage, GIN).
    #[arg(long, value_name = "K")]
    pub maxk: Option<usize>,
}
