//! Full-batch node-classification training: every epoch runs the whole graph forward,
//! cross-entropy on the train nodes, backward, one optimiser step; evaluation on
//! train/val/test every `eval_every` epochs; model selection on validation accuracy (the
//! reported test accuracy is the one at the best validation epoch, whose weights are
//! restored at the end); optional early stopping.

use crate::checkpoint::{BestSoFar, StateMeta, TrainState};
use crate::data::DeviceData;
use crate::error::{Error, Result};
use crate::optim::{Adam, OptimizerKind};
use crate::report::PhaseSums;
use candle_core::Tensor;
use gnn_models::{DropoutRng, Forward, Gnn, ModelGraph, Timer};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    /// How the learning rate moves over the epochs.
    #[serde(default)]
    pub lr_schedule: crate::LrSchedule,
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
    /// Write a training checkpoint every this many epochs (0: never); see [`crate::checkpoint`].
    #[serde(default)]
    pub checkpoint_every: usize,
    /// Where checkpoints go (a stem: `<stem>.safetensors` + `<stem>.json`). Also where the
    /// last good state is saved when training stops on a non-finite loss or gradient.
    #[serde(default)]
    pub checkpoint: Option<PathBuf>,
    /// Storage precision of features and activations (the data must be uploaded in it, see
    /// [`crate::DeviceData::with_precision`]); f16 adds dynamic loss scaling.
    #[serde(default)]
    pub precision: crate::Precision,
    /// Let cuBLAS run f32 GEMMs on TF32 tensor cores (10-bit mantissa products, fp32
    /// accumulation), as torch's `allow_tf32`; CUDA only. Process-wide: set at the start of
    /// every run (see [`crate::device::set_tf32`]).
    #[serde(default)]
    pub tf32: bool,
    /// Compute the first layer's aggregation of the (constant) input once, in the first
    /// epoch, instead of in every forward and backward ([`Gnn::input_aggregate`]; exact up to
    /// rounding; applies to GCN, GraphSAGE-mean and GIN without input dropout or MaxK).
    #[serde(default = "yes")]
    pub cache_input_aggregate: bool,
}

fn yes() -> bool {
    true
}

impl TrainConfig {
    /// True when `other` trains the same way (everything but `epochs`, checkpointing,
    /// profiling and the input-aggregate cache equal): the condition for resuming a checkpoint
    /// made under `self`.
    pub fn same_recipe(&self, other: &TrainConfig) -> bool {
        let strip = |c: &TrainConfig| TrainConfig {
            epochs: 0,
            profile: false,
            checkpoint_every: 0,
            checkpoint: None,
            cache_input_aggregate: true,
            ..c.clone()
        };
        strip(self) == strip(other)
    }
}

impl Default for TrainConfig {
    /// The GCN paper's recipe: Adam, lr 0.01, weight decay 5e-4, 200 epochs.
    fn default() -> Self {
        Self {
            epochs: 200,
            lr: 0.01,
            weight_decay: 5e-4,
            optimizer: OptimizerKind::Adam,
            lr_schedule: crate::LrSchedule::Constant,
            patience: None,
            eval_every: 1,
            seed: 0,
            profile: false,
            warmup: 3,
            checkpoint_every: 0,
            checkpoint: None,
            precision: crate::Precision::F32,
            tf32: false,
            cache_input_aggregate: true,
        }
    }
}

/// One epoch's numbers, passed to the progress callback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Peak bytes of live allocations during training by the allocator's own accounting
    /// ([`crate::allocated_peak_bytes`]; what torch's `max_memory_allocated` measures).
    /// `None` on the CPU.
    #[serde(default)]
    pub peak_allocated_bytes: Option<u64>,
    /// [`Self::peak_allocated_bytes`] split by where in the epoch it was reached: the
    /// allocator's high-water mark of each phase, the highest over all epochs. Says which
    /// phase sets the peak (and so what to cut). `None` on the CPU.
    #[serde(default)]
    pub peak_allocated_by_phase: Option<PeakByPhase>,
    /// Phase breakdown (measured when `profile`, else only totals).
    pub breakdown: PhaseSums,
    /// The first epoch's phases alone: where its one-off set-up (the transpose built on the
    /// first backward, module loads, the allocator's growth, the cached input aggregation)
    /// lands. Measured like [`Self::breakdown`].
    pub first_epoch: Option<PhaseSums>,
    /// Of the first epoch, the host milliseconds spent building the graph's cached views
    /// ([`gnn_kernels::setup_time`]: the transpose and its edge permutation, row schedules,
    /// degree tables); they land in its aggregation phase.
    pub first_epoch_graph_setup_ms: Option<f64>,
    /// When the run first came within [`TTA_TOLERANCE`] of its best validation accuracy
    /// ([`time_to_accuracy`]).
    pub time_to_accuracy: Option<TimeToAccuracy>,
    /// f16 only: optimiser steps skipped because the scaled gradients overflowed, and the
    /// final loss scale (see [`crate::LossScale`]).
    pub loss_scale: Option<crate::LossScale>,
    /// Per-epoch log.
    pub history: Vec<EpochLog>,
}

