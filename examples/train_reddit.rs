//! The main job: full-batch training on Reddit.
//!
//! With `--data-dir` pointing at DGL's `reddit_data.npz` + `reddit_graph.npz` it trains on the
//! real graph; otherwise it generates a seeded Reddit-shaped graph (232,965 nodes, ~114.6 M
//! edges, 602 features, 41 classes) at `--scale` (on the CPU the default scale is reduced so
//! the run finishes in a few minutes on 2 cores). It trains the chosen GNN and, on the same
//! data, an MLP baseline, prints both accuracies and the per-phase timing breakdown, writes a
//! JSON report and saves the GNN's weights under `runs/weights/` (the shipped checkpoints in
//! `weights/` are never overwritten unless `--save` names them).
//!
//! Long runs can checkpoint (`--checkpoint-every N`: weights, Adam state, dropout stream,
//! model selection and history, see `gnn::train::checkpoint`) and continue after an
//! interruption with `--resume runs/checkpoints/<model>-<dataset>`: the continued run equals
//! an uninterrupted one. A NaN or infinite loss or gradient stops training with the epoch and
//! tensor named, the state before that epoch saved beside the checkpoints.
//!
//! ```text
//! cargo run --release --example train_reddit
//! cargo run --release --example train_reddit -- --model sage --layers 2 --hidden 128 --epochs 50
//! cargo run --release --example train_reddit -- --data-dir ~/data/reddit
//! ```

use anyhow::{Context, Result};
use candle_core::Device;
use clap::Parser;
use gnn::graph::{generate, load_dgl_reddit, Dataset, SyntheticSpec};
use gnn::models::{ConvKind, Gnn, ModelConfig, ModelGraph};
use gnn::train::{on_oom, progress, train_from, DeviceData, TrainConfig, TrainReport, TrainState};
use std::path::PathBuf;
use std::time::Instant;

/// Node-count scale of the synthetic graph on the CPU when `--scale` is not given.
const CPU_DEFAULT_SCALE: f64 = 0.2;

#[path = "common/flags.rs"]
mod flags;

/// The Reddit benchmark recipe of MaxK-GNN and PyG's examples: 2 x 128, 60 epochs, no weight
/// decay, no input dropout, evaluation every 5 epochs.
const RECIPE: flags::Recipe = flags::Recipe {
    layers: 2,
    hidden: 128,
    epochs: 60,
    weight_decay: 0.0,
    input_dropout: Some(0.0),
    eval_every: 5,
};

#[derive(Parser, Debug)]
#[command(
    about = "Full-batch GNN training on Reddit (DGL files) or a Reddit-shaped synthetic graph"
)]
struct Args {
    /// Folder with DGL's reddit_data.npz and reddit_graph.npz (default: synthetic).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Scale of the synthetic graph's node count (1 = full Reddit size). Default: 0.2 on the CPU.
    #[arg(long)]
    scale: Option<f64>,
    /// Synthetic graph: scale of the class signal in the features (noise has unit variance).
    #[arg(long)]
    signal: Option<f32>,
    /// Synthetic graph: probability that an edge stays inside a community.
    #[arg(long)]
    homophily: Option<f64>,
    /// Model: gcn, sage, sage-pool, gin.
    #[arg(long, default_value = "gcn")]
    model: ConvKind,
    #[command(flatten)]
    train: flags::TrainFlags,
    #[command(flatten)]
    maxk: flags::MaxkFlag,
    /// Seed (graph generation, initialisation, dropout).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Skip the MLP baseline.
    #[arg(long)]
    no_baseline: bool,
    /// Where to write the JSON report.
    #[arg(long, default_value = "runs/train_reddit.json")]
    json: PathBuf,
    /// Weights stem (default runs/weights/<model>-<dataset>).
    #[arg(long)]
    save: Option<PathBuf>,
    /// Write a training checkpoint every N epochs (0: never).
    #[arg(long, default_value_t = 0, value_name = "N")]
    checkpoint_every: usize,
    /// Checkpoint stem (default runs/checkpoints/<model>-<dataset>); also where the last good
    /// state goes when training stops on a non-finite value.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// GPU: no float atomics in the sparse reductions, so runs with the same seed are
    /// bit-identical (see gnn_kernels::set_deterministic for what it costs and covers).
    #[arg(long)]
    deterministic: bool,
    /// Continue from this training checkpoint (same model, data and recipe; --epochs may grow).
    #[arg(long)]
    resume: Option<PathBuf>,
}

