//! Evaluation and model selection: the accuracies after an epoch, the best validation result
//! so far with its weights ([`BestSoFar`]), and when to stop ([`EarlyStopping`]).

use super::Trainer;
use crate::data::DeviceData;
use crate::error::Result;
use candle_core::{Tensor, Var};
use gnn_comm::Communicator;
use gnn_models::Forward;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The best validation result seen so far, as model selection tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BestSoFar {
    /// Best validation accuracy (-1 before the first evaluation).
    pub val: f64,
    /// Its epoch.
    pub epoch: usize,
    /// Test accuracy then.
    pub test: f64,
    /// Train accuracy then.
    pub train: f64,
    /// Evaluations since (for early stopping).
    pub since: usize,
}

impl Default for BestSoFar {
    fn default() -> Self {
        Self {
            val: -1.0,
            epoch: 0,
            test: 0.0,
            train: 0.0,
            since: 0,
        }
    }
}

impl BestSoFar {
    /// Records the accuracies `(train, val, test)` of an evaluation after `epoch`: a strictly
    /// better validation accuracy becomes the best (returns true), anything else counts one
    /// more evaluation since it.
    pub fn record(&mut self, epoch: usize, (train, val, test): (f64, f64, f64)) -> bool {
        if val > self.val {
            *self = Self {
                val,
                epoch,
                test,
                train,
                since: 0,
            };
            true
        } else {
            self.since += 1;
            false
        }
    }
}

/// Stops a run after `patience` evaluations in a row without a better validation accuracy
/// (never without a patience).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EarlyStopping {
    patience: Option<usize>,
}

impl EarlyStopping {
    /// Stopping after `patience` evaluations without improvement; `None` never stops.
    pub fn new(patience: Option<usize>) -> Self {
        Self { patience }
    }

    /// Whether the run whose selection stands at `best` should stop now.
    pub fn should_stop(&self, best: &BestSoFar) -> bool {
        self.patience.is_some_and(|p| best.since >= p)
    }
}

/// Model selection in a run: the best result and a copy of its parameters.
#[derive(Default)]
pub(super) struct Selection {
    /// The best validation result so far.
    pub best: BestSoFar,
    /// The parameters at it, in `Gnn::named_vars` order (none before the first evaluation).
    pub weights: Option<Vec<Tensor>>,
}

impl Selection {
    /// Records an evaluation after `epoch`, copying the parameters `vars` when it is the best.
    fn observe(
        &mut self,
        epoch: usize,
        acc: (f64, f64, f64),
        vars: &[(String, Var)],
    ) -> Result<()> {
        if self.best.record(epoch, acc) {
            self.weights = Some(
                vars.iter()
                    .map(|(_, v)| v.as_tensor().copy())
                    .collect::<candle_core::Result<_>>()?,
            );
        }
        Ok(())
    }

    /// Puts the best parameters back into `vars` (a no-op when nothing was evaluated).
    pub fn restore(self, vars: &[(String, Var)]) -> Result<()> {
        if let Some(w) = self.weights {
            for ((_, v), t) in vars.iter().zip(w) {
                v.set(&t)?;
            }
        }
        Ok(())
    }
}

impl Trainer<'_> {
    /// Evaluates the model after `epoch` (an untimed forward: evaluations are timed whole,
    /// into the report's inference time, not by phase) and updates the selection; returns the
    /// accuracies `(train, val, test)`.
    pub(super) fn evaluate(&mut self, epoch: usize, phase: &mut String) -> Result<(f64, f64, f64)> {
        self.sync()?;
        let te = Instant::now();
        *phase = format!("evaluating after epoch {epoch}");
        self.note(epoch, "evaluation");
        self.graph.set_phase_timing(false);
        let logits = self.model.forward(
            self.graph,
            &self.data.x,
            &mut Forward::eval()
                .with_input_aggregate(self.input_agg.as_ref())
                .with_output_rows(self.output.as_ref().map(|o| &o.rows)),
        );
        self.graph.set_phase_timing(self.cfg.profile);
        let logits = logits?;
        self.sync()?;
        self.records.infer_ms.push(te.elapsed().as_secs_f64() * 1e3);
        let acc = split_accuracy(&logits, self.out_data(), self.comm.as_deref())?;
        self.select.observe(epoch, acc, &self.vars)?;
        Ok(acc)
    }
}

/// Train, validation and test accuracy of `logits`; over all ranks when `comm` is given (the
/// correct counts and set sizes are summed).
fn split_accuracy(
    logits: &Tensor,
    data: &DeviceData,
    comm: Option<&dyn Communicator>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_so_far_keeps_the_first_strictly_better_validation() {
        let mut b = BestSoFar::default();
        assert!(b.record(2, (0.5, 0.6, 0.55)));
        assert_eq!(
            (b.epoch, b.val, b.test, b.train, b.since),
            (2, 0.6, 0.55, 0.5, 0)
        );
        // A tie is not an improvement: the earlier epoch stays.
        assert!(!b.record(4, (0.9, 0.6, 0.9)));
        assert!(!b.record(6, (0.9, 0.4, 0.9)));
        assert_eq!((b.epoch, b.test, b.since), (2, 0.55, 2));
        assert!(b.record(8, (0.7, 0.7, 0.65)));
        assert_eq!((b.epoch, b.since), (8, 0));
    }

    #[test]
    fn early_stopping_waits_patience_evaluations_without_improvement() {
        let stop = EarlyStopping::new(Some(2));
        let mut b = BestSoFar::default();
        b.record(1, (0.0, 0.5, 0.0));
        assert!(!stop.should_stop(&b));
        b.record(2, (0.0, 0.4, 0.0));
        assert!(!stop.should_stop(&b));
        b.record(3, (0.0, 0.5, 0.0));
        assert!(stop.should_stop(&b));
        // An improvement resets the count.
        b.record(4, (0.0, 0.6, 0.0));
        assert!(!stop.should_stop(&b));
        // Without a patience the run never stops early.
        b.since = usize::MAX;
        assert!(!EarlyStopping::new(None).should_stop(&b));
        // Patience 0 stops after the first epoch, improvement or not.
        let mut c = BestSoFar::default();
        assert!(c.record(1, (0.0, 0.5, 0.0)));
        assert!(EarlyStopping::new(Some(0)).should_stop(&c));
    }

    #[test]
    fn selection_restores_the_best_parameters() {
        let dev = candle_core::Device::Cpu;
        let v = Var::new(&[1f32, 2.0], &dev).unwrap();
        let vars = vec![("w".to_string(), v.clone())];
        let mut s = Selection::default();
        s.observe(1, (0.0, 0.5, 0.0), &vars).unwrap();
        v.set(&Tensor::new(&[3f32, 4.0], &dev).unwrap()).unwrap();
        s.observe(2, (0.0, 0.4, 0.0), &vars).unwrap();
        s.restore(&vars).unwrap();
        assert_eq!(v.as_tensor().to_vec1::<f32>().unwrap(), [1.0, 2.0]);
    }
}