/// The allocator's high-water mark (bytes) of each phase of a training epoch, the highest
/// over the run's epochs; [`TrainReport::peak_allocated_bytes`] is their maximum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeakByPhase {
    /// The training forward (with the first epoch's cached input aggregation).
    pub forward: u64,
    /// The loss.
    pub loss: u64,
    /// The backward, with gradient unscaling, the all-reduce and the finiteness check.
    pub backward: u64,
    /// The optimiser step.
    pub step: u64,
    /// Evaluation forwards, the model selection after them and periodic checkpoints.
    pub eval: u64,
}

impl PeakByPhase {
    /// The highest of the phases.
    pub fn max(&self) -> u64 {
        [self.forward, self.loss, self.backward, self.step, self.eval]
            .into_iter()
            .max()
            .unwrap_or(0)
    }

    /// Phase names and bytes, in epoch order.
    pub fn phases(&self) -> [(&'static str, u64); 5] {
        [
            ("forward", self.forward),
            ("loss", self.loss),
            ("backward", self.backward),
            ("step", self.step),
            ("eval", self.eval),
        ]
    }
}

/// Reads the allocator's high-water mark since the last call into `slot` (keeping the
/// highest) and starts a new window; a no-op on the CPU. The device is synchronised first, so
/// the mark covers the phase's kernels.
fn mark_peak(device: &candle_core::Device, slot: &mut Option<u64>) -> Result<()> {
    if device.is_cuda() {
        device.synchronize()?;
        if let Some(b) = crate::device::allocated_peak_bytes(device) {
            *slot = Some(slot.map_or(b, |p| p.max(b)));
        }
        crate::device::reset_allocated_peak(device);
    }
    Ok(())
}

/// How close to the run's best validation accuracy counts as reached: 0.5 points.
pub const TTA_TOLERANCE: f64 = 0.005;

/// Time to accuracy: the first evaluated epoch whose validation accuracy is within a
/// tolerance of the run's best, and the training time spent up to it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimeToAccuracy {
    /// The first evaluated epoch at or above `target`.
    pub epoch: usize,
    /// Training-step wall time of epochs `1..=epoch` (forward, loss, backward, update; the
    /// first epoch's warm-up included, evaluations excluded: how often to evaluate is a
    /// choice, not a cost of the model), seconds.
    pub train_s: f64,
    /// Its validation accuracy (fraction).
    pub val_acc: f64,
    /// Best validation accuracy minus the tolerance (fraction).
    pub target: f64,
}

/// The [`TimeToAccuracy`] of `history` against the best validation accuracy it holds, within
/// `tolerance` (a fraction: 0.005 is half a point). `None` when nothing was evaluated.
pub fn time_to_accuracy(history: &[EpochLog], tolerance: f64) -> Option<TimeToAccuracy> {
    let best = history
        .iter()
        .filter_map(|l| l.acc.map(|(_, va, _)| va))
        .reduce(f64::max)?;
    let target = best - tolerance;
    let mut spent_ms = 0.0;
    for l in history {
        spent_ms += l.epoch_ms;
        if let Some((_, va, _)) = l.acc.filter(|&(_, va, _)| va >= target) {
            return Some(TimeToAccuracy {
                epoch: l.epoch,
                train_s: spent_ms / 1e3,
                val_acc: va,
                target,
            });
        }
    }
    None
}

/// LayerNorm parameters (between layers, `norms.*`, or inside GIN's MLP, `convs.<l>.norm.*`):
/// exempt from weight decay, as usual.
fn is_norm_param(name: &str) -> bool {
    name.starts_with("norms.") || name.contains(".norm.")
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
    on_epoch: impl FnMut(&EpochLog),
) -> Result<TrainReport> {
    train_from(model, graph, data, cfg, None, on_epoch)
}

