//! Per-phase accounting of a forward pass, through spans a layer opens on its forward context:
//! `let _t = g.phase(Phase::Aggregation);` times everything until `_t` is dropped
//! ([`crate::ModelGraph::phase`]). The graph holds the clock, so no layer method takes a timer.
//!
//! A clock that is off costs one atomic load per span. On the CPU a span reads the wall clock
//! (candle's CPU ops are synchronous); on a CUDA device it records a pair of CUDA events on
//! candle's stream and their elapsed times are summed when the times are taken
//! ([`crate::ModelGraph::take_phase_times`]), so nothing is synchronised inside the pass.

use crate::error::{Error, Result};
use candle_core::Device;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[cfg(feature = "cuda")]
use candle_core::cuda_backend::cudarc::driver::{sys::CUevent_flags, CudaEvent};

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

impl PhaseTimes {
    fn add(&mut self, phase: Phase, d: Duration) {
        match phase {
            Phase::Aggregation => self.aggregation += d,
            Phase::Gemm => self.gemm += d,
            Phase::Elementwise => self.elementwise += d,
        }
    }
}

/// Records a timing-enabled event on a CUDA device's stream.
#[cfg(feature = "cuda")]
pub fn record_event(d: &candle_core::CudaDevice) -> Result<CudaEvent> {
    d.cuda_stream()
        .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(cuda_error)
}

#[cfg(feature = "cuda")]
fn cuda_error(e: impl std::fmt::Display) -> Error {
    Error::Candle(candle_core::Error::Msg(format!("cuda event: {e}")))
}

/// What the clock gathered since it was last taken.
#[derive(Default)]
struct Gathered {
    times: PhaseTimes,
    /// The first failure inside a span (a span cannot return it), reported by [`Timer::take`].
    error: Option<Error>,
    #[cfg(feature = "cuda")]
    events: Vec<(Phase, CudaEvent, CudaEvent)>,
}

/// The phase clock of one device: off until [`Timer::set_enabled`], then every
/// [`PhaseSpan`] adds its lifetime to its phase.
pub(crate) struct Timer {
    device: Device,
    on: AtomicBool,
    gathered: Mutex<Gathered>,
}

// Every pass over a graph shares its clock: it must leave `ModelGraph` Send and Sync.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Timer>();
};

impl Timer {
    /// A clock for work on `device`, off.
    pub(crate) fn new(device: &Device) -> Self {
        Self {
            device: device.clone(),
            on: AtomicBool::new(false),
            gathered: Mutex::new(Gathered::default()),
        }
    }

    /// Turns the clock on or off; what it gathered stays until [`Self::take`].
    pub(crate) fn set_enabled(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }

    fn gathered(&self) -> std::sync::MutexGuard<'_, Gathered> {
        self.gathered.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fail(&self, e: Error) {
        self.gathered().error.get_or_insert(e);
    }

    /// Opens a span of `phase`, a no-op when the clock is off.
    pub(crate) fn phase(&self, phase: Phase) -> PhaseSpan<'_> {
        let start = if self.on.load(Ordering::Relaxed) {
            self.start()
        } else {
            None
        };
        PhaseSpan {
            timer: self,
            phase,
            start,
        }
    }

    fn start(&self) -> Option<Start> {
        match &self.device {
            #[cfg(feature = "cuda")]
            Device::Cuda(d) => match record_event(d) {
                Ok(ev) => Some(Start::Event(ev)),
                Err(e) => {
                    self.fail(e);
                    None
                }
            },
            dev => match dev.synchronize() {
                Ok(()) => Some(Start::Wall(Instant::now())),
                Err(e) => {
                    self.fail(e.into());
                    None
                }
            },
        }
    }

    fn end(&self, phase: Phase, start: Start) {
        match start {
            Start::Wall(t) => match self.device.synchronize() {
                Ok(()) => self.gathered().times.add(phase, t.elapsed()),
                Err(e) => self.fail(e.into()),
            },
            #[cfg(feature = "cuda")]
            Start::Event(a) => {
                if let Device::Cuda(d) = &self.device {
                    match record_event(d) {
                        Ok(b) => self.gathered().events.push((phase, a, b)),
                        Err(e) => self.fail(e),
                    }
                }
            }
        }
    }

    /// The accumulated times, reset to zero, or the first error a span met.
    /// On CUDA this waits for the last recorded event.
    pub(crate) fn take(&self) -> Result<PhaseTimes> {
        let mut g = self.gathered();
        if let Some(e) = g.error.take() {
            *g = Gathered::default();
            return Err(e);
        }
        #[cfg(feature = "cuda")]
        for (phase, a, b) in std::mem::take(&mut g.events) {
            b.synchronize().map_err(cuda_error)?;
            let ms = a.elapsed_ms(&b).map_err(cuda_error)?;
            g.times.add(phase, Duration::from_secs_f64(ms as f64 / 1e3));
        }
        Ok(std::mem::take(&mut g.times))
    }
}

enum Start {
    Wall(Instant),
    #[cfg(feature = "cuda")]
    Event(CudaEvent),
}

/// A phase in progress ([`crate::ModelGraph::phase`]): its time, from its opening to its drop,
/// is added to the phase when the graph's clock is on.
#[must_use = "the phase ends when the span is dropped: bind it with `let _t = ...`"]
pub struct PhaseSpan<'a> {
    timer: &'a Timer,
    phase: Phase,
    start: Option<Start>,
}

impl Drop for PhaseSpan<'_> {
    fn drop(&mut self) {
        if let Some(start) = self.start.take() {
            self.timer.end(self.phase, start);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_add_their_lifetime_to_their_phase_only_when_on() {
        let t = Timer::new(&Device::Cpu);
        {
            let _s = t.phase(Phase::Gemm);
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(t.take().unwrap().gemm, Duration::ZERO);
        t.set_enabled(true);
        {
            let _s = t.phase(Phase::Gemm);
            std::thread::sleep(Duration::from_millis(2));
        }
        {
            let _a = t.phase(Phase::Aggregation);
        }
        let p = t.take().unwrap();
        assert!(p.gemm >= Duration::from_millis(2), "{p:?}");
        assert!(
            p.aggregation < p.gemm && p.elementwise == Duration::ZERO,
            "{p:?}"
        );
        // Taken: reset to zero.
        assert_eq!(t.take().unwrap().gemm, Duration::ZERO);
    }

    #[test]
    fn a_spans_error_is_reported_once_by_take() {
        let t = Timer::new(&Device::Cpu);
        t.fail(Error::Config("event".into()));
        assert!(t.take().unwrap_err().to_string().contains("event"));
        assert!(t.take().is_ok());
    }
}
