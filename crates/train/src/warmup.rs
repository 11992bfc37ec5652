//! Candle's CUDA kernels compiled for the GPU before the first epoch needs them.
//!
//! Our own kernels ship as fatbins holding sm_90 machine code (`gnn-kernels`' build script),
//! but candle 0.11 ships its kernel modules (unary, binary, reduce, cast, ...) as PTX text and
//! loads them through `CudaDevice::get_or_load_func`, which only takes PTX: the driver compiles
//! each module the first time an op needs it, one after another under candle's module lock
//! and inside the first epoch (~1 s per large module on a machine whose driver cache is cold).
//! Shipping cubins for them would take a fork of candle-core's loader. Instead, [`start`]
//! hands every module's PTX to the driver at device open, one thread per module, while the
//! data loads: the driver keeps what it compiles in its JIT cache (`~/.nv/ComputeCache`,
//! `CUDA_CACHE_PATH`), so candle's own load of the same text later is a cache hit. [`finish`]
//! waits for the threads and reports the compile times, so the set-up is measured apart from
//! the first epoch. With the driver's cache disabled (`CUDA_CACHE_DISABLE=1`) candle compiles
//! the modules again on first use, as without the warm-up.

use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Instant;

/// One module compiled by the warm-up.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ModuleWarmUp {
    /// Candle's module name.
    pub module: &'static str,
    /// Seconds the driver spent on it (in its own thread).
    pub compile_s: f64,
    /// The driver's error, if it refused the module (candle then reports it at first use).
    pub error: Option<String>,
}

/// What [`finish`] found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WarmUp {
    /// Seconds [`finish`] waited for the threads (the part not hidden behind loading).
    pub waited_s: f64,
    /// Seconds from [`start`] to the last module done.
    pub wall_s: f64,
    /// Every module, in candle's order.
    pub modules: Vec<ModuleWarmUp>,
}

type Pending = (Instant, Vec<JoinHandle<(ModuleWarmUp, Instant)>>);
static PENDING: Mutex<Option<Pending>> = Mutex::new(None);

/// Starts compiling candle's kernel modules for `device` in background threads (nothing on the
/// CPU, or when a warm-up is already running). Called by [`crate::prepare_device`].
pub fn start(device: &candle_core::Device) {
    #[cfg(feature = "cuda")]
    if let candle_core::Device::Cuda(dev) = device {
        use candle_core::cuda_backend::cudarc::nvrtc::Ptx;
        use candle_core::cuda_backend::kernels as k;
        let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        if pending.is_some() {
            return;
        }
        // Every module but the GGUF-quantised matmuls, convolutions and sorts, which no model uses
        // (sort alone is 11-23 s of a cold driver's compile).
        let modules: [(&'static str, &'static str); 8] = [
            ("affine", k::AFFINE.ptx()),
            ("binary", k::BINARY.ptx()),
            ("cast", k::CAST.ptx()),
            ("fill", k::FILL.ptx()),
            ("indexing", k::INDEXING.ptx()),
            ("reduce", k::REDUCE.ptx()),
            ("ternary", k::TERNARY.ptx()),
            ("unary", k::UNARY.ptx()),
        ];
        let context = dev.cuda_stream().context().clone();
        let t0 = Instant::now();
        let handles = modules
            .into_iter()
            .map(|(module, ptx)| {
                let context = context.clone();
                std::thread::spawn(move || {
                    let t = Instant::now();
                    let error = context
                        .load_module(Ptx::from_src(ptx))
                        .err()
                        .map(|e| e.to_string());
                    let done = Instant::now();
                    let compile_s = (done - t).as_secs_f64();
                    (
                        ModuleWarmUp {
                            module,
                            compile_s,
                            error,
                        },
                        done,
                    )
                })
            })
            .collect();
        *pending = Some((t0, handles));
    }
    let _ = device;
}

/// Waits for the warm-up [`start`] began and reports it; `None` when none is running.
pub fn finish() -> Option<WarmUp> {
    let (t0, handles) = PENDING.lock().unwrap_or_else(|e| e.into_inner()).take()?;
    let t = Instant::now();
    let mut last = t0;
    let mut modules = Vec::with_capacity(handles.len());
    for h in handles {
        match h.join() {
            Ok((m, done)) => {
                last = last.max(done);
                modules.push(m);
            }
            Err(_) => modules.push(ModuleWarmUp {
                module: "?",
                compile_s: 0.0,
                error: Some("warm-up thread panicked".into()),
            }),
        }
    }
    Some(WarmUp {
        waited_s: t.elapsed().as_secs_f64(),
        wall_s: last.duration_since(t0).as_secs_f64(),
        modules,
    })
}

impl std::fmt::Display for WarmUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: f64 = self.modules.iter().map(|m| m.compile_s).sum();
        write!(
            f,
            "kernel warm-up: {} candle modules compiled in {:.2} s of threads ({:.2} s wall, {:.2} s waited after loading)",
            self.modules.len(),
            total,
            self.wall_s,
            self.waited_s
        )?;
        for m in self.modules.iter().filter(|m| m.error.is_some()) {
            write!(
                f,
                "; {} failed: {}",
                m.module,
                m.error.as_deref().unwrap_or("")
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn nothing_runs_on_the_cpu() {
        super::start(&candle_core::Device::Cpu);
        assert!(super::finish().is_none());
    }
}
