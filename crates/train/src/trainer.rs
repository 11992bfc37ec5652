//! Full-batch node-classification training: every epoch runs the whole graph forward,
//! cross-entropy on the train nodes, backward, one optimiser step; evaluation on
//! train/val/test every `eval_every` epochs; model selection on validation accuracy (the
//! reported test accuracy is the one at the best validation epoch, whose weights are
//! restored at the end); optional early stopping.

use crate::breakdown::PhaseSums;
use crate::data::{accuracy, DeviceData};
use crate::error::{Error, Result};
use crate::optim::{Adam, OptimizerKind};
use candle_core::Tensor;
use gnn_models::{DropoutRng, Forward, Gnn, ModelGraph, Timer};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Training hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// Maximum epochs.
    pub epochs: usize,
    /// Learning rate.
    pub lr: f64,
    /// Weight decay (L2 for Adam, decoupled for AdamW); LayerNorm parameters are exempt.
    pub weight_decay: f64,
    /// Update rule.
    pub optimizer: OptimizerKind,
    /// Stop after this many evaluations without a better validation accuracy.
    pub patience: Option<usize>,
    /// Evaluate every this many epochs (and at the last one).
    pub eval_every: usize,
    /// Seed of dropout masks (the model's init seed is the model's).
    pub seed: u64,
    /// Measure the per-phase breakdown (synchronises the device around phases).
    pub profile: bool,
    /// Leading epochs left out of timing statistics.
    pub warmup: usize,
}

impl Default for TrainConfig {
    /// The GCN paper's recipe: Adam, lr 0.01, weight decay 5e-4, 200 epochs.
    fn default() -> Self {
        Self {
            epochs: 200,
            lr: 0.01,
            weight_decay: 5e-4,
            optimizer: OptimizerKind::Adam,
            patience: None,
            eval_every: 1,
            seed: 0,
            profile: false,
            warmup: 3,
        }
    }
}

/// One epoch's numbers, passed to the progress callback.
#[derive(Debug, Clone, Serialize)]
pub struct EpochLog {
    /// 1-based epoch.
    pub epoch: usize,
    /// Training loss.
    pub loss: f64,
    /// Training-step wall time (forward, loss, backward, update), ms.
    pub epoch_ms: f64,
    /// Accuracies `(train, val, test)` when evaluated this epoch.
    pub acc: Option<(f64, f64, f64)>,
}

