//! One distributed training run from one config struct, what the `train_dist` example does:
//! load or generate the data, partition the model's operands (contiguous ranges, or METIS
//! parts after renumbering the nodes so each part is a range: [`DistConfig::partition`]),
//! print the halo statistics, train every rank the launch puts in this process, print the
//! results and write the JSON report. Per-node outputs ([`DistConfig::predictions`]) are
//! written in the file's node order whatever the renumbering.
//!
//! ```no_run
//! use gnn_models::ConvKind;
//! use gnn_train::dist::{run, DistConfig};
//! use gnn_train::run::{DataSource, ModelSpec};
//!
//! let mut cfg = DistConfig::new(DataSource::bundled_cora(), ModelSpec::new(ConvKind::Gcn, 2, 16));
//! cfg.ranks = 3;
//! cfg.cpu = true;
//! let out = run(&cfg)?;
//! println!("{:.1} %", 100.0 * out.ranks[0].report.test_acc);
//! # Ok::<(), gnn_train::Error>(())
//! ```

use super::launch::{default_p2p_channels, no_nccl, train_launched, Launch};
use super::report::{
    exchange_line, fused, halo_table, partition_header, partition_line, print_results, rank_rows,
    slice_rows_json, PartitionRow,
};
use super::{setup, DistPlan, RankOutcome, Recipe, Widths};
use crate::device::pick_device;
use crate::error::{Error, Result};
use crate::report::write_text;
use crate::run::{load, reorder, DataSource, Loaded, ModelSpec};
use crate::trainer::{EpochLog, TrainConfig};
use gnn_graph::{metis, Exchange, MetisOptions, Partitioner, Reorder};
use gnn_kernels::{KernelPolicy, KernelsUsed};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Instant;

/// Everything one distributed run needs.
#[derive(Debug, Clone)]
pub struct DistConfig {
    /// The data.
    pub data: DataSource,
    /// Node renumbering applied after loading (contiguous ranges of a community order keep
    /// most edges inside a rank: smaller halos).
    pub reorder: Reorder,
    /// The model.
    pub model: ModelSpec,
    /// The recipe; `train.seed` also seeds every rank's (identical) initialisation. Set
    /// `train.profile` for the per-phase breakdown the report prints.
    pub train: TrainConfig,
    /// Number of ranks (partitions); a [`Launch::Process`] run has its `world` instead.
    pub ranks: usize,
    /// Where the ranks live and how they talk.
    pub launch: Launch,
    /// Stay on the CPU even when a GPU is there (the in-process ranks' device).
    pub cpu: bool,
    /// The kernel policy of every rank's graphs (SpMM/SDDMM kernels, determinism).
    pub kernels: KernelPolicy,
    /// How ranks exchange rows; `None`: chosen by volume ([`Exchange::by_volume`]).
    pub exchange: Option<Exchange>,
    /// How nodes are assigned to ranks: contiguous ranges balanced by non-zeros, METIS (the
    /// nodes renumbered once so each part is a range), or by mean degree
    /// ([`Partitioner::resolve`], the default). The choice, its reason, and the edge cut and
    /// halo sizes of the partition (of both with `stats_only`) are printed and reported.
    pub partition: Partitioner,
    /// METIS's settings where it runs (seed, imbalance, the most edges it sees).
    pub metis: MetisOptions,
    /// Write every node's predictions here after training (`.npz`: `pred` and `logits`, row
    /// `i` = node `i` of the loaded file, whatever the renumbering; see
    /// [`crate::sweep::inference::write_predictions`]). Written by the process running rank 0.
    pub predictions: Option<PathBuf>,
    /// Run each aggregation as the exchange followed by the SpMM even where the operand is
    /// symmetric and the exchange the all-gather (which otherwise fuse into one op that keeps
    /// less memory); for comparison.
    pub split_aggregation: bool,
    /// Keep the output layer's whole aggregation followed by the selection of the labelled
    /// rows even where the ranks could aggregate those rows alone
    /// ([`DistPlan::selected_output_aggregation`] off); for comparison.
    pub whole_output_aggregation: bool,
    /// After the partition, renumber each rank's nodes by descending degree within its own
    /// range ([`gnn_graph::reorder::degree_order_within`]): the partition and its halos stay,
    /// each block of gathered rows has its hubs first. On 4 H100s, GCN 3x128 bf16 on the
    /// papers-shaped graph: 84.41 -> 72.52 ms per epoch at scale 0.1, 880.1 -> 831.0 ms at
    /// full size, for 6.74 s and 74.67 s of set-up (the order, the renumbered dataset and the
    /// plan built again, its symmetry check included;
    /// `bench/records/dist-papers/h100x4-2026-11-28`, `-3`): repaid after about 570 and 1,500
    /// epochs, so `--reorder auto` leaves it off. The plan is now carried over
    /// ([`DistPlan::renumbered_within`]: only the operands derived again), which drops the
    /// halo count and the symmetry check, 36 of the 75 s at full size; not re-timed.
    pub degree_within_parts: bool,
    /// [`DistPlan::slice_rows`]: default [`gnn_comm::GATHER_SLICE_ROWS`] (one slice per
    /// rank's block); `None` keeps the local graph whole (no overlap).
    pub slice_rows: Option<usize>,
    /// [`DistPlan::small_gather_whole`] (default on; `train_dist --gather-slice-rows` turns
    /// it off).
    pub small_gather_whole: bool,
    /// NCCL runs a sliced aggregation's own-block slices while the exchange is in flight
    /// (default); off, after it (to measure what the overlap gains).
    pub overlap: bool,
    /// Print the halo statistics and stop.
    pub stats_only: bool,
    /// Where the JSON report goes; a [`Launch::Process`] rank writes `<stem>.rank<r>.json`.
    pub json: PathBuf,
    /// The command line or other note recorded in the report.
    pub note: String,
    /// How long one collective may take before the rank's watchdog aborts the communicator
    /// and the rank fails ([`gnn_comm::Watchdog`]); `None`: no watchdog. Default
    /// [`gnn_comm::DEFAULT_COMM_TIMEOUT`].
    pub comm_timeout: Option<std::time::Duration>,
    /// Continue from this checkpoint (written by rank 0 of a run of the same model, data and
    /// recipe, with any number of ranks; every rank reads it).
    pub resume: Option<PathBuf>,
    /// A rank that fails on purpose (tests of the fault handling).
    pub fault: Option<gnn_comm::Fault>,
    /// The bytes one rank may use ([`super::memory`]): the run stops before allocating
    /// anything when a rank's estimated peak exceeds them, saying what to change; in-process
    /// ranks sharing a device (or the CPU) are held to it together. `None`: the GPU's
    /// memory less [`super::memory::CUDA_RESERVE`] (and, for NCCL ranks,
    /// [`super::memory::nccl_p2p_reserve`]) on a CUDA device, no limit on the CPU;
    /// `Some(0)`: no check (the estimate is still printed).
    pub max_memory: Option<u64>,
    /// The fused aggregation's feature chunk ([`DistPlan::feature_chunk`]): `None` (auto)
    /// picks the widest whose estimate stays 5 % under [`Self::max_memory`] (the whole width
    /// where it does or no limit applies; the narrowest where none does); `Some(0)`: the
    /// whole width; `Some(c)`: `c` columns.
    pub feature_chunk: Option<usize>,
}

