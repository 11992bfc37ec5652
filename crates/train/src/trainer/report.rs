//! What a run reports: the per-epoch log, the [`TrainReport`] with its timing statistics,
//! time to accuracy and memory peaks, and the records a run keeps on the way ([`Records`]).

use super::select::BestSoFar;
use crate::error::Result;
use crate::report::{mean_std, median, PhaseSums};
use crate::LossScale;
use candle_core::Device;
use serde::{Deserialize, Serialize};

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
    /// phase sets the peak (and so what to cut). `None` on the CPU, and on one device
    /// without the profiler (`profile`), whose steps do not wait for the device between
    /// phases (only the whole step's peak is read: [`Self::peak_allocated_bytes`]).
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

impl TrainReport {
    /// Prints what the run of `model` with `seed` reached on stdout: accuracy, times,
    /// memory peaks and, with `breakdown`, the per-phase timing tables.
    pub fn print_summary(&self, model: &str, seed: u64, breakdown: bool) {
        let kind = model;
        if let Some(s) = &self.loss_scale {
            println!(
                "{kind} seed {seed}: f16 loss scale {} at the end, {} step(s) skipped on overflow",
                s.scale, s.skipped
            );
        }
        println!(
            "{kind} seed {seed}: test {:.2} % (val {:.2} % at epoch {}), median epoch {:.2} ms, \
             inference {:.1} ms",
            100.0 * self.test_acc,
            100.0 * self.best_val_acc,
            self.best_epoch,
            self.epoch_ms_median,
            self.inference_ms_median
        );
        if let Some(t) = self.time_to_accuracy {
            println!(
                "{kind} seed {seed}: time to accuracy (val >= best - 0.5 points = {:.2} %): epoch \
                 {}, {:.2} s of training",
                100.0 * t.target,
                t.epoch,
                t.train_s
            );
        }
        if let Some(b) = self.peak_allocated_bytes {
            println!(
                "peak device memory allocated (the allocator's accounting, as torch's \
                 max_memory_allocated): {:.2} GiB",
                b as f64 / (1u64 << 30) as f64
            );
        }
        if let Some(p) = self.peak_allocated_by_phase {
            let parts: Vec<String> = p
                .phases()
                .iter()
                .map(|(name, b)| format!("{name} {:.2}", *b as f64 / (1u64 << 30) as f64))
                .collect();
            println!("  highest in each phase (GiB): {}", parts.join(", "));
        }
        if let Some(b) = self.peak_device_bytes {
            println!(
                "peak device memory in use (sampled, driver view): {:.2} GiB",
                b as f64 / (1u64 << 30) as f64
            );
        }
        if breakdown {
            println!(
                "timing breakdown ({kind}, mean over {} epochs after warm-up):\n{}",
                self.breakdown.epochs,
                self.breakdown.table()
            );
            if let Some(f) = &self.first_epoch {
                println!(
                    "first epoch ({kind}, its one-off set-up included; of it {:.0} ms on the \
                     host building the graph's transpose, schedules and degree tables):\n{}",
                    self.first_epoch_graph_setup_ms.unwrap_or(0.0),
                    f.table()
                );
            }
        }
    }
}

/// The allocator's high-water mark (bytes) of each phase of a training epoch, the highest
/// over the run's epochs; [`TrainReport::peak_allocated_bytes`] is their maximum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeakByPhase {
    /// The training forward (with the first epoch's cached input aggregation).
    pub forward: u64,
    /// The loss, where the forward did not take it in (else what the forward left
    /// allocated).
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

/// The allocator windows of an epoch, in order: indices into [`Records::peaks`].
pub(super) mod window {
    /// The training forward.
    pub const FORWARD: usize = 0;
    /// The loss, where the forward did not take it in.
    pub const LOSS: usize = 1;
    /// The backward and what follows it up to the step.
    pub const BACKWARD: usize = 2;
    /// The optimiser step.
    pub const STEP: usize = 3;
    /// Evaluation, model selection and checkpoints.
    pub const EVAL: usize = 4;
}

