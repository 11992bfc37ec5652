//! MaxK-GNN training sweep: for each model (GCN, GraphSAGE, GIN) the ReLU version and the MaxK
//! version at every k on one dataset: test accuracy (mean over seeds), median epoch time, the
//! epochs each seed needs to come within one point of its best validation accuracy, the
//! speed-up over our ReLU model and over PyG (from the JSON `same_graph.py`-style scripts
//! write), and the per-phase epoch breakdown (the MaxK-GNN paper's Fig. 1, Fig. 9 and
//! Table 5).
//!
//! Epoch times come from unprofiled runs (no synchronisation inside the epoch); the breakdown
//! from a separate short profiled run of the same configuration.

use crate::data::DeviceData;
use crate::error::{Error, Result};
use crate::progress::EpochProgress;
use crate::report::chart::{draw_svg, Content, Legend, Line, Panel};
use crate::report::{or_dash, read_json, write_json, write_text, Table};
use crate::run::ModelSpec;
use crate::trainer::{train, TrainConfig};
use candle_core::Device;
use gnn_graph::Dataset;
use gnn_models::{ConvKind, Gnn, ModelGraph};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What to sweep.
#[derive(Debug, Clone)]
pub struct MaxkSweep {
    /// The dataset's label in the rows.
    pub dataset: String,
    /// Models (each with ReLU, then MaxK at every k).
    pub models: Vec<ConvKind>,
    /// Values of k.
    pub ks: Vec<usize>,
    /// Architecture (its `kind` and `maxk` are set per configuration).
    pub model: ModelSpec,
    /// Recipe (its `seed` is set per seed).
    pub train: TrainConfig,
    /// Seeds per configuration (accuracy is their mean; time is seed 0's).
    pub seeds: u64,
    /// Epochs of the profiled breakdown run (the first 3 are warm-up; at least 4).
    pub profile_epochs: usize,
    /// PyG reference JSON (`pyg_epochs.<model>_<layers>x<hidden>.train_epoch_ms`).
    pub pyg: Option<PathBuf>,
    /// Which GPU kernel each sparse op runs.
    pub kernels: gnn_kernels::KernelPolicy,
}

/// One configuration's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// Dataset label.
    pub dataset: String,
    /// Layer type.
    pub model: String,
    /// `relu` or `maxk:K`.
    pub activation: String,
    /// k, for MaxK.
    pub k: Option<usize>,
    /// Mean test accuracy over the seeds, percent.
    pub test_acc: f64,
    /// Per seed, percent.
    pub test_acc_seeds: Vec<f64>,
    /// Per seed: the epoch of the best validation accuracy.
    #[serde(default)]
    pub best_epoch_seeds: Vec<usize>,
    /// Per seed: the first evaluated epoch whose validation accuracy is within one point of
    /// that seed's best (how long the model takes to converge; times `epoch_ms` it is the
    /// training time to accuracy).
    #[serde(default)]
    pub converged_epoch_seeds: Vec<usize>,
    /// Per seed: the first evaluated epoch within 0.5 points of that seed's best validation
    /// accuracy ([`crate::time_to_accuracy`]).
    #[serde(default)]
    pub tta_epoch_seeds: Vec<usize>,
    /// Per seed: training seconds up to that epoch (time to accuracy).
    #[serde(default)]
    pub tta_s_seeds: Vec<f64>,
    /// Per seed, every evaluated epoch as `(epoch, training seconds up to it, validation
    /// accuracy %)`: time to any common accuracy target can be read off afterwards (the
    /// `tta_*` fields use each seed's own best).
    #[serde(default)]
    pub val_curve_seeds: Vec<Vec<(usize, f64, f64)>>,
    /// Median epoch of seed 0, ms.
    pub epoch_ms: f64,
    /// Our ReLU model's epoch time over this one's.
    pub speedup_vs_relu: Option<f64>,
    /// PyG's epoch for this model shape, ms.
    pub pyg_epoch_ms: Option<f64>,
    /// PyG's epoch time over ours.
    pub speedup_vs_pyg: Option<f64>,
    /// Per-phase milliseconds per epoch from the profiled run, in table order.
    pub breakdown: Vec<(String, f64)>,
}

