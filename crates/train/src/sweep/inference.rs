//! Inference sweep: trained models on their graph under exact or edge-sampled aggregation
//! (ES-SpMM `bucket:S` / `fastrand:S`, AES-SpMM `aes:W`) and f32 or INT8 features, reporting
//! test accuracy and the end-to-end split into feature loading (file read, host-to-device
//! copy, dequantisation), aggregation, GEMM and other work. With `sweep` every strategy runs
//! at every width with both encodings; on a GPU build the aggregation time is also compared
//! with cuSPARSE's CSR SpMM on the same operands and widths, in the same process.

use crate::data::accuracy;
use crate::error::{Error, Result};
use crate::features::HostFeatures;
use crate::infer::Engine;
use crate::report::chart::{draw_svg, Line, Panel};
use crate::report::{median, or_dash, write_json, write_text, Table};
use candle_core::{Device, Tensor};
use gnn_graph::Dataset;
use gnn_models::Aggregation;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What to run.
#[derive(Debug, Clone)]
pub struct InferSweep {
    /// Trained models: checkpoint stems or `.safetensors` files.
    pub weights: Vec<PathBuf>,
    /// The one aggregation to run without `sweep`.
    pub aggregation: Aggregation,
    /// INT8 features for that one run.
    pub int8: bool,
    /// Run every strategy at every width with both encodings instead.
    pub sweep: bool,
    /// Sweep widths.
    pub widths: Vec<usize>,
    /// Sweep strategies (`bucket`, `fastrand`, `aes`).
    pub strategies: Vec<String>,
    /// Timed forward passes per setting (median reported), after two warm-ups.
    pub reps: usize,
    /// Row-normalise the dataset's features (as the model was trained).
    pub row_normalize: bool,
    /// Read the features from this file (written by `save_features`) instead of the dataset.
    pub features: Option<PathBuf>,
    /// Write the features (INT8 with `int8`) to this safetensors file.
    pub save_features: Option<PathBuf>,
    /// Output folder: `infer.json`/`.md`, or `sweep.json`/`.md`/`.svg`.
    pub out: PathBuf,
    /// Without `sweep`, one model: write its per-node predictions here (`.npz`, see
    /// [`write_predictions`]).
    pub predictions: Option<PathBuf>,
    /// The reordering applied to the dataset after loading ([`crate::run::Loaded`]'s
    /// `new_of_old`), so predictions are written in the file's node order.
    pub new_of_old: Option<Vec<u32>>,
    /// Device storage of the features and activations for exact inference (bf16 / f16 need a
    /// CUDA device and run neither INT8 features nor sampled aggregation nor `sweep`).
    pub precision: crate::Precision,
    /// Which GPU kernel each sparse op runs (written into the report with the kernels that
    /// ran).
    pub kernels: gnn_kernels::KernelPolicy,
}

/// Writes per-node predictions of `logits` (`[N, C]`, rows in the dataset's current order) to
/// the `.npz` `path` in the original node order: `pred` (int64 `[N]`, the arg-max class) and
/// `logits` (float32 `[N, C]`); row `i` is node `i` of the loaded file. `new_of_old` is the
/// reordering applied after loading (`None`: the file's order).
pub fn write_predictions(path: &Path, logits: &Tensor, new_of_old: Option<&[u32]>) -> Result<()> {
    let (n, c) = logits.dims2()?;
    let rows: Vec<Vec<f32>> = logits.to_dtype(candle_core::DType::F32)?.to_vec2()?;
    if let Some(p) = new_of_old.filter(|p| p.len() != n) {
        return Err(Error::Invalid(format!(
            "the node order has {} entries but the logits have {n} rows",
            p.len()
        )));
    }
    let row_of = |old: usize| new_of_old.map_or(old, |p| p[old] as usize);
    let mut flat = Vec::with_capacity(n * c);
    let mut pred = Vec::with_capacity(n);
    for old in 0..n {
        let r = &rows[row_of(old)];
        flat.extend_from_slice(r);
        let best =
            r.iter().enumerate().fold(
                (0, f32::NEG_INFINITY),
                |b, (j, &v)| if v > b.1 { (j, v) } else { b },
            );
        pred.push(best.0 as i64);
    }
    use gnn_graph::io::npz::{write_npz, NpyArray, NpyData};
    let pred = NpyArray {
        shape: vec![n],
        data: NpyData::I64(pred),
    };
    let logits = NpyArray {
        shape: vec![n, c],
        data: NpyData::F32(flat),
    };
    write_npz(path, &[("pred", &pred), ("logits", &logits)], true)?;
    Ok(())
}

