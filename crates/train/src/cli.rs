//! Command-line flags shared by the examples (feature `cli`), each defined once and flattened
//! into every example that takes it (`#[command(flatten)]`). Flags whose default depends on
//! the dataset family (and on the model) are optional here and resolved against the example's
//! [`Recipe`] (Planetoid-sized graphs use the model's paper recipe where it states one, else
//! the GCN paper's: [`Recipe::planetoid`]; Reddit-sized ones the MaxK-GNN / PyG benchmark
//! recipe). [`hint`] adds the flags that may fix a library error.

use crate::error::{Error, Result};
use crate::optim::OptimizerKind;
use crate::run::{DataSource, ModelSpec};
use crate::trainer::TrainConfig;
use gnn_kernels::{ColumnBlock, KernelPolicy, SddmmKernel, SpmmKernel};
use gnn_models::{Activation, ConvKind};
use std::path::PathBuf;

/// An example's defaults for the flags whose default depends on it (and, for Planetoid-sized
/// graphs, on the model: [`Recipe::planetoid`]). Explicit flags override every field.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recipe {
    /// Where the numbers come from, for the run header.
    pub source: &'static str,
    /// `--layers`.
    pub layers: usize,
    /// `--hidden` (GAT and transformer: all heads together).
    pub hidden: usize,
    /// `--epochs`.
    pub epochs: usize,
    /// `--lr`.
    pub lr: f64,
    /// `--dropout` (hidden representations; attention coefficients too unless
    /// `--att-dropout`).
    pub dropout: f32,
    /// `--weight-decay`.
    pub weight_decay: f64,
    /// `--input-dropout`; `None`: the hidden dropout (Kipf & Welling's GCN).
    pub input_dropout: Option<f32>,
    /// `--heads` (GAT and transformer hidden layers).
    pub heads: usize,
    /// `--eval-every`.
    pub eval_every: usize,
}

impl Recipe {
    /// Kipf & Welling's GCN on Planetoid: 2 x 16, dropout 0.5 (input too), lr 0.01, weight
    /// decay 5e-4, 200 epochs, evaluation every epoch. The other models' Planetoid default
    /// where their paper gives none (see [`Recipe::planetoid`]).
    pub const PLANETOID: Recipe = Recipe {
        source: "Kipf & Welling's GCN (Planetoid)",
        layers: 2,
        hidden: 16,
        epochs: 200,
        lr: 0.01,
        dropout: 0.5,
        weight_decay: 5e-4,
        input_dropout: None,
        heads: 8,
        eval_every: 1,
    };

    /// Veličković et al.'s GAT on Cora and CiteSeer: 8 heads x 8 features in the hidden layer
    /// (one head at the output, as every GAT here), dropout 0.6 on the inputs of both layers
    /// and on the attention coefficients, lr 0.005, weight decay 5e-4. The paper stops on a
    /// patience of 100 epochs; this keeps GCN's 200 epochs with model selection on validation
    /// accuracy.
    pub const GAT_PLANETOID: Recipe = Recipe {
        source: "Velickovic et al.'s GAT (Cora/CiteSeer)",
        hidden: 64,
        lr: 0.005,
        dropout: 0.6,
        ..Recipe::PLANETOID
    };

    /// The Reddit benchmark recipe of MaxK-GNN and PyG's examples: 2 x 128, 60 epochs, lr 0.01,
    /// dropout 0.5, no weight decay, no input dropout, evaluation every 5 epochs.
    pub const REDDIT: Recipe = Recipe {
        source: "MaxK-GNN / PyG Reddit benchmark",
        layers: 2,
        hidden: 128,
        epochs: 60,
        lr: 0.01,
        dropout: 0.5,
        weight_decay: 0.0,
        input_dropout: Some(0.0),
        heads: 8,
        eval_every: 5,
    };

    /// The Planetoid-sized default of `kind`: its paper's where the paper states one for the
    /// Planetoid citation graphs (GCN, GAT), else [`Recipe::PLANETOID`]. GraphSAGE (Reddit,
    /// PPI, Web of Science, inductive), GIN (graph classification) and TransformerConv (OGB)
    /// publish no Planetoid recipe.
    pub fn planetoid(kind: ConvKind) -> Recipe {
        match kind {
            ConvKind::Gat => Recipe::GAT_PLANETOID,
            _ => Recipe::PLANETOID,
        }
    }
}

