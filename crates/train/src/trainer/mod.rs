//! Full-batch node-classification training: every epoch runs the whole graph forward,
//! cross-entropy on the train nodes, backward, one optimiser step; evaluation on
//! train/val/test every `eval_every` epochs; model selection on validation accuracy (the
//! reported test accuracy is the one at the best validation epoch, whose weights are
//! restored at the end); optional early stopping.
//!
//! The loop is a few named steps over one value that carries the run from epoch to epoch
//! (`Trainer`, private), one file each:
//! - `config.rs`: the recipe ([`TrainConfig`]);
//! - `epoch.rs`: one training step (forward, loss, backward, optimiser update) and what its
//!   parts took; f16's loss scaling is [`crate::LossScale`]'s;
//! - `select.rs`: evaluation, model selection ([`BestSoFar`]) and [`EarlyStopping`];
//! - `report.rs`: the per-epoch log and the [`TrainReport`] (history, timing statistics, time
//!   to accuracy, memory peaks).
//!
//! Phase timing: the layers open spans on the graph's clock ([`ModelGraph::phase`]), which
//! the trainer turns on for its training forwards when `profile` is set.

mod config;
mod epoch;
pub(crate) mod output;
mod report;
mod select;

pub use config::TrainConfig;
#[cfg(test)]
pub(crate) use epoch::all_reduce_grads;
pub use epoch::masked_cross_entropy;
pub use output::LabelledOutput;
pub use report::{
    time_to_accuracy, EpochLog, PeakByPhase, TimeToAccuracy, TrainReport, TTA_TOLERANCE,
};
pub use select::{BestSoFar, EarlyStopping};

use crate::checkpoint::{StateMeta, TrainState};
use crate::data::DeviceData;
use crate::error::{Error, Result};
use crate::optim::Adam;
use crate::LossScale;
use candle_core::{Device, Tensor, Var};
use gnn_comm::Communicator;
use gnn_models::{DropoutRng, Forward, Gnn, ModelGraph};
use report::{window, Records};
use select::Selection;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

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
    mut on_epoch: impl FnMut(&EpochLog),
) -> Result<TrainReport> {
    train_with_control(model, graph, data, cfg, resume, |log| {
        on_epoch(log);
        ControlFlow::Continue(())
    })
}

/// [`train_from`] whose `on_epoch` may end the run: `ControlFlow::Break(())` stops it after
/// that epoch, as early stopping does (the weights of the best validation epoch so far are
/// restored and the report covers the epochs run). For front doors that stop on a user's
/// request (an interrupt, a callback) with the last good state kept.
pub fn train_with_control(
    model: &Gnn,
    graph: &ModelGraph,
    data: &DeviceData,
    cfg: &TrainConfig,
    resume: Option<&TrainState>,
    on_epoch: impl FnMut(&EpochLog) -> ControlFlow<()>,
) -> Result<TrainReport> {
    let mut phase =
        "setting up training (optimiser state, the train rows' graph where the output layer \
         trains on them)"
            .to_string();
    let r = check(model, data, cfg)
        .and_then(|()| check_sizes(model, graph, data, cfg))
        .and_then(|()| {
            let mut t = Trainer::new(model, graph, data, cfg)?;
            let start = match resume {
                Some(st) => t.resume(st)?,
                None => 0,
            };
            t.run(start, on_epoch, &mut phase)
        });
    // Whatever the outcome, the graph's clocks are left off.
    graph.set_phase_timing(false);
    graph.graph.set_backward_timing(false);
    crate::device::on_oom(r, data.x.device(), || (phase, None))
}