impl DistConfig {
    /// `model` on `data` over two in-process ranks with the default recipe (profiled), the
    /// exchange chosen by volume, the report to `runs/train_dist.json`.
    pub fn new(data: DataSource, model: ModelSpec) -> Self {
        Self {
            data,
            reorder: Reorder::None,
            model,
            train: TrainConfig {
                profile: true,
                ..TrainConfig::default()
            },
            ranks: 2,
            launch: Launch::InProcess,
            cpu: false,
            kernels: KernelPolicy::default(),
            exchange: None,
            partition: Partitioner::Auto,
            metis: MetisOptions::default(),
            predictions: None,
            split_aggregation: false,
            whole_output_aggregation: false,
            degree_within_parts: false,
            slice_rows: Some(gnn_comm::GATHER_SLICE_ROWS),
            small_gather_whole: true,
            overlap: true,
            stats_only: false,
            json: PathBuf::from("runs/train_dist.json"),
            note: String::new(),
            comm_timeout: Some(gnn_comm::DEFAULT_COMM_TIMEOUT),
            resume: None,
            fault: None,
            max_memory: None,
            feature_chunk: None,
        }
    }
}

impl DistConfig {
    /// Ranks in all: the world of a [`Launch::Process`] run, else [`Self::ranks`].
    pub fn world(&self) -> usize {
        match &self.launch {
            Launch::Process(p) => p.world,
            _ => self.ranks,
        }
    }
}

/// The outcome of [`run()`].
pub struct DistOutcome {
    /// How the ranks exchanged rows.
    pub exchange: Exchange,
    /// The halo statistics per partition count `1..=ranks` (as the report holds them), of
    /// contiguous ranges of the loaded ids.
    pub halo_stats: Vec<Value>,
    /// The partition chosen, why, and its edge cut and halo sizes (with `stats_only`, those
    /// of both the range and the METIS partition): the report's `partition`.
    pub partition: Value,
    /// The ranks this process ran, in rank order; empty with `stats_only`.
    pub ranks: Vec<RankOutcome>,
    /// The JSON report and where it was written; `None` with `stats_only`.
    pub report: Option<(Value, PathBuf)>,
}

