//! The main job: full-batch training on Reddit.
//!
//! With `--data-dir` pointing at DGL's `reddit_data.npz` + `reddit_graph.npz` (or any format
//! `gnn::graph::load_auto` detects) it trains on those files; otherwise it generates a seeded
//! Reddit-shaped graph (232,965 nodes, ~114.6 M edges, 602 features, 41 classes) at `--scale`
//! (on the CPU the default scale is 0.2 so the run finishes in a few minutes on 2 cores). It
//! trains the chosen GNN and, on the same data, an MLP baseline, prints both accuracies and
//! the per-phase timing breakdown, writes a JSON report and saves the GNN's weights under
//! `runs/weights/` (the shipped checkpoints in `weights/` are never overwritten unless
//! `--save` names them). All of it is `gnn::train::run::run`.
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

use anyhow::Result;
use clap::Parser;
use gnn::models::ConvKind;
use gnn::train::cli::{DataFlags, Hinted, MaxkFlag, Recipe, TrainFlags};
use gnn::train::run::{run, RunConfig, Save};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    about = "Full-batch GNN training on Reddit (DGL files) or a Reddit-shaped synthetic graph"
)]
struct Args {
    #[command(flatten)]
    data: DataFlags,
    /// Model: gcn, sage, sage-pool, gin, gat, transformer.
    #[arg(long, default_value = "gcn")]
    model: ConvKind,
    #[command(flatten)]
    train: TrainFlags,
    #[command(flatten)]
    maxk: MaxkFlag,
    /// Seed (graph generation, initialisation, dropout).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Skip the MLP baseline.
    #[arg(long)]
    no_baseline: bool,
    /// No per-phase breakdown: the phase timers synchronise the device around every layer's
    /// sparse and dense work, which costs a few percent of a GPU epoch; without them the epoch
    /// times are what an uninstrumented run takes (as PyG's are measured).
    #[arg(long)]
    no_profile: bool,
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
    /// Continue from this training checkpoint (same model, data and recipe; --epochs may grow).
    #[arg(long)]
    resume: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut cfg = RunConfig::new(
        args.data.source("reddit", args.seed)?,
        args.train.model(args.model, &Recipe::REDDIT),
    );
    cfg.model.maxk = args.maxk.maxk;
    cfg.model.maxk_after_first = args.maxk.maxk_after_first;
    cfg.reorder = args.data.reorder_choice();
    cfg.row_normalize = false;
    cfg.train = args.train.train(&Recipe::REDDIT);
    cfg.train.seed = args.seed;
    cfg.train.profile = !args.no_profile;
    cfg.train.checkpoint_every = args.checkpoint_every;
    cfg.train.checkpoint = args.checkpoint.clone();
    cfg.baseline = !args.no_baseline;
    cfg.resume = args.resume.clone();
    cfg.save = args.save.clone().map_or(Save::Default, Save::At);
    cfg.json = Some(args.json.clone());
    cfg.epoch_lines = true;
    cfg.print_breakdown = true;
    cfg.cpu = args.train.device.cpu;
    cfg.kernels = args.train.device.policy()?;
    cfg.note = format!("{args:?}");
    run(&cfg).map_err(Hinted)?;
    Ok(())
}