/// [`train`], continuing from `resume` (a checkpoint of the same model and recipe, see
/// [`TrainState::load`]) when given: parameters, optimiser moments, dropout stream, model
/// selection and history are restored, and epochs continue after the checkpoint's. On the
/// CPU the continued run is bit-identical to one that was never interrupted.
///
/// Stops with [`Error::NonFinite`] when the loss or a gradient is NaN or infinite, naming the
/// epoch and the tensor, after saving the state before that epoch when `cfg.checkpoint` is set.
///
/// A CUDA out-of-memory failure becomes [`Error::OutOfMemory`] naming the epoch and phase.
pub fn train_from(
    model: &Gnn,
    graph: &ModelGraph,
    data: &DeviceData,
    cfg: &TrainConfig,
    resume: Option<&TrainState>,
    on_epoch: impl FnMut(&EpochLog),
) -> Result<TrainReport> {
    let mut phase = "setting up training (optimiser state)".to_string();
    let r = train_inner(model, graph, data, cfg, resume, on_epoch, &mut phase);
    crate::device::on_oom(r, data.x.device(), || (phase, None))
}

/// Rough size of the activations one training epoch keeps for its backward pass: about four
/// `nodes x width` f32 tensors per layer (linear output, aggregation, activation, dropout mask)
/// plus the dropped-out input. Only for out-of-memory messages: says whether a model can fit.
fn activation_bytes(cfg: &gnn_models::ModelConfig, nodes: usize) -> u64 {
    let widths: u64 = (0..cfg.layers)
        .map(|l| {
            if l + 1 == cfg.layers {
                cfg.out_dim
            } else {
                cfg.hidden
            }
        })
        .map(|w| w as u64)
        .sum();
    let per_node = 4 * widths + cfg.in_dim as u64;
    (nodes as u64).saturating_mul(per_node).saturating_mul(4)
}

