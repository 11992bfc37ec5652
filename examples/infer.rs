//! Inference with the engine: a trained model on its graph with exact or edge-sampled
//! aggregation (ES-SpMM `bucket:S` / `fastrand:S`, AES-SpMM `aes:W`) and f32 or INT8
//! features, reporting test accuracy and the end-to-end split into feature loading,
//! aggregation, GEMM and other work.
//!
//! ```text
//! cargo run --release --example infer -- --weights weights/gcn-cora --aggregation aes:32 --int8
//! cargo run --release --features cuda --example infer -- --dataset synthetic-reddit \
//!     --weights runs/gcn --weights runs/sage --sweep --out runs/infer-sweep
//! ```
//!
//! `--sweep` runs every strategy at every width (default 16..1024) with both feature
//! encodings and writes `sweep.json`, `sweep.md` and `sweep.svg` (accuracy loss and
//! aggregation speed-up against width) under `--out`. On a GPU build the aggregation time is
//! compared with cuSPARSE's CSR SpMM on the same operands and widths, in the same run.

use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
use clap::Parser;
use gnn::graph::{generate, load_dgl_reddit, load_planetoid, Dataset, SyntheticSpec};
use gnn::models::Aggregation;
use gnn::train::{accuracy, Engine, HostFeatures};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[cfg(feature = "cuda")]
#[path = "common/cusparse.rs"]
mod cusparse;

/// Synthetic scale used on the CPU when `--scale` is not given (as `train_reddit`).
const CPU_DEFAULT_SCALE: f64 = 0.2;

#[derive(Parser)]
#[command(about = "Inference with exact or sampled aggregation and f32/INT8 features")]
struct Args {
    /// Trained model: checkpoint stem or `.safetensors` (repeat for several with --sweep).
    #[arg(long, required = true)]
    weights: Vec<PathBuf>,
    /// `cora` / `citeseer` / `pubmed` (Planetoid raw folder; Cora is bundled), `reddit` (DGL
    /// npz folder in --data-dir), or `synthetic-reddit` (generated with --scale, --seed).
    #[arg(long, default_value = "cora")]
    dataset: String,
    /// Folder of the real dataset.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Synthetic size (1 = 232,965 nodes); default 1 on a GPU, 0.2 on the CPU.
    #[arg(long)]
    scale: Option<f64>,
    /// Synthetic seed (the one the model was trained with).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Number synthetic nodes community by community (same graph, relabelled).
    #[arg(long)]
    community_order: bool,
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
    /// Run on the CPU even when a GPU is available.
    #[arg(long)]
    cpu: bool,
}

/// Feature loading, medians over three loads, ms.
#[derive(Debug, Clone, Copy, Serialize)]
struct Load {
    encoding: &'static str,
    bytes: usize,
    /// Reading the feature file (page cache).
    read_ms: f64,
    /// Host-to-device copy.
    h2d_ms: f64,
    /// Dequantisation on the device.
    dequant_ms: f64,
}

impl Load {
    /// What the breakdown calls feature loading: file read, copy and dequantisation.
    fn loading_ms(&self) -> f64 {
        self.read_ms + self.h2d_ms + self.dequant_ms
    }
}

