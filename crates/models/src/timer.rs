//! Per-phase accounting of a forward pass. Disabled timers cost nothing. On the CPU an enabled
//! timer reads the wall clock around each region (candle's CPU ops are synchronous); on a
//! CUDA device it records a pair of CUDA events on candle's stream around each region and
//! sums their elapsed times when [`Timer::take`] is called, so nothing is synchronised
//! inside the pass.

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
    #[cfg(feature = "cuda")]
    events: RefCell<Vec<(Phase, CudaEvent, CudaEvent)>>,
}

#[cfg(feature = "cuda")]
use candle_core::cuda_backend::cudarc::driver::{sys::CUevent_flags, CudaEvent};

/// Records a timing-enabled event on a CUDA device's stream.
#[cfg(feature = "cuda")]
pub fn record_event(d: &candle_core::CudaDevice) -> Result<CudaEvent> {
    d.cuda_stream()
        .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(|e| crate::Error::Candle(candle_core::Error::Msg(format!("cuda event: {e}"))))
}

impl PhaseTimes {
    fn add(&mut self, phase: Phase, d: Duration) {
        match phase {
            Phase::Aggregation => self.aggregation += d,
            Phase::Gemm => self.gemm += d,
            Phase::Elementwise => self.elementwise += d,
        }
    }
}

impl Timer {
    /// A timer that records nothing.
    pub fn disabled() -> Self {
        Self::with(None)
    }
    /// A timer for work on `device`.
    pub fn enabled(device: &Device) -> Self {
        Self::with(Some(device.clone()))
    }
    fn with(device: Option<Device>) -> Self {
        Self {
            device,
            times: RefCell::new(PhaseTimes::default()),
            #[cfg(feature = "cuda")]
            events: RefCell::new(Vec::new()),
        }
    }
    /// Runs `f`, adding its time to `phase` when enabled.
    pub fn time<T>(&self, phase: Phase, f: impl FnOnce() -> Result<T>) -> Result<T> {
        match &self.device {
            None => f(),
            #[cfg(feature = "cuda")]
            Some(Device::Cuda(d)) => {
                let a = record_event(d)?;
                let out = f()?;
                let b = record_event(d)?;
                self.events.borrow_mut().push((phase, a, b));
                Ok(out)
            }
            Some(dev) => {
                dev.synchronize()?;
                let t = Instant::now();
                let out = f()?;
                dev.synchronize()?;
                self.times.borrow_mut().add(phase, t.elapsed());
                Ok(out)
            }
        }
    }
    /// The accumulated times, reset to zero.
    /// On CUDA this waits for the last recorded event.
    pub fn take(&self) -> Result<PhaseTimes> {
        #[cfg(feature = "cuda")]
        for (phase, a, b) in self.events.borrow_mut().drain(..) {
            b.synchronize().map_err(|e| {
                crate::Error::Candle(candle_core::Error::Msg(format!("cuda event: {e}")))
            })?;
            let ms = a.elapsed_ms(&b).map_err(|e| {
                crate::Error::Candle(candle_core::Error::Msg(format!("cuda event: {e}")))
            })?;
            self.times
                .borrow_mut()
                .add(phase, Duration::from_secs_f64(ms as f64 / 1e3));
        }
        Ok(std::mem::take(&mut *self.times.borrow_mut()))
    }
}