fn train_inner(
    model: &Gnn,
    graph: &ModelGraph,
    data: &DeviceData,
    cfg: &TrainConfig,
    resume: Option<&TrainState>,
    mut on_epoch: impl FnMut(&EpochLog),
    phase: &mut String,
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
    if data.x.dtype() != cfg.precision.dtype() {
        return Err(Error::Invalid(format!(
            "the recipe trains in {} but the features are {:?}; upload them with \
             DeviceData::with_precision",
            cfg.precision,
            data.x.dtype()
        )));
    }
    let mut scaler = (cfg.precision == crate::Precision::F16).then(crate::LossScale::new);
    let device = data.x.device().clone();
    crate::device::set_tf32(&device, cfg.tf32)?;
    let vars = model.named_vars();
    let params = vars
        .iter()
        .map(|(k, v)| (v.clone(), !is_norm_param(k)))
        .collect();
    let mut opt = Adam::new(cfg.optimizer, params, cfg.lr, cfg.weight_decay)?;
    // Dropout masks are a function of this stream alone on every device (no device RNG).
    let mut rng = DropoutRng::new(cfg.seed).with_row_offset(graph.row_offset() as u64);
    if cfg.checkpoint_every > 0 && cfg.checkpoint.is_none() {
        return Err(Error::Invalid(
            "checkpoint_every is set but no checkpoint path is".into(),
        ));
    }
    let timer = if cfg.profile {
        Timer::enabled(&device)
    } else {
        Timer::disabled()
    };
    graph.graph.set_backward_timing(cfg.profile);
    graph.graph.take_backward_time()?;
    // A partitioned graph: this is one rank of a multi-device run. Its halo exchanges run
    // inside the forward and backward; the gradients and the loss are summed over ranks here.
    let comm = graph.halo().map(|h| h.comm().clone());
    let comm_time = || comm.as_ref().map_or(Duration::ZERO, |c| c.time_spent());
    let comm_bytes = || comm.as_ref().map_or(0, |c| c.bytes_sent());
    let sync = |d: &candle_core::Device| d.synchronize();

    let mut history = Vec::with_capacity(cfg.epochs);
    let mut sums = PhaseSums::default();
    let (mut first_epoch, mut first_epoch_graph_setup_ms) = (None, None);
    let (mut epoch_ms, mut infer_ms) = (Vec::new(), Vec::new());
    let mut best = BestSoFar::default();
    let mut best_weights: Option<Vec<Tensor>> = None;
    let mut final_loss = f64::NAN;
    let mut start = 0;
    if let Some(st) = resume {
        best_weights = st.apply(model, cfg, &mut opt)?;
        let m = &st.meta;
        (start, rng, best, final_loss) = (m.epoch, m.dropout, m.best, m.final_loss);
        history = m.history.clone();
        (epoch_ms, infer_ms) = (m.epoch_ms.clone(), m.infer_ms.clone());
        // f16: continue with the saved loss scale (checkpoints from before it was saved
        // restart at 2^16).
        if let (Some(s), Some(saved)) = (scaler.as_mut(), m.loss_scale) {
            *s = saved;
        }
    }
    let state = |epoch: usize,
                 rng: DropoutRng,
                 best: BestSoFar,
                 final_loss: f64,
                 history: &[EpochLog],
                 epoch_ms: &[f64],
                 infer_ms: &[f64],
                 opt: &Adam,
                 best_weights: Option<&[Tensor]>,
                 loss_scale: Option<crate::LossScale>| {
        let meta = StateMeta {
            format: "gnn-train-state-v1".into(),
            epoch,
            model: model.config().clone(),
            train: cfg.clone(),
            adam_steps: opt.steps(),
            dropout: rng,
            best,
            final_loss,
            history: history.to_vec(),
            epoch_ms: epoch_ms.to_vec(),
            infer_ms: infer_ms.to_vec(),
            loss_scale,
        };
        TrainState::capture(meta, &vars, opt, best_weights)
    };
    sync(&device)?;
    crate::device::reset_allocated_peak(&device);
    let mut peak: Option<u64> = None;
    // Allocator high-water marks: forward, loss, backward, step, eval (see `PeakByPhase`).
    let mut peaks: [Option<u64>; 5] = [None; 5];
    let sample = |peak: &mut Option<u64>| {
        if let Some(b) = crate::device::device_memory_in_use(&device) {
            *peak = Some(peak.map_or(b, |p| p.max(b)));
        }
    };

    let need = format!(
        "; the epoch keeps about {} of node x width activations, an estimate",
        crate::device::gib(activation_bytes(model.config(), data.x.dim(0)?))
    );
    // The first layer's aggregation of the input, made in the first epoch run (and timed in
    // it), then reused by every forward.
    let mut input_agg: Option<Tensor> = None;
    for epoch in start + 1..=cfg.epochs {
        // The dropout stream before this epoch's masks, for the non-finite guard's checkpoint.
        let rng_before = rng;
        sync(&device)?;
        let (c0, b0) = (comm_time(), comm_bytes());
        let setup0 = gnn_kernels::setup_time();
        let t0 = Instant::now();
        *phase = format!("running training epoch {epoch} (forward{need})");
        if cfg.cache_input_aggregate && epoch == start + 1 {
            input_agg = timer.time(gnn_models::Phase::Aggregation, || {
                model.input_aggregate(graph, &data.x)
            })?;
        }
        let logits = model.forward(
            graph,
            &data.x,
            &mut Forward::train(&mut rng, &timer).with_input_aggregate(input_agg.as_ref()),
        )?;
        sync(&device)?;
        let t_fwd = t0.elapsed();
        let c_fwd = comm_time();
        sample(&mut peak);
        mark_peak(&device, &mut peaks[0])?;
        let t1 = Instant::now();
        let loss = masked_cross_entropy(&logits, &data.labels, &data.train_weight)?;
        sync(&device)?;
        let t_loss = t1.elapsed();
        mark_peak(&device, &mut peaks[1])?;
        let t2 = Instant::now();
        *phase = format!("running training epoch {epoch} (backward{need})");
        let mut grads = match &scaler {
            Some(s) => (&loss * s.scale)?.backward()?,
            None => loss.backward()?,
        };
        sync(&device)?;
        let t_bwd = t2.elapsed();
        let c_bwd = comm_time();
        sample(&mut peak);
        let loss_value = loss.to_scalar::<f32>()? as f64;
        // f16: unscale the gradients.
        if let Some(s) = &scaler {
            for (_, v) in &vars {
                if let Some(g) = grads.remove(v.as_tensor()) {
                    grads.insert(v.as_tensor(), (g / s.scale)?);
                }
            }
        }
        let loss_value = match &comm {
            Some(c) => {
                *phase = format!("running training epoch {epoch} (gradient all-reduce)");
                all_reduce_grads(c.as_ref(), &vars, &mut grads, &loss)?
            }
            None => loss_value,
        };
        // The forward's activations live as long as the loss's graph: free them before the
        // step and the evaluation, which would otherwise allocate on top of them.
        drop((loss, logits));
        // The non-finite check also drives f16 loss scaling: an overflow of the scaled
        // gradients (finite loss) skips the step and halves the scale, unless the scale has
        // nowhere left to go.
        let bad = non_finite(loss_value, &vars, &grads)?;
        let skip = match (scaler.as_mut(), &bad) {
            (Some(s), Some(_)) if loss_value.is_finite() => s.update(false),
            (Some(s), None) => {
                s.update(true);
                false
            }
            _ => false,
        };
        if skip {
            // Nothing reaches the parameters; the epoch is still timed and logged.
        } else if let Some(tensor) = bad {
            // Nothing of this epoch has reached the parameters, moments or records yet: with
            // the dropout stream rewound, the current state is the state before the epoch.
            let saved = match &cfg.checkpoint {
                Some(path) => Some(
                    state(
                        epoch - 1,
                        rng_before,
                        best,
                        final_loss,
                        &history,
                        &epoch_ms,
                        &infer_ms,
                        &opt,
                        best_weights.as_deref(),
                        scaler,
                    )
                    .save(path)?,
                ),
                None => None,
            };
            let tensor = if cfg.precision == crate::Precision::F16 && !loss_value.is_finite() {
                format!(
                    "{tensor}, under --precision f16, whose range ends at 65504: an activation \
                     overflowed (unnormalised sums over hundreds of neighbours, as GIN's, do); \
                     --precision bf16 keeps f32's range"
                )
            } else {
                tensor
            };
            return Err(Error::NonFinite {
                epoch,
                tensor,
                checkpoint: saved.map(|p| p.display().to_string()),
            });
        }
        mark_peak(&device, &mut peaks[2])?;
        let t3 = Instant::now();
        *phase = format!("running training epoch {epoch} (optimiser step)");
        if !skip {
            opt.set_lr(cfg.lr_schedule.rate(cfg.lr, epoch, cfg.epochs));
            opt.step(&grads)?;
        }
        drop(grads);
        final_loss = loss_value;
        sync(&device)?;
        let t_opt = t3.elapsed();
        mark_peak(&device, &mut peaks[3])?;
        let total = t0.elapsed();

        let phases = timer.take()?;
        let bwd_agg = graph.graph.take_backward_time()?;
        let measured = phases.aggregation + phases.gemm + phases.elementwise;
        // Communication is taken out of the phase it ran in: the forward's halo exchanges out
        // of the aggregation, the backward's out of the dense backward; the all-reduce ran
        // between the backward and the optimiser, outside every phase.
        let (comm_fwd, comm_bwd) = (c_fwd.saturating_sub(c0), c_bwd.saturating_sub(c_fwd));
        let epoch_sums = PhaseSums {
            aggregation: (phases.aggregation + bwd_agg).saturating_sub(comm_fwd),
            gemm: phases.gemm,
            elementwise: phases.elementwise,
            backward_dense: t_bwd.saturating_sub(bwd_agg).saturating_sub(comm_bwd),
            loss_optimizer: t_loss + t_opt,
            other: t_fwd.saturating_sub(measured),
            communication: comm_time().saturating_sub(c0),
            comm_bytes: comm_bytes() - b0,
            total,
            epochs: 1,
        };
        if epoch == 1 {
            first_epoch = Some(epoch_sums);
            first_epoch_graph_setup_ms =
                Some((gnn_kernels::setup_time().saturating_sub(setup0)).as_secs_f64() * 1e3);
        }
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
            *phase = format!("evaluating after epoch {epoch}");
            let eval_timer = Timer::disabled();
            let logits = model.forward(
                graph,
                &data.x,
                &mut Forward::eval(&eval_timer).with_input_aggregate(input_agg.as_ref()),
            )?;
            sync(&device)?;
            infer_ms.push(te.elapsed().as_secs_f64() * 1e3);
            let (tr, va, te) = split_accuracy(&logits, data, comm.as_deref())?;
            log.acc = Some((tr, va, te));
            if va > best.val {
                best = BestSoFar {
                    val: va,
                    epoch,
                    test: te,
                    train: tr,
                    since: 0,
                };
                best_weights = Some(
                    vars.iter()
                        .map(|(_, v)| v.as_tensor().copy())
                        .collect::<candle_core::Result<_>>()?,
                );
            } else {
                best.since += 1;
            }
        }
        on_epoch(&log);
        history.push(log);
        if cfg.checkpoint_every > 0 && epoch % cfg.checkpoint_every == 0 {
            if let Some(path) = &cfg.checkpoint {
                sync(&device)?;
                state(
                    epoch,
                    rng,
                    best,
                    final_loss,
                    &history,
                    &epoch_ms,
                    &infer_ms,
                    &opt,
                    best_weights.as_deref(),
                    scaler,
                )
                .save(path)?;
            }
        }
        mark_peak(&device, &mut peaks[4])?;
        if cfg.patience.is_some_and(|p| best.since >= p) {
            break;
        }
    }
    graph.graph.set_backward_timing(false);
    if let Some(w) = best_weights {
        for ((_, v), t) in vars.iter().zip(w) {
            v.set(&t)?;
        }
    }
    let by_phase = match peaks {
        [Some(forward), Some(loss), Some(backward), Some(step), Some(eval)] => Some(PeakByPhase {
            forward,
            loss,
            backward,
            step,
            eval,
        }),
        _ => None,
    };
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    Ok(TrainReport {
        epochs_run: history.len(),
        best_epoch: best.epoch,
        best_val_acc: best.val,
        test_acc: best.test,
        train_acc: best.train,
        final_loss,
        epoch_ms_mean: mean(&epoch_ms),
        epoch_ms_median: median(&mut epoch_ms.clone()),
        inference_ms_median: median(&mut infer_ms),
        peak_device_bytes: peak,
        peak_allocated_bytes: {
            // What the loop's windows did not see: restoring the best weights.
            let mut rest = None;
            mark_peak(&device, &mut rest)?;
            rest.into_iter().chain(by_phase.map(|p| p.max())).max()
        },
        peak_allocated_by_phase: by_phase,
        breakdown: sums,
        first_epoch,
        first_epoch_graph_setup_ms,
        time_to_accuracy: time_to_accuracy(&history, TTA_TOLERANCE),
        loss_scale: scaler,
        history,
    })
}