/// One measured setting.
#[derive(Debug, Clone, Serialize)]
struct Row {
    model: String,
    aggregation: String,
    strategy: String,
    width: Option<usize>,
    features: &'static str,
    test_acc: f64,
    /// Exact f32 accuracy minus this one, percentage points.
    acc_loss_pts: f64,
    aggregation_ms: f64,
    gemm_ms: f64,
    other_ms: f64,
    forward_ms: f64,
    loading_ms: f64,
    end_to_end_ms: f64,
    speedup_vs_exact: f64,
    speedup_vs_cusparse: Option<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

fn load_dataset(args: &Args, device: &Device) -> Result<(Dataset, bool)> {
    let t = Instant::now();
    let (ds, row_normalize) = match args.dataset.as_str() {
        name @ ("cora" | "citeseer" | "pubmed") => {
            let dir = match (&args.data_dir, name) {
                (Some(d), _) => d.clone(),
                (None, "cora") => PathBuf::from("data/cora/raw"),
                (None, _) => bail!("--dataset {name} needs --data-dir (a Planetoid raw folder)"),
            };
            (load_planetoid(&dir, name)?, true)
        }
        "reddit" => {
            let dir = args
                .data_dir
                .as_ref()
                .context("--dataset reddit needs --data-dir (DGL's reddit folder)")?;
            (load_dgl_reddit(dir)?, false)
        }
        "synthetic-reddit" => {
            let scale = args.scale.unwrap_or(if device.is_cpu() {
                CPU_DEFAULT_SCALE
            } else {
                1.0
            });
            let mut spec = SyntheticSpec::reddit().scaled(scale)?;
            spec.community_order = args.community_order;
            let (ds, rep) = generate(&spec, args.seed)?;
            println!("{rep}");
            (ds, false)
        }
        other => {
            bail!("unknown --dataset `{other}` (cora, citeseer, pubmed, reddit, synthetic-reddit)")
        }
    };
    println!(
        "{} (loaded in {:.1} s)",
        ds.summary(),
        t.elapsed().as_secs_f64()
    );
    Ok((ds, row_normalize))
}

/// Warns when the checkpoint's JSON says it was trained on another dataset.
fn check_provenance(weights: &Path, ds: &Dataset) {
    let s = weights.to_string_lossy();
    let stem = s.strip_suffix(".safetensors").unwrap_or(&s);
    let Ok(text) = std::fs::read_to_string(format!("{stem}.json")) else {
        return;
    };
    let trained = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["info"]["dataset"].as_str().map(str::to_string));
    let here = ds.name.trim_end_matches("+community-order");
    if let Some(t) = trained.filter(|t| t != here) {
        println!(
            "warning: {} was trained on `{t}`, running on `{}`",
            weights.display(),
            ds.name
        );
    }
}

/// Saves `host` to a scratch file, then reads and uploads it three times; returns the device
/// features and the median times.
fn timed_load(host: &HostFeatures, device: &Device, scratch: &Path) -> Result<(Tensor, Load)> {
    let path = scratch.join(format!("features-{}.safetensors", host.encoding()));
    host.save(&path)?;
    let (mut read, mut h2d, mut dq) = (Vec::new(), Vec::new(), Vec::new());
    let mut x = None;
    for _ in 0..3 {
        let t = Instant::now();
        let h = HostFeatures::load(&path)?;
        read.push(t.elapsed().as_secs_f64() * 1e3);
        let (dev_x, lt) = h.upload(device)?;
        h2d.push(lt.h2d.as_secs_f64() * 1e3);
        dq.push(lt.dequant.as_secs_f64() * 1e3);
        x = Some(dev_x);
    }
    std::fs::remove_file(&path).ok();
    let load = Load {
        encoding: host.encoding(),
        bytes: host.bytes(),
        read_ms: median(read),
        h2d_ms: median(h2d),
        dequant_ms: median(dq),
    };
    Ok((x.context("no load ran")?, load))
}

/// Medians of `reps` timed forwards: (logits, aggregation, GEMM, other, total) in ms.
fn measure(engine: &Engine, x: &Tensor, reps: usize) -> Result<(Tensor, [f64; 4])> {
    for _ in 0..2 {
        engine.run_timed(x)?;
    }
    let mut cols: [Vec<f64>; 4] = Default::default();
    let mut logits = None;
    for _ in 0..reps.max(1) {
        let r = engine.run_timed(x)?;
        let (a, g) = (
            r.phases.aggregation.as_secs_f64() * 1e3,
            r.phases.gemm.as_secs_f64() * 1e3,
        );
        let total = r.total.as_secs_f64() * 1e3;
        for (c, v) in cols.iter_mut().zip([a, g, (total - a - g).max(0.0), total]) {
            c.push(v);
        }
        logits = Some(r.logits);
    }
    let [a, g, o, t] = cols.map(median);
    Ok((logits.context("no forward ran")?, [a, g, o, t]))
}

/// Aggregation widths of each layer: the layers aggregate at the narrower side of their
/// linear map (see the conv docs).
fn layer_widths(engine: &Engine) -> Vec<usize> {
    let cfg = engine.model().config();
    (0..cfg.layers)
        .map(|l| {
            let (i, o) = cfg.layer_dims(l);
            i.min(o)
        })
        .collect()
}

