//! `train`: one training run over the engine's trainer ([`gnn_train::train_with_control`]),
//! set up as `gnn_train::run::train_seeds` sets up one seed of `train_cora` / `train_reddit`,
//! with the GIL released and a per-epoch hook for the callback, the progress display and
//! Ctrl-C.

use crate::arrays::value_error;
use crate::data::Data;
use crate::device::parse_device;
use crate::errors::{model_err, to_py};
use crate::model::{parse_activation, Model, Served};
use candle_core::Device;
use gnn_models::{Activation, ConvKind, Gnn, ModelGraph};
use gnn_train::run::ModelSpec;
use gnn_train::{
    device_name, on_oom, train_with_control, DeviceData, EpochLog, LrSchedule, OptimizerKind,
    Precision, TrainConfig, TrainReport,
};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict};
use serde_json::json;
use std::ops::ControlFlow;
use std::time::Instant;

/// Why a run ended before its last epoch.
enum Stop {
    /// Ctrl-C (SIGINT) arrived: stopped at the epoch boundary, state kept.
    Interrupt,
    /// `on_epoch` returned `False`.
    Callback,
    /// `on_epoch` raised: re-raised after the run.
    Raised(PyErr),
}

/// One epoch's numbers as the dict `on_epoch` receives.
fn epoch_dict<'py>(py: Python<'py>, log: &EpochLog, epochs: usize) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("epoch", log.epoch)?;
    d.set_item("epochs", epochs)?;
    d.set_item("loss", log.loss)?;
    d.set_item("epoch_ms", log.epoch_ms)?;
    let (tr, va, te) = log
        .acc
        .map_or((None, None, None), |(a, b, c)| (Some(a), Some(b), Some(c)));
    d.set_item("train_acc", tr)?;
    d.set_item("val_acc", va)?;
    d.set_item("test_acc", te)?;
    Ok(d)
}

/// At an epoch boundary, attached to the interpreter: the callback, then pending signals
/// (Python's SIGINT handler raises `KeyboardInterrupt` here).
fn at_epoch_end(log: &EpochLog, epochs: usize, on_epoch: Option<&Py<PyAny>>) -> Option<Stop> {
    Python::attach(|py| {
        if let Some(cb) = on_epoch {
            let arg = match epoch_dict(py, log, epochs) {
                Ok(d) => d,
                Err(e) => return Some(Stop::Raised(e)),
            };
            match cb.call1(py, (arg,)) {
                Ok(r) => {
                    let r = r.bind(py);
                    if r.is_instance_of::<PyBool>() && !r.is_truthy().unwrap_or(true) {
                        return Some(Stop::Callback);
                    }
                }
                Err(e) if e.is_instance_of::<PyKeyboardInterrupt>(py) => {
                    return Some(Stop::Interrupt)
                }
                Err(e) => return Some(Stop::Raised(e)),
            }
        }
        match py.check_signals() {
            Ok(()) => None,
            Err(e) if e.is_instance_of::<PyKeyboardInterrupt>(py) => Some(Stop::Interrupt),
            Err(e) => Some(Stop::Raised(e)),
        }
    })
}

/// What the run produced, before the Python objects are made.
struct Outcome {
    model: Gnn,
    graph: ModelGraph,
    report: TrainReport,
    roc_auc: Option<gnn_train::metrics::RocAuc>,
    prep_s: f64,
    total_s: f64,
}

