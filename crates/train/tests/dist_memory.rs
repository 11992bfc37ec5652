//! The memory estimate of a distributed rank (`gnn_train::dist::memory`) against what the CPU
//! path allocates, counted by a global allocator: the activations a training step keeps for
//! its backward, and the step's highest point.
//!
//! `cargo test --release -p gnn-train --test dist_memory -- --ignored --nocapture` with
//! `KIND`, `HIDDEN`, `RANKS`, `SCALE` (and `CHUNK`, feature columns) set measures one
//! configuration of the papers100M-shaped graph and prints it beside the estimate.

use candle_core::{Device, Tensor};
use gnn_comm::{Communicator, LocalComm};
use gnn_graph::{Dataset, SyntheticSpec};
use gnn_models::{ConvKind, DropoutRng, Forward, ModelConfig};
use gnn_train::dist::memory::{estimate_all, Target};
use gnn_train::dist::{DistPlan, Rank, Recipe};
use gnn_train::{LabelledOutput, TrainConfig};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The system allocator, counting the bytes live and their high-water mark.
struct Counting;
static LIVE: AtomicU64 = AtomicU64::new(0);
static HIGH: AtomicU64 = AtomicU64::new(0);

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
    HIGH.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call forwards to the system allocator with the caller's arguments; the