/// Model and optimiser flags of the training examples.
#[derive(clap::Args, Debug, Clone)]
pub struct TrainFlags {
    /// Layers [default: 2; maxk_sweep 4].
    #[arg(long)]
    pub layers: Option<usize>,
    /// Hidden width [default: train_cora 16 (gat 64: 8 heads x 8), train_reddit 128,
    /// maxk_sweep 256].
    #[arg(long)]
    pub hidden: Option<usize>,
    /// Epochs [default: train_cora and maxk_sweep 200, train_reddit 60].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Learning rate [default: 0.01; train_cora --model gat 0.005].
    #[arg(long)]
    pub lr: Option<f64>,
    /// Dropout on hidden representations [default: 0.5; train_cora --model gat 0.6].
    #[arg(long)]
    pub dropout: Option<f32>,
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
    /// Learning-rate schedule: constant, or cosine (annealed to 0 over --epochs, per epoch).
    #[arg(long, default_value = "constant")]
    pub lr_schedule: crate::LrSchedule,
    /// LayerNorm between layers.
    #[arg(long)]
    pub layer_norm: bool,
    /// Residual connections: hidden layers after the first add their input to their output
    /// (deep models; see c6f0242:docs/perf/h100-2026-11-24-deep-hard).
    #[arg(long)]
    pub residual: bool,
    /// GIN: LayerNorm inside each layer's MLP (Lin -> LayerNorm -> ReLU -> Lin, where PyG's GIN
    /// examples put BatchNorm); takes out the sum's degree-proportional scale (deep GIN).
    #[arg(long)]
    pub gin_norm: bool,
    /// Evaluate every this many epochs [default: train_cora 1, the others 5].
    #[arg(long)]
    pub eval_every: Option<usize>,
    /// Non-linearity between layers: relu or elu [default: elu for gat, relu otherwise].
    #[arg(long, value_parser = ["relu", "elu"])]
    pub activation: Option<String>,
    /// GAT and transformer: attention heads of the hidden layers (--hidden is their total width)
    /// [default: 8].
    #[arg(long)]
    pub heads: Option<usize>,
    /// GAT and transformer: dropout on the attention coefficients [default: the hidden dropout].
    #[arg(long)]
    pub att_dropout: Option<f32>,
    /// Storage precision of features and activations: f32, bf16 or f16 (half precision keeps
    /// fp32 accumulation, master weights and optimiser state; f16 adds loss scaling; GPU only).
    #[arg(long, default_value = "f32")]
    pub precision: crate::Precision,
    /// Let cuBLAS run the f32 GEMMs on TF32 tensor cores (fp32 accumulation, inputs rounded to
    /// a 10-bit mantissa; torch's `allow_tf32`). GPU only; sparse kernels are unchanged.
    #[arg(long)]
    pub tf32: bool,
    /// Recompute the first layer's aggregation of the input in every epoch instead of once
    /// (by default GCN, GraphSAGE-mean and GIN without input dropout or MaxK reuse it: the
    /// input is constant and the layer is linear in it up to its first non-linearity).
    #[arg(long)]
    pub no_input_cache: bool,
    /// Compute the output layer for every node in every epoch, as PyG and DGL do (by default
    /// only for the labelled nodes where they are at most half of the nodes: the loss and
    /// the metrics read no other rows; and see --no-train-rows). Not where the whole logits
    /// would pass candle's element limit (u32::MAX elements): the labelled rows are taken
    /// there regardless.
    #[arg(long)]
    pub all_output_rows: bool,
    /// Compute a GCN's, GraphSAGE's or GIN's output layer in training for the rows
    /// evaluation computes (by default, on one device, for the train nodes alone where they
    /// are at most 90 % of the nodes: the loss reads no other rows, so the layer's sparse
    /// product and its transpose run over their edges alone).
    #[arg(long)]
    pub no_train_rows: bool,
    /// `--cpu` and the kernel policy.
    #[command(flatten)]
    pub device: DeviceFlag,
}

/// Where to run, and the kernel policy, for every example that can run on either device.
#[derive(clap::Args, Debug, Clone)]
pub struct DeviceFlag {
    /// Run on the CPU even when a CUDA device is available.
    #[arg(long)]
    pub cpu: bool,
    /// `--spmm-kernel`, `--sddmm-kernel`, `--column-block`, `--deterministic`.
    #[command(flatten)]
    pub kernels: KernelFlags,
}