/// cuSPARSE CSR SpMM time for the model's exact aggregations (sum over layers, best of the
/// default and CSR_ALG2 algorithms per width, median ms), on the same graph and values: GCN's
/// normalised values, 1/deg for GraphSAGE-mean, ones for GIN.
#[cfg(feature = "cuda")]
fn cusparse_ms(engine: &Engine, reps: usize) -> Result<Option<f64>> {
    use cusparse::{time_ms, Cusparse, SpmmAlg};
    let Device::Cuda(dev) = engine.device() else {
        return Ok(None);
    };
    let g = &engine.graph().graph;
    let csr = g.csr();
    let values = match (engine.model().config().kind, &engine.graph().values) {
        (gnn::models::ConvKind::Gcn, Some(v)) => v.clone(),
        (gnn::models::ConvKind::SageMean, _) => {
            let v: Vec<f32> = (0..csr.n_rows())
                .flat_map(|i| {
                    let d = csr.row_len(i);
                    std::iter::repeat_n(1.0 / d.max(1) as f32, d)
                })
                .collect();
            Tensor::from_vec(v, csr.nnz(), engine.device())?
        }
        (gnn::models::ConvKind::Gin, _) => {
            Tensor::ones(csr.nnz(), candle_core::DType::F32, engine.device())?
        }
        _ => return Ok(None),
    };
    let stream = dev.cuda_stream();
    let sp = Cusparse::new(g, &values, &stream)?;
    let mut total = 0.0;
    for k in layer_widths(engine) {
        let b = Tensor::randn(0f32, 1.0, (g.n_cols(), k), engine.device())?;
        let c = Tensor::zeros((g.n_rows(), k), candle_core::DType::F32, engine.device())?;
        let mut best = f64::INFINITY;
        for alg in [
            SpmmAlg::CUSPARSE_SPMM_ALG_DEFAULT,
            SpmmAlg::CUSPARSE_SPMM_CSR_ALG2,
        ] {
            let plan = sp.plan(&b, &c, alg, dev)?;
            best = best.min(time_ms(&stream, reps, || sp.run(&plan))?);
        }
        total += best;
    }
    Ok(Some(total))
}

#[cfg(not(feature = "cuda"))]
fn cusparse_ms(_: &Engine, _: usize) -> Result<Option<f64>> {
    Ok(None)
}

fn sampling_of(strategy: &str, width: usize) -> Result<Aggregation> {
    Ok(format!("{strategy}:{width}").parse()?)
}