/// Runs `cfg` end to end; see the module docs. Progress and results go to stdout as they
/// come.
pub fn run(cfg: &DistConfig) -> Result<DistOutcome> {
    if cfg.launch.uses_nccl() {
        if !cfg!(feature = "nccl") {
            return Err(no_nccl());
        }
        // Before any thread starts or NCCL reads its environment.
        default_p2p_channels();
    }
    let ranks = cfg.world();
    if ranks == 0 {
        return Err(Error::Invalid(
            "a distributed run needs at least one rank".into(),
        ));
    }
    setup::enable();
    let device = setup::phase(|| "device".into(), || pick_device(cfg.cpu))?;
    println!("kernels: {}", cfg.kernels);
    let mut loaded = setup::phase(|| "load".into(), || load(&cfg.data, device.is_cpu()))?;
    // `auto` keeps the ids here: the degree order it picks on one device is not measured
    // under a partition yet (it concentrates the hubs' non-zeros in the first ranges).
    let how = cfg.reorder.without_auto();
    let (_, mut reorder_s) = setup::phase(|| "reorder".into(), || reorder(&mut loaded, how))?;
    let model = cfg.model.config(&loaded.dataset);
    // Checkpoints, written by rank 0, go to `runs/checkpoints/dist-<model>-<dataset>` unless
    // the recipe names a stem.
    let mut train = cfg.train.clone();
    if train.checkpoint_every > 0 && train.checkpoint.is_none() {
        train.checkpoint = Some(PathBuf::from(format!(
            "runs/checkpoints/dist-{}-{}",
            model.kind, loaded.dataset.name
        )));
    }
    let train = &train;

    // Communication volume per partition count, at the hidden width in the run's precision.
    let elem = train.precision.dtype().size_in_bytes() as u64;
    let mut plan = DistPlan::new(&loaded.dataset, model.kind, ranks, cfg.exchange)?;
    println!("contiguous ranges of the loaded ids, balanced by non-zeros:");
    let stats = setup::phase(
        || format!("halo table (1..={ranks} parts)"),
        || halo_table(&plan, ranks, model.hidden, elem),
    )?;
    let (partition, renumbering) = setup::phase(
        || "partition choice".into(),
        || choose_partition(cfg, &plan, ranks),
    )?;
    if let Some(ren) = renumbering {
        drop(plan);
        renumber(&mut loaded, &ren.new_of_old)?;
        plan = DistPlan::with_partition(
            &loaded.dataset,
            model.kind,
            |_| Ok(ren.partition),
            cfg.exchange,
        )?;
    }
    if cfg.degree_within_parts {
        let started = Instant::now();
        let parts = plan.partition.clone();
        let order = setup::phase(
            || "degree order within the parts".into(),
            || gnn_graph::reorder::degree_order_within(&loaded.dataset.graph, &parts),
        )?;
        plan.release_operands()?;
        crate::source::renumber(&mut loaded, &order)?;
        plan = plan.renumbered_within(&loaded.dataset, &order)?;
        // The order, the renumbering and the operands derived again: what the option costs.
        reorder_s += started.elapsed().as_secs_f64();
        println!(
            "renumbered each rank's nodes by descending degree within its range in {:.2} s",
            started.elapsed().as_secs_f64()
        );
    }
    plan.symmetric &= !cfg.split_aggregation;
    plan.selected_output_aggregation = !cfg.whole_output_aggregation;
    plan.slice_rows = cfg.slice_rows;
    plan.small_gather_whole = cfg.small_gather_whole;
    plan.gather_logits = cfg.predictions.is_some();
    let memory = setup::phase(
        || "memory estimate".into(),
        || preflight(cfg, &mut plan, &model, train, &device, ranks),
    )?;
    println!(
        "{}",
        exchange_line(&plan, cfg.exchange.is_some(), cfg.split_aggregation)
    );
    let restricted: Vec<usize> = (0..plan.partition.parts())
        .filter(|&r| {
            let (rows, labelled) = (plan.partition.range(r).len(), plan.labelled[r]);
            crate::trainer::output::restricts(rows, labelled, model.out_dim, train.labelled_output)
        })
        .collect();
    let labelled: usize = restricted.iter().map(|&r| plan.labelled[r]).sum();
    let rows: usize = restricted
        .iter()
        .map(|&r| plan.partition.range(r).len())
        .sum();
    // Whether the ranks aggregate the labelled rows alone for the output layer (a GCN or
    // GraphSAGE-mean of the config on the host: the decision reads its layers' shapes only).
    let rows_alone = plan.selected_output_aggregation
        && matches!(
            model.kind,
            gnn_models::ConvKind::Gcn | gnn_models::ConvKind::SageMean
        )
        && plan.selects_output_aggregation(
            &gnn_models::Gnn::new(model.clone(), &candle_core::Device::Cpu, 0)?,
            train,
        );
    // The report's record of the shortcut (null: every rank computes every row's logits).
    let output_rows = (!restricted.is_empty()).then(|| {
        json!({"ranks": restricted, "labelled_rows": labelled, "of_rows": rows,
               "aggregation_of_rows_alone": rows_alone})
    });
    if !restricted.is_empty() {
        println!(
            "output layer: the {labelled} labelled rows of {rows} on ranks {restricted:?} (the \
             loss and the metrics read no others; --all-output-rows computes every node's)"
        );
    }
    if rows_alone {
        println!(
            "output layer: its aggregation runs on the labelled rows alone (one reduce-scatter \
             of them forward, one all-gather of their gradient backward)"
        );
    }
    if cfg.stats_only {
        return Ok(DistOutcome {
            exchange: plan.exchange,
            halo_stats: stats,
            partition,
            ranks: Vec::new(),
            report: None,
        });
    }
    let ds = &loaded.dataset;

    let recipe = Recipe {
        model: &model,
        train,
        seed: train.seed,
        row_normalize: !loaded.raw_features,
        kernels: cfg.kernels,
        widths: Widths::Auto,
    };
    if let (true, Some(p)) = (train.checkpoint_every > 0, &train.checkpoint) {
        println!(
            "checkpoints every {} epochs in {} (rank 0)",
            train.checkpoint_every,
            p.display()
        );
    }
    if let Some(p) = &cfg.resume {
        println!("resuming from {}", p.display());
    }
    match cfg.comm_timeout {
        Some(t) => println!("watchdog: a collective may take {} s", t.as_secs_f64()),
        None => println!("watchdog: off"),
    }
    let t = Instant::now();
    let on_epoch = |log: &EpochLog| {
        if let Some((tr, va, te)) = log.acc {
            println!(
                "  epoch {:>4}/{}  loss {:.4}  acc train {tr:.3} val {va:.3} test {te:.3}  {:.0} ms/epoch",
                log.epoch, train.epochs, log.loss, log.epoch_ms
            );
        }
    };
    let outcomes = train_launched(cfg, &plan, ds, recipe, &device, &on_epoch)?;
    let wall = t.elapsed().as_secs_f64();
    if let (Some(path), Some(logits)) = (
        &cfg.predictions,
        outcomes.iter().find_map(|o| o.logits.as_ref()),
    ) {
        crate::sweep::inference::write_predictions(path, logits, loaded.new_of_old.as_deref())?;
        println!("wrote predictions (file node order) to {}", path.display());
    }
    print_results(&model, &plan, ranks, &outcomes, wall);
    let mut kernels_used = KernelsUsed::default();
    for o in &outcomes {
        kernels_used.merge(&o.kernels_used);
    }
    println!("kernels used: {kernels_used}");

    let r0 = &outcomes[0].report;
    let tta_with_reorder =
        crate::source::time_to_accuracy_with_reorder(r0.time_to_accuracy, reorder_s);
    // The slices the ranks' local graphs ran as (None: whole).
    let slices = plan.slice_rows_for(&model, train.precision);
    let report = json!({
        "args": cfg.note,
        "dataset": ds.summary(),
        "source": loaded.provenance,
        "model": model,
        "train": train,
        "kernel_policy": cfg.kernels,
        "kernels_used": kernels_used,
        "comm": cfg.launch.describe(),
        "exchange": plan.exchange,
        "fused_aggregation": fused(&plan),
        // What ran (DistPlan::slice_rows_for): null, the whole local graph; "per rank
        // block": one slice per rank's block. The setting and the small-operand rule beside.
        "gather_slice_rows": slice_rows_json(slices),
        "gather_slice_rows_asked": slice_rows_json(plan.slice_rows),
        "small_gather_whole": plan.small_gather_whole,
        "overlap": cfg.overlap && slices.is_some(),
        "degree_within_parts": cfg.degree_within_parts,
        "output_rows": output_rows,
        "halo_stats": stats,
        "partition": partition,
        "test_acc": r0.test_acc,
        "best_val_acc": r0.best_val_acc,
        "best_epoch": r0.best_epoch,
        "time_to_accuracy": r0.time_to_accuracy,
        "reorder_s": reorder_s,
        "time_to_accuracy_with_reorder_s": tta_with_reorder,
        "loss_curve": r0.history.iter().map(|h| h.loss).collect::<Vec<_>>(),
        "ranks": rank_rows(&outcomes),
        "wall_s": wall,
        "comm_timeout_s": cfg.comm_timeout.map(|t| t.as_secs_f64()),
        "resumed_from": cfg.resume.as_ref().map(|p| p.display().to_string()),
        "memory_estimate": memory,
        "setup": setup::report(),
    });
    // One report per process in a multi-process run (each holds its own rank).
    let path = match &cfg.launch {
        Launch::Process(p) => cfg.json.with_extension(format!("rank{}.json", p.rank)),
        _ => cfg.json.clone(),
    };
    let text = serde_json::to_string_pretty(&report).map_err(|e| Error::File {
        path: path.display().to_string(),
        problem: format!("cannot encode the report as JSON: {e}"),
    })?;
    write_text(&path, &text)?;
    println!("wrote {}", path.display());
    Ok(DistOutcome {
        exchange: plan.exchange,
        halo_stats: stats,
        partition,
        ranks: outcomes,
        report: Some((report, path)),
    })
}

