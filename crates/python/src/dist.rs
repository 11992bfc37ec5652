//! `train(..., devices=...)`: one training run over several ranks, one thread each, on the
//! engine's 1-D partition (`gnn_train::dist`: the plan, the ranks and their agreement on when
//! to stop are the library's). On the CPU the ranks talk through the in-process communicator
//! (`gnn_train::dist::local_comms`), on GPUs through NCCL (`gnn_train::dist::NcclGroup`,
//! feature `nccl`).
//!
//! Ctrl-C: the ranks run on threads of their own, where Python's signal handlers never run,
//! so the calling thread waits for them with the GIL released and checks for signals every
//! [`SIGNAL_POLL`]; an interrupt is passed on to rank 0's epoch hook, which stops every rank
//! after the same epoch.

use crate::args::Devices;
use crate::arrays::value_error;
use crate::errors::to_py;
use crate::model::{Model, Served};
use crate::train::{at_epoch_end, report_json, stopped, trained_info, Stop};
use candle_core::Device;
use gnn_graph::Dataset;
use gnn_kernels::{KernelPolicy, KernelsUsed};
use gnn_models::ModelConfig;
use gnn_train::dist::{DistPlan, RankOutcome, Recipe, Widths};
use gnn_train::{device_name, EpochLog, TrainConfig};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use serde_json::json;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often the calling thread checks for Ctrl-C while the ranks train.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// What one run trains, set up by `train` as for a single device.
pub(crate) struct Run {
    /// The data (every rank reads its rows of it).
    pub(crate) ds: Arc<Dataset>,
    /// The model.
    pub(crate) model: ModelConfig,
    /// The recipe; its seed also seeds the (identical) initialisation of every rank.
    pub(crate) train: TrainConfig,
    /// Every rank's kernel policy.
    pub(crate) kernels: KernelPolicy,
    /// Divide each feature row by its sum first.
    pub(crate) row_normalize: bool,
}

/// Where the ranks run.
enum Place {
    /// `n` ranks on the CPU, in-process communicator.
    Cpu(usize),
    /// One rank per GPU, NCCL.
    Gpus(Vec<usize>),
}

/// The ranks' place from `device` (`"cpu"`, `"cuda"`, `"auto"`) and `devices`.
fn place(device: &str, devices: &Devices) -> PyResult<Place> {
    let lower = device.trim().to_ascii_lowercase();
    let cuda = match lower.as_str() {
        "cpu" => false,
        "cuda" | "gpu" => true,
        // As for one device: a CUDA build means the GPUs.
        "auto" => cfg!(feature = "cuda"),
        other if other.starts_with("cuda:") => {
            return Err(value_error(format!(
                "device = {device:?} with devices: name the GPUs in devices and pass \
                 device=\"cuda\" (devices=[1, 2] runs ranks on GPUs 1 and 2)"
            )))
        }
        _ => {
            return Err(value_error(format!(
                "device {device:?}: expected \"cpu\", \"cuda\" or \"auto\" with devices"
            )))
        }
    };
    if !cuda {
        return Ok(Place::Cpu(devices.ranks()));
    }
    if !cfg!(feature = "cuda") {
        return Err(value_error(format!(
            "device {device:?}: this build of gnn has no CUDA support; reinstall it with \
             `pip install ./crates/python --config-settings=build-args=\"--features nccl\"`"
        )));
    }
    if !cfg!(feature = "nccl") {
        return Err(value_error(format!(
            "devices = {:?} on CUDA trains over NCCL: this build of gnn has CUDA but not the \
             `nccl` feature; reinstall it with \
             `pip install ./crates/python --config-settings=build-args=\"--features nccl\"`",
            devices.gpus()
        )));
    }
    Ok(Place::Gpus(devices.gpus()))
}

/// The calling thread's side of a run: the ranks' thread says when it is done.
#[derive(Default)]
struct Done {
    done: Mutex<bool>,
    cv: Condvar,
}

impl Done {
    fn set(&self) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }

    /// Waits up to `t`; whether the run is done.
    fn wait(&self, t: Duration) -> bool {
        let g = self.done.lock().unwrap_or_else(|e| e.into_inner());
        let (g, _) = self
            .cv
            .wait_timeout_while(g, t, |done| !*done)
            .unwrap_or_else(|e| e.into_inner());
        *g
    }
}

/// Marks the run done when dropped.
struct SetOnDrop<'a>(&'a Done);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.set()
    }
}

/// What the ranks' thread hands back.
struct Trained {
    outcomes: Vec<RankOutcome>,
    devices: Vec<Device>,
    exchange: gnn_graph::Exchange,
    prep_s: f64,
    total_s: f64,
}

