//! Per-phase timing of training epochs, as a table and as JSON.
//!
//! Phases and how each is measured (wall clock; with the device synchronised around each
//! region when profiling, so GPU work lands in the phase that launched it):
//! - `aggregation`: SpMM forward (timed by the layers) + SpMM/SDDMM backward (timed inside
//!   the ops' backward, see `DeviceGraph::set_backward_timing`);
//! - `gemm`: forward dense products of the linear layers;
//! - `elementwise`: forward activation, dropout, bias, LayerNorm;
//! - `backward_dense`: the rest of autograd (GEMM gradients and element-wise gradients),
//!   i.e. backward wall time minus its aggregation part;
//! - `loss_optimizer`: cross-entropy forward and the Adam update (where the output layer's
//!   op takes the loss in, [`gnn_models::Gnn::forward_offering_loss`], its cross-entropy is
//!   counted in `other`);
//! - `other`: what remains of the forward (indexing, graph bookkeeping, and the
//!   cross-entropy where the output layer's op takes the loss in);
//! - `communication` (multi-device runs only): wall time inside the communicator (halo
//!   exchanges forward and backward, the gradient all-reduce), waiting for slower ranks
//!   included; taken out of the phase it happened in.

use serde::Serialize;
use std::time::Duration;

/// Time per phase, summed over some epochs.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PhaseSums {
    /// See the module docs.
    pub aggregation: Duration,
    /// Forward GEMM.
    pub gemm: Duration,
    /// Forward element-wise work.
    pub elementwise: Duration,
    /// Backward excluding aggregation.
    pub backward_dense: Duration,
    /// Loss and optimiser.
    pub loss_optimizer: Duration,
    /// Remainder.
    pub other: Duration,
    /// Inside the communicator (multi-device runs; zero otherwise).
    pub communication: Duration,
    /// Bytes this rank sent (multi-device runs).
    pub comm_bytes: u64,
    /// Whole epochs.
    pub total: Duration,
    /// Number of epochs summed.
    pub epochs: usize,
}

/// One row of the printed table.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseRow {
    /// Phase name.
    pub phase: &'static str,
    /// Mean milliseconds per epoch.
    pub ms_per_epoch: f64,
    /// Share of the epoch, percent.
    pub percent: f64,
}

impl PhaseSums {
    /// Adds another epoch's sums.
    pub fn add(&mut self, o: &PhaseSums) {
        self.aggregation += o.aggregation;
        self.gemm += o.gemm;
        self.elementwise += o.elementwise;
        self.backward_dense += o.backward_dense;
        self.loss_optimizer += o.loss_optimizer;
        self.other += o.other;
        self.communication += o.communication;
        self.comm_bytes += o.comm_bytes;
        self.total += o.total;
        self.epochs += o.epochs;
    }

    /// Mean per-epoch rows, in table order.
    pub fn rows(&self) -> Vec<PhaseRow> {
        let n = self.epochs.max(1) as f64;
        let total = self.total.as_secs_f64().max(1e-12);
        [
            ("aggregation (SpMM fwd+bwd)", self.aggregation),
            ("GEMM (forward)", self.gemm),
            ("activation/dropout/bias (fwd)", self.elementwise),
            (
                "backward dense (GEMM + elementwise grads)",
                self.backward_dense,
            ),
            ("loss + optimizer", self.loss_optimizer),
            ("other", self.other),
            ("communication (halo + all-reduce)", self.communication),
            ("epoch total", self.total),
        ]
        .into_iter()
        .filter(|(phase, d)| !phase.starts_with("communication") || !d.is_zero())
        .map(|(phase, d)| PhaseRow {
            phase,
            ms_per_epoch: d.as_secs_f64() * 1e3 / n,
            percent: 100.0 * d.as_secs_f64() / total,
        })
        .collect()
    }

    /// A fixed-width text table.
    pub fn table(&self) -> String {
        let mut s = format!("{:<44} {:>12} {:>8}\n", "phase", "ms/epoch", "share");
        for r in self.rows() {
            s += &format!(
                "{:<44} {:>12.2} {:>7.1}%\n",
                r.phase, r.ms_per_epoch, r.percent
            );
        }
        s
    }
}