impl DeviceFlag {
    /// The device: the first GPU of a CUDA build unless `--cpu`, else the CPU.
    pub fn pick(&self) -> Result<candle_core::Device> {
        crate::device::pick_device(self.cpu)
    }

    /// The kernel policy the flags name ([`KernelFlags::policy`]); a forced kernel needs a
    /// CUDA build and a GPU run (the CPU has one kernel per op).
    pub fn policy(&self) -> Result<KernelPolicy> {
        let policy = self.kernels.policy();
        if !policy.is_auto() && (self.cpu || !cfg!(feature = "cuda")) {
            return Err(crate::Error::Invalid(format!(
                "--spmm-kernel {} --sddmm-kernel {} --column-block {} pick CUDA kernels, but                  this run is on the CPU{}",
                policy.spmm,
                policy.sddmm,
                policy.column_block,
                if self.cpu {
                    ""
                } else {
                    " (a build without --features cuda)"
                }
            )));
        }
        Ok(policy)
    }
}

/// The flags of a [`KernelPolicy`]: which GPU kernel each sparse op runs.
#[derive(clap::Args, Debug, Clone)]
pub struct KernelFlags {
    /// GPU kernel of the sum/mean SpMMs: auto (the measured dispatcher), ge (GE-SpMM's row
    /// kernel), narrow (GE-SpMM's narrow-row kernel where the width allows, else the row
    /// kernel), hp (HP-SpMM, DTP's edges per group) or hp:N (N in 8, 32, 64, 128, 256, 512).
    #[arg(
        long,
        default_value = "auto",
        ignore_case = true,
        hide_possible_values = true
    )]
    pub spmm_kernel: SpmmKernel,
    /// GPU kernel of the SDDMMs (attention scores, edge-value gradients): auto (HP-SDDMM with
    /// DTP's partition up to K = 1024, else the row kernel), rows (one warp per row) or hp:N.
    #[arg(
        long,
        default_value = "auto",
        ignore_case = true,
        hide_possible_values = true
    )]
    pub sddmm_kernel: SddmmKernel,
    /// Column blocking of GE-SpMM's row kernel on graphs wider than a block: auto (2^18
    /// columns), off, or a width in columns.
    #[arg(long, default_value = "auto")]
    pub column_block: ColumnBlock,
    /// GPU: no float atomics in the sparse reductions, so runs with the same seed are
    /// bit-identical (see gnn_kernels::KernelPolicy::deterministic for what it costs and
    /// covers).
    #[arg(long)]
    pub deterministic: bool,
}

impl KernelFlags {
    /// The policy these flags name.
    pub fn policy(&self) -> KernelPolicy {
        KernelPolicy {
            spmm: self.spmm_kernel,
            spmm_tiling: None,
            column_block: self.column_block,
            sddmm: self.sddmm_kernel,
            deterministic: self.deterministic,
        }
    }
}

impl TrainFlags {
    /// The model these flags describe for `kind` (ReLU; set `maxk` after).
    pub fn model(&self, kind: ConvKind, r: &Recipe) -> ModelSpec {
        let dropout = self.dropout.unwrap_or(r.dropout);
        ModelSpec {
            kind,
            layers: self.layers.unwrap_or(r.layers),
            hidden: self.hidden.unwrap_or(r.hidden),
            dropout,
            input_dropout: self.input_dropout.or(r.input_dropout).unwrap_or(dropout),
            layer_norm: self.layer_norm,
            residual: self.residual,
            gin_norm: self.gin_norm,
            maxk_after_first: false,
            maxk: None,
            activation: match (self.activation.as_deref(), kind) {
                (Some("elu"), _) | (None, ConvKind::Gat) => Activation::Elu,
                _ => Activation::Relu,
            },
            heads: self.heads.unwrap_or(r.heads),
            att_dropout: self.att_dropout.unwrap_or(dropout),
        }
    }

