//! Multi-device full-batch training (`gnn::train::dist`): the graph's nodes split into
//! `--ranks` contiguous ranges balanced by non-zeros, one rank per thread, halo rows exchanged
//! before every aggregation, gradients all-reduced every step.
//!
//! With `--nccl` (a build with `--features nccl`) rank `r` runs on GPU `r` and talks through
//! NCCL. Without it the ranks share one device (the first GPU, or the CPU with `--cpu`) and
//! talk through in-process channels: the same partitioned computation, useful to check it and
//! to read the communication volume, not to go faster.
//!
//! It prints the partition's halo sizes for 1..=ranks parts (rows each rank receives per
//! exchange, the communication volume per layer), trains, and prints rank 0's per-phase
//! breakdown with the communication phase, each rank's epoch time and peak memory; the JSON
//! report holds all of it.
//!
//! With `--nccl-id-file PATH` the process runs one rank (`RANK` of `WORLD_SIZE` on GPU
//! `LOCAL_RANK`, from the environment as torchrun sets them; rank 0 writes the NCCL id to
//! `PATH`, the others read it): one process per GPU, on one host or several.
//!
//! NCCL runs with at most 4 point-to-point channels ([`P2P_CHANNELS`]) unless
//! `NCCL_MAX_P2P_NCHANNELS` is set. Where memory is tight, `NCCL_MAX_NCHANNELS=4` caps the
//! collectives' channels too (a further 0.36 GiB per GPU on two H100s, the scale-1 GCN epoch
//! unchanged; not measured for the models whose exchange is an all-gather).
//!
//! ```text
//! cargo run --release --example train_dist -- --cpu --ranks 3 --scale 0.05 --epochs 20
//! cargo run --release --features nccl --example train_dist -- --nccl --ranks 2 --scale 1
//! # two processes (two hosts: the same, with a shared path and NCCL's network variables)
//! RANK=0 WORLD_SIZE=2 train_dist --nccl-id-file /shared/id --scale 1 &
//! RANK=1 WORLD_SIZE=2 train_dist --nccl-id-file /shared/id --scale 1
//! ```

use anyhow::{bail, Context, Result};
use clap::Parser;
use gnn::graph::Exchange;
use gnn::models::ConvKind;
use gnn::train::cli::{DataFlags, MaxkFlag, Recipe, TrainFlags};
use gnn::train::device::gib;
use gnn::train::dist::{local_comms, train_ranks, DistPlan, Recipe as RankRecipe};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

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
    /// GPU: no float atomics in the sparse reductions (see gnn_kernels::set_deterministic).
    #[arg(long)]
    deterministic: bool,
    /// Print the halo statistics and stop.
    #[arg(long)]
    stats_only: bool,
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

/// NCCL channels for point-to-point transfers (`NCCL_MAX_P2P_NCHANNELS`) unless the
/// environment sets it. NCCL's default (up to 64) gives every channel its own buffers on first
/// use: on two H100s the symmetric aggregation's ring steps took 0.37 GiB more per GPU of
/// NCCL's own memory than at 4 channels, at the same epoch time (scale 1: 24.1-24.6 ms either
/// way; scale 4: 175.0 vs 174.6 ms; `docs/perf/h100x2-2026-11-26-dist-ring`).
const P2P_CHANNELS: &str = "4";

