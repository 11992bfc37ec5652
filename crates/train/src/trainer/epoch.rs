//! One training step: forward, loss, backward (scaled under f16, summed over the ranks of a
//! multi-device run), the optimiser update gated on the device by the loss and the gradients,
//! the non-finite guard on their read-back; and what each part took.

use super::report::window;
use super::Trainer;
use crate::error::{Error, Result};
use crate::report::PhaseSums;
use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};
use gnn_comm::Communicator;
use gnn_models::{DropoutRng, Forward, PassOutput, Phase};
use std::time::{Duration, Instant};

/// The readings of one step: wall times of its parts, and the communicator's clock and
/// counter where they were taken.
#[derive(Default)]
struct Clock {
    /// Communicator time and bytes before the step.
    comm0: Duration,
    bytes0: u64,
    /// Communicator time after the forward, and after the backward.
    comm_fwd: Duration,
    comm_bwd: Duration,
    forward: Duration,
    loss: Duration,
    backward: Duration,
    step: Duration,
}

impl Trainer<'_> {
    /// The training step of `epoch` (`first`: the first this run makes, which computes the
    /// cached input aggregation). Returns its phases and the host milliseconds it spent
    /// building the graph's cached views ([`gnn_kernels::setup_time`]).
    pub(super) fn step(
        &mut self,
        epoch: usize,
        first: bool,
        phase: &mut String,
    ) -> Result<(PhaseSums, f64)> {
        // The dropout stream before this epoch's masks, for the non-finite guard's checkpoint.
        let rng_before = self.rng;
        self.sync()?;
        // The phases are synchronised (and the allocator's peak read per phase) only where
        // they are reported: with the profiler on, and on a rank of a multi-device run (its
        // watchdog times the waits). Otherwise the host queues the loss and the backward
        // while the device still runs the forward, as torch does; the step's time still ends
        // with a synchronisation (the read-back of the gated update's check, for the guard).
        let phased = self.cfg.profile || self.comm.is_some();
        let mut clock = Clock {
            comm0: self.comm_time(),
            bytes0: self.comm_bytes(),
            ..Clock::default()
        };
        let setup0 = gnn_kernels::setup_time();
        let t0 = Instant::now();
        *phase = format!("running training epoch {epoch} (forward{})", self.need);
        self.note(epoch, "forward");
        let out = self.forward(first)?;
        if phased {
            self.sync()?;
        }
        clock.forward = t0.elapsed();
        clock.comm_fwd = self.comm_time();
        self.records.sample_in_use(&self.device);
        if phased {
            self.records.mark(&self.device, window::FORWARD)?;
        }
        // The loss, unless the output layer's op took it in (its time is then the forward's).
        let t1 = Instant::now();
        let loss = match out {
            PassOutput::Loss(loss) => loss,
            PassOutput::Logits(logits) => {
                let (labels, weight) = loss_target(&self.train_output, &self.output, self.data);
                masked_cross_entropy(&logits, labels, weight)?
            }
        };
        if phased {
            self.sync()?;
        }
        clock.loss = t1.elapsed();
        if phased {
            self.records.mark(&self.device, window::LOSS)?;
        }
        let (loss_sum, grads) = self.backward(&loss, &mut clock, epoch, phase, phased)?;
        // The forward's activations live as long as the loss's graph: free them before the
        // step and the evaluation, which would otherwise allocate on top of them.
        drop(loss);
        // The loss and each gradient's sum, on the device: the update is queued behind the
        // backward, gated by them (it changes nothing unless all are finite), and they are
        // read back once, after it, for the non-finite guard.
        let (names, check) = check_values(&loss_sum, &self.vars, &grads)?;
        if phased {
            self.records.mark(&self.device, window::BACKWARD)?;
        }
        let t3 = Instant::now();
        *phase = format!("running training epoch {epoch} (optimiser step)");
        self.note(epoch, "optimiser step");
        let cfg = self.cfg;
        self.opt
            .set_lr(cfg.lr_schedule.rate(cfg.lr, epoch, cfg.epochs));
        self.opt.step(&grads, Some(&check))?;
        drop(grads);
        // The step's one wait (under the watchdog on a rank), before the check's read-back.
        self.sync()?;
        let values = check.to_vec1::<f32>()?;
        let bad = first_non_finite(&names, &values);
        if bad.is_some() {
            // The gate kept the update off the parameters and moments; the counter follows.
            self.opt.unstep();
        }
        let loss_value = values[0] as f64;
        self.guard_non_finite(epoch, rng_before, loss_value, bad)?;
        self.final_loss = loss_value;
        clock.step = t3.elapsed();
        self.records.mark(&self.device, window::STEP)?;
        let sums = self.phase_sums(&clock, t0.elapsed())?;
        let setup_ms = gnn_kernels::setup_time()
            .saturating_sub(setup0)
            .as_secs_f64()
            * 1e3;
        Ok((sums, setup_ms))
    }

    /// The training forward, with the input aggregation computed first when `first` (and
    /// the cache on), offering the model its loss ([`gnn_models::Gnn::forward_offering_loss`]).
    fn forward(&mut self, first: bool) -> Result<PassOutput> {
        let (model, graph, data) = (self.model, self.graph, self.data);
        let x = &data.x;
        if self.cfg.cache_input_aggregate && first {
            let _t = graph.phase(Phase::Aggregation);
            self.input_agg = model.input_aggregate(graph, x)?;
        }
        let pass = Forward::train(&mut self.rng).with_input_aggregate(self.input_agg.as_ref());
        // The train rows alone where the output layer runs so, else the evaluation's rows.
        let mut pass = match &self.train_output {
            Some(t) => pass.with_output_graph(Some(&t.graph)),
            None => pass.with_output_rows(self.output.as_ref().map(|o| &o.rows)),
        };
        // Read field by field: the pass holds the dropout stream.
        let (labels, weight) = loss_target(&self.train_output, &self.output, data);
        Ok(model.forward_offering_loss(graph, x, &mut pass, labels, weight)?)
    }

    /// The backward of `loss` (scaled under f16), timed into `clock` (its end synchronised
    /// where `phased`); the gradients unscaled and, on a partitioned graph, summed over the
    /// ranks with the loss. Returns the loss (summed over the ranks; `[1]`, f32, on the
    /// device, not read back) and the gradients.
    fn backward(
        &mut self,
        loss: &Tensor,
        clock: &mut Clock,
        epoch: usize,
        phase: &mut String,
        phased: bool,
    ) -> Result<(Tensor, GradStore)> {
        let t2 = Instant::now();
        *phase = format!("running training epoch {epoch} (backward{})", self.need);
        self.note(epoch, "backward");
        let mut grads = match &self.scaler {
            Some(s) => s.backward(loss)?,
            None => loss.backward()?,
        };
        if phased {
            self.sync()?;
        }
        clock.backward = t2.elapsed();
        clock.comm_bwd = self.comm_time();
        self.records.sample_in_use(&self.device);
        if let Some(s) = &self.scaler {
            s.unscale(&self.vars, &mut grads)?;
        }
        let loss = match &self.comm {
            Some(c) => {
                *phase = format!("running training epoch {epoch} (gradient all-reduce)");
                self.note(epoch, "gradient all-reduce");
                all_reduce_grads(c.as_ref(), &self.vars, &mut grads, loss)?
            }
            None => loss.to_dtype(candle_core::DType::F32)?.reshape(1)?,
        };
        Ok((loss, grads))
    }

    /// Acts on the step's check: `bad` names the first non-finite value among the loss and
    /// the gradients (the gated update then changed nothing). The check also drives f16 loss
    /// scaling: an overflow of the scaled gradients (finite loss) skips the step and halves
    /// the scale, unless the scale has nowhere left to go. Any other non-finite value stops
    /// the run with [`Error::NonFinite`], after saving the state before `epoch` (its dropout
    /// stream was `rng_before`) when the recipe names a checkpoint.
    fn guard_non_finite(
        &mut self,
        epoch: usize,
        rng_before: DropoutRng,
        loss_value: f64,
        bad: Option<String>,
    ) -> Result<()> {
        let skip = match self.scaler.as_mut() {
            Some(s) => s.skip_step(loss_value.is_finite(), bad.is_none()),
            None => false,
        };
        let Some(tensor) = bad.filter(|_| !skip) else {
            // A clean step, or a skipped one (nothing reached the parameters); the epoch is
            // still timed and logged.
            return Ok(());
        };
        // Nothing of this epoch has reached the parameters, moments or records yet: with the
        // dropout stream rewound, the current state is the state before the epoch.
        // Rank 0 of a multi-device run saves it (every rank stops here: the loss and the
        // gradients are the summed ones).
        let saved = match &self.cfg.checkpoint {
            Some(path) if self.writes_checkpoints() => {
                Some(self.state(epoch - 1, rng_before).save(path)?)
            }
            _ => None,
        };
        let f16_range = self.cfg.precision == crate::Precision::F16 && !loss_value.is_finite();
        let tensor = if f16_range {
            format!(
                "{tensor}, under f16 precision (TrainConfig::precision), whose range ends at \
                 65504: an activation overflowed (unnormalised sums over hundreds of \
                 neighbours, as GIN's, do); bf16 precision keeps f32's range"
            )
        } else {
            tensor
        };
        Err(Error::NonFinite {
            epoch,
            tensor,
            checkpoint: saved.map(|p| p.display().to_string()),
            f16_range,
        })
    }

    /// The step's phases from `clock`, the graph's phase and backward clocks and the
    /// communicator; `total` is the whole step.
    fn phase_sums(&self, clock: &Clock, total: Duration) -> Result<PhaseSums> {
        let phases = self.graph.take_phase_times()?;
        let mut bwd_agg = self.graph.graph.take_backward_time()?;
        if let Some(t) = &self.train_output {
            bwd_agg += t.graph.graph.take_backward_time()?;
        }
        let measured = phases.aggregation + phases.gemm + phases.elementwise;
        // Communication is taken out of the phase it ran in: the forward's halo exchanges out
        // of the aggregation, the backward's out of the dense backward; the all-reduce ran
        // between the backward and the optimiser, outside every phase.
        let comm_fwd = clock.comm_fwd.saturating_sub(clock.comm0);
        let comm_bwd = clock.comm_bwd.saturating_sub(clock.comm_fwd);
        Ok(PhaseSums {
            aggregation: (phases.aggregation + bwd_agg).saturating_sub(comm_fwd),
            gemm: phases.gemm,
            elementwise: phases.elementwise,
            backward_dense: clock
                .backward
                .saturating_sub(bwd_agg)
                .saturating_sub(comm_bwd),
            loss_optimizer: clock.loss + clock.step,
            other: clock.forward.saturating_sub(measured),
            communication: self.comm_time().saturating_sub(clock.comm0),
            comm_bytes: self.comm_bytes() - clock.bytes0,
            total,
            epochs: 1,
        })
    }
}

