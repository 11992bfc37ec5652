//! One training run from one config struct: load or generate the data, build the model, train
//! it over one or several seeds (with an MLP baseline on the same data if asked), evaluate,
//! save the best seed's weights and write the JSON report. What `train_reddit` and
//! `train_cora` do; progress and results are printed on stdout as they come.
//!
//! ```no_run
//! use gnn_train::run::{run, DataSource, ModelSpec, RunConfig};
//! use gnn_models::ConvKind;
//!
//! let mut cfg = RunConfig::new(DataSource::bundled_cora(), ModelSpec::new(ConvKind::Gcn, 2, 16));
//! cfg.seeds = 5;
//! let out = run(&cfg)?;
//! println!("{:.1} %", 100.0 * out.mean_test_acc);
//! # Ok::<(), gnn_train::Error>(())
//! ```

use crate::data::DeviceData;
use crate::device::{device_name, on_oom, pick_device};
use crate::error::{Error, Result};
use crate::metrics::RocAuc;
use crate::progress::EpochProgress;
use crate::report::{mean_std, write_json};
use crate::trainer::{train_from, TrainConfig, TrainReport};
use crate::TrainState;
use candle_core::Device;
use gnn_graph::{Dataset, Reorder};
use gnn_models::{Activation, ConvKind, Gnn, ModelConfig, ModelGraph};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Instant;

pub use crate::source::{load, reorder, DataSource, Loaded, CPU_DEFAULT_SCALE};

/// The model's architecture, without the dataset's dimensions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelSpec {
    /// Layer type.
    pub kind: ConvKind,
    /// Number of layers.
    pub layers: usize,
    /// Hidden width.
    pub hidden: usize,
    /// Dropout on hidden representations.
    pub dropout: f32,
    /// Dropout on the input features.
    pub input_dropout: f32,
    /// LayerNorm between layers.
    pub layer_norm: bool,
    /// Residual connections around the hidden layers (see `ModelConfig::residual`).
    pub residual: bool,
    /// GIN: LayerNorm inside each layer's MLP (see `ModelConfig::mlp_norm`).
    pub gin_norm: bool,
    /// MaxK from the second layer on, the first layer as the ReLU model's (see
    /// `ModelConfig::maxk_after_first`); only with `maxk`.
    pub maxk_after_first: bool,
    /// MaxK-GNN's non-linearity keeping this many entries per row instead of ReLU (not
    /// applied to an MLP).
    pub maxk: Option<usize>,
    /// Non-linearity between layers when `maxk` is not set.
    pub activation: Activation,
    /// GAT: heads of the hidden layers.
    pub heads: usize,
    /// GAT: dropout on the attention coefficients.
    pub att_dropout: f32,
}

impl ModelSpec {
    /// `layers` x `hidden` of `kind` with dropout 0.5 (input too), ReLU, no LayerNorm (GAT: one
    /// head, no attention dropout).
    pub fn new(kind: ConvKind, layers: usize, hidden: usize) -> Self {
        Self {
            kind,
            layers,
            hidden,
            dropout: 0.5,
            input_dropout: 0.5,
            layer_norm: false,
            residual: false,
            gin_norm: false,
            maxk_after_first: false,
            maxk: None,
            activation: Activation::Relu,
            heads: 1,
            att_dropout: 0.0,
        }
    }

    /// The full configuration for `ds`.
    pub fn config(&self, ds: &Dataset) -> ModelConfig {
        let mut cfg = ModelConfig::new(
            self.kind,
            ds.features.cols(),
            self.hidden,
            ds.num_classes,
            self.layers,
            self.dropout,
        );
        cfg.input_dropout = self.input_dropout;
        cfg.layer_norm = self.layer_norm;
        cfg.residual = self.residual;
        cfg.mlp_norm = self.gin_norm;
        cfg.activation = self.activation;
        if let (Some(k), true) = (self.maxk, self.kind != ConvKind::Mlp) {
            cfg.activation = Activation::MaxK { k };
            cfg.maxk_after_first = self.maxk_after_first;
        }
        if matches!(self.kind, ConvKind::Gat | ConvKind::Transformer) {
            cfg.heads = self.heads;
            cfg.att_dropout = self.att_dropout;
        }
        cfg
    }
}

/// Where the best seed's weights go.
#[derive(Debug, Clone, PartialEq)]
pub enum Save {
    /// `runs/weights/<model>-<dataset>`.
    Default,
    /// This stem.
    At(PathBuf),
    /// Nowhere.
    No,
}