/// The outcome of a run.
#[derive(Debug, Clone, Serialize)]
pub struct TrainReport {
    /// Epochs run (early stopping may cut them short).
    pub epochs_run: usize,
    /// Epoch of the best validation accuracy.
    pub best_epoch: usize,
    /// Best validation accuracy.
    pub best_val_acc: f64,
    /// Test accuracy at the best validation epoch.
    pub test_acc: f64,
    /// Train accuracy at the best validation epoch.
    pub train_acc: f64,
    /// Loss of the last epoch.
    pub final_loss: f64,
    /// Median training-epoch time after warm-up, ms.
    pub epoch_ms_median: f64,
    /// Mean training-epoch time after warm-up, ms.
    pub epoch_ms_mean: f64,
    /// Median full-graph inference (evaluation forward) time, ms.
    pub inference_ms_median: f64,
    /// Highest device memory in use seen during training (sampled after each forward and
    /// backward; driver view incl. context and allocator pool), bytes. `None` on the CPU.
    pub peak_device_bytes: Option<u64>,
    /// Phase breakdown (measured when `profile`, else only totals).
    pub breakdown: PhaseSums,
    /// Per-epoch log.
    pub history: Vec<EpochLog>,
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Trains `model` on `data` over `graph`. `on_epoch` sees every epoch (print progress there).
pub fn train(
    model: &Gnn,
    graph: &ModelGraph,
    data: &DeviceData,
    cfg: &TrainConfig,
    mut on_epoch: impl FnMut(&EpochLog),
) -> Result<TrainReport> {
    if cfg.epochs == 0 || cfg.eval_every == 0 {
        return Err(Error::Invalid("epochs and eval_every must be >= 1".into()));
    }
    if model.config().out_dim != data.num_classes {
        return Err(Error::Invalid(format!(
            "model has {} outputs but the dataset has {} classes",
            model.config().out_dim,
            data.num_classes
        )));
    }
    if model.config().in_dim != data.x.dim(1)? {
        return Err(Error::Invalid(format!(
            "model expects {} input features, the dataset has {}",
            model.config().in_dim,
            data.x.dim(1)?
        )));
    }
    let device = data.x.device().clone();
    let vars = model.named_vars();
    let params = vars
        .iter()
        .map(|(k, v)| (v.clone(), !k.starts_with("norms.")))
        .collect();
    let mut opt = Adam::new(cfg.optimizer, params, cfg.lr, cfg.weight_decay)?;
    let mut rng = DropoutRng::new(cfg.seed);
    if !device.is_cpu() {
        // Device RNG drives dropout off the CPU; the CPU path uses `rng` above.
        device.set_seed(cfg.seed)?;
    }
    let timer = if cfg.profile {
        Timer::enabled(&device)
    } else {
        Timer::disabled()
    };
    graph.graph.set_backward_timing(cfg.profile);
    graph.graph.take_backward_time()?;
    let sync = |d: &candle_core::Device| d.synchronize();

    let mut history = Vec::with_capacity(cfg.epochs);
    let mut sums = PhaseSums::default();
    let (mut epoch_ms, mut infer_ms) = (Vec::new(), Vec::new());
    let (mut best_val, mut best_epoch, mut best_test, mut best_train) = (-1.0f64, 0usize, 0.0, 0.0);
    let mut best_weights: Option<Vec<Tensor>> = None;
    let mut since_best = 0usize;
    let mut final_loss = f64::NAN;
    let mut peak: Option<u64> = None;
    let sample = |peak: &mut Option<u64>| {
        if let Some(b) = crate::device::device_memory_in_use(&device) {
            *peak = Some(peak.map_or(b, |p| p.max(b)));
        }
    };

    for epoch in 1..=cfg.epochs {
        sync(&device)?;
        let t0 = Instant::now();
        let logits = model.forward(graph, &data.x, &mut Forward::train(&mut rng, &timer))?;
        sync(&device)?;
        let t_fwd = t0.elapsed();
        sample(&mut peak);
        let t1 = Instant::now();
        let loss = masked_cross_entropy(&logits, &data.train_weight)?;
        sync(&device)?;
        let t_loss = t1.elapsed();
        let t2 = Instant::now();
        let grads = loss.backward()?;
        sync(&device)?;
        let t_bwd = t2.elapsed();
        sample(&mut peak);
        let t3 = Instant::now();
        opt.step(&grads)?;
        drop(grads);
        final_loss = loss.to_scalar::<f32>()? as f64;
        sync(&device)?;
        let t_opt = t3.elapsed();
        let total = t0.elapsed();

        let phases = timer.take()?;
        let bwd_agg = graph.graph.take_backward_time()?;
        let measured = phases.aggregation + phases.gemm + phases.elementwise;
        let epoch_sums = PhaseSums {
            aggregation: phases.aggregation + bwd_agg,
            gemm: phases.gemm,
            elementwise: phases.elementwise,
            backward_dense: t_bwd.saturating_sub(bwd_agg),
            loss_optimizer: t_loss + t_opt,
            other: t_fwd.saturating_sub(measured),
            total,
            epochs: 1,
        };
        if epoch > cfg.warmup || cfg.epochs <= cfg.warmup {
            sums.add(&epoch_sums);
            epoch_ms.push(total.as_secs_f64() * 1e3);
        }

        let mut log = EpochLog {
            epoch,
            loss: final_loss,
            epoch_ms: total.as_secs_f64() * 1e3,
            acc: None,
        };
        if epoch % cfg.eval_every == 0 || epoch == cfg.epochs {
            sync(&device)?;
            let te = Instant::now();
            let eval_timer = Timer::disabled();
            let logits = model.forward(graph, &data.x, &mut Forward::eval(&eval_timer))?;
            sync(&device)?;
            infer_ms.push(te.elapsed().as_secs_f64() * 1e3);
            let tr = accuracy(&logits, &data.labels, &data.train)?;
            let va = accuracy(&logits, &data.labels, &data.val)?;
            let te = accuracy(&logits, &data.labels, &data.test)?;
            log.acc = Some((tr, va, te));
            if va > best_val {
                (best_val, best_epoch, best_test, best_train) = (va, epoch, te, tr);
                best_weights = Some(
                    vars.iter()
                        .map(|(_, v)| v.as_tensor().copy())
                        .collect::<candle_core::Result<_>>()?,
                );
                since_best = 0;
            } else {
                since_best += 1;
            }
        }
        on_epoch(&log);
        history.push(log);
        if cfg.patience.is_some_and(|p| since_best >= p) {
            break;
        }
    }
    graph.graph.set_backward_timing(false);
    if let Some(w) = best_weights {
        for ((_, v), t) in vars.iter().zip(w) {
            v.set(&t)?;
        }
    }
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    Ok(TrainReport {
        epochs_run: history.len(),
        best_epoch,
        best_val_acc: best_val,
        test_acc: best_test,
        train_acc: best_train,
        final_loss,
        epoch_ms_mean: mean(&epoch_ms),
        epoch_ms_median: median(&mut epoch_ms.clone()),
        inference_ms_median: median(&mut infer_ms),
        peak_device_bytes: peak,
        breakdown: sums,
        history,
    })
}

/// Mean cross-entropy over the nodes and labels encoded in `weight` (see
/// [`DeviceData::train_weight`]): `-sum(log_softmax(logits) * weight)`.
pub fn masked_cross_entropy(logits: &Tensor, weight: &Tensor) -> Result<Tensor> {
    let logp = candle_nn::ops::log_softmax(logits, candle_core::D::Minus1)?;
    Ok((logp * weight)?.sum_all()?.neg()?)
}

/// Logits of every node in evaluation mode (no dropout): the inference path.
pub fn predict(model: &Gnn, graph: &ModelGraph, x: &Tensor) -> Result<Tensor> {
    let t = Timer::disabled();
    Ok(model.forward(graph, x, &mut Forward::eval(&t))?)
}