struct Ctx<'a> {
    labels: Tensor,
    test: Tensor,
    reps: usize,
    model: String,
    exact_acc: f64,
    exact_agg_ms: f64,
    cusparse_ms: Option<f64>,
    features: [(&'a Tensor, Load); 2],
}

fn run_setting(engine: &mut Engine, ctx: &Ctx, agg: Aggregation, int8: bool) -> Result<Row> {
    engine.set_aggregation(agg)?;
    let (x, load) = ctx.features[int8 as usize];
    let (logits, [a, g, o, t]) = measure(engine, x, ctx.reps)?;
    let acc = accuracy(&logits, &ctx.labels, &ctx.test)?;
    let (strategy, width) = match agg.to_string().split_once(':') {
        Some((s, w)) => (s.to_string(), w.parse().ok()),
        None => ("exact".to_string(), None),
    };
    Ok(Row {
        model: ctx.model.clone(),
        aggregation: agg.to_string(),
        strategy,
        width,
        features: load.encoding,
        test_acc: acc,
        acc_loss_pts: 100.0 * (ctx.exact_acc - acc),
        aggregation_ms: a,
        gemm_ms: g,
        other_ms: o,
        forward_ms: t,
        loading_ms: load.loading_ms(),
        end_to_end_ms: load.loading_ms() + t,
        speedup_vs_exact: ctx.exact_agg_ms / a,
        speedup_vs_cusparse: ctx.cusparse_ms.map(|c| c / a),
    })
}

fn print_rows(rows: &[Row]) {
    println!(
        "{:<22} {:<14} {:<5} {:>8} {:>7} {:>9} {:>8} {:>8} {:>9} {:>9} {:>7} {:>8}",
        "model",
        "aggregation",
        "feat",
        "test %",
        "loss",
        "agg ms",
        "gemm ms",
        "other",
        "load ms",
        "e2e ms",
        "vs ours",
        "vs cuSP"
    );
    for r in rows {
        println!(
            "{:<22} {:<14} {:<5} {:>8.2} {:>7.2} {:>9.3} {:>8.3} {:>8.3} {:>9.3} {:>9.3} {:>6.2}x {:>8}",
            r.model,
            r.aggregation,
            r.features,
            100.0 * r.test_acc,
            r.acc_loss_pts,
            r.aggregation_ms,
            r.gemm_ms,
            r.other_ms,
            r.loading_ms,
            r.end_to_end_ms,
            r.speedup_vs_exact,
            r.speedup_vs_cusparse
                .map(|s| format!("{s:.2}x"))
                .unwrap_or_else(|| "-".into())
        );
    }
}

fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| model | aggregation | features | test acc % | loss (pts) | aggregation ms | GEMM ms | other ms | loading ms | end-to-end ms | vs our exact | vs cuSPARSE |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {:.2} | {:.2} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.2}× | {} |\n",
            r.model,
            r.aggregation,
            r.features,
            100.0 * r.test_acc,
            r.acc_loss_pts,
            r.aggregation_ms,
            r.gemm_ms,
            r.other_ms,
            r.loading_ms,
            r.end_to_end_ms,
            r.speedup_vs_exact,
            r.speedup_vs_cusparse
                .map(|v| format!("{v:.2}×"))
                .unwrap_or_else(|| "–".into())
        );
    }
    s
}

