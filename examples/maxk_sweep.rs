//! MaxK-GNN training sweep: for each model (GCN, GraphSAGE, GIN) trains the ReLU version and
//! the MaxK version at every k on one dataset (the Reddit-shaped graph or Cora), and reports
//! test accuracy, median epoch time, the speed-up over our ReLU model and over PyG (from the
//! JSON `.dev/pyg_4x256.py` writes on the same GPU), and the per-phase epoch breakdown (the
//! shapes of the MaxK-GNN paper's Fig. 1, Fig. 9 and Table 5).
//!
//! Epoch times come from unprofiled runs (no synchronisation inside the epoch); the breakdown
//! from a separate short profiled run of the same configuration. Writes `sweep.json`,
//! `sweep.md`, `accuracy_time.svg` and `breakdown.svg` under `--out`; `--append` merges into
//! an existing `sweep.json` (one model per invocation keeps each run short), `--replot` only
//! redraws the table and charts from `sweep.json`. Recipes follow `train_cora` on Cora (input
//! dropout 0.5, weight decay 5e-4) and `train_reddit` on Reddit; 4-layer GIN needs `--lr 0.001`.
//!
//! ```text
//! cargo run --release --example maxk_sweep -- --dataset cora --k 16,32,64 --seeds 2
//! cargo run --release --features cuda --example maxk_sweep -- --dataset reddit --models gcn \
//!     --k 8,16,32,64,128 --pyg pyg_4x256.json --out runs/maxk_sweep
//! ```

use anyhow::{bail, Context, Result};
use clap::Parser;
use gnn::graph::{generate, load_planetoid, Dataset, SyntheticSpec};
use gnn::models::{Activation, ConvKind, Gnn, ModelConfig, ModelGraph};
use gnn::train::{train, DeviceData, TrainConfig};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[path = "common/flags.rs"]
mod flags;

#[derive(Parser, Debug)]
#[command(about = "MaxK-GNN training sweep: accuracy and epoch time per k against ReLU and PyG")]
struct Args {
    #[command(flatten)]
    train: flags::TrainFlags,
    /// `reddit` (synthetic Reddit-shaped graph at --scale) or `cora` (bundled Planetoid files).
    #[arg(long, default_value = "cora")]
    dataset: String,
    /// Synthetic Reddit scale (1 = 232,965 nodes).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
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

/// One configuration's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Row {
    dataset: String,
    model: String,
    /// `relu` or `maxk:K`.
    activation: String,
    k: Option<usize>,
    test_acc: f64,
    test_acc_seeds: Vec<f64>,
    /// Per seed: the epoch of the best validation accuracy.
    #[serde(default)]
    best_epoch_seeds: Vec<usize>,
    /// Per seed: the first evaluated epoch whose validation accuracy is within one point of
    /// that seed's best (how long the model takes to converge; times `epoch_ms` it is the
    /// training time to accuracy).
    #[serde(default)]
    converged_epoch_seeds: Vec<usize>,
    epoch_ms: f64,
    speedup_vs_relu: Option<f64>,
    pyg_epoch_ms: Option<f64>,
    speedup_vs_pyg: Option<f64>,
    /// Per-phase milliseconds per epoch from the profiled run, in table order.
    breakdown: Vec<(String, f64)>,
}

#[derive(Serialize, Deserialize, Default)]
struct Doc {
    device: String,
    setup: BTreeMap<String, String>,
    rows: Vec<Row>,
}

fn load(args: &Args) -> Result<Dataset> {
    match args.dataset.as_str() {
        "cora" => {
            // Relative to the working directory first (binaries run from a checkout elsewhere).
            let rel = PathBuf::from("data/cora/raw");
            let dir = if rel.is_dir() {
                rel
            } else {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/cora/raw")
            };
            load_planetoid(&dir, "cora")
                .with_context(|| format!("loading Cora from {}", dir.display()))
        }
        "reddit" => {
            let spec = SyntheticSpec::reddit().scaled(args.scale)?;
            let (ds, report) = generate(&spec, 0)?;
            println!("{report}");
            Ok(ds)
        }
        other => bail!("--dataset {other}: expected reddit or cora"),
    }
}