    /// The training recipe these flags describe (seed 0, no profiling, no checkpoints).
    pub fn train(&self, r: &Recipe) -> TrainConfig {
        TrainConfig {
            epochs: self.epochs.unwrap_or(r.epochs),
            lr: self.lr.unwrap_or(r.lr),
            weight_decay: self.weight_decay.unwrap_or(r.weight_decay),
            optimizer: self.optimizer,
            lr_schedule: self.lr_schedule,
            eval_every: self.eval_every.unwrap_or(r.eval_every),
            precision: self.precision,
            tf32: self.tf32,
            cache_input_aggregate: !self.no_input_cache,
            labelled_output: !self.all_output_rows,
            train_rows_output: !self.no_train_rows,
            ..TrainConfig::default()
        }
    }
}

/// The run header's recipe line: which recipe gave the defaults, then the values in force
/// (explicit flags applied), e.g. `recipe (Kipf & Welling's GCN (Planetoid), flags applied):
/// 2 x 16, dropout 0.5 (input 0.5), lr 0.01, weight decay 0.0005, adam, 200 epochs, evaluated
/// every 1`.
pub fn recipe_line(r: &Recipe, model: &ModelSpec, train: &TrainConfig) -> String {
    let attention = matches!(model.kind, ConvKind::Gat | ConvKind::Transformer);
    let heads = match (attention, model.heads) {
        (true, h) if h > 0 => format!(" ({h} heads x {})", model.hidden / h),
        _ => String::new(),
    };
    let att = if attention {
        format!(", attention {}", model.att_dropout)
    } else {
        String::new()
    };
    format!(
        "recipe ({}, flags applied): {} x {}{heads}, dropout {} (input {}{att}), lr {}, weight \
         decay {}, {}, {} epochs, evaluated every {}",
        r.source,
        model.layers,
        model.hidden,
        model.dropout,
        model.input_dropout,
        train.lr,
        train.weight_decay,
        format!("{:?}", train.optimizer).to_ascii_lowercase(),
        train.epochs,
        train.eval_every
    )
}

/// The flags that may fix `e`, for the errors the library states in its own terms (it gives
/// no command-line advice itself): a non-finite loss, running out of GPU memory, a CUDA-only
/// setting on the CPU.
pub fn hint(e: &Error) -> Option<&'static str> {
    match e {
        Error::NonFinite {
            f16_range: true, ..
        } => Some(
            "--precision bf16 keeps f32's range; or try a lower --lr or --layer-norm, and keep \
             the features row-normalised (no --no-row-normalize)",
        ),
        Error::NonFinite { .. } => Some(
            "try a lower --lr or --layer-norm, and keep the features row-normalised (no \
             --no-row-normalize)",
        ),
        Error::OutOfMemory { .. } => Some(
            "try a smaller --hidden or fewer --layers, a smaller graph (--scale), --precision \
             bf16 (half the bytes of features and activations), or several GPUs (the train_dist \
             example, --nccl)",
        ),
        Error::CudaOnly { .. } => Some(
            "drop --cpu and build with --features cuda, or keep the CPU's settings \
             (--precision f32, no --tf32)",
        ),
        _ => None,
    }
}

/// A library error followed by its [`hint`], for the examples to return from `main`
/// (`run(&cfg).map_err(Hinted)?`).
#[derive(Debug)]
pub struct Hinted(pub Error);

impl std::fmt::Display for Hinted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        match hint(&self.0) {
            Some(h) => write!(f, "\nhint: {h}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Hinted {
    // The wrapped error's own cause: its text is already this error's.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0)
    }
}

/// The MaxK-GNN flag of the single-run training examples.
#[derive(clap::Args, Debug, Clone)]
pub struct MaxkFlag {
    /// MaxK-GNN non-linearity keeping K entries per row (instead of ReLU): linear -> MaxK ->
    /// dropout -> SpGEMM aggregation in every layer but the last (GCN, sage, GIN).
    #[arg(long, value_name = "K")]
    pub maxk: Option<usize>,
    /// With --maxk: the first layer runs as the ReLU model's (aggregate, ReLU, dropout) and MaxK
    /// starts at the second; the first aggregation then averages the input before any
    /// selection and is computed once per run.
    #[arg(long, requires = "maxk")]
    pub maxk_after_first: bool,
}

