//! Multi-device full-batch training (`gnn::train::dist`): the graph's nodes split into
//! `--ranks` parts balanced by non-zeros (contiguous ranges, or METIS parts with the nodes
//! renumbered once so each part is a range: `--partition`), one rank per thread, halo rows
//! exchanged before every aggregation (GAT and the transformer: their projected rows, each
//! rank's edge softmax over its own rows), gradients all-reduced every step.
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
//! One process per GPU, on one host or several: with `--tcp-rendezvous` the process runs one
//! rank and gets rank 0's NCCL id over TCP at `MASTER_ADDR:MASTER_PORT` (no shared file);
//! with `--nccl-id-file PATH` rank 0 writes it to `PATH` and the others read it. The rank, the
//! world size and the GPU come from `--rank`/`--world-size`/`--local-rank`, else torchrun's
//! `RANK`/`WORLD_SIZE`/`LOCAL_RANK`, else Slurm's `SLURM_PROCID`/`SLURM_NTASKS`/
//! `SLURM_LOCALID` (`gnn::train::dist::ProcessRank::from_env`).
//!
//! Faults: a collective that does not finish within `--comm-timeout` seconds (default 45)
//! aborts the communicator and the rank exits with an error naming itself, the epoch and
//! phase, and the ranks it waited for; a rank that fails makes the in-process ranks fail at
//! once. `--checkpoint-every N` has rank 0 save the training state every N epochs, and
//! `--resume STEM` continues from it (with any number of ranks).
//!
//! Memory: before allocating, every rank's peak is estimated (`gnn::train::dist::memory`:
//! the features, the cached input aggregation, the local graph, the activations kept for the
//! backward and the step's transient high) and printed; a run that does not fit
//! `--max-memory` (default: the GPU's memory less 2 GiB and NCCL's channel buffers) stops
//! with the estimate and what to change. The fused aggregation runs in feature chunks
//! (`--feature-chunk`) chosen to fit.
//!
//! NCCL runs with at most 32 point-to-point channels (`gnn::train::dist::P2P_CHANNELS`: the
//! ring exchange's shifts, 1,058.5 -> 880.1 ms per papers100M-sized GCN 3x128 epoch on 4
//! H100s against 4 channels) unless `NCCL_MAX_P2P_NCHANNELS` is set; the budget leaves NCCL
//! about 13 MiB per channel and peer. Where memory is tight, `NCCL_MAX_P2P_NCHANNELS=4` gives
//! that back and `NCCL_MAX_NCHANNELS=4` caps the collectives' channels too (a further
//! 0.36 GiB per GPU on two H100s, the scale-1 GCN epoch unchanged; not measured for the
//! models whose exchange is an all-gather).
//!
//! All of it is `gnn::train::dist::run`; a failed rank under `--nccl` ends the process
//! (`gnn::train::dist::Launch`).
//!
//! ```text
//! cargo run --release --example train_dist -- --cpu --ranks 3 --scale 0.05 --epochs 20
//! cargo run --release --features nccl --example train_dist -- --nccl --ranks 2 --scale 1
//! # two processes, TCP rendezvous (two hosts: the same, with rank 0's host as MASTER_ADDR)
//! export MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 WORLD_SIZE=2
//! RANK=0 train_dist --tcp-rendezvous --scale 1 --checkpoint-every 10 &
//! RANK=1 train_dist --tcp-rendezvous --scale 1 --checkpoint-every 10
//! # Slurm: srun -N2 --ntasks-per-node=4 --gpus-per-task=1 train_dist --tcp-rendezvous ...
//! ```

