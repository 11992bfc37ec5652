//! `train`: one training run over the engine's trainer ([`gnn_train::train_with_control`]),
//! set up as `gnn_train::run::train_seeds` sets up one seed of `train_cora` / `train_reddit`,
//! with the GIL released and a per-epoch hook for the callback, the progress display and
//! Ctrl-C.

use crate::args::{non_negative, non_negative_opt, Devices};
use crate::arrays::value_error;
use crate::data::Data;
use crate::device::parse_device;
use crate::errors::{model_err, to_py};
use crate::model::{parse_activation, Model, Served};
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
pub(crate) enum Stop {
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
pub(crate) fn at_epoch_end(
    log: &EpochLog,
    epochs: usize,
    on_epoch: Option<&Py<PyAny>>,
) -> Option<Stop> {
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
///
/// ``devices`` trains over several ranks, one thread each, on a 1-D partition of the nodes
/// (contiguous ranges balanced by non-zeros; the engine's ``train_dist``): with
/// ``device="cuda"``, ``devices=[i, j, ...]`` puts one rank on each listed GPU (``devices=N``:
/// GPUs ``0..N``) and the ranks talk through NCCL (a build with the ``nccl`` feature); with
/// ``device="cpu"``, ``devices=N`` (or a list of N ids) runs N ranks on the CPU over the
/// in-process communicator. Losses and accuracies are the single-device run's up to the order
/// of float sums. Every model partitions, GAT and the transformer included.
/// The model returned is rank 0's (the parameters are replicated), the report rank 0's with a
/// row per rank under ``"ranks"``. An NCCL rank that fails aborts the other ranks'
/// communicators and its error is raised (``MemoryError`` out of memory, else
/// ``RuntimeError``); a failure while the ranks are still joining NCCL, or a peer whose abort
/// never returns, ends the process, as ``train_dist`` does.
#[pyfunction]
#[pyo3(signature = (data, model="gcn", *, layers=2, hidden=128, epochs=200, lr=0.01,
    weight_decay=5e-4, dropout=0.5, input_dropout=None, precision="f32", device="auto",
    devices=None, maxk=None, maxk_after_first=false, seed=0, eval_every=1, patience=None,
    optimizer="adam", lr_schedule="constant", heads=8, att_dropout=None, activation=None,
    layer_norm=false, residual=false, gin_norm=false, row_normalize=None, tf32=false,
    profile=false, deterministic=false, input_cache=true, labelled_output=true, train_rows=true,
    on_epoch=None))]