/// Trains a GNN on ``data`` and returns ``(model, report)``: the model with the weights of its
/// best validation epoch, and a dict with the history, time to accuracy and the per-phase
/// breakdown. The trainer is the engine's own (``train_cora`` / ``train_reddit``): the same
/// data, recipe and seed give the same losses bit for bit on the CPU.
///
/// Defaults follow Kipf & Welling's GCN recipe (Adam, lr 0.01, weight decay 5e-4, dropout 0.5,
/// 200 epochs, evaluated every epoch) at 2 x 128.
///
/// ``on_epoch(log)`` is called after every epoch with ``{"epoch", "epochs", "loss",
/// "epoch_ms", "train_acc", "val_acc", "test_acc"}`` (accuracies ``None`` on epochs not
/// evaluated); returning ``False`` stops the run there. Ctrl-C stops it at the next epoch
/// boundary. A stopped run keeps its best weights so far and says why in
/// ``report["stopped"]`` (``"interrupt"`` or ``"callback"``; ``None`` when it ran to the end).
/// The GIL is released while the engine works.
#[pyfunction]
#[pyo3(signature = (data, model="gcn", *, layers=2, hidden=128, epochs=200, lr=0.01,
    weight_decay=5e-4, dropout=0.5, input_dropout=None, precision="f32", device="auto",
    maxk=None, maxk_after_first=false, seed=0, eval_every=1, patience=None, optimizer="adam",
    lr_schedule="constant", heads=8, att_dropout=None, activation=None, layer_norm=false,
    residual=false, gin_norm=false, row_normalize=None, tf32=false, profile=false,
    deterministic=false, input_cache=true, on_epoch=None))]
#[allow(clippy::too_many_arguments)]
pub fn train(
    py: Python<'_>,
    data: &Data,
    model: &str,
    layers: usize,
    hidden: usize,
    epochs: usize,
    lr: f64,
    weight_decay: f64,
    dropout: f32,
    input_dropout: Option<f32>,
    precision: &str,
    device: &str,
    maxk: Option<usize>,
    maxk_after_first: bool,
    seed: u64,
    eval_every: usize,
    patience: Option<usize>,
    optimizer: &str,
    lr_schedule: &str,
    heads: usize,
    att_dropout: Option<f32>,
    activation: Option<&str>,
    layer_norm: bool,
    residual: bool,
    gin_norm: bool,
    row_normalize: Option<bool>,
    tf32: bool,
    profile: bool,
    deterministic: bool,
    input_cache: bool,
    on_epoch: Option<Py<PyAny>>,
) -> PyResult<(Model, Py<PyAny>)> {
    let kind: ConvKind = model.parse().map_err(model_err)?;
    let precision: Precision = precision.parse().map_err(to_py)?;
    let optimizer: OptimizerKind = optimizer.parse().map_err(to_py)?;
    let lr_schedule: LrSchedule = lr_schedule.parse().map_err(to_py)?;
    for (name, p) in [
        ("dropout", Some(dropout)),
        ("input_dropout", input_dropout),
        ("att_dropout", att_dropout),
    ] {
        if let Some(p) = p.filter(|p| !(0.0..1.0).contains(p)) {
            return Err(value_error(format!("{name} = {p}: it must be in [0, 1)")));
        }
    }
    if !(lr > 0.0 && lr.is_finite() && weight_decay >= 0.0 && weight_decay.is_finite()) {
        return Err(value_error(format!(
            "lr = {lr}, weight_decay = {weight_decay}: lr must be > 0 and weight_decay >= 0"
        )));
    }
    if matches!(maxk, Some(0)) {
        return Err(value_error(
            "maxk = 0: MaxK keeps at least one entry per row",
        ));
    }
    if maxk_after_first && maxk.is_none() {
        return Err(value_error("maxk_after_first needs maxk"));
    }
    let activation = match activation {
        Some(a) => parse_activation(a)?,
        None if kind == ConvKind::Gat => Activation::Elu,
        None => Activation::Relu,
    };
    let spec = ModelSpec {
        kind,
        layers,
        hidden,
        dropout,
        input_dropout: input_dropout.unwrap_or(dropout),
        layer_norm,
        residual,
        gin_norm,
        maxk_after_first,
        maxk,
        activation,
        heads,
        att_dropout: att_dropout.unwrap_or(dropout),
    };
    let tc = TrainConfig {
        epochs,
        lr,
        weight_decay,
        optimizer,
        lr_schedule,
        patience,
        eval_every,
        seed,
        profile,
        precision,
        tf32,
        cache_input_aggregate: input_cache,
        ..TrainConfig::default()
    };
    let dev = parse_device(device)?;
    let ds = data.ds.clone();
    let row_normalize = row_normalize.unwrap_or(data.row_normalize);
    if ds.split.train.is_empty() || ds.num_classes == 0 {
        return Err(value_error(format!(
            "{} has no training nodes: training needs labels (y) and a split",
            ds.name
        )));
    }
    let mcfg = spec.config(&ds);
    mcfg.validate().map_err(model_err)?;
    let policy = gnn_kernels::KernelPolicy {
        deterministic,
        ..Default::default()
    };
    let mut stop: Option<Stop> = None;
    let out = py.detach(|| -> gnn_train::Result<Outcome> {
        let t_all = Instant::now();
        precision.check_device(&dev)?;
        let data = DeviceData::new(&ds, &dev, row_normalize)?.with_precision(precision)?;
        let t = Instant::now();
        let graph = on_oom(ModelGraph::new(&ds.graph, kind, &dev), &dev, || {
            (
                format!("uploading the graph ({} edges) for {kind}", ds.graph.nnz()),
                None,
            )
        })?
        .with_policy(policy);
        let prep_s = t.elapsed().as_secs_f64();
        let model = on_oom(Gnn::new(mcfg.clone(), &dev, seed), &dev, || {
            ("allocating the model's parameters".to_string(), None)
        })?;
        let report =
            train_with_control(&model, &graph, &data, &tc, None, |log| {
                match at_epoch_end(log, tc.epochs, on_epoch.as_ref()) {
                    None => ControlFlow::Continue(()),
                    Some(s) => {
                        stop = Some(s);
                        ControlFlow::Break(())
                    }
                }
            })?;
        let roc_auc = gnn_train::metrics::model_roc_auc(&model, &graph, &data)?;
        Ok(Outcome {
            model,
            graph,
            report,
            roc_auc,
            prep_s,
            total_s: t_all.elapsed().as_secs_f64(),
        })
    });
    let stopped = match stop {
        Some(Stop::Raised(e)) => return Err(e),
        Some(Stop::Interrupt) => Some("interrupt"),
        Some(Stop::Callback) => Some("callback"),
        None => None,
    };
    let out = out.map_err(to_py)?;
    let report = report_json(&out, &ds.name, &dev, &tc, stopped, row_normalize)?;
    let info = json!({
        "dataset": ds.name,
        "test_acc": out.report.test_acc,
        "val_acc": out.report.best_val_acc,
        "best_epoch": out.report.best_epoch,
        "epochs": out.report.epochs_run,
        "saved_seed": seed,
        "train": tc,
    });
    let model = Model::new(
        Served::bound(out.model, out.graph, &ds, dev),
        Some(row_normalize),
        info,
    );
    let report = crate::json::to_python(py, &report)?.unbind();
    Ok((model, report))
}