/// What a run records on its way: the history, the timings counted in the statistics and the
/// memory peaks.
#[derive(Debug, Default)]
pub(super) struct Records {
    /// Every epoch so far.
    pub history: Vec<EpochLog>,
    /// The phases of the epochs after warm-up.
    pub sums: PhaseSums,
    /// The first epoch's phases.
    pub first_epoch: Option<PhaseSums>,
    /// Of the first epoch, the host time building the graph's cached views, ms.
    pub first_epoch_graph_setup_ms: Option<f64>,
    /// Training-step times counted in the statistics, ms.
    pub epoch_ms: Vec<f64>,
    /// Evaluation-forward times, ms.
    pub infer_ms: Vec<f64>,
    /// Highest device memory in use seen (driver view), bytes.
    pub in_use: Option<u64>,
    /// The allocator's high-water mark of each [`window`], the highest over the epochs.
    pub peaks: [Option<u64>; 5],
}

impl Records {
    /// Empty records for a run of `epochs`.
    pub fn new(epochs: usize) -> Self {
        Self {
            history: Vec::with_capacity(epochs),
            ..Self::default()
        }
    }

    /// Samples the device memory in use (driver view) into [`Self::in_use`].
    pub fn sample_in_use(&mut self, device: &Device) {
        if let Some(b) = crate::device::device_memory_in_use(device) {
            self.in_use = Some(self.in_use.map_or(b, |p| p.max(b)));
        }
    }

    /// Closes allocator window `w` ([`window`]) and opens the next.
    pub fn mark(&mut self, device: &Device, w: usize) -> Result<()> {
        mark_peak(device, &mut self.peaks[w])
    }

    /// Records a training step's phases: as the first epoch's (with its graph set-up time)
    /// when `epoch` is 1, in the statistics when past warm-up.
    pub fn count(
        &mut self,
        epoch: usize,
        sums: PhaseSums,
        setup_ms: f64,
        warmup: usize,
        epochs: usize,
    ) {
        if epoch == 1 {
            self.first_epoch = Some(sums);
            self.first_epoch_graph_setup_ms = Some(setup_ms);
        }
        if epoch > warmup || epochs <= warmup {
            self.sums.add(&sums);
            self.epoch_ms.push(sums.total.as_secs_f64() * 1e3);
        }
    }

    /// The report of a finished run whose model selection ended at `best`.
    pub fn finish(
        self,
        best: BestSoFar,
        final_loss: f64,
        loss_scale: Option<LossScale>,
        device: &Device,
    ) -> Result<TrainReport> {
        let by_phase = match self.peaks {
            [Some(forward), Some(loss), Some(backward), Some(step), Some(eval)] => {
                Some(PeakByPhase {
                    forward,
                    loss,
                    backward,
                    step,
                    eval,
                })
            }
            _ => None,
        };
        // What the epochs' windows did not see: restoring the best weights.
        let mut rest = None;
        mark_peak(device, &mut rest)?;
        Ok(TrainReport {
            epochs_run: self.history.len(),
            best_epoch: best.epoch,
            best_val_acc: best.val,
            test_acc: best.test,
            train_acc: best.train,
            final_loss,
            epoch_ms_mean: mean_std(&self.epoch_ms).0,
            epoch_ms_median: median(self.epoch_ms),
            inference_ms_median: median(self.infer_ms),
            peak_device_bytes: self.in_use,
            // Every window read, whether or not each phase had its own.
            peak_allocated_bytes: self.peaks.iter().flatten().copied().chain(rest).max(),
            peak_allocated_by_phase: by_phase,
            breakdown: self.sums,
            first_epoch: self.first_epoch,
            first_epoch_graph_setup_ms: self.first_epoch_graph_setup_ms,
            time_to_accuracy: time_to_accuracy(&self.history, TTA_TOLERANCE),
            loss_scale,
            history: self.history,
        })
    }
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