/// The labels and row weights of the training loss: the train rows' where the output layer
/// runs on them alone (`train_output`), else every output row's (`output`'s, or `data`'s).
fn loss_target<'b>(
    train_output: &'b Option<super::output::TrainOutput>,
    output: &'b Option<super::output::LabelledOutput>,
    data: &'b crate::DeviceData,
) -> (&'b Tensor, &'b Tensor) {
    match train_output {
        Some(t) => (&t.labels, &t.weight),
        None => {
            let d = output.as_ref().map_or(data, |o| &o.data);
            (&d.labels, &d.train_weight)
        }
    }
}

/// Sums the parameters' gradients and the loss over the ranks of `comm` in one all-reduce
/// (fp32, flattened and concatenated in parameter order), replacing `grads`' entries; returns
/// the summed loss (`[1]`, f32, on the device). A parameter without a gradient contributes
/// zeros (every rank then holds one, so the next steps stay in step).
pub(crate) fn all_reduce_grads(
    comm: &dyn Communicator,
    vars: &[(String, Var)],
    grads: &mut GradStore,
    loss: &Tensor,
) -> Result<Tensor> {
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
    Ok(sum.narrow(0, at, 1)?)
}

/// The step's check on the device, not read back: the loss (`[1]`, f32) then the sum of each
/// parameter's gradient, in f32, in one launch ([`gnn_kernels::sums_f32`]); with the names of
/// the parameters whose sums follow the loss. Any non-finite gradient value makes its sum
/// non-finite (an overflowing sum of finite ones counts too, as an update from such gradients
/// would be useless).
fn check_values<'a>(
    loss: &Tensor,
    vars: &'a [(String, Var)],
    grads: &GradStore,
) -> Result<(Vec<&'a str>, Tensor)> {
    let mut names = Vec::with_capacity(vars.len());
    let mut parts = vec![loss.to_dtype(candle_core::DType::F32)?];
    for (k, v) in vars {
        if let Some(g) = grads.get(v.as_tensor()) {
            names.push(k.as_str());
            parts.push(g.to_dtype(candle_core::DType::F32)?);
        }
    }
    let sums = gnn_kernels::sums_f32(&parts.iter().collect::<Vec<_>>())?;
    Ok((names, sums))
}

/// The first non-finite value of a step's check read back (`values`: the loss, then the sums
/// of the gradients `names` names), described for [`Error::NonFinite`].
fn first_non_finite(names: &[&str], values: &[f32]) -> Option<String> {
    let (loss, sums) = values.split_first()?;
    if !loss.is_finite() {
        return Some(format!("the training loss ({loss})"));
    }
    names
        .iter()
        .zip(sums)
        .find(|(_, s)| !s.is_finite())
        .map(|(k, s)| format!("the gradient of `{k}` (sum {s})"))
}

/// Mean cross-entropy over the train nodes: the fused masked cross-entropy of `logits`
/// against `labels` with row weights `weight` (see [`crate::DeviceData::train_weight`]),
/// computed in fp32 whatever the logits' dtype (one kernel each way; see
/// [`gnn_kernels::masked_cross_entropy`]).
pub fn masked_cross_entropy(logits: &Tensor, labels: &Tensor, weight: &Tensor) -> Result<Tensor> {
    Ok(gnn_kernels::masked_cross_entropy(logits, labels, weight)?)
}