/// Everything one run needs.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The data.
    pub data: DataSource,
    /// Node renumbering applied after loading.
    pub reorder: Reorder,
    /// Row-normalise the features (the citation datasets' convention).
    pub row_normalize: bool,
    /// The model.
    pub model: ModelSpec,
    /// The recipe; `train.seed` is the first seed. `train.checkpoint` defaults to
    /// `runs/checkpoints/<model>-<dataset>` (also where the last good state goes when
    /// training stops on a non-finite value).
    pub train: TrainConfig,
    /// Seeds `train.seed ..` to train (model init and dropout); the mean test accuracy is
    /// reported and the seed with the best validation accuracy is kept.
    pub seeds: u64,
    /// Also train an MLP on the same features and split (first seed only).
    pub baseline: bool,
    /// Continue from this training checkpoint (one seed only).
    pub resume: Option<PathBuf>,
    /// Where the weights go.
    pub save: Save,
    /// Where the JSON report goes, if anywhere.
    pub json: Option<PathBuf>,
    /// Print every evaluated epoch (above the progress bar) rather than the bar alone.
    pub epoch_lines: bool,
    /// Print each seed's per-phase breakdown table (with `train.profile`).
    pub print_breakdown: bool,
    /// Stay on the CPU even when a GPU is there.
    pub cpu: bool,
    /// The GPU kernel policy of the run's graphs (`--spmm-kernel`, `--deterministic`, ...).
    pub kernels: gnn_kernels::KernelPolicy,
    /// The command line or other note recorded in the report.
    pub note: String,
}

impl RunConfig {
    /// `model` on `data` with the default recipe, one seed, weights to the default place, no
    /// JSON.
    pub fn new(data: DataSource, model: ModelSpec) -> Self {
        Self {
            data,
            reorder: Reorder::None,
            row_normalize: true,
            model,
            train: TrainConfig::default(),
            seeds: 1,
            baseline: false,
            resume: None,
            save: Save::Default,
            json: None,
            epoch_lines: false,
            print_breakdown: false,
            cpu: false,
            kernels: Default::default(),
            note: String::new(),
        }
    }
}

/// One seed's result.
#[derive(Debug, Clone, Serialize)]
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// What training reported.
    pub report: TrainReport,
    /// Two-class data: the ROC-AUC of the kept (best validation epoch's) weights.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roc_auc: Option<RocAuc>,
}

/// A trained configuration: its seeds and the best one's model.
pub struct Trained {
    /// Per seed, in order.
    pub runs: Vec<SeedRun>,
    /// Index into `runs` of the best validation accuracy (the first on ties).
    pub best: usize,
    /// The best seed's model (weights of its best validation epoch).
    pub model: Gnn,
    /// Seconds to upload and prepare the graph for the layer type.
    pub prep_s: f64,
    /// The kernels the graph's ops ran, over every seed.
    pub kernels_used: gnn_kernels::KernelsUsed,
}

/// The outcome of [`run`].
pub struct RunOutcome {
    /// The dataset's name.
    pub dataset: String,
    /// The GNN.
    pub gnn: Trained,
    /// The MLP baseline, if asked.
    pub baseline: Option<TrainReport>,
    /// Mean test accuracy over the seeds (fraction).
    pub mean_test_acc: f64,
    /// Its sample standard deviation.
    pub std_test_acc: f64,
    /// The weights' stem, if saved.
    pub saved: Option<PathBuf>,
    /// The JSON report (also written to `json` if set).
    pub report: Value,
}

fn without_history(r: &TrainReport) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("history");
    }
    v
}

/// Prints the model a run trains (kind, activation, precision, shape, parameters) and how
/// long its graph took to prepare.
fn print_model_header(cfg: &RunConfig, spec: &ModelSpec, model: &Gnn, prep_s: f64) {
    let kind = spec.kind;
    println!(
        "{kind} ({}, {}), {} layers x {} hidden, {} parameters (graph prepared in \
         {prep_s:.2} s)",
        model.config().activation,
        if cfg.train.tf32 && !cfg.train.precision.is_half() {
            "f32, TF32 GEMMs".to_string()
        } else {
            cfg.train.precision.to_string()
        },
        spec.layers,
        spec.hidden,
        model.num_params()
    );
}