fn load(args: &Args, device: &Device) -> Result<(Dataset, serde_json::Value)> {
    if let Some(dir) = &args.data_dir {
        let t = Instant::now();
        let ds = progress::step(format!("loading {}", dir.display()), || {
            load_dgl_reddit(dir)
        })
        .with_context(|| format!("loading DGL Reddit from {}", dir.display()))?;
        println!(
            "loaded {} in {:.1} s; {}",
            ds.summary(),
            t.elapsed().as_secs_f64(),
            ds.graph.degree_stats()
        );
        return Ok((ds, serde_json::json!({"source": "dgl", "dir": dir})));
    }
    let scale = match (args.scale, device.is_cpu()) {
        (Some(s), _) => s,
        (None, true) => {
            println!(
                "no --data-dir: generating a Reddit-shaped graph at scale {CPU_DEFAULT_SCALE} (the CPU default, a few \
                 minutes on 2 cores); --scale 1 gives the full 232,965-node graph"
            );
            CPU_DEFAULT_SCALE
        }
        (None, false) => 1.0,
    };
    let mut spec = SyntheticSpec::reddit().scaled(scale)?;
    if let Some(s) = args.signal {
        spec.signal = s;
    }
    if let Some(h) = args.homophily {
        spec.homophily = h;
    }
    let (ds, report) = progress::step(
        format!("generating a Reddit-shaped graph at scale {scale}"),
        || generate(&spec, args.seed),
    )?;
    println!("{report}");
    Ok((ds, serde_json::to_value(&report)?))
}

fn run(
    name: &'static str,
    kind: ConvKind,
    args: &Args,
    ds: &Dataset,
    data: &DeviceData,
    device: &Device,
) -> Result<(Gnn, TrainReport, f64)> {
    let tf = args.train.resolve(&RECIPE);
    let mut cfg = ModelConfig::new(
        kind,
        ds.features.cols(),
        tf.hidden,
        ds.num_classes,
        tf.layers,
        tf.dropout,
    );
    cfg.input_dropout = tf.input_dropout;
    cfg.layer_norm = tf.layer_norm;
    if let (Some(k), true) = (args.maxk.maxk, kind != ConvKind::Mlp) {
        cfg.activation = gnn::models::Activation::MaxK { k };
    }
    let t = Instant::now();
    let graph = on_oom(ModelGraph::new(&ds.graph, kind, device), device, || {
        (
            format!("uploading the graph ({} edges) for {kind}", ds.graph.nnz()),
            None,
        )
    })?;
    let prep = t.elapsed().as_secs_f64();
    let params: u64 = (0..cfg.layers)
        .map(|l| cfg.layer_dims(l))
        .map(|(i, o)| (i as u64 + 1) * o as u64)
        .sum();
    let model = on_oom(Gnn::new(cfg, device, args.seed), device, || {
        (
            format!("allocating the model's parameters (at least {params} floats)"),
            Some(4 * params),
        )
    })?;
    println!(
        "{name}: {kind} ({}), {} layers x {} hidden, {} parameters (graph prepared in {prep:.2} s)",
        model.config().activation,
        tf.layers,
        tf.hidden,
        model.num_params()
    );
    // Checkpoints and resumption belong to the GNN run, not to the MLP baseline.
    let gnn_run = kind != ConvKind::Mlp || args.model == ConvKind::Mlp;
    let tc = TrainConfig {
        epochs: tf.epochs,
        lr: tf.lr,
        weight_decay: tf.weight_decay,
        optimizer: tf.optimizer,
        eval_every: tf.eval_every,
        seed: args.seed,
        profile: true,
        checkpoint_every: if gnn_run { args.checkpoint_every } else { 0 },
        checkpoint: gnn_run.then(|| {
            args.checkpoint.clone().unwrap_or_else(|| {
                PathBuf::from(format!("runs/checkpoints/{}-{}", args.model, ds.name))
            })
        }),
        ..TrainConfig::default()
    };
    let resume = match (&args.resume, gnn_run) {
        (Some(p), true) => {
            let st = TrainState::load(p, device)?;
            println!(
                "{name}: resuming from {} at epoch {}",
                p.display(),
                st.meta.epoch
            );
            Some(st)
        }
        _ => None,
    };
    let bar =
        progress::EpochProgress::new(name, tf.epochs, resume.as_ref().map_or(0, |s| s.meta.epoch));
    let report = train_from(&model, &graph, data, &tc, resume.as_ref(), |log| {
        bar.epoch(log)
    })?;
    drop(bar);
    if let (true, Some(p)) = (tc.checkpoint_every > 0, &tc.checkpoint) {
        println!("{name}: checkpoints in {}", p.display());
    }
    Ok((model, report, prep))
}