/// Errors where a rank's tensor would pass [`gnn_models::MAX_TENSOR_ELEMENTS`]
/// (`check_tensor_sizes`), before anything is allocated; the predictions' logits
/// ([`DistPlan::gather_logits`]) are every row's.
fn check_rank_sizes(
    plan: &DistPlan,
    model: &gnn_models::ModelConfig,
    train: &TrainConfig,
) -> Result<()> {
    use crate::trainer::output::{check_tensor_sizes, output_rows};
    let fix = "use more ranks (each holds fewer rows) or a narrower model";
    for rank in 0..plan.partition.parts() {
        let shape = super::memory::RankShape::of(plan, model, train.precision, rank);
        let out_rows = output_rows(
            shape.rows,
            shape.labelled,
            model.out_dim,
            train.labelled_output,
        );
        let at = |e: crate::Error| match e {
            crate::Error::Model(e) => crate::Error::Invalid(format!("rank {rank}: {e}")),
            e => e,
        };
        // The rows a rank's aggregation input holds with those it receives, where they are a
        // tensor of their own (not under the fused symmetric all-gather, which GraphSAGE-mean
        // leaves in f16).
        let fused = shape.fused
            && !(model.kind == gnn_models::ConvKind::SageMean
                && train.precision == crate::Precision::F16);
        let exchanged = match (fused, plan.exchange) {
            (true, _) => None,
            (false, Exchange::AllGather) => Some(shape.parts * shape.block_rows),
            (false, _) => Some(shape.rows + shape.halo),
        };
        let cached = super::memory::caches_input(model, train);
        check_tensor_sizes(
            model,
            shape.rows,
            shape.nnz as usize,
            out_rows,
            cached,
            exchanged,
            fix,
        )
        .map_err(at)?;
        if plan.gather_logits {
            gnn_models::check_elements(
                "the predictions' logits",
                shape.rows,
                model.out_dim,
                "use more ranks, or leave out --predictions",
            )
            .map_err(|e| crate::Error::Invalid(format!("rank {rank}: {e}")))?;
        }
    }
    Ok(())
}