/// Sums the parameters' gradients and the loss over the ranks of `comm` in one all-reduce
/// (fp32, flattened and concatenated in parameter order), replacing `grads`' entries; returns
/// the summed loss. A parameter without a gradient contributes zeros (every rank then holds
/// one, so the next steps stay in step).
pub(crate) fn all_reduce_grads(
    comm: &dyn gnn_comm::Communicator,
    vars: &[(String, candle_core::Var)],
    grads: &mut candle_core::backprop::GradStore,
    loss: &Tensor,
) -> Result<f64> {
    use candle_core::DType;
    let mut parts = Vec::with_capacity(vars.len() + 1);
    for (_, v) in vars {
        parts.push(match grads.get(v.as_tensor()) {
            Some(g) => g.to_dtype(DType::F32)?.flatten_all()?,
            None => Tensor::zeros(v.elem_count(), DType::F32, v.device())?,
        });
    }
    parts.push(loss.to_dtype(DType::F32)?.reshape(1)?);
    let sum = comm.all_reduce_sum(&Tensor::cat(&parts, 0)?)?;
    let mut at = 0;
    for (_, v) in vars {
        let n = v.elem_count();
        let g = sum
            .narrow(0, at, n)?
            .reshape(v.shape())?
            .to_dtype(v.dtype())?;
        grads.insert(v.as_tensor(), g);
        at += n;
    }
    Ok(sum.narrow(0, at, 1)?.to_vec1::<f32>()?[0] as f64)
}