fn main() -> Result<()> {
    let args = Args::parse();
    gnn::kernels::set_deterministic(args.deterministic);
    let device = gnn::train::pick_device(args.train.cpu)?;
    println!("device: {}", gnn::train::device_name(&device));
    let t_all = Instant::now();
    let (ds, source) = load(&args, &device)?;
    println!("{}", ds.summary());
    let data = DeviceData::new(&ds, &device, false)?;

    let (model, gnn, prep) = run("gnn", args.model, &args, &ds, &data, &device)?;
    println!(
        "{}: test accuracy {:.2} % (val {:.2} % at epoch {}), median epoch {:.1} ms, inference {:.1} ms",
        args.model,
        100.0 * gnn.test_acc,
        100.0 * gnn.best_val_acc,
        gnn.best_epoch,
        gnn.epoch_ms_median,
        gnn.inference_ms_median
    );
    if let Some(b) = gnn.peak_device_bytes {
        println!(
            "peak device memory in use (sampled, driver view): {:.2} GiB",
            b as f64 / (1u64 << 30) as f64
        );
    }
    println!(
        "timing breakdown ({}, mean over {} epochs after warm-up):\n{}",
        args.model,
        gnn.breakdown.epochs,
        gnn.breakdown.table()
    );

    let mlp = if args.no_baseline {
        None
    } else {
        let (_, rep, _) = run("mlp", ConvKind::Mlp, &args, &ds, &data, &device)?;
        Some(rep)
    };
    println!("\nresult on {}:", ds.name);
    println!(
        "  {:<6} test accuracy {:>6.2} %",
        args.model.to_string(),
        100.0 * gnn.test_acc
    );
    if let Some(m) = &mlp {
        println!(
            "  {:<6} test accuracy {:>6.2} %  (features only, same data)",
            "mlp",
            100.0 * m.test_acc
        );
        println!(
            "  gain over MLP: {:+.2} points",
            100.0 * (gnn.test_acc - m.test_acc)
        );
    }

    let stem = args
        .save
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("runs/weights/{}-{}", args.model, ds.name)));
    let info = serde_json::json!({"dataset": ds.name, "test_acc": gnn.test_acc, "val_acc": gnn.best_val_acc, "epochs": gnn.epochs_run});
    let (st, _) = model.save(&stem, info)?;
    println!("saved weights to {}", st.display());

    let doc = serde_json::json!({
        "dataset": ds.summary(),
        "source": source,
        "device": gnn::train::device_name(&device),
        "threads": rayon_threads(),
        "args": format!("{args:?}"),
        "graph_prep_s": prep,
        "deterministic": args.deterministic,
        "gnn": { "model": model.config(), "report": without_history(&gnn), "breakdown": gnn.breakdown.rows(),
                 "loss_curve": gnn.history.iter().map(|h| h.loss).collect::<Vec<_>>() },
        "mlp": mlp.as_ref().map(without_history),
        "total_s": t_all.elapsed().as_secs_f64(),
    });
    if let Some(dir) = args.json.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&args.json, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing {}", args.json.display()))?;
    println!(
        "wrote {} (total {:.1} s)",
        args.json.display(),
        t_all.elapsed().as_secs_f64()
    );
    Ok(())
}

fn without_history(r: &TrainReport) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("history");
    }
    v
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