/// The report dict: the trainer's report (history, accuracies, epoch times, time to accuracy,
/// memory peaks, breakdown) with the breakdown's table rows, the model and recipe, where it ran
/// and why it stopped.
fn report_json(
    out: &Outcome,
    dataset: &str,
    dev: &Device,
    tc: &TrainConfig,
    stopped: Option<&str>,
    row_normalize: bool,
) -> PyResult<serde_json::Value> {
    let mut v = serde_json::to_value(&out.report).map_err(|e| value_error(e.to_string()))?;
    let o = v
        .as_object_mut()
        .ok_or_else(|| value_error("the training report is not a JSON object"))?;
    o.insert("stopped".into(), json!(stopped));
    o.insert("dataset".into(), json!(dataset));
    o.insert("device".into(), json!(device_name(dev)));
    o.insert("model".into(), json!(out.model.config()));
    o.insert("train".into(), json!(tc));
    o.insert("row_normalize".into(), json!(row_normalize));
    o.insert("breakdown_rows".into(), json!(out.report.breakdown.rows()));
    o.insert("graph_prep_s".into(), json!(out.prep_s));
    o.insert("total_s".into(), json!(out.total_s));
    o.insert("kernels_used".into(), json!(out.graph.kernels_used()));
    if let Some(a) = out.roc_auc {
        o.insert("roc_auc".into(), json!(a));
    }
    Ok(v)
}