/// Train, validation and test accuracy of `logits`; over all ranks when `comm` is given (the
/// correct counts and set sizes are summed).
fn split_accuracy(
    logits: &Tensor,
    data: &DeviceData,
    comm: Option<&dyn gnn_comm::Communicator>,
) -> Result<(f64, f64, f64)> {
    let mut counts = Vec::with_capacity(6);
    for ids in [&data.train, &data.val, &data.test] {
        let (c, n) = crate::data::correct_count(logits, &data.labels, ids)?;
        counts.extend([c, n as f64]);
    }
    if let Some(c) = comm {
        let t = Tensor::from_vec(counts, 6, logits.device())?;
        counts = c.all_reduce_sum(&t)?.to_vec1::<f64>()?;
    }
    let frac = |i: usize| {
        if counts[2 * i + 1] == 0.0 {
            0.0
        } else {
            counts[2 * i] / counts[2 * i + 1]
        }
    };
    Ok((frac(0), frac(1), frac(2)))
}

/// `Some(name)` of the first non-finite value among the loss and the parameters' gradients
/// (one device synchronisation: the gradient sums are stacked and read back together).
fn non_finite(
    loss: f64,
    vars: &[(String, candle_core::Var)],
    grads: &candle_core::backprop::GradStore,
) -> Result<Option<String>> {
    if !loss.is_finite() {
        return Ok(Some(format!("the training loss ({loss})")));
    }
    let (names, sums): (Vec<&str>, Vec<Tensor>) = vars
        .iter()
        .filter_map(|(k, v)| {
            let g = grads.get(v.as_tensor())?;
            Some((
                k.as_str(),
                g.to_dtype(candle_core::DType::F32)
                    .and_then(|g| g.sum_all()),
            ))
        })
        .map(|(k, s)| s.map(|s| (k, s)))
        .collect::<candle_core::Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    if sums.is_empty() {
        return Ok(None);
    }
    let sums = Tensor::stack(&sums, 0)?.to_vec1::<f32>()?;
    Ok(names
        .iter()
        .zip(&sums)
        .find(|(_, s)| !s.is_finite())
        .map(|(k, s)| format!("the gradient of `{k}` (sum {s})")))
}