/// The memory pre-flight: every rank's estimated peak ([`super::memory`]) against the budget
/// ([`DistConfig::max_memory`]), with the feature chunk chosen to fit when `cfg` leaves it to
/// the estimate. Prints the estimate (the largest rank's components) and returns the
/// report's `memory_estimate`; an error naming the estimate, the budget and what to change
/// when the run cannot fit.
fn preflight(
    cfg: &DistConfig,
    plan: &mut DistPlan,
    model: &gnn_models::ModelConfig,
    train: &TrainConfig,
    device: &candle_core::Device,
    ranks: usize,
) -> Result<Value> {
    use super::memory::{self, Target, CUDA_RESERVE};
    let target = if device.is_cuda() {
        Target::Cuda
    } else {
        Target::Cpu
    };
    // In-process ranks share one device (or the CPU); an NCCL rank has one of its own.
    let shared = !cfg.launch.uses_nccl();
    // NCCL ranks also keep the point-to-point channels' buffers past the reserve's 4.
    let nccl = if cfg.launch.uses_nccl() && device.is_cuda() {
        memory::nccl_p2p_reserve(super::launch::p2p_channels(), ranks)
    } else {
        0
    };
    let budget = match cfg.max_memory {
        Some(0) => None,
        Some(b) => Some(b),
        None => crate::device::device_memory_info(device)
            .map(|(_, total)| total.saturating_sub(CUDA_RESERVE + nccl)),
    };
    let need = |all: &[memory::Estimate]| -> u64 {
        if shared {
            all.iter().map(memory::Estimate::peak).sum()
        } else {
            all.iter().map(memory::Estimate::peak).max().unwrap_or(0)
        }
    };
    if device.is_cuda() {
        // As the memory refusal below: --stats-only (the graph step of a saved-graph suite,
        // which writes the graph on a GPU machine at one rank) reports it and goes on.
        match check_rank_sizes(plan, model, train) {
            Err(e) if cfg.stats_only => println!("training would stop here: {e}"),
            r => r?,
        }
    }
    let fits = |all: &[memory::Estimate]| budget.is_none_or(|b| need(all) <= b);
    // The chunk chosen leaves the estimate a margin (5 % of the budget) where one does; else
    // the narrowest chunk runs if it fits at all.
    let roomy = |all: &[memory::Estimate]| budget.is_none_or(|b| need(all) <= b - b / 20);
    let (all, fit) = match cfg.feature_chunk {
        Some(c) => {
            plan.feature_chunk = (c > 0).then_some(c);
            let all = memory::estimate_all(plan, model, train, target);
            let ok = fits(&all);
            (all, ok)
        }
        None => match memory::fit_feature_chunk(plan, model, train, target, roomy) {
            Ok((_, all)) => (all, true),
            Err(all) => {
                let ok = fits(&all);
                (all, ok)
            }
        },
    };
    let g = |b: u64| b as f64 / (1u64 << 30) as f64;
    let worst = memory::worst(&all).cloned();
    if let Some(w) = &worst {
        let peaks: Vec<String> = all.iter().map(|e| format!("{:.1}", g(e.peak()))).collect();
        println!(
            "memory (estimated per rank, GiB): peaks [{}]{}; feature chunk {}; rank {}:",
            peaks.join(", "),
            match budget {
                Some(b) if shared => format!(
                    ", {:.1} for all {ranks} in-process ranks against {:.1}",
                    g(need(&all)),
                    g(b)
                ),
                Some(b) => format!(" against {:.1} a rank", g(b)),
                None => String::new(),
            },
            plan.feature_chunk
                .map_or("off (whole width)".to_string(), |c| format!("{c} columns")),
            w.rank
        );
        println!("{}", w.table());
    }
    if let (false, Some(b), Some(w)) = (fit, budget, &worst) {
        let refusal = memory::refusal(w, need(&all), b, shared, plan.feature_chunk, model, ranks);
        if !cfg.stats_only {
            return Err(Error::Invalid(refusal));
        }
        println!("training would stop here: {refusal}");
    }
    Ok(json!({
        "target": format!("{target:?}"),
        "budget_bytes": budget,
        "shared_device": shared,
        "feature_chunk": plan.feature_chunk,
        "peak_bytes": all.iter().map(memory::Estimate::peak).collect::<Vec<_>>(),
        "worst": worst.map(|w| json!({
            "rank": w.rank,
            "rows": w.rows,
            "resident": w.resident,
            "kept": w.kept,
            "transient": w.transient.0,
            "transient_at": w.transient.1,
            "peak": w.peak(),
            "layer_by_layer": w.exact,
        })),
    }))
}