// counters are only arithmetic on the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size() as u64, Ordering::Relaxed);
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new >= l.size() {
                grew(new - l.size());
            } else {
                LIVE.fetch_sub((l.size() - new) as u64, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// One measurement at a time: the counters are the process's.
static SERIAL: Mutex<()> = Mutex::new(());

fn barrier(c: &dyn Communicator) {
    let t = Tensor::zeros(1, candle_core::DType::F32, &Device::Cpu).unwrap();
    c.all_reduce_sum(&t).unwrap();
}

/// What one training step allocated on `ranks` in-process ranks, all ranks together:
/// `(kept after the forward, highest point of the step)`, both above what was live before
/// it (the data, the graphs, the cached input aggregation); and the estimate's
/// `(kept, kept + transient)` summed over the ranks.
fn measure(
    ds: &Dataset,
    model: &ModelConfig,
    ranks: usize,
    chunk: Option<usize>,
    selected: bool,
) -> [u64; 4] {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let train = TrainConfig::default();
    // The labelled rows' aggregation runs under the all-gather exchange only (the papers
    // runs take it; at this scale the automatic choice can be point-to-point).
    let exchange = selected.then_some(gnn_graph::Exchange::AllGather);
    let mut plan = DistPlan::new(ds, model.kind, ranks, exchange).unwrap();
    plan.feature_chunk = chunk;
    // The ring of per-rank blocks the estimate was measured against (on three or more ranks
    // this small graph would otherwise aggregate whole: `WHOLE_GATHER_BYTES`).
    plan.small_gather_whole = false;
    // The output layer's aggregation of the labelled rows alone (GCN's and GraphSAGE-mean's
    // default), or the whole aggregation followed by the selection.
    plan.selected_output_aggregation = selected;
    let est = estimate_all(&plan, model, &train, Target::Cpu);
    let recipe = Recipe {
        model,
        train: &train,
        seed: 0,
        row_normalize: false,
        kernels: Default::default(),
        widths: Default::default(),
    };
    let got = LocalComm::run_group(ranks, |c| {
        let comm: Arc<dyn Communicator> = Arc::new(c);
        let r = Rank::new(&plan, ds, recipe, comm.clone(), &Device::Cpu).unwrap();
        // The path asked for is the one that runs (no silent fallback to the whole one).
        assert_eq!(plan.selects_output_aggregation(&r.model, &train), selected);
        let agg = r.model.input_aggregate(&r.graph, &r.data.x).unwrap();
        // The output layer's rows as the trainer takes them (the labelled 1.4 %): resident,
        // as the data.
        let out = LabelledOutput::choose(&r.model, &r.data, train.labelled_output).unwrap();
        assert!(out.is_some(), "papers100M's labelled rows are few");
        let data = out.as_ref().map_or(&r.data, |o| &o.data);
        barrier(comm.as_ref());
        let before = LIVE.load(Ordering::Relaxed);
        if comm.rank() == 0 {
            HIGH.store(before, Ordering::Relaxed);
        }
        barrier(comm.as_ref());
        let mut rng = DropoutRng::new(7).with_row_offset(r.rows.start as u64);
        let mut pass = Forward::train(&mut rng)
            .with_input_aggregate(agg.as_ref())
            .with_output_rows(out.as_ref().map(|o| &o.rows));
        let logits = r.model.forward(&r.graph, &r.data.x, &mut pass).unwrap();
        barrier(comm.as_ref());
        let kept = LIVE.load(Ordering::Relaxed);
        barrier(comm.as_ref());
        let loss =
            gnn_train::masked_cross_entropy(&logits, &data.labels, &data.train_weight).unwrap();
        let grads = loss.backward().unwrap();
        barrier(comm.as_ref());
        let high = HIGH.load(Ordering::Relaxed);
        drop(grads);
        [kept - before, high - before]
    });
    let [kept, high] = got[0];
    let est_kept = est.iter().map(|e| e.kept).sum();
    let est_high = est.iter().map(|e| e.kept + e.transient.0).sum();
    [kept, high, est_kept, est_high]
}

fn papers(scale: f64) -> Dataset {
    let spec = SyntheticSpec::papers100m().scaled(scale).unwrap();
    gnn_graph::generate(&spec, 0).unwrap().0
}

fn model(kind: ConvKind, hidden: usize) -> ModelConfig {
    let mut m = ModelConfig::new(kind, 128, hidden, 172, 3, 0.5);
    // The papers100M recipe: no input dropout, so the input aggregation is cached.
    m.input_dropout = 0.0;
    m
}

#[test]
fn the_estimate_holds_the_cpu_paths_allocations() {
    let ds = papers(0.001);
    // The output layer on the labelled rows alone (the default where the output layer
    // aggregates first: not GCN 3x256, whose output layer multiplies first), and once the
    // whole path, which is what the estimate replays: it bounds both (step high, estimate
    // over measured: selected 1.01-1.11 from run to run, GCN 3x256 whole 1.08).
    for (kind, hidden, ranks, chunk, selected) in [
        (ConvKind::Gcn, 64, 4, None, true),
        (ConvKind::Gcn, 128, 2, Some(32), true),
        (ConvKind::Gcn, 256, 2, Some(32), false),
        (ConvKind::SageMean, 128, 4, None, true),
        (ConvKind::SageMean, 64, 3, Some(16), true),
    ] {
        let [kept, high, est_kept, est_high] =
            measure(&ds, &model(kind, hidden), ranks, chunk, selected);
        let what = format!("{kind} 3x{hidden} P={ranks} chunk {chunk:?} selected {selected}");
        println!("{what}: kept {kept} (estimate {est_kept}), high {high} (estimate {est_high})");
        // The kept activations to within 1 % (the rounding of the masks' words, small
        // tensors); the step's highest point within -5 % .. +25 %: the estimate is each
        // rank's peak, summed, where the in-process ranks reach theirs at slightly different
        // moments (between collectives each runs at its own pace: the measured high of one
        // configuration varies by 7 % from run to run), and it rounds transients up
        // (measured 0.998-1.12 on 4 ranks, up to 1.20 on 3; GCN 3x64 on 4 ranks 0.961 twice
        // while another build loaded both cores, 2026-11-28, where the ranks' paces differ
        // most).
        let ratio = |a: u64, b: u64| a as f64 / b as f64;
        assert!((ratio(est_kept, kept) - 1.0).abs() < 0.01, "{what}: kept");
        assert!(
            (0.95..1.25).contains(&ratio(est_high, high)),
            "{what}: high"
        );
    }
}

#[test]
#[ignore = "a measurement: KIND, HIDDEN, RANKS, SCALE, CHUNK from the environment"]
fn measure_one_configuration() {
    let var = |k: &str| std::env::var(k).ok();
    let scale: f64 = var("SCALE").map_or(0.002, |s| s.parse().unwrap());
    let hidden: usize = var("HIDDEN").map_or(128, |s| s.parse().unwrap());
    let ranks: usize = var("RANKS").map_or(4, |s| s.parse().unwrap());
    let kind: ConvKind = var("KIND").map_or(ConvKind::Gcn, |s| s.parse().unwrap());
    let chunk: Option<usize> = var("CHUNK").map(|s| s.parse().unwrap());
    let selected = var("SELECTED").is_some_and(|s| s == "1");
    let ds = papers(scale);
    let n = ds.num_nodes() as f64;
    let [kept, high, est_kept, est_high] =
        measure(&ds, &model(kind, hidden), ranks, chunk, selected);
    println!(
        "{kind} 3x{hidden} P={ranks} scale {scale} chunk {chunk:?} selected {selected}, bytes \
         per node: kept {:.0} \
         (estimate {:.0}), step high {:.0} (estimate {:.0})",
        kept as f64 / n,
        est_kept as f64 / n,
        high as f64 / n,
        est_high as f64 / n
    );
}
