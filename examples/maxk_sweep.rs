//! MaxK-GNN training sweep (`gnn::train::sweep::maxk`): for each model (GCN, GraphSAGE, GIN)
//! trains the ReLU version and the MaxK version at every k on one dataset (the Reddit-shaped
//! graph or Cora), and reports test accuracy, median epoch time, epochs to convergence, the
//! speed-up over our ReLU model and over PyG (from a peer JSON measured on the same GPU), and
//! the per-phase epoch breakdown (the shapes of the MaxK-GNN paper's Fig. 1, Fig. 9, Table 5).
//!
//! Writes `sweep.json`, `sweep.md`, `accuracy_time.svg` and `breakdown.svg` under `--out`;
//! `--append` merges into an existing `sweep.json` (one model per invocation keeps each run
//! short), `--replot` only redraws the table and charts from `sweep.json`. Recipes follow
//! `train_cora` on Cora (input dropout 0.5, weight decay 5e-4) and `train_reddit` on Reddit;
//! 4-layer GIN needs `--lr 0.001`.
//!
//! ```text
//! cargo run --release --example maxk_sweep -- --dataset cora --k 16,32,64 --seeds 2
//! cargo run --release --features cuda --example maxk_sweep -- --dataset reddit --models gcn \
//!     --k 8,16,32,64,128 --pyg pyg_4x256.json --out runs/maxk_sweep
//! ```

use anyhow::Result;
use clap::Parser;
use gnn::models::ConvKind;
use gnn::train::cli::{DataFlags, Recipe, TrainFlags};
use gnn::train::run::{load, DataSource};
use gnn::train::sweep::maxk::{Doc, MaxkSweep};
use gnn::train::DeviceData;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(about = "MaxK-GNN training sweep: accuracy and epoch time per k against ReLU and PyG")]
struct Args {
    #[command(flatten)]
    train: TrainFlags,
    #[command(flatten)]
    data: DataFlags,
    /// Models.
    #[arg(long, value_delimiter = ',', default_value = "gcn,sage,gin")]
    models: Vec<ConvKind>,
    /// Values of k (the ReLU model always runs too).
    #[arg(long, value_delimiter = ',', default_value = "8,16,32,64,96,128,192")]
    k: Vec<usize>,
    /// Epochs of the profiled breakdown run (the first 3 are warm-up).
    #[arg(long, default_value_t = 15)]
    profile_epochs: usize,
    /// Seeds per configuration (accuracy is their mean; time is seed 0's).
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// PyG reference JSON (`pyg_epochs.<model>_<layers>x<hidden>.train_epoch_ms`).
    #[arg(long)]
    pyg: Option<PathBuf>,
    /// MaxK from the second layer on, the first layer as the ReLU model's (see train_reddit's
    /// --maxk-after-first).
    #[arg(long)]
    maxk_after_first: bool,
    /// Output folder.
    #[arg(long, default_value = "runs/maxk_sweep")]
    out: PathBuf,
    /// Merge into an existing `sweep.json` in --out instead of replacing it.
    #[arg(long)]
    append: bool,
    /// Train nothing: rewrite `sweep.md` and the charts from `sweep.json` in --out (e.g. after
    /// merging the JSON of several runs).
    #[arg(long)]
    replot: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let json = args.out.join("sweep.json");
    if args.replot {
        return Ok(Doc::load(&json)?.write_tables(&args.out)?);
    }
    let dataset = args.data.name("cora").to_string();
    let source = args.data.source("cora", 0)?;
    let small = matches!(source, DataSource::Files { .. });
    // 4 x 256, 200 epochs; the Planetoid recipe's decay and input dropout on small graphs.
    let recipe = Recipe {
        layers: 4,
        hidden: 256,
        epochs: 200,
        weight_decay: if small { 5e-4 } else { 0.0 },
        input_dropout: Some(if small { 0.5 } else { 0.0 }),
        eval_every: 5,
        source: "maxk_sweep's 4 x 256",
        ..Recipe::PLANETOID
    };
    let mut sweep = MaxkSweep {
        dataset,
        models: args.models.clone(),
        ks: args.k.clone(),
        model: gnn::train::run::ModelSpec {
            maxk_after_first: args.maxk_after_first,
            ..args.train.model(ConvKind::Gcn, &recipe)
        },
        train: args.train.train(&recipe),
        seeds: args.seeds,
        profile_epochs: args.profile_epochs,
        pyg: args.pyg.clone(),
        kernels: args.train.device.policy()?,
    };
    let device = args.train.device.pick()?;
    println!("device: {}", gnn::train::device_name(&device));
    let ds = load(&source, device.is_cpu())?.dataset;
    if args.data.dataset.is_none() && args.data.data_dir.is_some() {
        // A folder's rows carry its dataset's name, not the default `cora`.
        sweep.dataset = ds.name.clone();
    }
    let data = DeviceData::new(&ds, &device, small)?.with_precision(args.train.precision)?;
    let mut doc = match (args.append, json.exists()) {
        (true, true) => Doc::load(&json)?,
        _ => Doc::default(),
    };
    sweep.run(&ds, &data, &device, &mut doc)?;
    Ok(doc.write(&args.out)?)
}