/// Picks the partition `cfg.partition` stands for on `plan`'s operands (ranges of the loaded
/// ids) over `ranks`, prints the choice and its reason, and the edge cut and halo sizes of
/// the chosen partition; with `stats_only`, of both range and METIS for every part count
/// from 2 to `ranks`. Returns the report's `partition` and, for METIS, the renumbering that
/// makes its parts ranges.
fn choose_partition(
    cfg: &DistConfig,
    plan: &DistPlan,
    ranks: usize,
) -> Result<(Value, Option<gnn_graph::Renumbering>)> {
    let csr = &plan.operands.csr;
    let (method, reason) = cfg.partition.resolve(csr, ranks);
    println!("partition: {method} ({reason})");
    let counts: Vec<usize> = if cfg.stats_only && ranks > 1 {
        (2..=ranks).collect()
    } else {
        vec![ranks]
    };
    let mut rows = Vec::new();
    let mut renumbering = None;
    println!("{}", partition_header());
    // Each line as it comes: METIS takes minutes on graphs of 10^8 non-zeros.
    let mut push = |row: PartitionRow| {
        println!("{}", partition_line(&row));
        rows.push(row);
    };
    for &p in &counts {
        let range = gnn_graph::RowPartition::balanced_by_nnz(csr, p)?;
        let halo = plan.halo_sizes_of(&range)?;
        push(PartitionRow::of_ranges(&range, csr, halo)?);
        let chosen = p == ranks && method == Partitioner::Metis;
        if p < 2 || !(chosen || cfg.stats_only) {
            continue;
        }
        let (parts, report) = crate::progress::step(
            format!("METIS: {p} parts of {} nodes", csr.n_rows()),
            || metis(csr, p, &cfg.metis),
        )?;
        let halo = parts.halo_sizes(csr)?;
        let seconds = report.prepare_s + report.partition_s;
        if report.edge_sample < 1.0 {
            println!(
                "METIS saw {:.1} % of the undirected edges (a hash sample: its ids are 32-bit)",
                100.0 * report.edge_sample
            );
        }
        push(PartitionRow::of(
            Partitioner::Metis,
            &parts,
            csr,
            halo,
            seconds,
            Some(report),
        )?);
        if chosen {
            renumbering = Some(parts.renumbering()?);
        }
    }
    let mean = csr.nnz() as f64 / csr.n_rows().max(1) as f64;
    Ok((
        json!({
            "requested": cfg.partition,
            "chosen": method,
            "reason": reason,
            "parts": ranks,
            "mean_row_length": mean,
            "sparse_below": Partitioner::SPARSE_MEAN_DEGREE,
            "compared": rows,
        }),
        renumbering,
    ))
}