/// Which dataset: a folder in any detected format, the bundled Cora, or a generated
/// Reddit- or papers100M-shaped graph.
#[derive(clap::Args, Debug, Clone)]
pub struct DataFlags {
    /// Dataset folder or file, format detected: gnn's binary CSR (graph.gnncsr, written by
    /// --save-graph), Planetoid raw folder, DGL Reddit (reddit_data.npz + reddit_graph.npz),
    /// OGB raw folder, gnn-benchmark npz, edge-list folder (edges.txt + features.npy +
    /// labels.npy).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Dataset name: inside --data-dir, Planetoid's file prefix (cora, citeseer, pubmed) or the
    /// `.npz` stem; without it, `cora` (bundled), `reddit` (a generated Reddit-shaped graph) or
    /// `papers100m` (a generated papers100M-shaped one) [default: train_reddit reddit, the
    /// others cora].
    #[arg(long)]
    pub dataset: Option<String>,
    /// Seed of the stratified split, for formats that carry none (gnn-benchmark, edge lists).
    #[arg(long, default_value_t = 0)]
    pub split_seed: u64,
    /// Generated graph: node-count scale (1 = Reddit's 232,965 nodes, papers100M's 111 M)
    /// [default: 1 on a GPU; on the CPU 0.2, papers100m 0.005].
    #[arg(long)]
    pub scale: Option<f64>,
    /// Generated graph: also write it (graph, features, labels, split) to DIR/graph.gnncsr in
    /// gnn's binary CSR format; `--data-dir DIR` then loads it instead of generating.
    #[arg(long, value_name = "DIR")]
    pub save_graph: Option<PathBuf>,
    /// Generated graph: scale of the class signal in the features (noise has unit variance).
    #[arg(long)]
    pub signal: Option<f32>,
    /// Generated graph: probability that an edge stays inside a community.
    #[arg(long)]
    pub homophily: Option<f64>,
    /// Generated graph: number nodes community by community (same graph, relabelled).
    #[arg(long)]
    pub community_order: bool,
    /// Generated graph: mean row length at scale 1 (self loop included; scaled by
    /// sqrt(--scale) as the preset's 492 is), e.g. 51 for a products-like sparse graph.
    #[arg(long)]
    pub avg_degree: Option<f64>,
    /// Renumber the nodes after loading for locality: auto (the degree order on graphs of a
    /// million nodes or more, where it took a papers100M-shaped epoch 1.35-1.5x faster and
    /// repaid its cost in about 50 epochs; none below), none, degree, rcm, louvain. Its cost is
    /// printed and counted in time to accuracy; predictions stay in the file's node order.
    /// train_dist: auto keeps the ids.
    #[arg(long, default_value = "auto")]
    pub reorder: gnn_graph::Reorder,
}

impl DataFlags {
    /// `--reorder`, except that `auto` keeps ids the user asked to be numbered by community
    /// (`--community-order`).
    pub fn reorder_choice(&self) -> gnn_graph::Reorder {
        match self.reorder {
            gnn_graph::Reorder::Auto if self.community_order => gnn_graph::Reorder::None,
            other => other,
        }
    }

    /// The dataset name, or the example's default.
    pub fn name<'a>(&'a self, default: &'a str) -> &'a str {
        self.dataset.as_deref().unwrap_or(default)
    }