use anyhow::{bail, Result};
use clap::Parser;
use gnn::comm::Fault;
use gnn::graph::{Exchange, Partitioner};
use gnn::models::ConvKind;
use gnn::train::cli::{DataFlags, MaxkFlag, Recipe, TrainFlags};
use gnn::train::dist::{run, DistConfig, Launch, ProcessRank, RankFlags, Rendezvous};
use std::path::PathBuf;
use std::time::Duration;

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
    /// Multi-process NCCL: this process runs one rank (see --rank); rank 0 writes the NCCL id
    /// to this file (on a file system every rank reads), the others wait for it. Start one
    /// process per GPU, on one host or several.
    #[arg(long)]
    nccl_id_file: Option<PathBuf>,
    /// Multi-process NCCL: this process runs one rank (see --rank); rank 0 listens on
    /// MASTER_PORT and hands the NCCL id to the others, which connect to MASTER_ADDR (no
    /// shared file). Implied by --master-addr.
    #[arg(long)]
    tcp_rendezvous: bool,
    /// Rank 0's host for the TCP rendezvous [default: $MASTER_ADDR].
    #[arg(long)]
    master_addr: Option<String>,
    /// Rank 0's port for the TCP rendezvous [default: $MASTER_PORT, else 29500].
    #[arg(long)]
    master_port: Option<u16>,
    /// Seconds a rank waits for rank 0 at the rendezvous, and rank 0 for the others.
    #[arg(long, default_value_t = 600)]
    rendezvous_timeout: u64,
    /// One rank per process: this process's rank [default: $RANK, else $SLURM_PROCID].
    #[arg(long)]
    rank: Option<usize>,
    /// One rank per process: ranks in all [default: $WORLD_SIZE, else $SLURM_NTASKS].
    #[arg(long)]
    world_size: Option<usize>,
    /// One rank per process: its GPU on this host [default: $LOCAL_RANK, else
    /// $SLURM_LOCALID, else the rank; device 0 where CUDA_VISIBLE_DEVICES shows one GPU].
    #[arg(long)]
    local_rank: Option<usize>,
    /// Seconds one collective may take before the rank's watchdog aborts the communicator
    /// and the rank exits with an error naming it and the epoch (0: no watchdog).
    #[arg(long, default_value_t = 45)]
    comm_timeout: u64,
    /// Rank 0 saves the training state (weights, Adam moments, dropout stream, epoch) every
    /// N epochs (0: never).
    #[arg(long, default_value_t = 0)]
    checkpoint_every: usize,
    /// Checkpoint stem [default: runs/checkpoints/dist-<model>-<dataset>].
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Continue from this checkpoint (same model, data and recipe; any number of ranks;
    /// --epochs may grow). Every rank reads it.
    #[arg(long)]
    resume: Option<PathBuf>,
    /// Fault test: rank RANK fails at its first collective of epoch EPOCH, as
    /// RANK:EPOCH[:KIND]; KIND error (default), panic, or stall (hangs outside communication
    /// until the group is aborted: in one process, once the others time out; a process of a
    /// multi-process run hangs until killed).
    #[arg(long)]
    inject_fault: Option<Fault>,
    /// Run each aggregation as the exchange followed by the SpMM (two ops, the local graph's
    /// transpose in the backward) even where the operand is symmetric and the exchange the
    /// all-gather, which otherwise fuse into one op that keeps less memory; for comparison.
    #[arg(long)]
    split_aggregation: bool,
    /// Where every rank's output layer runs on its labelled rows alone and the model is a
    /// GCN whose output layer aggregates first, the ranks aggregate those rows alone (one
    /// reduce-scatter of them forward, one all-gather of their gradient backward); this
    /// keeps the whole aggregation and exchange followed by the selection, for comparison.
    #[arg(long)]
    whole_output_aggregation: bool,
    /// After the partition, renumber each rank's nodes by descending degree within its own
    /// range (the partition and its halos stay; each block of gathered rows has its hubs
    /// first). On 4 H100s it took GCN 3x128 on the papers-shaped graph from 84.4 to 72.5 ms
    /// per epoch at scale 0.1 and from 880.1 to 831.0 ms at full size, for 6.7 s and 74.7 s
    /// of set-up when the plan was built again on the new ids (it now keeps its halos and
    /// symmetry, which were 36 of the 75 s; not re-timed): it repays after hundreds of
    /// epochs, so `--reorder auto` does not turn it on. (--reorder degree instead sorts
    /// before the partition, which on 4 GPUs made the scale-0.1 epoch 2.9x slower.)
    #[arg(long)]
    degree_within_parts: bool,
    /// Under that one op, the local graph is stored as column slices, one per rank's block
    /// of the gathered rows (the own block's slice runs while the others' rows are in
    /// flight); this cuts each block further into slices of at most this many rows; 0 keeps
    /// the graph whole (no overlap). MaxK and max keep it whole; GraphSAGE's mean too, unless
    /// this is below the gathered rows (all ranks' blocks) or feature chunks are on: a mean
    /// over slices divides afterwards, in f32, which cost more than the overlap saved at
    /// scale 1 on two GPUs. Without this flag, three or more ranks whose gathered operand is
    /// at most 256 MiB keep the graph whole too (`gnn::train::dist::WHOLE_GATHER_BYTES`:
    /// the per-block passes cost more than the exchange hidden); a value given is kept
    /// (18446744073709551615: one slice per rank's block wherever the model slices at all).
    #[arg(long)]
    gather_slice_rows: Option<usize>,
    /// Run the sliced aggregation's own-block slices after each exchange instead of while it
    /// is in flight (NCCL; for measuring what the overlap gains).
    #[arg(long)]
    no_overlap: bool,
    /// GiB one rank may use: before anything is allocated, each rank's peak is estimated
    /// (printed, with its components) and the run stops, naming what to change, when it does
    /// not fit (in-process ranks sharing a device or the CPU: all of them together). Default:
    /// the GPU's memory less 2 GiB and NCCL's channel buffers (13 MiB per point-to-point
    /// channel past 4 and peer); no limit on the CPU. 0: print the estimate, do not stop.
    #[arg(long)]
    max_memory: Option<f64>,
    /// The fused aggregation exchanges and multiplies at most this many feature columns at a
    /// time (less memory per aggregation, the same values, more messages); 0: the whole
    /// width. Default: the widest of whole, 128, 64, 32, 16 whose estimate stays 5 % under
    /// --max-memory.
    #[arg(long)]
    feature_chunk: Option<usize>,
    /// Where to write the JSON report.
    #[arg(long, default_value = "runs/train_dist.json")]
    json: PathBuf,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.ranks == 0 {
        bail!("--ranks must be >= 1");
    }
    let tcp = args.tcp_rendezvous || args.master_addr.is_some();
    if (args.nccl || args.nccl_id_file.is_some() || tcp) && !cfg!(feature = "nccl") {
        bail!("--nccl, --nccl-id-file and --tcp-rendezvous need a build with --features nccl");
    }
    if tcp && args.nccl_id_file.is_some() {
        bail!("--tcp-rendezvous and --nccl-id-file are two ways to meet: choose one");
    }
    let mut cfg = DistConfig::new(
        args.data.source("reddit", args.seed)?,
        args.train.model(args.model, &Recipe::REDDIT),
    );
    cfg.model.maxk = args.maxk.maxk;
    cfg.model.maxk_after_first = args.maxk.maxk_after_first;
    // `auto` keeps the ids on several devices (gnn::train::dist::run); name an ordering to
    // have one.
    cfg.reorder = args.data.reorder_choice();
    cfg.train = args.train.train(&Recipe::REDDIT);
    cfg.train.seed = args.seed;
    cfg.train.profile = true;
    cfg.ranks = args.ranks;
    let flags = RankFlags {
        rank: args.rank,
        world: args.world_size,
        local_rank: args.local_rank,
    };
    let rendezvous = match &args.nccl_id_file {
        Some(path) => Some(Rendezvous::File(path.clone())),
        None if tcp => Some(Rendezvous::tcp_from_env(
            args.master_addr.clone(),
            args.master_port,
            Duration::from_secs(args.rendezvous_timeout),
        )?),
        None => None,
    };
    cfg.launch = match rendezvous {
        Some(r) => Launch::Process(ProcessRank::from_env(flags, r)?),
        None if args.nccl => Launch::Nccl,
        None => Launch::InProcess,
    };
    cfg.comm_timeout = (args.comm_timeout > 0).then(|| Duration::from_secs(args.comm_timeout));
    cfg.train.checkpoint_every = args.checkpoint_every;
    cfg.train.checkpoint = args.checkpoint.clone();
    cfg.resume = args.resume.clone();
    cfg.fault = args.inject_fault;
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
    cfg.whole_output_aggregation = args.whole_output_aggregation;
    cfg.degree_within_parts = args.degree_within_parts;
    if let Some(rows) = args.gather_slice_rows {
        cfg.slice_rows = (rows > 0).then_some(rows);
        cfg.small_gather_whole = false;
    }
    cfg.overlap = !args.no_overlap;
    // Measuring the overlap needs the slices it runs on.
    if args.no_overlap {
        cfg.small_gather_whole = false;
    }
    cfg.max_memory = match args.max_memory {
        Some(g) if !g.is_finite() || g < 0.0 => bail!("--max-memory must be a number of GiB >= 0"),
        Some(g) => Some((g * (1u64 << 30) as f64) as u64),
        None => None,
    };
    cfg.feature_chunk = args.feature_chunk;
    cfg.stats_only = args.stats_only;
    cfg.json = args.json.clone();
    cfg.note = format!("{args:?}");
    run(&cfg)?;
    Ok(())
}