/// Trains `spec` on `data` over `cfg.seeds` seeds (an MLP when `spec.kind` is one, with no
/// checkpoints unless the run's own model is an MLP).
pub fn train_seeds(
    cfg: &RunConfig,
    spec: &ModelSpec,
    ds: &Dataset,
    data: &DeviceData,
    device: &Device,
) -> Result<Trained> {
    let kind = spec.kind;
    let mcfg = spec.config(ds);
    let t = Instant::now();
    let graph = on_oom(ModelGraph::new(&ds.graph, kind, device), device, || {
        (
            format!("uploading the graph ({} edges) for {kind}", ds.graph.nnz()),
            None,
        )
    })?
    .with_policy(cfg.kernels)
    // The lean layer forms: GraphSAGE 3x256 bf16 23.2 against 25.6 ms an epoch on the
    // Reddit-shaped graph, peak 2.32 against 3.72 GiB (one H200,
    // bench/records/dist-scaling/h100-2026-11-28-sage-kernels/lean-whole-h200).
    .with_lean_layers(true)
    // The output layers on aligned columns where that was measured to pay (41 classes -> 48).
    .with_padded_outputs(gnn_models::padded_outputs_pay(
        kind,
        device,
        cfg.train.precision.is_half(),
    ));
    let prep_s = t.elapsed().as_secs_f64();
    // Checkpoints and resumption belong to the run's model, not to its baseline.
    let own = kind == cfg.model.kind;
    if own && cfg.seeds > 1 && (cfg.resume.is_some() || cfg.train.checkpoint_every > 0) {
        return Err(Error::Invalid(
            "checkpointing and resuming take one seed; got several".into(),
        ));
    }
    let mut tc = cfg.train.clone();
    if own {
        tc.checkpoint = Some(tc.checkpoint.clone().unwrap_or_else(|| {
            PathBuf::from(format!("runs/checkpoints/{}-{}", cfg.model.kind, ds.name))
        }));
    } else {
        tc.checkpoint_every = 0;
        tc.checkpoint = None;
    }
    let resume = match (&cfg.resume, own) {
        (Some(p), true) => {
            let st = TrainState::load(p, device)?;
            println!(
                "{kind}: resuming from {} at epoch {}",
                p.display(),
                st.meta.epoch
            );
            Some(st)
        }
        _ => None,
    };
    let params: u64 = (0..mcfg.layers)
        .map(|l| mcfg.layer_dims(l))
        .map(|(i, o)| (i as u64 + 1) * o as u64)
        .sum();
    let seeds = if own { cfg.seeds.max(1) } else { 1 };
    let mut runs: Vec<SeedRun> = Vec::new();
    let mut best: Option<(usize, Gnn)> = None;
    for seed in cfg.train.seed..cfg.train.seed + seeds {
        let model = on_oom(Gnn::new(mcfg.clone(), device, seed), device, || {
            (
                format!("allocating the model's parameters (at least {params} floats)"),
                Some(4 * params),
            )
        })?;
        if seed == cfg.train.seed {
            print_model_header(cfg, spec, &model, prep_s);
        }
        if seed == cfg.train.seed
            && tc.cache_input_aggregate
            && model.input_aggregate_reduce(&graph).is_some()
        {
            println!(
                "first layer: its aggregation of the input is computed once, in the first \
                 epoch (--no-input-cache recomputes it every epoch)"
            );
        }
        if seed == cfg.train.seed {
            let split = &ds.split;
            let labelled = split.train.len() + split.val.len() + split.test.len();
            let line = crate::trainer::output::describe(
                ds.num_nodes(),
                labelled,
                mcfg.out_dim,
                tc.labelled_output,
            );
            if let Some(line) = line {
                println!("{line}");
            }
            let can = crate::trainer::output::can_train_rows(&model, &graph);
            let train_ids = crate::trainer::output::sorted_distinct(split.train.clone());
            let evaluated_labelled = crate::trainer::output::restricts(
                ds.num_nodes(),
                labelled,
                mcfg.out_dim,
                tc.labelled_output,
            );
            let train = crate::trainer::output::describe_train_rows(
                can,
                ds.num_nodes(),
                train_ids.len(),
                tc.trains_rows(),
                evaluated_labelled,
            );
            if let Some(line) = train {
                println!("{line}");
            }
        }
        let tc = TrainConfig { seed, ..tc.clone() };
        let done = resume.as_ref().map_or(0, |s| s.meta.epoch);
        let mut bar = EpochProgress::new(format!("{kind} seed {seed}"), tc.epochs, done);
        if !cfg.epoch_lines {
            bar = bar.without_lines();
        }
        let rep = train_from(&model, &graph, data, &tc, resume.as_ref(), |log| {
            bar.epoch(log)
        })?;
        drop(bar);
        let roc_auc = crate::metrics::model_roc_auc(&model, &graph, data)?;
        rep.print_summary(
            &kind.to_string(),
            seed,
            cfg.print_breakdown && tc.profile && own,
        );
        if let Some(a) = roc_auc {
            println!("{kind} seed {seed}: {a}");
        }
        if let (true, Some(p)) = (tc.checkpoint_every > 0, &tc.checkpoint) {
            println!("{kind}: checkpoints in {}", p.display());
        }
        let better = best
            .as_ref()
            .is_none_or(|(i, _)| rep.best_val_acc > runs[*i].report.best_val_acc);
        runs.push(SeedRun {
            seed,
            report: rep,
            roc_auc,
        });
        if better {
            best = Some((runs.len() - 1, model));
        }
    }
    let (best, model) = best.ok_or_else(|| Error::Invalid("no seed ran".into()))?;
    Ok(Trained {
        runs,
        best,
        model,
        prep_s,
        kernels_used: graph.kernels_used(),
    })
}