    /// Where the data comes from; `seed` seeds a generated graph.
    pub fn source(&self, default: &str, seed: u64) -> Result<DataSource> {
        let name = self.name(default);
        let generated = matches!(
            name,
            "reddit" | "synthetic-reddit" | "papers100m" | "synthetic-papers100m"
        );
        if self.save_graph.is_some() && (self.data_dir.is_some() || !generated) {
            return Err(crate::Error::Invalid(format!(
                "--save-graph writes a generated graph (--dataset reddit or papers100m, no \
                 --data-dir); this run reads {}",
                self.data_dir
                    .as_ref()
                    .map_or_else(|| name.to_string(), |d| d.display().to_string())
            )));
        }
        if let Some(dir) = &self.data_dir {
            return Ok(DataSource::Files {
                path: dir.clone(),
                name: name.to_string(),
                split_seed: self.split_seed,
            });
        }
        match name {
            "cora" => Ok(DataSource::bundled_cora()),
            "reddit" | "synthetic-reddit" | "papers100m" | "synthetic-papers100m" => {
                let mut spec = if name.ends_with("reddit") {
                    gnn_graph::SyntheticSpec::reddit()
                } else {
                    gnn_graph::SyntheticSpec::papers100m()
                };
                if let Some(s) = self.signal {
                    spec.signal = s;
                }
                if let Some(h) = self.homophily {
                    spec.homophily = h;
                }
                if let Some(d) = self.avg_degree {
                    spec.avg_degree = d;
                }
                spec.community_order = self.community_order;
                Ok(DataSource::Synthetic {
                    spec,
                    scale: self.scale,
                    seed,
                    save: self.save_graph.clone(),
                })
            }
            other => Err(crate::Error::Invalid(format!(
                "--dataset {other} needs --data-dir (a folder or .npz file holding it); without \
                 one, `cora` (bundled), `reddit` and `papers100m` (generated) are available"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        device: DeviceFlag,
    }

    fn parse(args: &[&str]) -> std::result::Result<Cmd, clap::Error> {
        Cmd::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
    }

    #[test]
    fn kernel_flags_parse_into_one_policy() {
        let d = parse(&[]).unwrap().device;
        assert_eq!(d.kernels.policy(), KernelPolicy::default());
        assert_eq!(d.policy().unwrap(), KernelPolicy::default());
        let d = parse(&[
            "--spmm-kernel",
            "HP:64",
            "--sddmm-kernel",
            "rows",
            "--column-block",
            "off",
            "--deterministic",
        ])
        .unwrap()
        .device;
        let want = KernelPolicy {
            spmm: SpmmKernel::Hp(64),
            spmm_tiling: None,
            column_block: ColumnBlock::Off,
            sddmm: SddmmKernel::Rows,
            deterministic: true,
        };
        assert_eq!(d.kernels.policy(), want);
        // The policy parsed from the flags survives the report's JSON.
        let json = serde_json::to_value(want).unwrap();
        assert_eq!(serde_json::from_value::<KernelPolicy>(json).unwrap(), want);
        for bad in [
            &["--spmm-kernel", "hp:7"][..],
            &["--sddmm-kernel", "narrow"],
            &["--column-block", "wide"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn forced_kernels_are_refused_on_the_cpu_determinism_is_not() {
        let d = parse(&["--cpu", "--spmm-kernel", "ge"]).unwrap().device;
        let e = d.policy().unwrap_err().to_string();
        assert!(e.contains("--spmm-kernel ge") && e.contains("CPU"), "{e}");
        let d = parse(&["--cpu", "--deterministic"]).unwrap().device;
        assert!(d.policy().unwrap().deterministic);
    }

    #[derive(Parser)]
    struct Data {
        #[command(flatten)]
        data: DataFlags,
    }

    fn data(args: &[&str]) -> DataFlags {
        Data::try_parse_from(std::iter::once("d").chain(args.iter().copied()))
            .unwrap()
            .data
    }

    #[test]
    fn generated_datasets_and_save_graph() {
        let d = data(&[
            "--dataset",
            "papers100m",
            "--scale",
            "0.01",
            "--save-graph",
            "out",
        ]);
        match d.source("reddit", 3).unwrap() {
            DataSource::Synthetic {
                spec,
                scale,
                seed,
                save,
            } => {
                assert_eq!(spec, gnn_graph::SyntheticSpec::papers100m());
                assert_eq!((scale, seed, save), (Some(0.01), 3, Some("out".into())));
            }
            other => panic!("{other:?}"),
        }
        let d = data(&["--homophily", "0.3"]);
        match d.source("reddit", 0).unwrap() {
            DataSource::Synthetic { spec, save, .. } => {
                assert_eq!(
                    (spec.name.as_str(), spec.homophily),
                    ("synthetic-reddit", 0.3)
                );
                assert_eq!(save, None);
            }
            other => panic!("{other:?}"),
        }
        for args in [
            &["--data-dir", "x", "--save-graph", "out"][..],
            &["--save-graph", "out"],
        ] {
            let e = data(args).source("cora", 0).unwrap_err().to_string();
            assert!(e.contains("--save-graph writes a generated graph"), "{e}");
        }
    }

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        train: TrainFlags,
    }

    fn flags(args: &[&str]) -> TrainFlags {
        Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .unwrap()
            .train
    }

    #[test]
    fn planetoid_defaults_follow_each_models_paper() {
        let none = flags(&[]);
        // GCN (and every model without a Planetoid recipe of its own): Kipf & Welling's.
        for kind in [
            ConvKind::Gcn,
            ConvKind::SageMean,
            ConvKind::Gin,
            ConvKind::Transformer,
        ] {
            let r = Recipe::planetoid(kind);
            assert_eq!(r, Recipe::PLANETOID, "{kind}");
            let (m, t) = (none.model(kind, &r), none.train(&r));
            assert_eq!((m.layers, m.hidden), (2, 16));
            assert_eq!((m.dropout, m.input_dropout), (0.5, 0.5));
            assert_eq!(
                (t.lr, t.weight_decay, t.epochs, t.eval_every),
                (0.01, 5e-4, 200, 1)
            );
        }
        // GAT: 8 heads x 8, dropout 0.6 on inputs and attention, lr 0.005, decay 5e-4.
        let r = Recipe::planetoid(ConvKind::Gat);
        let (m, t) = (none.model(ConvKind::Gat, &r), none.train(&r));
        assert_eq!((m.hidden, m.heads, m.hidden / m.heads), (64, 8, 8));
        assert_eq!((m.dropout, m.input_dropout, m.att_dropout), (0.6, 0.6, 0.6));
        assert_eq!((t.lr, t.weight_decay, t.epochs), (0.005, 5e-4, 200));
        // Explicit flags win over the recipe.
        let f = flags(&[
            "--hidden",
            "16",
            "--heads",
            "4",
            "--dropout",
            "0.5",
            "--lr",
            "0.01",
            "--att-dropout",
            "0.1",
        ]);
        let (m, t) = (f.model(ConvKind::Gat, &r), f.train(&r));
        assert_eq!(
            (m.hidden, m.heads, m.dropout, m.input_dropout),
            (16, 4, 0.5, 0.5)
        );
        assert_eq!((m.att_dropout, t.lr), (0.1, 0.01));
        // The Reddit recipe is the same for every model.
        let m = none.model(ConvKind::Gat, &Recipe::REDDIT);
        assert_eq!(
            (m.hidden, m.heads, m.dropout, m.input_dropout),
            (128, 8, 0.5, 0.0)
        );
    }

    #[test]
    fn the_recipe_line_shows_the_values_in_force() {
        let r = Recipe::planetoid(ConvKind::Gat);
        let f = flags(&["--epochs", "100"]);
        let line = recipe_line(&r, &f.model(ConvKind::Gat, &r), &f.train(&r));
        assert_eq!(
            line,
            "recipe (Velickovic et al.'s GAT (Cora/CiteSeer), flags applied): 2 x 64 (8 heads \
             x 8), dropout 0.6 (input 0.6, attention 0.6), lr 0.005, weight decay 0.0005, adam, \
             100 epochs, evaluated every 1"
        );
        let r = Recipe::planetoid(ConvKind::Gcn);
        let none = flags(&[]);
        let line = recipe_line(&r, &none.model(ConvKind::Gcn, &r), &none.train(&r));
        assert_eq!(
            line,
            "recipe (Kipf & Welling's GCN (Planetoid), flags applied): 2 x 16, dropout 0.5 \
             (input 0.5), lr 0.01, weight decay 0.0005, adam, 200 epochs, evaluated every 1"
        );
    }

    #[test]
    fn flag_advice_lives_here_not_in_the_library() {
        let oom = Error::OutOfMemory {
            what: "allocating x".into(),
            bytes: None,
            free: None,
            total: None,
        };
        assert!(!oom.to_string().contains("--"), "{oom}");
        let text = Hinted(oom).to_string();
        assert!(
            text.starts_with("out of GPU memory while allocating x")
                && text.contains("\nhint: ")
                && text.contains("--hidden"),
            "{text}"
        );
        let cpu = crate::Precision::Bf16
            .check_device(&candle_core::Device::Cpu)
            .unwrap_err();
        assert!(hint(&cpu).is_some_and(|h| h.contains("--cpu")));
        let nan = Error::NonFinite {
            epoch: 3,
            tensor: "the training loss (NaN)".into(),
            checkpoint: None,
            f16_range: false,
        };
        assert!(!nan.to_string().contains("--") && hint(&nan).is_some_and(|h| h.contains("--lr")));
        let f16 = Error::NonFinite {
            epoch: 3,
            tensor: "the training loss (inf)".into(),
            checkpoint: None,
            f16_range: true,
        };
        assert!(hint(&f16).is_some_and(|h| h.contains("--precision bf16")));
        // Errors with nothing to add pass through unchanged.
        let other = Error::Invalid("bad".into());
        assert_eq!(hint(&other), None);
        assert_eq!(Hinted(other).to_string(), "bad");
    }
}