/// Mean cross-entropy over the train nodes: the fused masked cross-entropy of `logits`
/// against `labels` with row weights `weight` (see [`DeviceData::train_weight`]), computed in
/// fp32 whatever the logits' dtype (one kernel each way; see
/// [`gnn_kernels::masked_cross_entropy`]).
pub fn masked_cross_entropy(logits: &Tensor, labels: &Tensor, weight: &Tensor) -> Result<Tensor> {
    Ok(gnn_kernels::masked_cross_entropy(logits, labels, weight)?)
}

/// Logits of every node in evaluation mode (no dropout): the inference path.
pub fn predict(model: &Gnn, graph: &ModelGraph, x: &Tensor) -> Result<Tensor> {
    let t = Timer::disabled();
    Ok(model.forward(graph, x, &mut Forward::eval(&t))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(epoch: usize, ms: f64, val: Option<f64>) -> EpochLog {
        EpochLog {
            epoch,
            loss: 1.0,
            epoch_ms: ms,
            acc: val.map(|v| (v, v, v)),
        }
    }

    #[test]
    fn time_to_accuracy_counts_training_time_to_the_first_close_evaluation() {
        // Evaluated every 2 epochs; best 0.900 at epoch 8, 0.897 (within 0.5 pts) at epoch 6.
        let h: Vec<EpochLog> = [
            (100.0, None),
            (10.0, Some(0.5)),
            (10.0, None),
            (10.0, Some(0.80)),
            (10.0, None),
            (10.0, Some(0.897)),
            (10.0, None),
            (10.0, Some(0.900)),
        ]
        .iter()
        .enumerate()
        .map(|(i, &(ms, v))| log(i + 1, ms, v))
        .collect();
        let t = time_to_accuracy(&h, TTA_TOLERANCE).unwrap();
        assert_eq!(t.epoch, 6);
        assert!((t.train_s - 0.150).abs() < 1e-12, "{}", t.train_s);
        assert!((t.target - 0.895).abs() < 1e-12 && t.val_acc == 0.897);
        // A tighter tolerance waits for the best itself.
        assert_eq!(time_to_accuracy(&h, 0.001).unwrap().epoch, 8);
        // Nothing evaluated: no figure.
        assert!(time_to_accuracy(&h[..1], TTA_TOLERANCE).is_none());
    }

    #[test]
    fn peak_by_phase_names_the_highest_phase() {
        let p = PeakByPhase {
            forward: 3,
            loss: 1,
            backward: 5,
            step: 2,
            eval: 4,
        };
        assert_eq!(p.max(), 5);
        let names: Vec<&str> = p.phases().iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["forward", "loss", "backward", "step", "eval"]);
        assert_eq!(p.phases()[4].1, 4);
        // The CPU has no allocator accounting: no figure rather than zeros.
        let mut slot = None;
        mark_peak(&candle_core::Device::Cpu, &mut slot).unwrap();
        assert_eq!(slot, None);
    }
}