impl Row {
    /// Mean time to accuracy over the seeds, seconds (`None` for rows written before it was
    /// recorded).
    pub fn tta_mean_s(&self) -> Option<f64> {
        (!self.tta_s_seeds.is_empty())
            .then(|| self.tta_s_seeds.iter().sum::<f64>() / self.tta_s_seeds.len() as f64)
    }

    /// `"s (epoch) / ..."` per seed, or `-`.
    fn tta_text(&self) -> String {
        if self.tta_s_seeds.is_empty() {
            return "-".into();
        }
        self.tta_s_seeds
            .iter()
            .zip(&self.tta_epoch_seeds)
            .map(|(s, e)| format!("{s:.2} ({e})"))
            .collect::<Vec<_>>()
            .join(" / ")
    }
}

/// A sweep's results: `sweep.json`.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Doc {
    /// Device name.
    pub device: String,
    /// Per dataset, the recipe in words.
    pub setup: BTreeMap<String, String>,
    /// Rows, sorted by dataset, model, k (ReLU first).
    pub rows: Vec<Row>,
}

fn pyg_ms(path: &Path, key: &str) -> Result<Option<f64>> {
    let v: serde_json::Value = read_json(path)?;
    Ok(v["pyg_epochs"][key]["train_epoch_ms"].as_f64())
}

impl MaxkSweep {
    /// The recipe in words (the `setup` line of the report).
    pub fn setup(&self) -> String {
        let (m, t) = (&self.model, &self.train);
        format!(
            "{}x{} layers, lr {} ({:?}), weight decay {}, dropout {} (input {}), layer norm {}, \
             residual {}, MaxK after the first layer {}, {} epochs, {} seed(s), kernels: {}",
            m.layers,
            m.hidden,
            t.lr,
            t.lr_schedule,
            t.weight_decay,
            m.dropout,
            m.input_dropout,
            m.layer_norm,
            m.residual,
            m.maxk_after_first,
            t.epochs,
            self.seeds,
            self.kernels
        )
    }