/// Trains `run` over the ranks `device` and `devices` name; returns `(model, report)` as the
/// single-device `train` does.
pub(crate) fn train(
    py: Python<'_>,
    run: Run,
    device: &str,
    devices: &Devices,
    on_epoch: Option<Py<PyAny>>,
) -> PyResult<(Model, Py<PyAny>)> {
    let place = place(device, devices)?;
    let interrupted = AtomicBool::new(false);
    let stop: Mutex<Option<Stop>> = Mutex::new(None);
    let done = Done::default();
    let epochs = run.train.epochs;
    // Rank 0's epochs: the callback, then the interrupt the calling thread saw.
    let hook = |log: &EpochLog| {
        let why = at_epoch_end(log, epochs, on_epoch.as_ref()).or_else(|| {
            interrupted
                .load(Ordering::Relaxed)
                .then_some(Stop::Interrupt)
        });
        match why {
            Some(s) => {
                *stop.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
                ControlFlow::Break(())
            }
            None => ControlFlow::Continue(()),
        }
    };
    let mut raised: Option<PyErr> = None;
    let out = std::thread::scope(|s| {
        let worker = s.spawn(|| {
            // Set however the thread ends (a panic too): the loop below waits for it.
            let _done = SetOnDrop(&done);
            train_ranks(&run, &place, &hook)
        });
        while !py.detach(|| done.wait(SIGNAL_POLL)) {
            if let Err(e) = py.check_signals() {
                if !e.is_instance_of::<PyKeyboardInterrupt>(py) && raised.is_none() {
                    raised = Some(e);
                }
                interrupted.store(true, Ordering::Relaxed);
            }
        }
        worker.join().unwrap_or_else(|p| {
            Err(gnn_train::Error::Invalid(format!(
                "the ranks' thread panicked: {}",
                p.downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| p.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)")
            )))
        })
    });
    if let Some(e) = raised {
        return Err(e);
    }
    let stopped = stopped(stop.into_inner().unwrap_or_else(|e| e.into_inner()))?;
    let mut t = out.map_err(to_py)?;
    let mut kernels_used = KernelsUsed::default();
    for o in &t.outcomes {
        kernels_used.merge(&o.kernels_used);
    }
    let ranks = gnn_train::dist::report::rank_rows(&t.outcomes);
    let r0 = t.outcomes.swap_remove(0);
    let dev0 = t.devices.swap_remove(0);
    let mut names = vec![device_name(&dev0)];
    names.extend(t.devices.iter().map(device_name));
    let extra = json!({
        "stopped": stopped,
        "dataset": run.ds.name,
        "device": names[0],
        "devices": names,
        "comm": if matches!(place, Place::Cpu(_)) { "in-process" } else { "nccl" },
        "exchange": t.exchange,
        "ranks": ranks,
        "model": r0.model.config(),
        "train": run.train,
        "row_normalize": run.row_normalize,
        "graph_prep_s": t.prep_s,
        "total_s": t.total_s,
        "kernels_used": kernels_used,
    });
    let report = report_json(&r0.report, extra)?;
    let info = trained_info(&run.ds.name, &r0.report, run.train.seed, &run.train);
    let model = Model::new(Served::new(r0.model, dev0), Some(run.row_normalize), info);
    let report = crate::json::to_python(py, &report)?.unbind();
    Ok((model, report))
}

/// The ranks' thread: the plan (the model's operands, split into ranges balanced by
/// non-zeros), then every rank trained.
fn train_ranks(
    run: &Run,
    place: &Place,
    hook: &(dyn Fn(&EpochLog) -> ControlFlow<()> + Sync),
) -> gnn_train::Result<Trained> {
    let t_all = Instant::now();
    let ranks = match place {
        Place::Cpu(n) => *n,
        Place::Gpus(g) => g.len(),
    };
    let recipe = Recipe {
        model: &run.model,
        train: &run.train,
        seed: run.train.seed,
        row_normalize: run.row_normalize,
        kernels: run.kernels,
        widths: Widths::Auto,
    };
    let t = Instant::now();
    let plan = DistPlan::new(&run.ds, run.model.kind, ranks, None)?;
    let prep_s = t.elapsed().as_secs_f64();
    let (outcomes, devices) = match place {
        Place::Cpu(n) => {
            let devices = vec![Device::Cpu; *n];
            run.train.precision.check_device(&devices[0])?;
            let comms = gnn_train::dist::local_comms(*n);
            let outcomes = gnn_train::dist::train_ranks_with_control(
                &plan,
                &run.ds,
                recipe,
                &comms,
                &devices,
                None,
                hook,
                &|_, _| {},
            )?;
            (outcomes, devices)
        }
        Place::Gpus(gpus) => gpu_ranks(&plan, &run.ds, recipe, gpus, hook)?,
    };
    Ok(Trained {
        outcomes,
        devices,
        exchange: plan.exchange,
        prep_s,
        total_s: t_all.elapsed().as_secs_f64(),
    })
}

/// One rank per GPU of `gpus`, NCCL between them, each communicator behind the engine's
/// default watchdog; a failed rank aborts every rank's communicator and the run returns its
/// error, which Python raises (`NcclGroup::abort_all_or_end`; a rank failing before every rank
/// has joined still ends the process: the others wait in NCCL's init, which nothing aborts).
#[cfg(feature = "nccl")]
fn gpu_ranks(
    plan: &DistPlan,
    ds: &Dataset,
    recipe: Recipe<'_>,
    gpus: &[usize],
    hook: &(dyn Fn(&EpochLog) -> ControlFlow<()> + Sync),
) -> gnn_train::Result<(Vec<RankOutcome>, Vec<Device>)> {
    use gnn_train::dist::NcclGroup;
    let group = NcclGroup::open(gpus, true)?;
    recipe.train.precision.check_device(&group.devices[0])?;
    let timeout = Some(gnn_comm::DEFAULT_COMM_TIMEOUT);
    let make = |rank: usize, dev: &Device| group.guarded(rank, dev, timeout);
    let outcomes = gnn_train::dist::train_ranks_with_control(
        plan,
        ds,
        recipe,
        &make,
        &group.devices,
        None,
        hook,
        &|rank, e| group.abort_all_or_end(rank, e),
    )?;
    Ok((outcomes, group.devices))
}

#[cfg(not(feature = "nccl"))]
fn gpu_ranks(
    _: &DistPlan,
    _: &Dataset,
    _: Recipe<'_>,
    _: &[usize],
    _: &(dyn Fn(&EpochLog) -> ControlFlow<()> + Sync),
) -> gnn_train::Result<(Vec<RankOutcome>, Vec<Device>)> {
    // `place` refuses GPUs in a build without NCCL before any rank starts.
    Err(gnn_train::Error::Invalid(
        "training on several GPUs needs a build of gnn with the `nccl` feature".into(),
    ))
}