/// Renumbers `loaded`'s nodes by `new_of_old`, composing the map back to the file's ids.
fn renumber(loaded: &mut Loaded, new_of_old: &[u32]) -> Result<()> {
    let t = Instant::now();
    crate::source::renumber(loaded, new_of_old)?;
    println!(
        "renumbered the nodes so each part is a range in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::ProcessRank;
    use gnn_models::ConvKind;

    fn cora(json: PathBuf) -> DistConfig {
        let mut cfg = DistConfig::new(
            DataSource::bundled_cora(),
            ModelSpec::new(ConvKind::Gcn, 2, 16),
        );
        cfg.cpu = true;
        cfg.train.epochs = 4;
        cfg.train.eval_every = 2;
        cfg.json = json;
        cfg.note = "test note".into();
        cfg
    }

    #[test]
    fn a_run_trains_every_rank_and_writes_its_report() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = cora(dir.path().join("sub/dist.json"));
        let out = run(&cfg).unwrap();
        assert_eq!(out.ranks.len(), 2);
        assert_eq!(out.halo_stats.len(), 2);
        // The ranks own consecutive ranges covering every node.
        assert_eq!(out.ranks[0].rows.start, 0);
        assert_eq!(out.ranks[0].rows.end, out.ranks[1].rows.start);
        assert_eq!(out.ranks[1].rows.end, 2708);
        let (report, path) = out.report.unwrap();
        assert_eq!(path, cfg.json);
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(written, report);
        assert_eq!(report["args"], "test note");
        assert_eq!(report["comm"], "in-process");
        assert_eq!(report["exchange"], json!(out.exchange));
        assert_eq!(report["gather_slice_rows"], "per rank block");
        assert_eq!(report["ranks"].as_array().unwrap().len(), 2);
        let losses: Vec<f64> = out.ranks[0].report.history.iter().map(|h| h.loss).collect();
        assert_eq!(losses.len(), 4);
        assert_eq!(report["loss_curve"], json!(losses));
        // Every rank logs the same global losses.
        let other: Vec<f64> = out.ranks[1].report.history.iter().map(|h| h.loss).collect();
        assert_eq!(losses, other);
    }

    #[test]
    fn stats_only_trains_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = cora(dir.path().join("dist.json"));
        cfg.ranks = 3;
        cfg.stats_only = true;
        cfg.exchange = Some(Exchange::AllGather);
        cfg.partition = Partitioner::Range;
        let out = run(&cfg).unwrap();
        assert_eq!(out.exchange, Exchange::AllGather);
        assert_eq!(out.halo_stats.len(), 3);
        // Both partitions measured, the range one kept.
        assert_eq!(out.partition["chosen"], "range");
        let compared = out.partition["compared"].as_array().unwrap();
        let methods: Vec<_> = compared
            .iter()
            .map(|r| (r["method"].clone(), r["parts"].clone()))
            .collect();
        let want = [("range", 2), ("metis", 2), ("range", 3), ("metis", 3)];
        assert_eq!(methods, want.map(|(m, p)| (json!(m), json!(p))));
        for r in compared {
            assert_eq!(r["halo"].as_array().unwrap().len(), r["parts"]);
            assert!(r["edge_cut"].as_u64().unwrap() > 0);
        }
        assert!(out.ranks.is_empty() && out.report.is_none());
        assert!(!cfg.json.exists());
        cfg.ranks = 0;
        assert!(run(&cfg).is_err());
    }

    /// The values of `t` as bits.
    fn bits(t: &candle_core::Tensor) -> Vec<u32> {
        let v = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn a_failed_rank_ends_the_run_and_a_resumed_run_equals_an_uninterrupted_one() {
        use crate::TrainState;
        use candle_core::Device;
        let dir = tempfile::tempdir().unwrap();
        let stem = |name: &str| dir.path().join(format!("ckpt-{name}"));
        let base = |name: &str| {
            let mut cfg = cora(dir.path().join(format!("report-{name}.json")));
            cfg.ranks = 3;
            cfg.train.epochs = 8;
            cfg.train.checkpoint_every = 2;
            cfg.train.checkpoint = Some(stem(name));
            // Range partitions keep the file's ids, so the dropout masks (which follow global
            // rows) are the same on 3 and 2 ranks; METIS (`auto` picks it on Cora) renumbers
            // per part count, and a resume on another count draws other masks.
            cfg.partition = Partitioner::Range;
            cfg
        };
        let whole = run(&base("whole")).unwrap();

        // Rank 1 fails in epoch 6: the run ends with its error (the others' collectives fail
        // at once, not after the 45 s watchdog), and the last checkpoint is epoch 4's.
        let mut cut = base("cut");
        cut.fault = Some("1:6".parse().unwrap());
        let t = Instant::now();
        let e = run(&cut).err().unwrap().to_string();
        assert!(
            t.elapsed() < std::time::Duration::from_secs(30),
            "{:?}",
            t.elapsed()
        );
        assert!(e.contains("fault injected: rank 1 fails at epoch 6"), "{e}");
        let saved = TrainState::load(stem("cut"), &Device::Cpu).unwrap();
        assert_eq!(saved.meta.epoch, 4);
        // Kept for the resume on two ranks below (the next run overwrites the stem).
        let (at4, _) = crate::checkpoint::state_paths(&stem("at4"));
        std::fs::copy(crate::checkpoint::state_paths(&stem("cut")).0, at4).unwrap();

        // Resumed on the same ranks: every epoch's loss and accuracies, and the final
        // parameters, moments and best weights, bit for bit.
        let mut resumed = base("cut");
        resumed.resume = Some(stem("cut"));
        let out = run(&resumed).unwrap();
        for o in &out.ranks {
            let (a, b) = (&o.report.history, &whole.ranks[0].report.history);
            assert_eq!(a.len(), 8);
            for (x, y) in a.iter().zip(b) {
                assert_eq!(
                    (x.epoch, x.loss.to_bits(), x.acc),
                    (y.epoch, y.loss.to_bits(), y.acc),
                    "rank {}",
                    o.rank
                );
            }
            assert_eq!(o.report.test_acc, whole.ranks[0].report.test_acc);
        }
        let (a, b) = (
            TrainState::load(stem("whole"), &Device::Cpu).unwrap(),
            TrainState::load(stem("cut"), &Device::Cpu).unwrap(),
        );
        assert_eq!((a.meta.epoch, b.meta.epoch), (8, 8));
        assert_eq!(a.meta.adam_steps, b.meta.adam_steps);
        assert_eq!(a.meta.dropout, b.meta.dropout);
        assert_eq!(a.params.len(), b.params.len());
        assert!(!a.best.is_empty());
        for (k, p) in &a.params {
            assert_eq!(bits(p), bits(&b.params[k]), "{k}");
            assert_eq!(bits(&a.moments[k].0), bits(&b.moments[k].0), "m {k}");
            assert_eq!(bits(&a.moments[k].1), bits(&b.moments[k].1), "v {k}");
            assert_eq!(bits(&a.best[k]), bits(&b.best[k]), "best {k}");
        }

        // On two ranks instead: the same masks (they follow global rows), the same losses
        // up to the order of float sums.
        let mut two = base("two");
        two.ranks = 2;
        two.resume = Some(stem("at4"));
        let out = run(&two).unwrap();
        assert_eq!(out.ranks.len(), 2);
        for (x, y) in out.ranks[0]
            .report
            .history
            .iter()
            .zip(&whole.ranks[0].report.history)
        {
            assert!(((x.loss - y.loss) / y.loss).abs() < 1e-5, "{x:?} vs {y:?}");
        }
    }

    /// The logits of a predictions file (`--predictions`).
    fn logits_in(path: &std::path::Path) -> Vec<f32> {
        let mut z = gnn_graph::io::npz::NpzArchive::open(path).unwrap();
        match z.read("logits").unwrap().data {
            gnn_graph::io::npz::NpyData::F32(v) => v,
            other => panic!("logits {other:?}"),
        }
    }

    /// `got` equals `want` up to the order of float sums: every logit within 1e-3 of the
    /// largest magnitude (rows out of order would differ by whole logits).
    fn same_logits(got: &[f32], want: &[f32]) {
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        let worst = got
            .iter()
            .zip(want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst <= 1e-3 * scale, "max diff {worst}, scale {scale}");
    }

    /// Cora on 3 ranks without dropout (runs that differ in their node order then train the
    /// same function: masks follow ids), `set` applied, predictions written under `dir` as
    /// `name.npz`: the logits read back in the file's order, the report, each rank's rows.
    fn predicting_run(
        dir: &std::path::Path,
        name: &str,
        set: impl FnOnce(&mut DistConfig),
    ) -> (Vec<f32>, Value, Vec<std::ops::Range<usize>>) {
        let mut cfg = cora(dir.join(format!("{name}.json")));
        cfg.model.dropout = 0.0;
        cfg.model.input_dropout = 0.0;
        cfg.ranks = 3;
        set(&mut cfg);
        let path = dir.join(format!("{name}.npz"));
        cfg.predictions = Some(path.clone());
        let out = run(&cfg).unwrap();
        let (report, _) = out.report.unwrap();
        let rows = out.ranks.iter().map(|o| o.rows.clone()).collect();
        (logits_in(&path), report, rows)
    }

    /// The degree order within each rank's range: the same parts (rows and halos per rank),
    /// the same model function, predictions row for row in the file's order.
    #[test]
    fn degree_order_within_parts_keeps_the_partition_and_the_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let run_with = |within: bool| {
            let (logits, report, rows) = predicting_run(dir.path(), &within.to_string(), |cfg| {
                cfg.partition = Partitioner::Range;
                cfg.degree_within_parts = within;
            });
            assert_eq!(report["degree_within_parts"], within);
            // Its cost counts in time to accuracy.
            let reorder_s = report["reorder_s"].as_f64().unwrap();
            assert_eq!(reorder_s > 0.0, within);
            assert_eq!(
                report["time_to_accuracy_with_reorder_s"].is_number(),
                within
            );
            let halos: Vec<_> = report["ranks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["halo"].clone())
                .collect();
            (logits, rows, halos)
        };
        let (sorted, sorted_rows, sorted_halos) = run_with(true);
        let (plain, plain_rows, plain_halos) = run_with(false);
        assert_eq!(sorted_rows, plain_rows);
        assert_eq!(sorted_halos, plain_halos);
        same_logits(&sorted, &plain);
    }

    #[test]
    fn a_metis_run_writes_predictions_in_the_file_order() {
        let dir = tempfile::tempdir().unwrap();
        let run_with = |partition: Partitioner| {
            let (logits, report, rows) =
                predicting_run(dir.path(), &partition.to_string(), |cfg| {
                    cfg.partition = partition;
                });
            assert_eq!(report["partition"]["chosen"], json!(partition));
            assert_eq!(report["partition"]["reason"], "as requested");
            (logits, report, rows)
        };
        let (metis, report, metis_rows) = run_with(Partitioner::Metis);
        let (range, range_report, range_rows) = run_with(Partitioner::Range);
        assert_eq!(metis.len(), 2708 * 7);
        assert_ne!(metis_rows, range_rows, "METIS gave the range partition");
        // The same model function on the same nodes, row for row in the file's order: equal up
        // to the order of float sums (rows out of order would differ by whole logits).
        same_logits(&metis, &range);
        // The METIS report holds both partitions' measures, the range one only its own.
        let compared = report["partition"]["compared"].as_array().unwrap();
        assert_eq!(compared.len(), 2);
        assert_eq!(compared[1]["method"], "metis");
        assert!(compared[1]["metis"]["partition_s"].as_f64().unwrap() >= 0.0);
        let halo = |r: &Value| r["total_halo"].as_u64().unwrap();
        assert!(halo(&compared[1]) < halo(&compared[0]), "{compared:?}");
        let ranks = report["ranks"].as_array().unwrap();
        for (r, row) in ranks.iter().enumerate() {
            assert_eq!(row["halo"], compared[1]["halo"][r], "rank {r}");
        }
        assert_eq!(
            range_report["partition"]["compared"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn a_process_launch_has_its_world() {
        let mut cfg = cora(PathBuf::from("unused.json"));
        assert_eq!(cfg.world(), 2);
        cfg.launch = Launch::Process(ProcessRank {
            rank: 1,
            world: 3,
            gpu: 1,
            rendezvous: crate::dist::Rendezvous::File("id".into()),
            sources: "test".into(),
        });
        assert_eq!(cfg.world(), 3);
        #[cfg(not(feature = "nccl"))]
        {
            let e = run(&cfg).err().unwrap().to_string();
            assert!(e.contains("nccl"), "{e}");
        }
    }
}