#[allow(clippy::too_many_arguments)]
pub fn train(
    py: Python<'_>,
    data: &Data,
    model: &str,
    layers: i128,
    hidden: i128,
    epochs: i128,
    lr: f64,
    weight_decay: f64,
    dropout: f32,
    input_dropout: Option<f32>,
    precision: &str,
    device: &str,
    devices: Option<&Bound<'_, PyAny>>,
    maxk: Option<i128>,
    maxk_after_first: bool,
    seed: i128,
    eval_every: i128,
    patience: Option<i128>,
    optimizer: &str,
    lr_schedule: &str,
    heads: i128,
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
    labelled_output: bool,
    train_rows: bool,
    on_epoch: Option<Py<PyAny>>,
) -> PyResult<(Model, Py<PyAny>)> {
    let layers: usize = non_negative("layers", layers)?;
    let hidden: usize = non_negative("hidden", hidden)?;
    let epochs: usize = non_negative("epochs", epochs)?;
    let maxk: Option<usize> = non_negative_opt("maxk", maxk)?;
    let seed: u64 = non_negative("seed", seed)?;
    let eval_every: usize = non_negative("eval_every", eval_every)?;
    let patience: Option<usize> = non_negative_opt("patience", patience)?;
    let heads: usize = non_negative("heads", heads)?;
    let devices = devices.map(Devices::parse).transpose()?;
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
        labelled_output,
        train_rows_output: train_rows,
        ..TrainConfig::default()
    };
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
    if let Some(devices) = devices {
        let run = crate::dist::Run {
            ds,
            model: mcfg,
            train: tc,
            kernels: policy,
            row_normalize,
        };
        return crate::dist::train(py, run, device, &devices, on_epoch);
    }
    let dev = parse_device(device)?;
    let mut stop: Option<Stop> = None;
    let out = py.detach(|| -> gnn_train::Result<Outcome> {
        let t_all = Instant::now();
        precision.check_device(&dev)?;
        let data = DeviceData::new(&ds, &dev, row_normalize)?
            .with_precision(precision)?
            .with_aligned_features()?;
        let t = Instant::now();
        let graph = on_oom(ModelGraph::new(&ds.graph, kind, &dev), &dev, || {
            (
                format!("uploading the graph ({} edges) for {kind}", ds.graph.nnz()),
                None,
            )
        })?
        .with_policy(policy)
        .with_lean_layers(true)
        // As train_reddit: the output layers on aligned columns where that pays.
        .with_padded_outputs(gnn_models::padded_outputs_pay(
            kind,
            &dev,
            precision.is_half(),
        ));
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
    let stopped = stopped(stop)?;
    let out = out.map_err(to_py)?;
    let mut extra = json!({
        "stopped": stopped,
        "dataset": ds.name,
        "device": device_name(&dev),
        "model": out.model.config(),
        "train": tc,
        "row_normalize": row_normalize,
        "graph_prep_s": out.prep_s,
        "total_s": out.total_s,
        "kernels_used": out.graph.kernels_used(),
    });
    if let (Some(a), Some(o)) = (out.roc_auc, extra.as_object_mut()) {
        o.insert("roc_auc".into(), json!(a));
    }
    let report = report_json(&out.report, extra)?;
    let info = trained_info(&ds.name, &out.report, seed, &tc);
    let model = Model::new(
        Served::bound(out.model, out.graph, &ds, dev),
        Some(row_normalize),
        info,
    );
    let report = crate::json::to_python(py, &report)?.unbind();
    Ok((model, report))
}

/// What `Model.save` records beside the weights of a model trained here.
pub(crate) fn trained_info(
    dataset: &str,
    report: &TrainReport,
    seed: u64,
    tc: &TrainConfig,
) -> serde_json::Value {
    json!({
        "dataset": dataset,
        "test_acc": report.test_acc,
        "val_acc": report.best_val_acc,
        "best_epoch": report.best_epoch,
        "epochs": report.epochs_run,
        "saved_seed": seed,
        "train": tc,
    })
}

/// `why` a run stopped early as the report names it (`None`: it ran to the end), or the
/// exception `on_epoch` raised.
pub(crate) fn stopped(stop: Option<Stop>) -> PyResult<Option<&'static str>> {
    match stop {
        Some(Stop::Raised(e)) => Err(e),
        Some(Stop::Interrupt) => Ok(Some("interrupt")),
        Some(Stop::Callback) => Ok(Some("callback")),
        None => Ok(None),
    }
}

/// The report dict: the trainer's report (history, accuracies, epoch times, time to accuracy,
/// memory peaks, breakdown) with the breakdown's table rows, and `extra`'s entries (the model
/// and recipe, where it ran, why it stopped).
pub(crate) fn report_json(
    report: &TrainReport,
    extra: serde_json::Value,
) -> PyResult<serde_json::Value> {
    let mut v = serde_json::to_value(report).map_err(|e| value_error(e.to_string()))?;
    let o = v
        .as_object_mut()
        .ok_or_else(|| value_error("the training report is not a JSON object"))?;
    o.insert("breakdown_rows".into(), json!(report.breakdown.rows()));
    if let serde_json::Value::Object(extra) = extra {
        o.extend(extra);
    }
    Ok(v)
}