/// Prints the GNN's test accuracy beside the MLP baseline's on `dataset`, each with its test
/// ROC-AUC on two-class data.
fn print_comparison(
    dataset: &str,
    kind: ConvKind,
    (gnn, gnn_auc): (&TrainReport, Option<RocAuc>),
    (mlp, mlp_auc): (&TrainReport, Option<RocAuc>),
) {
    let auc_of = |a: Option<RocAuc>| {
        a.and_then(|a| a.test)
            .map(|t| format!(", ROC-AUC {t:.4}"))
            .unwrap_or_default()
    };
    println!("\nresult on {dataset}:");
    println!(
        "  {:<6} test accuracy {:>6.2} %{}",
        kind.to_string(),
        100.0 * gnn.test_acc,
        auc_of(gnn_auc)
    );
    println!(
        "  {:<6} test accuracy {:>6.2} %{}  (features only, same data)",
        "mlp",
        100.0 * mlp.test_acc,
        auc_of(mlp_auc)
    );
    println!(
        "  gain over MLP: {:+.2} points",
        100.0 * (gnn.test_acc - mlp.test_acc)
    );
}

/// Runs `cfg` end to end; see the module docs.
pub fn run(cfg: &RunConfig) -> Result<RunOutcome> {
    let device = pick_device(cfg.cpu)?;
    cfg.train.precision.check_device(&device)?;
    crate::device::set_tf32(&device, cfg.train.tf32)?;
    println!("device: {}\nkernels: {}", device_name(&device), cfg.kernels);
    if std::env::var_os(crate::device::MEMORY_LIMIT_ENV).is_some() {
        if let Some((_, total)) = crate::device::device_memory_info(&device) {
            println!(
                "device memory limited to {} ({})",
                crate::device::gib(total),
                crate::device::MEMORY_LIMIT_ENV
            );
        }
    }
    let t_all = Instant::now();
    let mut loaded = load(&cfg.data, device.is_cpu())?;
    let (_, reorder_s) = reorder(&mut loaded, cfg.reorder)?;
    let ds = &loaded.dataset;
    let data = DeviceData::new(ds, &device, cfg.row_normalize)?
        .with_precision(cfg.train.precision)?
        .with_aligned_features()?;
    let warm_up = crate::warmup::finish();
    if let Some(w) = &warm_up {
        println!("{w}");
    }
    let gnn = train_seeds(cfg, &cfg.model, ds, &data, &device)?;
    println!("kernels used: {}", gnn.kernels_used);
    let accs: Vec<f64> = gnn.runs.iter().map(|r| r.report.test_acc).collect();
    let (mean, std) = mean_std(&accs);
    let kind = cfg.model.kind;
    let aucs: Vec<Option<RocAuc>> = gnn.runs.iter().map(|r| r.roc_auc).collect();
    let auc = crate::metrics::mean_std_test(&aucs);
    if gnn.runs.len() > 1 {
        println!(
            "mean test accuracy: {:.1} ± {:.1} % over {} seeds ({kind} on {})",
            100.0 * mean,
            100.0 * std,
            accs.len(),
            ds.name
        );
        if let Some((m, s)) = auc {
            println!(
                "mean test ROC-AUC: {m:.4} ± {s:.4} over {} seeds",
                accs.len()
            );
        }
    }
    let baseline = if cfg.baseline && kind != ConvKind::Mlp {
        let spec = ModelSpec {
            kind: ConvKind::Mlp,
            ..cfg.model.clone()
        };
        let t = train_seeds(cfg, &spec, ds, &data, &device)?;
        Some((t.runs[t.best].report.clone(), t.runs[t.best].roc_auc))
    } else {
        None
    };
    let (baseline, baseline_auc) = baseline.unzip();
    let best = &gnn.runs[gnn.best];
    let tta_with_reorder =
        crate::source::time_to_accuracy_with_reorder(best.report.time_to_accuracy, reorder_s);
    if let Some(m) = &baseline {
        print_comparison(
            &ds.name,
            kind,
            (&best.report, best.roc_auc),
            (m, baseline_auc.flatten()),
        );
    }
    let runs: Vec<Value> = gnn
        .runs
        .iter()
        .map(|r| {
            let mut v = json!({"seed": r.seed, "test_acc": r.report.test_acc, "val_acc": r.report.best_val_acc,
                   "best_epoch": r.report.best_epoch, "epoch_ms_median": r.report.epoch_ms_median});
            if let (Some(a), Some(o)) = (r.roc_auc, v.as_object_mut()) {
                o.insert("roc_auc".into(), json!(a));
            }
            v
        })
        .collect();
    let saved = match &cfg.save {
        Save::No => None,
        Save::Default => Some(PathBuf::from(format!("runs/weights/{kind}-{}", ds.name))),
        Save::At(p) => Some(p.clone()),
    };
    if let Some(stem) = &saved {
        let info = json!({
            "dataset": ds.name, "test_acc": best.report.test_acc, "val_acc": best.report.best_val_acc,
            "epochs": best.report.epochs_run, "saved_seed": best.seed,
            "saved_val_acc": best.report.best_val_acc, "saved_test_acc": best.report.test_acc,
            "mean_test_acc": 100.0 * mean, "std_test_acc": 100.0 * std, "seeds": gnn.runs.len(),
            "train": cfg.train,
        });
        let (st, _) = gnn.model.save(stem, info)?;
        println!("saved weights to {}", st.display());
    }
    let mut report = json!({
        "dataset": ds.name,
        "dataset_summary": ds.summary(),
        "source": loaded.provenance,
        "device": device_name(&device),
        "threads": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "args": cfg.note,
        "graph_prep_s": gnn.prep_s,
        "kernel_warm_up": warm_up,
        "kernel_policy": cfg.kernels,
        "kernels_used": gnn.kernels_used,
        "model": gnn.model.config(),
        "train": cfg.train,
        "runs": runs,
        // Percent, as train_cora has always written them (the per-run accuracies are fractions).
        "mean_test_acc": 100.0 * mean,
        "std_test_acc": 100.0 * std,
        "gnn": {"model": gnn.model.config(), "seed": best.seed, "report": without_history(&best.report),
                "breakdown": best.report.breakdown.rows(),
                "loss_curve": best.report.history.iter().map(|h| h.loss).collect::<Vec<_>>()},
        "mlp": baseline.as_ref().map(without_history),
        "total_s": t_all.elapsed().as_secs_f64(),
        "reorder_s": reorder_s,
        "time_to_accuracy_with_reorder_s": tta_with_reorder,
    });
    // Two-class data: ROC-AUC beside the accuracies (fractions, as the per-run ones).
    if let (Some((m, s)), Some(o)) = (auc, report.as_object_mut()) {
        o.insert("mean_test_roc_auc".into(), json!(m));
        o.insert("std_test_roc_auc".into(), json!(s));
        for (key, a) in [("gnn", best.roc_auc), ("mlp", baseline_auc.flatten())] {
            if let (Some(a), Some(part)) = (a, o.get_mut(key).and_then(Value::as_object_mut)) {
                part.insert("roc_auc".into(), json!(a));
            }
        }
    }
    if let Some(p) = &cfg.json {
        write_json(p, &report)?;
        println!(
            "wrote {} (total {:.1} s)",
            p.display(),
            t_all.elapsed().as_secs_f64()
        );
    }
    Ok(RunOutcome {
        dataset: ds.name.clone(),
        gnn,
        baseline,
        mean_test_acc: mean,
        std_test_acc: std,
        saved,
        report,
    })
}