/// Two panels against width (log scale), f32 features: accuracy loss, and aggregation
/// speed-up over cuSPARSE (over our exact kernel when cuSPARSE was not measured).
fn chart(rows: &[Row], path: &Path) -> Result<()> {
    use gnn::train::chart::{draw_svg, Line, Panel};
    let pts: Vec<&Row> = rows
        .iter()
        .filter(|r| r.width.is_some() && r.features == "f32")
        .collect();
    if pts.is_empty() {
        return Ok(());
    }
    let peer = pts.iter().all(|r| r.speedup_vs_cusparse.is_some());
    let speed = |r: &Row| match (peer, r.speedup_vs_cusparse) {
        (true, Some(s)) => s,
        _ => r.speedup_vs_exact,
    };
    // One line per (model, strategy), points in width order as measured.
    let mut names: Vec<String> = Vec::new();
    for r in &pts {
        let n = format!("{} {}", r.model, r.strategy);
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let series = |f: &dyn Fn(&Row) -> f64| -> Vec<Line> {
        names
            .iter()
            .map(|n| {
                let v = pts
                    .iter()
                    .filter(|r| &format!("{} {}", r.model, r.strategy) == n)
                    .map(|r| (r.width.unwrap_or(1) as f64, f(r)))
                    .collect();
                Line::measured(n.clone(), v)
            })
            .collect()
    };
    let mut loss = Panel::lines(
        "accuracy loss vs exact (points)",
        "sampling width S / W",
        "",
        series(&|r| r.acc_loss_pts),
    );
    loss.log_x = true;
    let lo = pts.iter().map(|r| r.acc_loss_pts).fold(0.0, f64::min) - 0.1;
    let hi = pts.iter().map(|r| r.acc_loss_pts).fold(1.0, f64::max) * 1.1;
    loss.y_range = Some((lo, hi));
    let title = if peer {
        "aggregation speed-up over cuSPARSE"
    } else {
        "aggregation speed-up over our exact kernel"
    };
    let mut fast = Panel::lines(title, "sampling width S / W", "", series(&|r| speed(r)));
    fast.log_x = true;
    Ok(draw_svg(path, &[loss, fast], 2, (640, 480))?)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let device = gnn::train::pick_device(args.cpu)?;
    println!("device: {}", gnn::train::device_name(&device));
    let (ds, row_normalize) = load_dataset(&args, &device)?;
    let host = match &args.features {
        Some(p) => {
            HostFeatures::load(p).with_context(|| format!("reading features {}", p.display()))?
        }
        None => HostFeatures::from_dataset(&ds, row_normalize)?,
    };
    if host.dims()? != (ds.num_nodes(), ds.features.cols()) {
        bail!(
            "features are {:?} but the dataset has {} nodes x {} features",
            host.dims()?,
            ds.num_nodes(),
            ds.features.cols()
        );
    }
    if let Some(p) = &args.save_features {
        let h = if args.int8 {
            host.quantize()?
        } else {
            host.clone()
        };
        h.save(p)?;
        println!("wrote {} features to {}", h.encoding(), p.display());
    }
    let labels: Vec<u32> = ds.labels.iter().map(|&l| l.max(0) as u32).collect();
    let labels = Tensor::from_vec(labels, ds.num_nodes(), &device)?;
    let test = Tensor::from_vec(ds.split.test.clone(), ds.split.test.len(), &device)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;

    // Both encodings, loaded the way a deployment would: file -> host -> device.
    let f32_host = match &host {
        HostFeatures::F32(_) => host.clone(),
        HostFeatures::Int8 { .. } => {
            if args.sweep || !args.int8 {
                bail!("--features holds INT8 codes: use it with --int8 and without --sweep");
            }
            host.clone()
        }
    };
    let (x32, l32) = timed_load(&f32_host, &device, &args.out)?;
    let (x8, l8) = timed_load(&f32_host.quantize()?, &device, &args.out)?;
    for l in [&l32, &l8] {
        println!(
            "features {:<4}: {:>7.1} MB, read {:.2} ms, host-to-device {:.2} ms, dequantise {:.3} ms",
            l.encoding,
            l.bytes as f64 / 1e6,
            l.read_ms,
            l.h2d_ms,
            l.dequant_ms
        );
    }

    let mut rows = Vec::new();
    let mut models = Vec::new();
    for w in &args.weights {
        check_provenance(w, &ds);
        let mut engine = Engine::load(w, &ds.graph, &device)
            .with_context(|| format!("loading {}", w.display()))?;
        let cfg = engine.model().config().clone();
        let model = format!(
            "{} {}x{}",
            cfg.kind,
            cfg.layers,
            if cfg.layers > 1 {
                cfg.hidden
            } else {
                cfg.out_dim
            }
        );
        let (logits, [exact_agg, ..]) = measure(&engine, &x32, args.reps)?;
        let exact_acc = accuracy(&logits, &labels, &test)?;
        let cusp = cusparse_ms(&engine, args.reps)?;
        println!(
            "{}: {model}, exact test accuracy {:.2} %, exact aggregation {exact_agg:.3} ms{}",
            w.display(),
            100.0 * exact_acc,
            cusp.map(|c| format!(", cuSPARSE {c:.3} ms"))
                .unwrap_or_default()
        );
        let ctx = Ctx {
            labels: labels.clone(),
            test: test.clone(),
            reps: args.reps,
            model: model.clone(),
            exact_acc,
            exact_agg_ms: exact_agg,
            cusparse_ms: cusp,
            features: [(&x32, l32), (&x8, l8)],
        };
        let mut mine = Vec::new();
        if args.sweep {
            for int8 in [false, true] {
                mine.push(run_setting(&mut engine, &ctx, Aggregation::Exact, int8)?);
            }
            for s in &args.strategies {
                for &width in &args.widths {
                    for int8 in [false, true] {
                        mine.push(run_setting(
                            &mut engine,
                            &ctx,
                            sampling_of(s, width)?,
                            int8,
                        )?);
                    }
                }
            }
        } else {
            mine.push(run_setting(&mut engine, &ctx, args.aggregation, args.int8)?);
        }
        print_rows(&mine);
        models.push(serde_json::json!({
            "weights": w, "model": model, "config": cfg, "exact_test_acc": exact_acc,
            "exact_aggregation_ms": exact_agg, "cusparse_ms": cusp,
            "aggregation_widths": layer_widths(&engine),
        }));
        rows.extend(mine);
    }

    // Summary: the fastest setting within 1 point, AES against ES Bucket, INT8 loading.
    let mut summary = Vec::new();
    for m in rows
        .iter()
        .map(|r| r.model.clone())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.model == m).collect();
        let best = mine
            .iter()
            .filter(|r| r.width.is_some() && r.features == "f32" && r.acc_loss_pts < 1.0)
            .max_by(|a, b| a.aggregation_ms.total_cmp(&b.aggregation_ms).reverse());
        let loss = |strategy: &str, w: usize| {
            mine.iter()
                .find(|r| r.strategy == strategy && r.width == Some(w) && r.features == "f32")
                .map(|r| r.acc_loss_pts)
        };
        let widths: Vec<usize> = args.widths.clone();
        let aes_vs_bucket: Vec<_> = widths
            .iter()
            .filter_map(|&w| Some((w, loss("aes", w)?, loss("bucket", w)?)))
            .collect();
        let int8_extra = mine
            .iter()
            .find(|r| r.strategy == "exact" && r.features == "int8")
            .map(|r| r.acc_loss_pts);
        if let Some(b) = best {
            println!(
                "{m}: fastest setting within 1 point: {} ({:.3} ms, {:.2}x our exact{}; loss {:.2} pts)",
                b.aggregation,
                b.aggregation_ms,
                b.speedup_vs_exact,
                b.speedup_vs_cusparse
                    .map(|s| format!(", {s:.2}x cuSPARSE"))
                    .unwrap_or_default(),
                b.acc_loss_pts
            );
        }
        if !aes_vs_bucket.is_empty() {
            let wins = aes_vs_bucket.iter().filter(|(_, a, b)| a < b).count();
            println!(
                "{m}: AES loses less than ES Bucket at {wins} of {} widths: {}",
                aes_vs_bucket.len(),
                aes_vs_bucket
                    .iter()
                    .map(|(w, a, b)| format!("{w}: {a:.2} vs {b:.2}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        summary.push(serde_json::json!({
            "model": m,
            "best_within_1pt": best.map(|b| b.aggregation.clone()),
            "best_within_1pt_speedup_vs_cusparse": best.and_then(|b| b.speedup_vs_cusparse),
            "best_within_1pt_speedup_vs_exact": best.map(|b| b.speedup_vs_exact),
            "aes_vs_bucket_loss_pts": aes_vs_bucket,
            "int8_extra_loss_pts": int8_extra,
        }));
    }
    let cut = 100.0 * (1.0 - l8.loading_ms() / l32.loading_ms());
    let h2d_cut = 100.0 * (1.0 - (l8.h2d_ms + l8.dequant_ms) / l32.h2d_ms.max(1e-9));
    println!(
        "INT8 features: loading (read + copy + dequantise) {:.2} -> {:.2} ms ({cut:.0} % less); \
         copy + dequantise {:.2} -> {:.2} ms{}; {:.1} -> {:.1} MB",
        l32.loading_ms(),
        l8.loading_ms(),
        l32.h2d_ms,
        l8.h2d_ms + l8.dequant_ms,
        if device.is_cpu() {
            " (no copy on the CPU)".to_string()
        } else {
            format!(" ({h2d_cut:.0} % less)")
        },
        l32.bytes as f64 / 1e6,
        l8.bytes as f64 / 1e6
    );

    let doc = serde_json::json!({
        "device": gnn::train::device_name(&device),
        "dataset": ds.name, "nodes": ds.num_nodes(), "edges": ds.graph.nnz(),
        "features": ds.features.cols(), "reps": args.reps,
        "loading": [l32, l8], "int8_loading_cut_pct": cut,
        "int8_copy_dequant_cut_pct": (!device.is_cpu()).then_some(h2d_cut),
        "models": models, "summary": summary, "rows": rows,
    });
    let stem = if args.sweep { "sweep" } else { "infer" };
    let json = args.out.join(format!("{stem}.json"));
    std::fs::write(&json, serde_json::to_string_pretty(&doc)? + "\n")?;
    std::fs::write(args.out.join(format!("{stem}.md")), markdown(&rows))?;
    if args.sweep {
        chart(&rows, &args.out.join("sweep.svg"))?;
    }
    println!(
        "wrote {} (and .md{})",
        json.display(),
        if args.sweep { ", sweep.svg" } else { "" }
    );
    Ok(())
}