/// Feature loading, medians over three loads, ms.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Load {
    /// `f32` or `int8` (`bf16` / `f16` under a half precision: the f32 file narrowed on the
    /// device).
    pub encoding: &'static str,
    /// File size.
    pub bytes: usize,
    /// Reading the feature file (page cache).
    pub read_ms: f64,
    /// Host-to-device copy.
    pub h2d_ms: f64,
    /// Dequantisation on the device.
    pub dequant_ms: f64,
}

impl Load {
    /// What the breakdown calls feature loading: file read, copy and dequantisation.
    pub fn loading_ms(&self) -> f64 {
        self.read_ms + self.h2d_ms + self.dequant_ms
    }
}

/// One measured setting.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Model, e.g. `gcn 2x128`.
    pub model: String,
    /// The aggregation as written on the command line.
    pub aggregation: String,
    /// `exact`, `bucket`, `fastrand` or `aes`.
    pub strategy: String,
    /// Sampling width.
    pub width: Option<usize>,
    /// Feature encoding.
    pub features: &'static str,
    /// Test accuracy (fraction).
    pub test_acc: f64,
    /// Exact f32 accuracy minus this one, percentage points.
    pub acc_loss_pts: f64,
    /// Medians, ms.
    pub aggregation_ms: f64,
    /// GEMM.
    pub gemm_ms: f64,
    /// The rest of the forward.
    pub other_ms: f64,
    /// The whole forward.
    pub forward_ms: f64,
    /// Feature loading.
    pub loading_ms: f64,
    /// Loading plus forward.
    pub end_to_end_ms: f64,
    /// Our exact aggregation time over this one's.
    pub speedup_vs_exact: f64,
    /// cuSPARSE's over this one's (GPU builds).
    pub speedup_vs_cusparse: Option<f64>,
}

/// Warns when the checkpoint's JSON says it was trained on another dataset.
fn check_provenance(weights: &Path, ds: &Dataset) {
    let s = weights.to_string_lossy();
    let stem = s.strip_suffix(".safetensors").unwrap_or(&s);
    let Ok(text) = std::fs::read_to_string(format!("{stem}.json")) else {
        return;
    };
    let trained = serde_json::from_str::<Value>(&text)
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
    Ok((x.ok_or_else(|| Error::Invalid("no load ran".into()))?, load))
}

/// Medians of `reps` timed forwards: logits and (aggregation, GEMM, other, total) in ms.
fn measure(engine: &Engine, x: &Tensor, reps: usize) -> Result<(Tensor, [f64; 4])> {
    for _ in 0..2 {
        engine.run_timed(x)?;
    }
    let mut cols: [Vec<f64>; 4] = Default::default();
    let mut logits = None;
    for _ in 0..reps.max(1) {
        let r = engine.run_timed(x)?;
        let a = r.phases.aggregation.as_secs_f64() * 1e3;
        let g = r.phases.gemm.as_secs_f64() * 1e3;
        let total = r.total.as_secs_f64() * 1e3;
        for (c, v) in cols.iter_mut().zip([a, g, (total - a - g).max(0.0), total]) {
            c.push(v);
        }
        logits = Some(r.logits);
    }
    let logits = logits.ok_or_else(|| Error::Invalid("no forward ran".into()))?;
    Ok((logits, cols.map(median)))
}

