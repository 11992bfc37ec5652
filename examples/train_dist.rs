//! Multi-device full-batch training (`gnn::train::dist`): the graph's nodes split into
//! `--ranks` parts balanced by non-zeros (contiguous ranges, or METIS parts with the nodes
//! renumbered once so each part is a range: `--partition`), one rank per thread, halo rows
//! exchanged before every aggregation, gradients all-reduced every step.
//!
//! With `--nccl` (a build with `--features nccl`) rank `r` runs on GPU `r` and talks through
//! NCCL. Without it the ranks share one device (the first GPU, or the CPU with `--cpu`) and
//! talk through in-process channels: the same partitioned computation, useful to check it and
//! to read the communication volume, not to go faster.
//!
//! It prints the partition's halo sizes for 1..=ranks parts (rows each rank receives per
//! exchange, the communication volume per layer), the partition chosen and why, with its
//! edge cut and halo rows per rank (`--stats-only`: of both range and METIS), trains, and
//! prints rank 0's per-phase
//! breakdown with the communication phase, each rank's epoch time and peak memory; the JSON
//! report holds all of it.
//!
//! With `--nccl-id-file PATH` the process runs one rank (`RANK` of `WORLD_SIZE` on GPU
//! `LOCAL_RANK`, from the environment as torchrun sets them; rank 0 writes the NCCL id to
//! `PATH`, the others read it): one process per GPU, on one host or several.
//!
//! NCCL runs with at most 4 point-to-point channels (`gnn::train::dist::P2P_CHANNELS`) unless
//! `NCCL_MAX_P2P_NCHANNELS` is set. Where memory is tight, `NCCL_MAX_NCHANNELS=4` caps the
//! collectives' channels too (a further 0.36 GiB per GPU on two H100s, the scale-1 GCN epoch
//! unchanged; not measured for the models whose exchange is an all-gather).
//!
//! All of it is `gnn::train::dist::run`; a failed rank under `--nccl` ends the process
//! (`gnn::train::dist::Launch`).
//!
//! ```text
//! cargo run --release --example train_dist -- --cpu --ranks 3 --scale 0.05 --epochs 20
//! cargo run --release --features nccl --example train_dist -- --nccl --ranks 2 --scale 1
//! # two processes (two hosts: the same, with a shared path and NCCL's network variables)
//! RANK=0 WORLD_SIZE=2 train_dist --nccl-id-file /shared/id --scale 1 &
//! RANK=1 WORLD_SIZE=2 train_dist --nccl-id-file /shared/id --scale 1
//! ```