fn pyg_ms(path: &Path, key: &str) -> Result<Option<f64>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    Ok(v["pyg_epochs"][key]["train_epoch_ms"].as_f64())
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.replot {
        let path = args.out.join("sweep.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let doc: Doc =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        return write_outputs(&doc, &args.out);
    }
    let cora = args.dataset == "cora";
    // 4 x 256, 200 epochs; the Planetoid recipe's decay and input dropout on Cora.
    let t = args.train.resolve(&flags::Recipe {
        layers: 4,
        hidden: 256,
        epochs: 200,
        weight_decay: if cora { 5e-4 } else { 0.0 },
        input_dropout: Some(if cora { 0.5 } else { 0.0 }),
        eval_every: 5,
    });
    if args.k.iter().any(|&k| k == 0 || k > t.hidden) {
        bail!(
            "--k {:?}: every k must be in 1..={} (the hidden width)",
            args.k,
            t.hidden
        );
    }
    let device = gnn::train::pick_device(t.cpu)?;
    let dev_name = gnn::train::device_name(&device);
    println!("device: {dev_name}");
    let ds = load(&args)?;
    println!("{}", ds.summary());
    let data = DeviceData::new(&ds, &device, cora)?;
    let (wd, input_dropout) = (t.weight_decay, t.input_dropout);

    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let json_path = args.out.join("sweep.json");
    let mut doc = if args.append && json_path.exists() {
        let text = std::fs::read_to_string(&json_path)
            .with_context(|| format!("reading {}", json_path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", json_path.display()))?
    } else {
        Doc::default()
    };
    doc.device = dev_name.clone();
    let setup = format!(
        "{}x{} layers, lr {}, weight decay {wd}, dropout {} (input {}), layer norm {}, {} epochs, {} seed(s)",
        t.layers,
        t.hidden,
        t.lr,
        t.dropout,
        input_dropout,
        t.layer_norm,
        t.epochs,
        args.seeds
    );
    doc.setup.insert(args.dataset.clone(), setup.clone());
    println!("{setup}");

    for &kind in &args.models {
        let graph = ModelGraph::new(&ds.graph, kind, &device)?;
        let pyg = match &args.pyg {
            Some(p) => pyg_ms(p, &format!("{kind}_{}x{}", t.layers, t.hidden))?,
            None => None,
        };
        let mut relu_ms = None;
        let acts =
            std::iter::once(Activation::Relu).chain(args.k.iter().map(|&k| Activation::MaxK { k }));
        for act in acts {
            let mut cfg = ModelConfig::new(
                kind,
                ds.features.cols(),
                t.hidden,
                ds.num_classes,
                t.layers,
                t.dropout,
            );
            cfg.layer_norm = t.layer_norm;
            cfg.input_dropout = input_dropout;
            cfg.activation = act;
            let base = TrainConfig {
                epochs: t.epochs,
                lr: t.lr,
                weight_decay: wd,
                eval_every: t.eval_every,
                ..TrainConfig::default()
            };
            let mut accs = Vec::new();
            let (mut best_epochs, mut converged) = (Vec::new(), Vec::new());
            let mut epoch_ms = 0.0;
            for seed in 0..args.seeds {
                let model = Gnn::new(cfg.clone(), &device, seed)?;
                let bar = gnn::train::progress::EpochProgress::new(
                    format!("{kind} {} seed {seed}", cfg.activation),
                    base.epochs,
                    0,
                )
                .without_lines();
                let rep = train(
                    &model,
                    &graph,
                    &data,
                    &TrainConfig {
                        seed,
                        ..base.clone()
                    },
                    |log| bar.epoch(log),
                )?;
                drop(bar);
                accs.push(100.0 * rep.test_acc);
                best_epochs.push(rep.best_epoch);
                converged.push(
                    rep.history
                        .iter()
                        .find(|l| {
                            l.acc
                                .is_some_and(|(_, va, _)| va >= rep.best_val_acc - 0.01)
                        })
                        .map_or(rep.best_epoch, |l| l.epoch),
                );
                if seed == 0 {
                    epoch_ms = rep.epoch_ms_median;
                }
            }
            // Breakdown: a short profiled run (synchronises around phases).
            let model = Gnn::new(cfg.clone(), &device, 0)?;
            let prof = TrainConfig {
                epochs: args.profile_epochs.max(4),
                profile: true,
                warmup: 3,
                eval_every: usize::MAX,
                ..base.clone()
            };
            let rep = train(&model, &graph, &data, &prof, |_| {})?;
            let breakdown = rep
                .breakdown
                .rows()
                .into_iter()
                .map(|r| (r.phase.to_string(), r.ms_per_epoch))
                .collect();
            let k = match act {
                Activation::MaxK { k } => Some(k),
                _ => None,
            };
            if k.is_none() {
                relu_ms = Some(epoch_ms);
            }
            let row = Row {
                dataset: args.dataset.clone(),
                model: kind.to_string(),
                activation: act.to_string(),
                k,
                test_acc: accs.iter().sum::<f64>() / accs.len() as f64,
                test_acc_seeds: accs,
                best_epoch_seeds: best_epochs,
                converged_epoch_seeds: converged,
                epoch_ms,
                speedup_vs_relu: relu_ms.map(|r| r / epoch_ms),
                pyg_epoch_ms: pyg,
                speedup_vs_pyg: pyg.map(|p| p / epoch_ms),
                breakdown,
            };
            println!(
                "{:<5} {:<9} test {:>6.2} % (seeds {})  epoch {:>8.2} ms  vs ReLU {:>5.2}x  vs PyG {}  \
                 converged at epoch {:?}",
                row.model,
                row.activation,
                row.test_acc,
                row.test_acc_seeds
                    .iter()
                    .map(|a| format!("{a:.2}"))
                    .collect::<Vec<_>>()
                    .join("/"),
                row.epoch_ms,
                row.speedup_vs_relu.unwrap_or(f64::NAN),
                row.speedup_vs_pyg
                    .map_or("-".into(), |s| format!("{s:.2}x")),
                row.converged_epoch_seeds
            );
            doc.rows.retain(|r| {
                !(r.dataset == row.dataset
                    && r.model == row.model
                    && r.activation == row.activation)
            });
            doc.rows.push(row);
        }
    }
    doc.rows.sort_by(|a, b| {
        (&a.dataset, &a.model, a.k.unwrap_or(0)).cmp(&(&b.dataset, &b.model, b.k.unwrap_or(0)))
    });
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    write_outputs(&doc, &args.out)
}

/// `sweep.md` and the two charts from a sweep document.
fn write_outputs(doc: &Doc, out: &Path) -> Result<()> {
    let md = markdown(doc);
    print!("\n{md}");
    let md_path = out.join("sweep.md");
    std::fs::write(&md_path, &md).with_context(|| format!("writing {}", md_path.display()))?;
    charts::accuracy_time(doc, &out.join("accuracy_time.svg"))?;
    charts::breakdown(doc, &out.join("breakdown.svg"))?;
    println!(
        "wrote sweep.md, accuracy_time.svg, breakdown.svg in {}",
        out.display()
    );
    Ok(())
}

fn markdown(doc: &Doc) -> String {
    let mut s = format!("Device: {}\n\n", doc.device);
    for (ds, setup) in &doc.setup {
        s += &format!("- {ds}: {setup}\n");
    }
    s += "\n| dataset | model | activation | test acc % | Δ vs ReLU (points) | converged at epoch (per seed) | epoch ms | vs ReLU | vs PyG |";
    let phases: Vec<String> = doc
        .rows
        .first()
        .map(|r| r.breakdown.iter().map(|(p, _)| p.clone()).collect())
        .unwrap_or_default();
    for p in &phases {
        s += &format!(" {p} |");
    }
    s += "\n|---|---|---|---|---|---|---|---|---|";
    s += &"---|".repeat(phases.len());
    s += "\n";
    for r in &doc.rows {
        let relu = doc
            .rows
            .iter()
            .find(|o| o.dataset == r.dataset && o.model == r.model && o.k.is_none());
        let delta = relu.map_or("-".into(), |o| format!("{:+.2}", r.test_acc - o.test_acc));
        let conv = if r.converged_epoch_seeds.is_empty() {
            "-".to_string()
        } else {
            r.converged_epoch_seeds
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join(" / ")
        };
        s += &format!(
            "| {} | {} | {} | {:.2} | {} | {} | {:.2} | {} | {} |",
            r.dataset,
            r.model,
            r.activation,
            r.test_acc,
            delta,
            conv,
            r.epoch_ms,
            r.speedup_vs_relu.map_or("-".into(), |x| format!("{x:.2}×")),
            r.speedup_vs_pyg.map_or("-".into(), |x| format!("{x:.2}×")),
        );
        for (_, ms) in &r.breakdown {
            s += &format!(" {ms:.2} |");
        }
        s += "\n";
    }
    s
}

mod charts {
    use super::Doc;
    use anyhow::Result;
    use gnn::train::chart::{draw_svg, Content, Legend, Line, Panel};
    use std::path::Path;

    /// Per (dataset, model): test accuracy and epoch time against k, ReLU and PyG as levels.
    pub fn accuracy_time(doc: &Doc, path: &Path) -> Result<()> {
        let mut groups: Vec<(String, String)> = doc
            .rows
            .iter()
            .map(|r| (r.dataset.clone(), r.model.clone()))
            .collect();
        groups.dedup();
        let mut panels = Vec::new();
        for (ds, model) in &groups {
            let rows: Vec<_> = doc
                .rows
                .iter()
                .filter(|r| &r.dataset == ds && &r.model == model)
                .collect();
            let maxk: Vec<_> = rows
                .iter()
                .filter_map(|r| r.k.map(|k| (k as f64, *r)))
                .collect();
            let relu = rows.iter().find(|r| r.k.is_none());
            let kmax = maxk.iter().map(|p| p.0).fold(1.0, f64::max);
            let mut acc = vec![Line::measured(
                "MaxK",
                maxk.iter().map(|(k, r)| (*k, r.test_acc)).collect(),
            )];
            let mut time = vec![Line::measured(
                "MaxK",
                maxk.iter().map(|(k, r)| (*k, r.epoch_ms)).collect(),
            )];
            if let Some(r) = relu {
                acc.push(Line::level("ReLU", r.test_acc, 0.0, kmax));
                time.push(Line::level("ReLU (ours)", r.epoch_ms, 0.0, kmax));
            }
            if let Some(p) = rows.iter().find_map(|r| r.pyg_epoch_ms) {
                time.push(Line::level("PyG", p, 0.0, kmax));
            }
            let amin = rows.iter().map(|r| r.test_acc).fold(100.0, f64::min);
            let mut a = Panel::lines(format!("{model} on {ds}: test accuracy"), "k", "%", acc);
            a.y_range = Some(((amin - 2.0).max(0.0), 100.0));
            a.legend = Legend::LowerRight;
            let mut t = Panel::lines(format!("{model} on {ds}: epoch time"), "k", "ms", time);
            t.legend = Legend::UpperLeft;
            panels.extend([a, t]);
        }
        Ok(draw_svg(path, &panels, 2, (490, 300))?)
    }

    /// Stacked per-phase epoch time of every configuration (the paper's Fig. 1 shape).
    pub fn breakdown(doc: &Doc, path: &Path) -> Result<()> {
        let phases: Vec<String> = doc
            .rows
            .first()
            .map(|r| r.breakdown.iter().map(|(p, _)| p.clone()).collect())
            .unwrap_or_default();
        let stacks = phases
            .iter()
            .enumerate()
            .filter(|(_, p)| *p != "epoch total")
            .map(|(i, p)| {
                let v = doc
                    .rows
                    .iter()
                    .map(|r| r.breakdown.get(i).map_or(0.0, |(_, v)| *v))
                    .collect();
                (p.clone(), v)
            })
            .collect();
        let categories = doc
            .rows
            .iter()
            .map(|r| format!("{}/{} {}", r.dataset, r.model, r.activation))
            .collect();
        let panel = Panel {
            title: "Epoch time by phase (profiled runs)".into(),
            x_desc: String::new(),
            y_desc: "ms per epoch".into(),
            log_x: false,
            y_range: None,
            legend: Legend::UpperRight,
            content: Content::StackedBars { categories, stacks },
        };
        Ok(draw_svg(path, &[panel], 1, (1000, 520))?)
    }
}