fn main() -> Result<()> {
    let args = Args::parse();
    if args.ranks == 0 {
        bail!("--ranks must be >= 1");
    }
    if (args.nccl || args.nccl_id_file.is_some()) && !cfg!(feature = "nccl") {
        bail!("--nccl and --nccl-id-file need a build with --features nccl");
    }
    if (args.nccl || args.nccl_id_file.is_some())
        && std::env::var_os("NCCL_MAX_P2P_NCHANNELS").is_none()
    {
        // Before any thread starts or NCCL reads its environment.
        std::env::set_var("NCCL_MAX_P2P_NCHANNELS", P2P_CHANNELS);
    }
    let device = args.train.device.pick()?;
    gnn::kernels::set_deterministic(args.deterministic);
    let src = args.data.source("reddit", args.seed)?;
    let mut loaded = gnn::train::run::load(&src, device.is_cpu())?;
    // Contiguous ranges of a community order keep most edges inside a rank (smaller halos).
    gnn::train::run::reorder(&mut loaded, args.data.reorder)?;
    let ds = &loaded.dataset;
    let mut spec = args.train.model(args.model, &Recipe::REDDIT);
    spec.maxk = args.maxk.maxk;
    spec.maxk_after_first = args.maxk.maxk_after_first;
    let model = spec.config(ds);
    let mut train = args.train.train(&Recipe::REDDIT);
    train.seed = args.seed;
    train.profile = true;

    // Communication volume per partition count: rows received per exchange (one exchange
    // per layer forward, one back), and its bytes at the hidden width in the run's precision.
    let elem = train.precision.dtype().size_in_bytes() as u64;
    let exchange = match args.exchange.as_str() {
        "auto" => None,
        e => Some(e.parse::<Exchange>()?),
    };
    let procs = match &args.nccl_id_file {
        Some(path) => Some(Process::from_env(path)?),
        None => None,
    };
    let ranks = procs.as_ref().map_or(args.ranks, |p| p.world);
    let mut plan = DistPlan::new(ds, model.kind, ranks, exchange)?;
    plan.symmetric &= !args.split_aggregation;
    plan.slice_rows = match args.gather_slice_rows {
        None => Some(gnn::comm::GATHER_SLICE_ROWS),
        Some(0) => None,
        Some(n) => Some(n),
    };
    // The point-to-point volume (halo rows, every rank's sum) against the all-gather's
    // ((P - 1) x the longest range, per rank), and what auto picks.
    println!(
        "{:>5} {:>10} {:>14} {:>16} {:>16} {:>15}  halo rows per rank",
        "parts", "nnz imbal.", "halo rows", "all-gather rows", "MB/exchange@hid", "auto picks"
    );
    let mut stats = Vec::new();
    for p in 1..=ranks {
        let s = plan.halo_stats(p)?;
        let gather = s.all_gather_rows();
        let pick = s.exchange();
        let rows = match pick {
            Exchange::PointToPoint => s.total_halo(),
            Exchange::AllGather => gather,
        };
        let mb = (rows as u64 * model.hidden as u64 * elem) as f64 / 1e6;
        println!(
            "{p:>5} {:>10.3} {:>14} {:>16} {:>16.1} {:>15}  {:?}",
            s.nnz_imbalance(),
            s.total_halo(),
            gather,
            mb,
            pick.to_string(),
            s.halo
        );
        stats.push(json!({"parts": p, "stats": s, "all_gather_rows": gather,
            "auto_exchange": pick, "mb_per_exchange_at_hidden": mb}));
    }
    println!(
        "exchange: {} ({}); aggregation: {}",
        plan.exchange,
        if exchange.is_some() {
            "forced"
        } else {
            "by volume"
        },
        if plan.symmetric && plan.exchange == Exchange::AllGather {
            "one op (symmetric operand: no local transpose, no gathered rows kept; column \
             slices of --gather-slice-rows where the model has only sum/mean aggregations)"
        } else if args.split_aggregation {
            "exchange + SpMM (--split-aggregation)"
        } else {
            "exchange + SpMM"
        }
    );
    if args.stats_only {
        return Ok(());
    }

    let recipe = RankRecipe {
        model: &model,
        train: &train,
        seed: args.seed,
        row_normalize: !loaded.raw_features,
    };
    let t = Instant::now();
    let on_epoch = |log: &gnn::train::EpochLog| {
        if let Some((tr, va, te)) = log.acc {
            println!(
                "  epoch {:>4}/{}  loss {:.4}  acc train {tr:.3} val {va:.3} test {te:.3}  {:.0} ms/epoch",
                log.epoch, train.epochs, log.loss, log.epoch_ms
            );
        }
    };
    let outcomes = if let Some(proc) = &procs {
        vec![nccl_process(
            &plan,
            ds,
            recipe,
            proc,
            !args.no_overlap,
            &on_epoch,
        )?]
    } else if args.nccl {
        nccl_run(&plan, ds, recipe, args.ranks, !args.no_overlap, &on_epoch)?
    } else {
        // Ranks sharing a GPU each get their own candle device (stream and cuBLAS handle: a
        // cuBLAS handle must not be used by two threads at once).
        let devices = match &device {
            candle_core::Device::Cuda(_) => (0..args.ranks)
                .map(|_| candle_core::Device::new_cuda_with_stream(0))
                .collect::<candle_core::Result<Vec<_>>>()?,
            d => vec![d.clone(); args.ranks],
        };
        println!(
            "{} in-process ranks on {:?} (channels, not NCCL)",
            args.ranks,
            device.location()
        );
        train_ranks(
            &plan,
            ds,
            recipe,
            &local_comms(args.ranks),
            &devices,
            on_epoch,
            &|_, _| {},
        )?
    };
    let wall = t.elapsed().as_secs_f64();

    let r0 = &outcomes[0].report;
    println!(
        "{} {}x{} on {} ranks ({} exchange): test {:.2} % (val {:.2} % at epoch {}), {:.1} s in all",
        model.kind,
        model.layers,
        model.hidden,
        ranks,
        plan.exchange,
        100.0 * r0.test_acc,
        100.0 * r0.best_val_acc,
        r0.best_epoch,
        wall
    );
    if let Some(tta) = &r0.time_to_accuracy {
        println!("time to accuracy: {tta:?}");
    }
    println!(
        "rank  rows        halo      ms/epoch  comm ms  comm MB/epoch  peak allocated  peak in use"
    );
    for o in &outcomes {
        let b = &o.report.breakdown;
        let n = b.epochs.max(1) as f64;
        println!(
            "{:>4}  {:>10}  {:>8}  {:>8.2}  {:>7.2}  {:>13.1}  {:>14}  {}",
            o.rank,
            o.rows.len(),
            o.halo,
            o.report.epoch_ms_median,
            b.communication.as_secs_f64() * 1e3 / n,
            b.comm_bytes as f64 / n / 1e6,
            o.report.peak_allocated_bytes.map_or("-".to_string(), gib),
            o.report.peak_device_bytes.map_or("-".to_string(), gib)
        );
    }
    println!("rank 0 breakdown:\n{}", r0.breakdown.table());

    let ranks: Vec<_> = outcomes
        .iter()
        .map(|o| {
            json!({
                "rank": o.rank, "rows": [o.rows.start, o.rows.end], "halo": o.halo,
                "epoch_ms_median": o.report.epoch_ms_median,
                "breakdown": o.report.breakdown.rows(),
                "comm_bytes_per_epoch": o.report.breakdown.comm_bytes as f64
                    / o.report.breakdown.epochs.max(1) as f64,
                "peak_allocated_bytes": o.report.peak_allocated_bytes,
                "peak_device_bytes": o.report.peak_device_bytes,
            })
        })
        .collect();
    let report = json!({
        "args": format!("{args:?}"),
        "dataset": ds.summary(),
        "source": loaded.provenance,
        "model": model,
        "train": train,
        "comm": if procs.is_some() {
            "nccl, one process per rank"
        } else if args.nccl {
            "nccl"
        } else {
            "in-process"
        },
        "exchange": plan.exchange,
        "fused_aggregation": plan.symmetric && plan.exchange == Exchange::AllGather,
        // null: the whole local graph; "per rank block": one slice per rank's block.
        "gather_slice_rows": match plan.slice_rows {
            Some(usize::MAX) => json!("per rank block"),
            other => json!(other),
        },
        "overlap": !args.no_overlap,
        "halo_stats": stats,
        "test_acc": r0.test_acc,
        "best_val_acc": r0.best_val_acc,
        "best_epoch": r0.best_epoch,
        "time_to_accuracy": r0.time_to_accuracy,
        "loss_curve": r0.history.iter().map(|h| h.loss).collect::<Vec<_>>(),
        "ranks": ranks,
        "wall_s": wall,
    });
    // One report per process in a multi-process run (each holds its own rank).
    let path = match &procs {
        Some(p) => args.json.with_extension(format!("rank{}.json", p.rank)),
        None => args.json.clone(),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

/// This process's place in a multi-process run (`--nccl-id-file`), from the environment
/// variables torchrun sets.
#[derive(Debug)]
#[cfg_attr(not(feature = "nccl"), allow(dead_code))]
struct Process {
    rank: usize,
    world: usize,
    gpu: usize,
    id_file: PathBuf,
}

impl Process {
    fn from_env(id_file: &std::path::Path) -> Result<Self> {
        let var = |name: &str| -> Result<Option<usize>> {
            match std::env::var(name) {
                Ok(v) => v.trim().parse().map(Some).with_context(|| {
                    format!("environment variable {name}={v:?} is not a non-negative integer")
                }),
                Err(std::env::VarError::NotPresent) => Ok(None),
                Err(e) => bail!("environment variable {name}: {e}"),
            }
        };
        let need = |name: &str| -> Result<usize> {
            var(name)?.with_context(|| {
                format!(
                    "--nccl-id-file runs one rank per process: set {name} (and RANK, WORLD_SIZE)"
                )
            })
        };
        let (rank, world) = (need("RANK")?, need("WORLD_SIZE")?);
        if world == 0 || rank >= world {
            bail!("RANK={rank} is not a rank of WORLD_SIZE={world}");
        }
        Ok(Self {
            rank,
            world,
            gpu: var("LOCAL_RANK")?.unwrap_or(rank),
            id_file: id_file.to_path_buf(),
        })
    }
}

#[cfg(feature = "nccl")]
fn nccl_process(
    plan: &DistPlan,
    ds: &gnn::graph::Dataset,
    recipe: RankRecipe<'_>,
    proc: &Process,
    overlap: bool,
    on_epoch: &(dyn Fn(&gnn::train::EpochLog) + Sync),
) -> Result<gnn::train::dist::RankOutcome> {
    use gnn::comm::{Communicator, NcclComm, NcclId};
    use std::sync::Arc;
    let path = &proc.id_file;
    let id = if proc.rank == 0 {
        // A leftover id from an earlier run would send the other ranks to a communicator
        // that never forms; refuse instead of overwriting under their feet.
        if path.exists() {
            bail!(
                "{}: the NCCL id file exists already (an earlier run's?); remove it or use a \
                 fresh path for each run",
                path.display()
            );
        }
        let id = NcclId::new()?;
        let tmp = path.with_extension("partial");
        id.write(&tmp)?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("moving the NCCL id into {}", path.display()))?;
        id
    } else {
        let t = Instant::now();
        loop {
            if path.exists() {
                break NcclId::read(path)?;
            }
            if t.elapsed().as_secs() > 600 {
                bail!(
                    "{}: no NCCL id after 600 s; is rank 0 running?",
                    path.display()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    let device = candle_core::Device::new_cuda(proc.gpu)
        .with_context(|| format!("opening GPU {} (LOCAL_RANK)", proc.gpu))?;
    gnn::train::prepare_device(&device)?;
    println!(
        "rank {} of {} on GPU {}, NCCL id from {}",
        proc.rank,
        proc.world,
        proc.gpu,
        path.display()
    );
    let comm =
        Arc::new(NcclComm::new(&id, proc.rank, proc.world, &device, true)?.with_overlap(overlap))
            as Arc<dyn Communicator>;
    Ok(gnn::train::dist::train_rank(
        plan, ds, recipe, comm, &device, on_epoch,
    )?)
}

#[cfg(not(feature = "nccl"))]
fn nccl_process(
    _: &DistPlan,
    _: &gnn::graph::Dataset,
    _: RankRecipe<'_>,
    _: &Process,
    _: bool,
    _: &(dyn Fn(&gnn::train::EpochLog) + Sync),
) -> Result<gnn::train::dist::RankOutcome> {
    bail!("--nccl-id-file needs a build with --features nccl")
}

#[cfg(feature = "nccl")]
fn nccl_run(
    plan: &DistPlan,
    ds: &gnn::graph::Dataset,
    recipe: RankRecipe<'_>,
    ranks: usize,
    overlap: bool,
    on_epoch: &(dyn Fn(&gnn::train::EpochLog) + Sync),
) -> Result<Vec<gnn::train::dist::RankOutcome>> {
    use gnn::comm::{Communicator, NcclComm, NcclId};
    use std::sync::Arc;
    let devices = (0..ranks)
        .map(|r| {
            let d = candle_core::Device::new_cuda(r).with_context(|| format!("opening GPU {r}"))?;
            gnn::train::prepare_device(&d)?;
            Ok(d)
        })
        .collect::<Result<Vec<_>>>()?;
    let id = NcclId::new()?;
    println!(
        "{ranks} ranks on GPUs 0..{ranks}, NCCL (NCCL_MAX_P2P_NCHANNELS={})",
        std::env::var("NCCL_MAX_P2P_NCHANNELS").unwrap_or_default()
    );
    if let Some((_, total)) = gnn::train::device::device_memory_info(&devices[0]) {
        if std::env::var_os(gnn::train::MEMORY_LIMIT_ENV).is_some() {
            println!(
                "each GPU limited to {} ({})",
                gib(total),
                gnn::train::MEMORY_LIMIT_ENV
            );
        }
    }
    let make = |rank: usize, dev: &candle_core::Device| {
        Ok(
            Arc::new(NcclComm::new(&id, rank, ranks, dev, true)?.with_overlap(overlap))
                as Arc<dyn Communicator>,
        )
    };
    // A failed rank (out of memory, say) leaves the others inside an NCCL collective that
    // nothing can cancel from here: report it and end the process, as torchrun does.
    // `_exit`, not `exit`: the atexit handlers would tear CUDA down under the threads still
    // inside it (a segmentation fault instead of the error).
    let fail_fast = |rank: usize, e: &gnn::train::Error| {
        use std::io::Write;
        eprintln!("Error: rank {rank} failed: {e}\nending the run (the other ranks wait in NCCL)");
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        // SAFETY: `_exit` ends the process at once; nothing runs after it.
        unsafe { libc::_exit(1) }
    };
    Ok(train_ranks(
        plan, ds, recipe, &make, &devices, on_epoch, &fail_fast,
    )?)
}

#[cfg(not(feature = "nccl"))]
fn nccl_run(
    _: &DistPlan,
    _: &gnn::graph::Dataset,
    _: RankRecipe<'_>,
    _: usize,
    _: bool,
    _: &(dyn Fn(&gnn::train::EpochLog) + Sync),
) -> Result<Vec<gnn::train::dist::RankOutcome>> {
    bail!("--nccl needs a build with --features nccl")
}