use anyhow::{bail, Result};
use clap::Parser;
use gnn::graph::{Exchange, Partitioner};
use gnn::models::ConvKind;
use gnn::train::cli::{DataFlags, MaxkFlag, Recipe, TrainFlags};
use gnn::train::dist::{run, DistConfig, Launch, ProcessRank};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(about = "Multi-device full-batch GNN training over a 1-D node partition")]
struct Args {
    #[command(flatten)]
    data: DataFlags,
    /// Model: gcn, sage, gin (GAT and the transformer do not partition yet).
    #[arg(long, default_value = "gcn")]
    model: ConvKind,
    #[command(flatten)]
    train: TrainFlags,
    #[command(flatten)]
    maxk: MaxkFlag,
    /// Seed (graph generation, initialisation, dropout).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Number of ranks (partitions).
    #[arg(long, default_value_t = 2)]
    ranks: usize,
    /// One GPU per rank (GPUs 0..ranks), NCCL between them (needs --features nccl).
    #[arg(long)]
    nccl: bool,
    /// Print the halo statistics (edge cut and halo rows of both the range and the METIS
    /// partition) and stop.
    #[arg(long)]
    stats_only: bool,
    /// How nodes are split over ranks: range (contiguous ids balanced by non-zeros), metis
    /// (METIS k-way, minimum edge cut, non-zeros balanced within 3 %; the nodes renumbered
    /// once so each part is a range), auto (metis when the mean row length is below 100, a
    /// sparse graph whose halo follows the edge cut; range otherwise).
    #[arg(long, default_value = "auto")]
    partition: Partitioner,
    /// METIS sees at most this many undirected edges (its ids are 32-bit, and its run time
    /// grows with them): above it, a hash sample of the edges stands for the graph.
    #[arg(long, default_value_t = gnn::graph::partitioner::MAX_METIS_EDGES)]
    metis_max_edges: usize,
    /// Write every node's predictions after training to this `.npz` (`pred`, `logits`; row
    /// `i` is node `i` of the loaded file, whatever the partition's renumbering).
    #[arg(long)]
    predictions: Option<PathBuf>,
    /// How ranks exchange rows: auto (all-gather when the halos are at least 3/4 of its
    /// volume, point-to-point otherwise), p2p, or allgather.
    #[arg(long, default_value = "auto")]
    exchange: String,
    /// Multi-process NCCL: this process runs one rank, `RANK` of `WORLD_SIZE` (environment,
    /// as torchrun sets them) on GPU `LOCAL_RANK` (default: RANK); rank 0 writes the NCCL id
    /// to this file (on a file system every rank reads), the others wait for it. Start one
    /// process per GPU, on one host or several.
    #[arg(long)]
    nccl_id_file: Option<PathBuf>,
    /// Run each aggregation as the exchange followed by the SpMM (two ops, the local graph's
    /// transpose in the backward) even where the operand is symmetric and the exchange the
    /// all-gather, which otherwise fuse into one op that keeps less memory; for comparison.
    #[arg(long)]
    split_aggregation: bool,
    /// Under that one op, the local graph is stored as column slices, one per rank's block
    /// of the gathered rows (the own block's slice runs while the others' rows are in
    /// flight); this cuts each block further into slices of at most this many rows; 0 keeps
    /// the graph whole (no overlap). MaxK, max and GraphSAGE's mean keep it whole.
    #[arg(long)]
    gather_slice_rows: Option<usize>,
    /// Run the sliced aggregation's own-block slices after each exchange instead of while it
    /// is in flight (NCCL; for measuring what the overlap gains).
    #[arg(long)]
    no_overlap: bool,
    /// Where to write the JSON report.
    #[arg(long, default_value = "runs/train_dist.json")]
    json: PathBuf,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.ranks == 0 {
        bail!("--ranks must be >= 1");
    }
    if (args.nccl || args.nccl_id_file.is_some()) && !cfg!(feature = "nccl") {
        bail!("--nccl and --nccl-id-file need a build with --features nccl");
    }
    let mut cfg = DistConfig::new(
        args.data.source("reddit", args.seed)?,
        args.train.model(args.model, &Recipe::REDDIT),
    );
    cfg.model.maxk = args.maxk.maxk;
    cfg.model.maxk_after_first = args.maxk.maxk_after_first;
    cfg.reorder = args.data.reorder;
    cfg.train = args.train.train(&Recipe::REDDIT);
    cfg.train.seed = args.seed;
    cfg.train.profile = true;
    cfg.ranks = args.ranks;
    cfg.launch = match &args.nccl_id_file {
        Some(path) => Launch::Process(ProcessRank::from_env(path)?),
        None if args.nccl => Launch::Nccl,
        None => Launch::InProcess,
    };
    cfg.cpu = args.train.device.cpu;
    cfg.kernels = args.train.device.policy()?;
    cfg.exchange = match args.exchange.as_str() {
        "auto" => None,
        e => Some(e.parse::<Exchange>()?),
    };
    cfg.partition = args.partition;
    cfg.metis.max_edges = args.metis_max_edges;
    cfg.predictions = args.predictions.clone();
    cfg.split_aggregation = args.split_aggregation;
    if let Some(rows) = args.gather_slice_rows {
        cfg.slice_rows = (rows > 0).then_some(rows);
    }
    cfg.overlap = !args.no_overlap;
    cfg.stats_only = args.stats_only;
    cfg.json = args.json.clone();
    cfg.note = format!("{args:?}");
    run(&cfg)?;
    Ok(())
}
