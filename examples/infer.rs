//! Inference with the engine (`gnn::train::sweep::inference`): a trained model on its graph
//! with exact or edge-sampled aggregation (ES-SpMM `bucket:S` / `fastrand:S`, AES-SpMM
//! `aes:W`) and f32 or INT8 features, reporting test accuracy and the end-to-end split into
//! feature loading, aggregation, GEMM and other work.
//!
//! ```text
//! cargo run --release --example infer -- --weights weights/gcn-cora --aggregation aes:32 --int8
//! cargo run --release --features cuda --example infer -- --dataset reddit \
//!     --weights runs/gcn --weights runs/sage --sweep --out runs/infer-sweep
//! cargo run --release --example infer -- --weights weights/gcn-cora --reorder louvain \
//!     --predictions runs/pred.npz
//! ```
//!
//! `--sweep` runs every strategy at every width (default 16..1024) with both feature
//! encodings and writes `sweep.json`, `sweep.md` and `sweep.svg` (accuracy loss and
//! aggregation speed-up against width) under `--out`. On a GPU build the aggregation time is
//! compared with cuSPARSE's CSR SpMM on the same operands and widths, in the same run.

use anyhow::Result;
use clap::Parser;
use gnn::models::Aggregation;
use gnn::train::cli::{DataFlags, DeviceFlag};
use gnn::train::infer::sampler_order_warning;
use gnn::train::run::{load, reorder};
use gnn::train::sweep::inference::InferSweep;
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "Inference with exact or sampled aggregation and f32/INT8 features")]
struct Args {
    /// Trained model: checkpoint stem or `.safetensors` (repeat for several with --sweep).
    #[arg(long, required = true)]
    weights: Vec<PathBuf>,
    #[command(flatten)]
    data: DataFlags,
    /// Seed of a generated graph (the one the model was trained with).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Aggregation: exact, bucket:S, fastrand:S or aes:W.
    #[arg(long, default_value = "exact")]
    aggregation: Aggregation,
    /// Load the features as INT8 (per-feature min/max quantisation, dequantised on the device).
    #[arg(long)]
    int8: bool,
    /// Read the features from this file (written by --save-features) instead of the dataset.
    #[arg(long)]
    features: Option<PathBuf>,
    /// Write the features (INT8 with --int8) to this safetensors file.
    #[arg(long)]
    save_features: Option<PathBuf>,
    /// Sweep strategies x widths x feature encodings.
    #[arg(long)]
    sweep: bool,
    /// Sweep widths.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "16,32,64,128,256,512,1024"
    )]
    widths: Vec<usize>,
    /// Sweep strategies.
    #[arg(long, value_delimiter = ',', default_value = "bucket,fastrand,aes")]
    strategies: Vec<String>,
    /// Timed forward passes per setting (median reported), after two warm-ups.
    #[arg(long, default_value_t = 10, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    reps: usize,
    /// Output folder (JSON, Markdown table, SVG chart).
    #[arg(long, default_value = "runs/infer")]
    out: PathBuf,
    /// Write per-node predictions (`pred` int64 [N], `logits` float32 [N, C]) to this `.npz`,
    /// rows in the file's node order even under --reorder (one model, no --sweep).
    #[arg(long)]
    predictions: Option<PathBuf>,
    /// Device storage of features and activations: f32, bf16 or f16 (exact or sampled
    /// aggregation; fp32 accumulation inside the kernels; GPU only).
    #[arg(long, default_value = "f32")]
    precision: gnn::train::Precision,
    #[command(flatten)]
    device: DeviceFlag,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let device = args.device.pick()?;
    println!("device: {}", gnn::train::device_name(&device));
    let mut loaded = load(&args.data.source("cora", args.seed)?, device.is_cpu())?;
    // `auto` keeps the file's ids here: the samplers are biased under a degree order (see
    // sampler_order_warning), and a --features file from an earlier run holds its rows in
    // that run's order.
    let how = args.data.reorder_choice().without_auto();
    let (applied, _) = reorder(&mut loaded, how)?;
    let community_ids = args.data.community_order;
    let strategies: Vec<Aggregation> = if args.sweep {
        args.strategies
            .iter()
            .map(|s| format!("{s}:16").parse())
            .collect::<Result<_, _>>()?
    } else {
        vec![args.aggregation]
    };
    for agg in strategies {
        if let Some(w) = sampler_order_warning(agg, applied, community_ids) {
            println!("warning: {w}");
        }
    }
    let sweep = InferSweep {
        weights: args.weights,
        aggregation: args.aggregation,
        int8: args.int8,
        sweep: args.sweep,
        widths: args.widths,
        strategies: args.strategies,
        reps: args.reps,
        row_normalize: !loaded.raw_features,
        features: args.features,
        save_features: args.save_features,
        out: args.out,
        predictions: args.predictions,
        new_of_old: loaded.new_of_old.take(),
        precision: args.precision,
        kernels: args.device.policy()?,
    };
    sweep.run(&loaded.dataset, &device)?;
    Ok(())
}