/// Aggregation widths of each layer: the layers aggregate at the narrower side of their
/// linear map (see the conv docs).
pub fn layer_widths(engine: &Engine) -> Vec<usize> {
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
/// normalised values, 1/deg for GraphSAGE-mean, ones for GIN. `None` on the CPU and for
/// layer types cuSPARSE has no counterpart of.
#[cfg(all(feature = "cuda", feature = "verify"))]
pub fn cusparse_ms(engine: &Engine, reps: usize) -> Result<Option<f64>> {
    use gnn_kernels::peer::{time_ms, Cusparse, SpmmAlg};
    use gnn_models::ConvKind;
    let Device::Cuda(dev) = engine.device() else {
        return Ok(None);
    };
    let g = &engine.graph().graph;
    let csr = g.csr();
    let values = match (engine.model().config().kind, &engine.graph().values) {
        (ConvKind::Gcn, Some(v)) => v.clone(),
        (ConvKind::SageMean, _) => {
            let v: Vec<f32> = (0..csr.n_rows())
                .flat_map(|i| {
                    let d = csr.row_len(i);
                    std::iter::repeat_n(1.0 / d.max(1) as f32, d)
                })
                .collect();
            Tensor::from_vec(v, csr.nnz(), engine.device())?
        }
        (ConvKind::Gin, _) => Tensor::ones(csr.nnz(), candle_core::DType::F32, engine.device())?,
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

/// Without CUDA, or without the `verify` feature's cuSPARSE peer, there is no cuSPARSE to
/// compare with.
#[cfg(not(all(feature = "cuda", feature = "verify")))]
pub fn cusparse_ms(_: &Engine, _: usize) -> Result<Option<f64>> {
    Ok(None)
}

/// A model's fixed context for its settings.
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

/// The rows as one table (printed fixed-width, written as Markdown).
pub fn table(rows: &[Row]) -> Table {
    let mut t = Table::new()
        .left("model", 22)
        .left("aggregation", 14)
        .left("features", 8);
    for (h, w) in [
        ("test acc %", 10),
        ("loss (pts)", 10),
        ("aggregation ms", 14),
        ("GEMM ms", 8),
        ("other ms", 8),
        ("loading ms", 10),
        ("end-to-end ms", 13),
        ("vs our exact", 12),
        ("vs cuSPARSE", 11),
    ] {
        t = t.right(h, w);
    }
    for r in rows {
        t.row(vec![
            r.model.clone(),
            r.aggregation.clone(),
            r.features.to_string(),
            format!("{:.2}", 100.0 * r.test_acc),
            format!("{:.2}", r.acc_loss_pts),
            format!("{:.3}", r.aggregation_ms),
            format!("{:.3}", r.gemm_ms),
            format!("{:.3}", r.other_ms),
            format!("{:.3}", r.loading_ms),
            format!("{:.3}", r.end_to_end_ms),
            format!("{:.2}×", r.speedup_vs_exact),
            or_dash(r.speedup_vs_cusparse, |v| format!("{v:.2}×")),
        ]);
    }
    t
}

/// Two panels against width (log scale), f32 features: accuracy loss, and aggregation
/// speed-up over cuSPARSE (over our exact kernel when cuSPARSE was not measured).
pub fn chart(rows: &[Row], path: &Path) -> Result<()> {
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
    let x = "sampling width S / W";
    let mut loss = Panel::lines(
        "accuracy loss vs exact (points)",
        x,
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
    let mut fast = Panel::lines(title, x, "", series(&|r| speed(r)));
    fast.log_x = true;
    draw_svg(path, &[loss, fast], 2, (640, 480))
}

/// Per model: the fastest setting within 1 point, AES against ES Bucket, INT8's extra loss.
fn summarize(rows: &[Row], widths: &[usize]) -> Vec<Value> {
    let mut summary = Vec::new();
    let models: std::collections::BTreeSet<String> = rows.iter().map(|r| r.model.clone()).collect();
    for m in models {
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
                b.speedup_vs_cusparse.map(|s| format!(", {s:.2}x cuSPARSE")).unwrap_or_default(),
                b.acc_loss_pts
            );
        }
        if !aes_vs_bucket.is_empty() {
            let wins = aes_vs_bucket.iter().filter(|(_, a, b)| a < b).count();
            let list: Vec<String> = aes_vs_bucket
                .iter()
                .map(|(w, a, b)| format!("{w}: {a:.2} vs {b:.2}"))
                .collect();
            println!(
                "{m}: AES loses less than ES Bucket at {wins} of {} widths: {}",
                aes_vs_bucket.len(),
                list.join(", ")
            );
        }
        summary.push(json!({
            "model": m,
            "best_within_1pt": best.map(|b| b.aggregation.clone()),
            "best_within_1pt_speedup_vs_cusparse": best.and_then(|b| b.speedup_vs_cusparse),
            "best_within_1pt_speedup_vs_exact": best.map(|b| b.speedup_vs_exact),
            "aes_vs_bucket_loss_pts": aes_vs_bucket,
            "int8_extra_loss_pts": int8_extra,
        }));
    }
    summary
}

impl InferSweep {
    /// The features as a deployment loads them, checked against `ds`, saved if asked.
    fn host_features(&self, ds: &Dataset) -> Result<HostFeatures> {
        let host = match &self.features {
            Some(p) => HostFeatures::load(p)?,
            None => HostFeatures::from_dataset(ds, self.row_normalize)?,
        };
        if host.dims()? != (ds.num_nodes(), ds.features.cols()) {
            return Err(Error::Invalid(format!(
                "features are {:?} but the dataset has {} nodes x {} features",
                host.dims()?,
                ds.num_nodes(),
                ds.features.cols()
            )));
        }
        if let Some(p) = &self.save_features {
            let h = if self.int8 {
                host.quantize()?
            } else {
                host.clone()
            };
            h.save(p)?;
            println!("wrote {} features to {}", h.encoding(), p.display());
        }
        if matches!(host, HostFeatures::Int8 { .. }) && (self.sweep || !self.int8) {
            return Err(Error::Invalid(
                "the features file holds INT8 codes, which serve INT8 inference only (int8 \
                 set, no sweep)"
                    .into(),
            ));
        }
        Ok(host)
    }

    /// Errors when the options do not go together (or half precision is asked for off a
    /// CUDA device).
    fn check_options(&self, device: &Device) -> Result<()> {
        if self.predictions.is_some() && (self.sweep || self.weights.len() != 1) {
            return Err(Error::Invalid(
                "per-node predictions are written for one model and no sweep".into(),
            ));
        }
        if self.precision.is_half() {
            self.precision.check_device(device)?;
            if self.sweep || self.int8 {
                return Err(Error::Invalid(format!(
                    "precision {} runs over the dataset's features (exact or sampled \
                     aggregation); INT8 features and sweeps run in f32 only",
                    self.precision
                )));
            }
        }
        Ok(())
    }

    /// The `(aggregation, int8)` settings each model runs under: the sweep's grid, or the
    /// one asked for.
    fn settings(&self) -> Result<Vec<(Aggregation, bool)>> {
        let mut settings = Vec::new();
        if self.sweep {
            settings.extend([(Aggregation::Exact, false), (Aggregation::Exact, true)]);
            for s in &self.strategies {
                for &width in &self.widths {
                    let agg: Aggregation = format!("{s}:{width}").parse()?;
                    settings.extend([(agg, false), (agg, true)]);
                }
            }
        } else {
            settings.push((self.aggregation, self.int8));
        }
        Ok(settings)
    }

    /// Writes the JSON document `doc`, the Markdown table of `rows` and, for a sweep, the
    /// chart into the output folder.
    fn write_outputs(&self, doc: &Value, rows: &[Row]) -> Result<()> {
        let stem = if self.sweep { "sweep" } else { "infer" };
        let json_path = self.out.join(format!("{stem}.json"));
        write_json(&json_path, doc)?;
        write_text(
            &self.out.join(format!("{stem}.md")),
            &table(rows).markdown(),
        )?;
        if self.sweep {
            chart(rows, &self.out.join("sweep.svg"))?;
        }
        println!(
            "wrote {} (and .md{})",
            json_path.display(),
            if self.sweep { ", sweep.svg" } else { "" }
        );
        Ok(())
    }

    /// Runs every model under every setting on `ds`; writes the JSON, Markdown and (for a
    /// sweep) the chart in `out`, and returns the JSON document.
    pub fn run(&self, ds: &Dataset, device: &Device) -> Result<Value> {
        self.check_options(device)?;
        let host = self.host_features(ds)?;
        let labels: Vec<u32> = ds.labels.iter().map(|&l| l.max(0) as u32).collect();
        let labels = Tensor::from_vec(labels, ds.num_nodes(), device)?;
        let test = Tensor::from_vec(ds.split.test.clone(), ds.split.test.len(), device)?;
        std::fs::create_dir_all(&self.out).map_err(|e| Error::Io {
            path: self.out.display().to_string(),
            source: e,
        })?;
        // Both encodings, loaded the way a deployment would: file -> host -> device.
        let (mut x32, mut l32) = timed_load(&host, device, &self.out)?;
        if self.precision.is_half() {
            // Narrowed once on the device (the copy stays f32: no half type on the host side).
            x32 = x32.to_dtype(self.precision.dtype())?;
            l32.encoding = match self.precision {
                crate::Precision::Bf16 => "bf16",
                _ => "f16",
            };
        }
        let (x8, l8) = timed_load(&host.quantize()?, device, &self.out)?;
        for l in [&l32, &l8] {
            println!(
                "features {:<4}: {:>7.1} MB, read {:.2} ms, host-to-device {:.2} ms, dequantise {:.3} ms",
                l.encoding, l.bytes as f64 / 1e6, l.read_ms, l.h2d_ms, l.dequant_ms
            );
        }
        let (mut rows, mut models) = (Vec::new(), Vec::new());
        let mut kernels_used = gnn_kernels::KernelsUsed::default();
        for w in &self.weights {
            check_provenance(w, ds);
            let mut engine = Engine::load(w, &ds.graph, device)?.with_policy(self.kernels);
            let cfg = engine.model().config().clone();
            let width = if cfg.layers > 1 {
                cfg.hidden
            } else {
                cfg.out_dim
            };
            let model = format!("{} {}x{width}", cfg.kind, cfg.layers);
            let (logits, [exact_agg, ..]) = measure(&engine, &x32, self.reps)?;
            let exact_acc = accuracy(&logits, &labels, &test)?;
            let cusp = cusparse_ms(&engine, self.reps)?;
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
                reps: self.reps,
                model: model.clone(),
                exact_acc,
                exact_agg_ms: exact_agg,
                cusparse_ms: cusp,
                features: [(&x32, l32), (&x8, l8)],
            };
            let settings = self.settings()?;
            if let Some(path) = &self.predictions {
                engine.set_aggregation(self.aggregation)?;
                let x = if self.int8 { &x8 } else { &x32 };
                write_predictions(path, &engine.predict(x)?, self.new_of_old.as_deref())?;
                println!(
                    "wrote per-node predictions ({}) in the file's node order to {}",
                    self.aggregation,
                    path.display()
                );
            }
            let mine = settings
                .into_iter()
                .map(|(agg, int8)| run_setting(&mut engine, &ctx, agg, int8))
                .collect::<Result<Vec<_>>>()?;
            print!("{}", table(&mine).text());
            let used = engine.kernels_used();
            kernels_used.merge(&used);
            models.push(json!({
                "weights": w, "model": model, "config": cfg, "exact_test_acc": exact_acc,
                "exact_aggregation_ms": exact_agg, "cusparse_ms": cusp,
                "aggregation_widths": layer_widths(&engine), "kernels_used": used,
            }));
            rows.extend(mine);
        }
        let summary = summarize(&rows, &self.widths);
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
        let doc = json!({
            "device": crate::device_name(device),
            "kernel_policy": self.kernels, "kernels_used": kernels_used,
            "dataset": ds.name, "nodes": ds.num_nodes(), "edges": ds.graph.nnz(),
            "features": ds.features.cols(), "reps": self.reps,
            "loading": [l32, l8], "int8_loading_cut_pct": cut,
            "int8_copy_dequant_cut_pct": (!device.is_cpu()).then_some(h2d_cut),
            "models": models, "summary": summary, "rows": rows,
        });
        self.write_outputs(&doc, &rows)?;
        Ok(doc)
    }
}
