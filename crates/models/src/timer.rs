//! Per-phase wall-clock accounting of a forward pass. Disabled timers cost nothing; enabled
//! ones synchronise the device around each timed region so GPU work is attributed to the
//! phase that launched it.

use crate::error::Result;
use candle_core::Device;
use serde::Serialize;
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// The phases a forward pass is split into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Phase {
    /// Sparse aggregation (SpMM).
    Aggregation,
    /// Dense matrix products (linear layers).
    Gemm,
    /// Activation, dropout, normalisation, bias and other element-wise work.
    Elementwise,
}

/// Accumulated time per phase.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PhaseTimes {
    /// Aggregation time.
    pub aggregation: Duration,
    /// GEMM time.
    pub gemm: Duration,
    /// Element-wise time.
    pub elementwise: Duration,
}

/// Collects [`PhaseTimes`] when enabled.
pub struct Timer {
    device: Option<Device>,
    times: RefCell<PhaseTimes>,
}

impl Timer {
    /// A timer that records nothing.
    pub fn disabled() -> Self {
        Self {
            device: None,
            times: RefCell::new(PhaseTimes::default()),
        }
    }
    /// A timer that synchronises `device` around timed regions.
    pub fn enabled(device: &Device) -> Self {
        Self {
            device: Some(device.clone()),
            times: RefCell::new(PhaseTimes::default()),
        }
    }
    /// Runs `f`, adding its time to `phase` when enabled.
    pub fn time<T>(&self, phase: Phase, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let Some(dev) = &self.device else { return f() };
        dev.synchronize()?;
        let t = Instant::now();
        let out = f()?;
        dev.synchronize()?;
        let d = t.elapsed();
        let mut times = self.times.borrow_mut();
        match phase {
            Phase::Aggregation => times.aggregation += d,
            Phase::Gemm => times.gemm += d,
            Phase::Elementwise => times.elementwise += d,
        }
        Ok(out)
    }
    /// The accumulated times, reset to zero.
    pub fn take(&self) -> PhaseTimes {
        std::mem::take(&mut *self.times.borrow_mut())
    }
}
