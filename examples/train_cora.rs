//! Trains GCN / GraphSAGE / GIN on a small graph (bundled Cora by default) over several seeds
//! and reports the mean test accuracy at the best validation epoch. Defaults follow each
//! model's paper where it gives a Planetoid recipe (GCN: Kipf & Welling's; GAT: Veličković et
//! al.'s 8 heads x 8, dropout 0.6, lr 0.005), else GCN's; explicit flags override them, and the
//! run header prints the recipe in force. `--data-dir` takes any
//! format `gnn::graph::load_auto` detects: Planetoid raw folders, gnn-benchmark `.npz` files
//! (PyG's CitationFull / Amazon / Coauthor; 20 / 30 / rest per class from `--split-seed`),
//! edge-list folders, OGB raw folders, DGL Reddit. All of it is `gnn::train::run::run`.
//!
//! ```text
//! cargo run --release --example train_cora -- --model gcn --seeds 5
//! cargo run --release --example train_cora -- --data-dir ~/data/CiteSeer/raw --dataset citeseer
//! cargo run --release --example train_cora -- --data-dir ~/data/Amazon/Computers/raw/amazon_electronics_computers.npz
//! cargo run --release --example train_cora -- --data-dir my_graph/   # edges.txt, features.npy, labels.npy
//! ```

use anyhow::Result;
use clap::Parser;
use gnn::models::ConvKind;
use gnn::train::{
    cli::{recipe_line, DataFlags, Hinted, MaxkFlag, Recipe, TrainFlags},
    run::{run, RunConfig, Save},
};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    about = "Full-batch GNN training on a small graph: Planetoid, gnn-benchmark npz, edge-list folder"
)]
struct Args {
    /// Model: gcn, sage, sage-pool, gin, gat, transformer, mlp.
    #[arg(long, default_value = "gcn")]
    model: ConvKind,
    /// Number of seeds (runs) to average over.
    #[arg(long, default_value_t = 5)]
    seeds: u64,
    #[command(flatten)]
    data: DataFlags,
    #[command(flatten)]
    train: TrainFlags,
    #[command(flatten)]
    maxk: MaxkFlag,
    /// Keep raw features (default: row-normalised, as in the GCN paper).
    #[arg(long)]
    no_row_normalize: bool,
    /// Save the best seed's model under this stem (default runs/weights/<model>-<dataset>).
    #[arg(long)]
    save: Option<PathBuf>,
    /// Do not save weights.
    #[arg(long)]
    no_save: bool,
    /// Print the per-phase timing breakdown of each seed.
    #[arg(long)]
    profile: bool,
    /// Write the per-seed results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let recipe = Recipe::planetoid(args.model);
    let mut cfg = RunConfig::new(
        args.data.source("cora", 0)?,
        args.train.model(args.model, &recipe),
    );
    cfg.model.maxk = args.maxk.maxk;
    cfg.model.maxk_after_first = args.maxk.maxk_after_first;
    cfg.reorder = args.data.reorder_choice();
    cfg.row_normalize = !args.no_row_normalize;
    cfg.train = args.train.train(&recipe);
    cfg.train.profile = args.profile;
    cfg.seeds = args.seeds;
    cfg.save = match (args.no_save, &args.save) {
        (true, _) => Save::No,
        (false, Some(p)) => Save::At(p.clone()),
        (false, None) => Save::Default,
    };
    cfg.json = args.json.clone();
    cfg.print_breakdown = args.profile;
    cfg.cpu = args.train.device.cpu;
    cfg.kernels = args.train.device.policy()?;
    cfg.note = format!("{args:?}");
    println!("{}", recipe_line(&recipe, &cfg.model, &cfg.train));
    run(&cfg).map_err(Hinted)?;
    Ok(())
}