/// Errors when `model`, `data` and `cfg` do not fit together.
fn check(model: &Gnn, data: &DeviceData, cfg: &TrainConfig) -> Result<()> {
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
    // The dataset's own width must be the model's; padding columns come on top.
    if model.config().in_dim != data.features()?
        || !model.config().accepts_input_width(data.x.dim(1)?)
    {
        return Err(Error::Invalid(format!(
            "model expects {} input features, the dataset has {}",
            model.config().in_dim,
            data.features()?
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
    if cfg.checkpoint_every > 0 && cfg.checkpoint.is_none() {
        return Err(Error::Invalid(
            "checkpoint_every is set but no checkpoint path is".into(),
        ));
    }
    Ok(())
}

/// On a CUDA device, errors where a tensor of the run would pass
/// [`gnn_models::MAX_TENSOR_ELEMENTS`] ([`output::check_tensor_sizes`]).
fn check_sizes(
    model: &Gnn,
    graph: &ModelGraph,
    data: &DeviceData,
    cfg: &TrainConfig,
) -> Result<()> {
    if !data.x.device().is_cuda() {
        return Ok(());
    }
    let nodes = data.x.dim(0)?;
    let labelled = data.train.dim(0)? + data.val.dim(0)? + data.test.dim(0)?;
    let m = model.config();
    let out_rows = output::output_rows(nodes, labelled, m.out_dim, cfg.labelled_output);
    // A rank of a partitioned run had its exchanged rows checked before it allocated
    // (`dist::run`'s pre-flight).
    let cached = cfg.cache_input_aggregate && model.input_aggregate_reduce(graph).is_some();
    output::check_tensor_sizes(
        m,
        nodes,
        graph.graph.nnz(),
        out_rows,
        cached,
        None,
        "train partitioned over more GPUs (train_dist --ranks), each holding a share of the \
         rows, or narrow the model",
    )
}

/// LayerNorm parameters (between layers, `norms.*`, or inside GIN's MLP, `convs.<l>.norm.*`):
/// exempt from weight decay, as usual.
fn is_norm_param(name: &str) -> bool {
    name.starts_with("norms.") || name.contains(".norm.")
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

/// A run in progress: everything that carries from one epoch to the next.
struct Trainer<'a> {
    model: &'a Gnn,
    graph: &'a ModelGraph,
    data: &'a DeviceData,
    cfg: &'a TrainConfig,
    device: Device,
    vars: Vec<(String, Var)>,
    opt: Adam,
    /// Dropout masks are a function of this stream alone on every device (no device RNG).
    rng: DropoutRng,
    /// f16's dynamic loss scale.
    scaler: Option<LossScale>,
    /// A partitioned graph's communicator: this is one rank of a multi-device run. Its halo
    /// exchanges run inside the forward and backward; the gradients and the loss are summed
    /// over ranks here.
    comm: Option<Arc<dyn Communicator>>,
    select: Selection,
    records: Records,
    /// Loss of the last completed epoch.
    final_loss: f64,
    /// The first layer's aggregation of the input, made in the first epoch run (and timed in
    /// it), then reused by every forward.
    input_agg: Option<Tensor>,
    /// The size note of out-of-memory messages.
    need: String,
    /// The output layer's rows when not every node's, with the data re-indexed to them.
    output: Option<output::LabelledOutput>,
    /// The training pass's output layer for the train rows alone, where it runs so
    /// ([`output::TrainOutput`]); evaluation keeps [`Self::output`].
    train_output: Option<output::TrainOutput>,
}

impl<'a> Trainer<'a> {
    /// Optimiser, dropout stream and clocks for a fresh run (see [`Self::resume`]).
    fn new(
        model: &'a Gnn,
        graph: &'a ModelGraph,
        data: &'a DeviceData,
        cfg: &'a TrainConfig,
    ) -> Result<Self> {
        let scaler = (cfg.precision == crate::Precision::F16).then(LossScale::new);
        let device = data.x.device().clone();
        crate::device::set_tf32(&device, cfg.tf32)?;
        let vars = model.named_vars();
        let params = vars
            .iter()
            .map(|(k, v)| (v.clone(), !is_norm_param(k)))
            .collect();
        let opt = Adam::new(cfg.optimizer, params, cfg.lr, cfg.weight_decay)?;
        let rng = DropoutRng::new(cfg.seed).with_row_offset(graph.row_offset() as u64);
        graph.set_phase_timing(cfg.profile);
        graph.take_phase_times()?;
        graph.graph.set_backward_timing(cfg.profile);
        graph.graph.take_backward_time()?;
        let train_output = output::TrainOutput::choose(model, graph, data, cfg.trains_rows())?;
        if let Some(t) = &train_output {
            t.graph.graph.set_backward_timing(cfg.profile);
        }
        let rows_graph = match &train_output {
            Some(t) => format!(
                ", plus {} for the train rows' graph and its transpose",
                crate::device::gib(t.device_bytes())
            ),
            None => String::new(),
        };
        let need = format!(
            "; the epoch keeps about {} of node x width activations, an estimate{rows_graph}",
            crate::device::gib(activation_bytes(model.config(), data.x.dim(0)?))
        );
        Ok(Self {
            model,
            graph,
            data,
            cfg,
            device,
            vars,
            opt,
            rng,
            scaler,
            comm: graph.halo().map(|h| h.comm().clone()),
            select: Selection::default(),
            records: Records::new(cfg.epochs),
            final_loss: f64::NAN,
            input_agg: None,
            need,
            output: output::LabelledOutput::choose_on(model, graph, data, cfg.labelled_output)?,
            train_output,
        })
    }

    /// The labels, loss weights and splits as the logits' rows are: re-indexed to the output
    /// rows when the output layer computes only those.
    fn out_data(&self) -> &DeviceData {
        self.output.as_ref().map_or(self.data, |o| &o.data)
    }

    /// Continues from checkpoint `st`; returns the epochs it had completed.
    fn resume(&mut self, st: &TrainState) -> Result<usize> {
        self.select.weights = st.apply(self.model, self.cfg, &mut self.opt)?;
        let m = &st.meta;
        // The stream's position is global; where this rank's rows start in it is this
        // rank's own (rank 0 wrote the checkpoint; 0 on one device either way).
        let rng = m.dropout.with_row_offset(self.rng.row_offset);
        (self.rng, self.select.best, self.final_loss) = (rng, m.best, m.final_loss);
        self.records.history = m.history.clone();
        (self.records.epoch_ms, self.records.infer_ms) = (m.epoch_ms.clone(), m.infer_ms.clone());
        // f16: continue with the saved loss scale (checkpoints from before it was saved
        // restart at 2^16).
        if let (Some(s), Some(saved)) = (self.scaler.as_mut(), m.loss_scale) {
            *s = saved;
        }
        Ok(m.epoch)
    }

    /// The state after `epoch` epochs with the dropout stream at `rng`, as a checkpoint.
    fn state(&self, epoch: usize, rng: DropoutRng) -> TrainState {
        let meta = StateMeta {
            format: "gnn-train-state-v1".into(),
            epoch,
            model: self.model.config().clone(),
            train: self.cfg.clone(),
            adam_steps: self.opt.steps(),
            dropout: rng,
            best: self.select.best,
            final_loss: self.final_loss,
            history: self.records.history.clone(),
            epoch_ms: self.records.epoch_ms.clone(),
            infer_ms: self.records.infer_ms.clone(),
            loss_scale: self.scaler,
        };
        TrainState::capture(meta, &self.vars, &self.opt, self.select.weights.as_deref())
    }

    /// Names the step the communicator's errors report (one rank of a multi-device run).
    fn note(&self, epoch: usize, phase: &'static str) {
        if let Some(c) = &self.comm {
            c.note_step(epoch, phase);
        }
    }

    /// Waits for the device's queued work; on a rank of a multi-device run, as a call its
    /// communicator's watchdog times ([`gnn_comm::Communicator::watch_wait`]): a kernel that
    /// never ends stops the run with an error naming the rank and the step.
    fn sync(&self) -> Result<()> {
        match &self.comm {
            Some(c) => Ok(c.watch_wait("device sync", &mut || Ok(self.device.synchronize()?))?),
            None => Ok(self.device.synchronize()?),
        }
    }

    /// Whether this trainer writes checkpoints: on one device, and on rank 0 of a
    /// multi-device run (the others hold the same state, see [`Self::check_replicated`]).
    fn writes_checkpoints(&self) -> bool {
        self.comm.as_ref().is_none_or(|c| c.rank() == 0)
    }

    /// On a multi-device run, checks that every rank holds rank 0's parameters, optimiser
    /// moments and best-validation weights, bit for bit (a collective: every rank calls it at
    /// the same epoch), so that rank 0's checkpoint restores every rank. They are replicated
    /// by construction (the summed gradients and the accuracies that select the best epoch
    /// are the same on every rank); what is each rank's own (the dropout stream's row offset,
    /// the timings) is not compared and is not taken from the checkpoint on resume.
    fn check_replicated(&self, epoch: usize) -> Result<()> {
        let Some(comm) = self.comm.as_ref().filter(|c| c.world() > 1) else {
            return Ok(());
        };
        let mut tensors: Vec<Tensor> = self
            .vars
            .iter()
            .map(|(_, v)| v.as_tensor().clone())
            .collect();
        for (m, v) in self.opt.moments() {
            tensors.extend([m, v]);
        }
        tensors.extend(self.select.weights.iter().flatten().cloned());
        let fp = fingerprint(&tensors)?;
        let mine = Tensor::from_vec(vec![fp as u32, (fp >> 32) as u32], (1, 2), &self.device)?;
        let all = comm.all_gather(&mine)?.to_vec2::<u32>()?;
        match all.iter().position(|row| row != &all[0]) {
            None => Ok(()),
            Some(r) => Err(Error::Invalid(format!(
                "after epoch {epoch}, rank {r}'s parameters or optimiser state differ from rank \
                 0's (fingerprints {:08x}{:08x} and {:08x}{:08x}): the replicated state diverged, \
                 and rank 0's checkpoint would not restore rank {r}",
                all[r][1], all[r][0], all[0][1], all[0][0]
            ))),
        }
    }

    /// Time spent inside the communicator so far (zero on one device).
    fn comm_time(&self) -> Duration {
        self.comm
            .as_ref()
            .map_or(Duration::ZERO, |c| c.time_spent())
    }

    /// Bytes the communicator sent so far.
    fn comm_bytes(&self) -> u64 {
        self.comm.as_ref().map_or(0, |c| c.bytes_sent())
    }

    /// Epochs `start + 1 ..= cfg.epochs`, each a training step, an evaluation when due, a
    /// checkpoint when due; then the best weights restored and the report.
    fn run(
        mut self,
        start: usize,
        mut on_epoch: impl FnMut(&EpochLog) -> ControlFlow<()>,
        phase: &mut String,
    ) -> Result<TrainReport> {
        let cfg = self.cfg;
        let stop = EarlyStopping::new(cfg.patience);
        self.device.synchronize()?;
        crate::device::reset_allocated_peak(&self.device);
        for epoch in start + 1..=cfg.epochs {
            let (sums, setup_ms) = self.step(epoch, epoch == start + 1, phase)?;
            self.records
                .count(epoch, sums, setup_ms, cfg.warmup, cfg.epochs);
            let mut log = EpochLog {
                epoch,
                loss: self.final_loss,
                epoch_ms: sums.total.as_secs_f64() * 1e3,
                acc: None,
            };
            if epoch % cfg.eval_every == 0 || epoch == cfg.epochs {
                log.acc = Some(self.evaluate(epoch, phase)?);
            }
            let flow = on_epoch(&log);
            self.records.history.push(log);
            if cfg.checkpoint_every > 0 && epoch % cfg.checkpoint_every == 0 {
                if let Some(path) = &cfg.checkpoint {
                    self.note(epoch, "checkpoint");
                    self.sync()?;
                    self.check_replicated(epoch)?;
                    if self.writes_checkpoints() {
                        self.state(epoch, self.rng).save(path)?;
                    }
                }
            }
            self.records.mark(&self.device, window::EVAL)?;
            if flow.is_break() || stop.should_stop(&self.select.best) {
                break;
            }
        }
        let best = self.select.best;
        self.select.restore(&self.vars)?;
        self.records
            .finish(best, self.final_loss, self.scaler, &self.device)
    }
}

/// FNV-1a over the f32 bits of `tensors`' values, in order (read to the host).
fn fingerprint(tensors: &[Tensor]) -> Result<u64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for t in tensors {
        let values = t
            .to_dtype(candle_core::DType::F32)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        for v in values {
            for b in v.to_bits().to_le_bytes() {
                h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
    Ok(h)
}

/// Logits of every node in evaluation mode (no dropout): the inference path. On a CUDA
/// device, refused before it starts where a tensor of the pass would pass
/// [`gnn_models::MAX_TENSOR_ELEMENTS`] (the logits themselves included).
pub fn predict(model: &Gnn, graph: &ModelGraph, x: &Tensor) -> Result<Tensor> {
    if x.device().is_cuda() {
        let n = x.dim(0)?;
        output::check_tensor_sizes(
            model.config(),
            n,
            graph.graph.nnz(),
            n,
            false,
            None,
            "predict partitioned over more GPUs, each holding a share of the rows",
        )?;
    }
    Ok(model.forward(graph, x, &mut Forward::eval())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_cora as cora;
    use gnn_models::{ConvKind, ModelConfig};

    /// Every epoch's loss of `got` within `bound` (relative) of `want`'s, the same epochs.
    #[cfg(feature = "cuda")]
    fn assert_losses_within(got: &TrainReport, want: &TrainReport, bound: f64, what: &str) {
        assert_eq!(got.history.len(), want.history.len(), "{what}");
        for (a, b) in got.history.iter().zip(&want.history) {
            assert!(
                ((a.loss - b.loss) / b.loss).abs() < bound,
                "{what}, epoch {}: loss {} vs {}",
                a.epoch,
                a.loss,
                b.loss
            );
        }
    }

    /// On a GPU, a training pass whose output layer runs over the 140 train rows alone
    /// (over Cora restricted to them, the CUDA graph's row-scaled sum included) trains as the
    /// whole output does: GCN (f32, bf16, f16: its weighted sum), GraphSAGE-mean,
    /// GraphSAGE-pool (its max over the restricted rows) and GIN 2 x 16 with dropout, lean
    /// layers and padded outputs, with and without the cached input aggregation, 10 epochs,
    /// every epoch's loss within 1e-4 (f32) and 1e-2 (half precision) relative. Skipped
    /// without a GPU.
    #[cfg(feature = "cuda")]
    #[test]
    fn train_rows_train_as_the_whole_output_on_one_gpu() {
        let Ok(gpu) = Device::new_cuda(0) else {
            eprintln!("no CUDA device: skipped");
            return;
        };
        let ds = cora();
        for (kind, precision, bound) in [
            (ConvKind::Gcn, crate::Precision::F32, 1e-4),
            (ConvKind::Gcn, crate::Precision::Bf16, 1e-2),
            (ConvKind::Gcn, crate::Precision::F16, 1e-2),
            (ConvKind::SageMean, crate::Precision::F32, 1e-4),
            (ConvKind::SageMean, crate::Precision::Bf16, 1e-2),
            (ConvKind::SagePool, crate::Precision::F32, 1e-4),
            (ConvKind::SagePool, crate::Precision::Bf16, 1e-2),
            (ConvKind::Gin, crate::Precision::F32, 1e-4),
            (ConvKind::Gin, crate::Precision::Bf16, 1e-2),
        ] {
            let cfg = ModelConfig::new(kind, ds.features.cols(), 16, 7, 2, 0.5);
            let graph = ModelGraph::new(&ds.graph, kind, &gpu)
                .unwrap()
                .with_lean_layers(true)
                .with_padded_outputs(true);
            let data = DeviceData::new(&ds, &gpu, true)
                .unwrap()
                .with_precision(precision)
                .unwrap();
            let model = Gnn::new(cfg.clone(), &gpu, 0).unwrap();
            let chosen = output::TrainOutput::choose(&model, &graph, &data, true).unwrap();
            assert_eq!(chosen.map(|t| t.graph.graph.n_rows()), Some(140));
            for cache in [true, false] {
                let run = |on: bool| {
                    let tc = TrainConfig {
                        epochs: 10,
                        precision,
                        labelled_output: on,
                        cache_input_aggregate: cache,
                        ..Default::default()
                    };
                    let model = Gnn::new(cfg.clone(), &gpu, 0).unwrap();
                    train(&model, &graph, &data, &tc, |_| {}).unwrap()
                };
                let (want, got) = (run(false), run(true));
                let what = format!("{kind} {precision:?} cache {cache}, train rows vs all");
                assert_losses_within(&got, &want, bound, &what);
            }
        }
    }

    /// On a GPU, GCN's fused sum run unweighted between two `D^-1/2` row scalings (the CUDA
    /// default, [`ModelGraph::with_scaled_normalisation`]) trains as the weighted SpMM does:
    /// Cora, GCN 2 x 16 with dropout, lean layers and padded outputs as the examples run them,
    /// 10 epochs, every epoch's loss within 1e-4 (f32) and 1e-2 (bf16) relative. Skipped
    /// without a GPU.
    #[cfg(feature = "cuda")]
    #[test]
    fn scaled_gcn_normalisation_trains_as_the_weighted_on_one_gpu() {
        let Ok(gpu) = Device::new_cuda(0) else {
            eprintln!("no CUDA device: skipped");
            return;
        };
        let ds = cora();
        let cfg = ModelConfig::new(ConvKind::Gcn, ds.features.cols(), 16, 7, 2, 0.5);
        for (precision, bound) in [
            (crate::Precision::F32, 1e-4),
            (crate::Precision::Bf16, 1e-2),
        ] {
            let tc = TrainConfig {
                epochs: 10,
                precision,
                ..Default::default()
            };
            let data = DeviceData::new(&ds, &gpu, true)
                .unwrap()
                .with_precision(precision)
                .unwrap();
            let run = |scaled: bool| {
                let graph = ModelGraph::new(&ds.graph, ConvKind::Gcn, &gpu)
                    .unwrap()
                    .with_lean_layers(true)
                    .with_padded_outputs(true)
                    .with_scaled_normalisation(scaled);
                let f = graph
                    .fused_aggregation(gnn_kernels::Reduce::Sum, candle_core::DType::F32)
                    .unwrap();
                assert_eq!(f.is_scaled(), scaled);
                let model = Gnn::new(cfg.clone(), &gpu, 0).unwrap();
                train(&model, &graph, &data, &tc, |_| {}).unwrap()
            };
            let (want, got) = (run(false), run(true));
            let what = format!("{precision:?}, scaled vs weighted");
            assert_losses_within(&got, &want, bound, &what);
        }
    }

    #[test]
    fn a_break_from_the_callback_stops_after_that_epoch_with_the_same_losses() {
        let dev = Device::Cpu;
        let ds = cora();
        let data = DeviceData::new(&ds, &dev, true).unwrap();
        let graph = ModelGraph::new(&ds.graph, ConvKind::Gcn, &dev).unwrap();
        let cfg = ModelConfig::new(ConvKind::Gcn, ds.features.cols(), 16, 7, 2, 0.5);
        let tc = TrainConfig {
            epochs: 8,
            ..Default::default()
        };
        let full = train(
            &Gnn::new(cfg.clone(), &dev, 0).unwrap(),
            &graph,
            &data,
            &tc,
            |_| {},
        )
        .unwrap();
        let model = Gnn::new(cfg, &dev, 0).unwrap();
        let mut seen = 0;
        let cut = train_with_control(&model, &graph, &data, &tc, None, |log| {
            seen += 1;
            if log.epoch == 3 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
        assert_eq!((seen, cut.epochs_run, cut.history.len()), (3, 3, 3));
        assert!(cut.best_epoch <= 3);
        let losses = |r: &TrainReport| r.history.iter().map(|h| h.loss).collect::<Vec<_>>();
        assert_eq!(losses(&cut), losses(&full)[..3]);
    }

    /// With few labelled nodes (Cora's test split cut to 100: 740 of 2,708 labelled) the
    /// output layer runs on those rows alone, and in training on the 140 train rows alone
    /// (over the graph restricted to them); with Cora's whole split (1,640 labelled) on the
    /// train rows alone in training only. Either way it trains as the whole output does:
    /// the same losses and accuracies, epoch by epoch, whether the layer multiplies first
    /// (16 -> 7) or aggregates first (4 -> 7), with composed and lean layers and the
    /// row-scaled GCN sum; GCN, GraphSAGE-mean and GIN.
    #[test]
    fn labelled_output_rows_train_as_the_whole_output() {
        let dev = Device::Cpu;
        for (kind, test_rows, labelled) in [
            (ConvKind::Gcn, 100, Some(740)),
            (ConvKind::Gcn, 1000, None),
            (ConvKind::SageMean, 100, Some(740)),
            (ConvKind::SageMean, 1000, None),
            (ConvKind::Gin, 1000, None),
        ] {
            let mut ds = cora();
            ds.split.test.truncate(test_rows);
            let data = DeviceData::new(&ds, &dev, true).unwrap();
            let plain = || ModelGraph::new(&ds.graph, kind, &dev).unwrap();
            let graphs = [
                ("composed", plain()),
                ("lean", plain().with_lean_layers(true)),
                (
                    "lean scaled",
                    plain()
                        .with_lean_layers(true)
                        .with_scaled_normalisation(true),
                ),
            ];
            for (form, graph) in &graphs {
                for hidden in [16, 4] {
                    let cfg = ModelConfig::new(kind, ds.features.cols(), hidden, 7, 2, 0.5);
                    let model = |seed| Gnn::new(cfg.clone(), &dev, seed).unwrap();
                    let chosen = output::LabelledOutput::choose(&model(0), &data, true).unwrap();
                    assert_eq!(chosen.map(|o| o.rows.len()), labelled);
                    assert!(output::LabelledOutput::choose(&model(0), &data, false)
                        .unwrap()
                        .is_none());
                    let train_rows = |on| {
                        output::TrainOutput::choose(&model(0), graph, &data, on)
                            .unwrap()
                            .map(|t| t.graph.graph.n_rows())
                    };
                    assert_eq!((train_rows(true), train_rows(false)), (Some(140), None));
                    let run = |on: bool| {
                        let tc = TrainConfig {
                            epochs: 6,
                            labelled_output: on,
                            ..Default::default()
                        };
                        train(&model(0), graph, &data, &tc, |_| {}).unwrap()
                    };
                    let (rows, every) = (run(true), run(false));
                    for (a, b) in rows.history.iter().zip(&every.history) {
                        let what = format!(
                            "{kind} {form}, {test_rows} test rows, hidden {hidden} epoch {}",
                            a.epoch
                        );
                        assert!(
                            (a.loss - b.loss).abs() <= 1e-5 * b.loss,
                            "{what}: {} vs {}",
                            a.loss,
                            b.loss
                        );
                        assert_eq!(a.acc, b.acc, "{what}");
                    }
                    assert_eq!(rows.history.len(), 6);
                }
            }
        }
    }

    /// The train rows are taken where they are at most 90 % of the nodes, for a model that
    /// can, when enabled.
    #[test]
    fn train_rows_are_taken_up_to_nine_tenths_of_the_nodes() {
        assert!(output::trains_on_train_rows(true, 100, 90, true));
        assert!(!output::trains_on_train_rows(true, 100, 91, true));
        assert!(!output::trains_on_train_rows(false, 100, 66, true));
        assert!(!output::trains_on_train_rows(true, 100, 66, false));
        assert!(!output::trains_on_train_rows(true, 100, 0, true));
        let line = output::describe_train_rows(true, 100, 66, true, false).unwrap_or_default();
        assert!(line.contains("the 66 train rows of 100"), "{line}");
        assert!(line.contains("evaluation computes every row"), "{line}");
        assert!(line.contains("--no-train-rows"), "{line}");
        assert!(output::describe_train_rows(true, 100, 6, true, true)
            .is_some_and(|s| s.contains("evaluation computes the labelled rows")));
        assert!(output::describe_train_rows(true, 100, 66, false, false).is_none());
    }
}