    /// Runs the sweep on `ds`, merging its rows into `doc` (rows of the same dataset, model
    /// and activation are replaced).
    pub fn run(
        &self,
        ds: &Dataset,
        data: &DeviceData,
        device: &Device,
        doc: &mut Doc,
    ) -> Result<()> {
        if let Some(k) = self.ks.iter().find(|&&k| k == 0 || k > self.model.hidden) {
            return Err(Error::Invalid(format!(
                "MaxK k = {k}: every k must be in 1..={} (the hidden width)",
                self.model.hidden
            )));
        }
        doc.device = crate::device_name(device);
        doc.setup.insert(self.dataset.clone(), self.setup());
        println!("{}", self.setup());
        for &kind in &self.models {
            let graph = ModelGraph::new(&ds.graph, kind, device)?.with_policy(self.kernels);
            let pyg = match &self.pyg {
                Some(p) => pyg_ms(
                    p,
                    &format!("{kind}_{}x{}", self.model.layers, self.model.hidden),
                )?,
                None => None,
            };
            let mut relu_ms = None;
            for k in std::iter::once(None).chain(self.ks.iter().map(|&k| Some(k))) {
                let spec = ModelSpec {
                    kind,
                    maxk: k,
                    ..self.model.clone()
                };
                let row = self.one(ds, data, device, &graph, &spec, relu_ms, pyg)?;
                if k.is_none() {
                    relu_ms = Some(row.epoch_ms);
                }
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
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn one(
        &self,
        ds: &Dataset,
        data: &DeviceData,
        device: &Device,
        graph: &ModelGraph,
        spec: &ModelSpec,
        relu_ms: Option<f64>,
        pyg: Option<f64>,
    ) -> Result<Row> {
        let cfg = spec.config(ds);
        let (mut accs, mut best_epochs, mut converged) = (Vec::new(), Vec::new(), Vec::new());
        let (mut tta_epochs, mut tta_s) = (Vec::new(), Vec::new());
        let mut curves = Vec::new();
        let mut epoch_ms = 0.0;
        for seed in 0..self.seeds {
            let model = Gnn::new(cfg.clone(), device, seed)?;
            let name = format!("{} {} seed {seed}", spec.kind, cfg.activation);
            let bar = EpochProgress::new(name, self.train.epochs, 0).without_lines();
            let tc = TrainConfig {
                seed,
                ..self.train.clone()
            };
            let rep = train(&model, graph, data, &tc, |log| bar.epoch(log))?;
            drop(bar);
            accs.push(100.0 * rep.test_acc);
            best_epochs.push(rep.best_epoch);
            converged.push(
                crate::time_to_accuracy(&rep.history, 0.01).map_or(rep.best_epoch, |t| t.epoch),
            );
            if let Some(t) = rep.time_to_accuracy {
                tta_epochs.push(t.epoch);
                tta_s.push(t.train_s);
            }
            let mut train_s = 0.0;
            curves.push(
                rep.history
                    .iter()
                    .filter_map(|l| {
                        train_s += l.epoch_ms / 1e3;
                        l.acc.map(|(_, va, _)| (l.epoch, train_s, 100.0 * va))
                    })
                    .collect(),
            );
            if seed == 0 {
                epoch_ms = rep.epoch_ms_median;
            }
        }
        // Breakdown: a short profiled run (synchronises around phases).
        let model = Gnn::new(cfg.clone(), device, 0)?;
        let prof = TrainConfig {
            epochs: self.profile_epochs.max(4),
            profile: true,
            warmup: 3,
            eval_every: usize::MAX,
            ..self.train.clone()
        };
        let rep = train(&model, graph, data, &prof, |_| {})?;
        let breakdown = rep
            .breakdown
            .rows()
            .into_iter()
            .map(|r| (r.phase.to_string(), r.ms_per_epoch))
            .collect();
        let row = Row {
            dataset: self.dataset.clone(),
            model: spec.kind.to_string(),
            activation: cfg.activation.to_string(),
            k: spec.maxk,
            test_acc: accs.iter().sum::<f64>() / accs.len().max(1) as f64,
            test_acc_seeds: accs,
            best_epoch_seeds: best_epochs,
            converged_epoch_seeds: converged,
            tta_epoch_seeds: tta_epochs,
            tta_s_seeds: tta_s,
            val_curve_seeds: curves,
            epoch_ms,
            speedup_vs_relu: if spec.maxk.is_none() {
                Some(1.0)
            } else {
                relu_ms.map(|r| r / epoch_ms)
            },
            pyg_epoch_ms: pyg,
            speedup_vs_pyg: pyg.map(|p| p / epoch_ms),
            breakdown,
        };
        println!(
            "{:<5} {:<9} test {:>6.2} % (seeds {})  epoch {:>8.2} ms  vs ReLU {:>5.2}x  vs PyG {}  \
             converged at epoch {:?}  time to accuracy {} s",
            row.model,
            row.activation,
            row.test_acc,
            row.test_acc_seeds.iter().map(|a| format!("{a:.2}")).collect::<Vec<_>>().join("/"),
            row.epoch_ms,
            row.speedup_vs_relu.unwrap_or(f64::NAN),
            or_dash(row.speedup_vs_pyg, |s| format!("{s:.2}x")),
            row.converged_epoch_seeds,
            row.tta_text()
        );
        Ok(row)
    }
}

impl Doc {
    /// Reads `sweep.json`.
    pub fn load(path: &Path) -> Result<Self> {
        read_json(path)
    }

    /// Writes `sweep.json`, `sweep.md`, `accuracy_time.svg` and `breakdown.svg` in `out`, and
    /// prints the table.
    pub fn write(&self, out: &Path) -> Result<()> {
        write_json(&out.join("sweep.json"), self)?;
        self.write_tables(out)
    }

    /// [`Doc::write`] without `sweep.json` (redrawing from a merged file).
    pub fn write_tables(&self, out: &Path) -> Result<()> {
        let md = self.markdown();
        print!("\n{md}");
        write_text(&out.join("sweep.md"), &md)?;
        self.accuracy_time_chart(&out.join("accuracy_time.svg"))?;
        self.breakdown_chart(&out.join("breakdown.svg"))?;
        println!(
            "wrote sweep.md, accuracy_time.svg, breakdown.svg in {}",
            out.display()
        );
        Ok(())
    }

    fn phases(&self) -> Vec<String> {
        self.rows
            .first()
            .map(|r| r.breakdown.iter().map(|(p, _)| p.clone()).collect())
            .unwrap_or_default()
    }

    /// The report: device, setups, one table row per configuration.
    pub fn markdown(&self) -> String {
        let mut s = format!("Device: {}\n\n", self.device);
        for (ds, setup) in &self.setup {
            s += &format!("- {ds}: {setup}\n");
        }
        let mut t = Table::new();
        for h in [
            "dataset",
            "model",
            "activation",
            "test acc %",
            "Δ vs ReLU (points)",
            "converged at epoch (per seed)",
            "time to accuracy s (epoch), per seed",
            "epoch ms",
            "vs ReLU",
            "vs PyG",
        ] {
            t = t.left(h, 0);
        }
        for p in self.phases() {
            t = t.left(p, 0);
        }
        for r in &self.rows {
            let relu = self
                .rows
                .iter()
                .find(|o| o.dataset == r.dataset && o.model == r.model && o.k.is_none());
            let conv = r
                .converged_epoch_seeds
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>();
            let mut cells = vec![
                r.dataset.clone(),
                r.model.clone(),
                r.activation.clone(),
                format!("{:.2}", r.test_acc),
                or_dash(relu, |o| format!("{:+.2}", r.test_acc - o.test_acc)),
                if conv.is_empty() {
                    "-".into()
                } else {
                    conv.join(" / ")
                },
                r.tta_text(),
                format!("{:.2}", r.epoch_ms),
                or_dash(r.speedup_vs_relu, |x| format!("{x:.2}×")),
                or_dash(r.speedup_vs_pyg, |x| format!("{x:.2}×")),
            ];
            cells.extend(r.breakdown.iter().map(|(_, ms)| format!("{ms:.2}")));
            t.row(cells);
        }
        s + "\n" + &t.markdown()
    }

    /// Per (dataset, model): test accuracy and epoch time against k, ReLU and PyG as levels.
    pub fn accuracy_time_chart(&self, path: &Path) -> Result<()> {
        let mut groups: Vec<(String, String)> = self
            .rows
            .iter()
            .map(|r| (r.dataset.clone(), r.model.clone()))
            .collect();
        groups.dedup();
        let mut panels = Vec::new();
        for (ds, model) in &groups {
            let rows: Vec<_> = self
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
            let mut tta = vec![Line::measured(
                "MaxK",
                maxk.iter()
                    .filter_map(|(k, r)| Some((*k, r.tta_mean_s()?)))
                    .collect(),
            )];
            if let Some(t) = relu.and_then(|r| r.tta_mean_s()) {
                tta.push(Line::level("ReLU", t, 0.0, kmax));
            }
            let amin = rows.iter().map(|r| r.test_acc).fold(100.0, f64::min);
            let mut a = Panel::lines(format!("{model} on {ds}: test accuracy"), "k", "%", acc);
            a.y_range = Some(((amin - 2.0).max(0.0), 100.0));
            a.legend = Legend::LowerRight;
            let mut t = Panel::lines(format!("{model} on {ds}: epoch time"), "k", "ms", time);
            t.legend = Legend::UpperLeft;
            let mut tt = Panel::lines(
                format!("{model} on {ds}: time to accuracy (val >= best - 0.5 pts, mean)"),
                "k",
                "s",
                tta,
            );
            tt.legend = Legend::UpperLeft;
            panels.extend([a, t, tt]);
        }
        draw_svg(path, &panels, 3, (490, 300))
    }

    /// Stacked per-phase epoch time of every configuration (the paper's Fig. 1 shape).
    pub fn breakdown_chart(&self, path: &Path) -> Result<()> {
        let stacks = self
            .phases()
            .into_iter()
            .enumerate()
            .filter(|(_, p)| p != "epoch total")
            .map(|(i, p)| {
                let v = self
                    .rows
                    .iter()
                    .map(|r| r.breakdown.get(i).map_or(0.0, |(_, v)| *v))
                    .collect();
                (p, v)
            })
            .collect();
        let categories = self
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
        draw_svg(path, &[panel], 1, (1000, 520))
    }
}
