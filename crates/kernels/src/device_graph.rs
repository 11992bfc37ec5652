//! [`DeviceGraph`]: the one bridge from a host [`Csr`] to the device the tensors live on.
//!
//! The structure is uploaded once and shared (`Arc`) by every op that uses it; derived
//! views (the transpose with its edge permutation, inverse degrees) are built on first use
//! and cached, as DGL caches sparse formats on its graphs.

#[cfg(feature = "cuda")]
mod cuda;

use crate::error::Result;
use crate::policy::{KernelLog, KernelPolicy, KernelsUsed};
use candle_core::{DType, Device, Tensor};
use gnn_graph::Csr;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Host wall time spent building graphs' cached derived views (transposes and their edge
/// permutations, row schedules, degree tables, permuted edge values), process-wide, ns.
static SETUP_NS: AtomicU64 = AtomicU64::new(0);

/// Host wall time spent so far, in this process, building the derived views every
/// [`DeviceGraph`] caches on first use (the transpose, row schedules, degree tables): one-off
/// work that lands in the first epoch that needs it. Compare readings before and after.
pub fn setup_time() -> Duration {
    Duration::from_nanos(SETUP_NS.load(Ordering::Relaxed))
}

thread_local! {
    /// How many [`timed_setup`] calls are running on this thread.
    static SETUP_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs `f`, adding its wall time to [`setup_time`]. Nested calls (a build that needs another
/// view built first) count once, in the outermost.
fn timed_setup<T>(f: impl FnOnce() -> T) -> T {
    let depth = SETUP_DEPTH.with(|d| d.replace(d.get() + 1));
    let t = Instant::now();
    let out = f();
    SETUP_DEPTH.with(|d| d.set(depth));
    if depth == 0 {
        SETUP_NS.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
    out
}

/// A CSR graph resident on a candle device (row = target, column = source), with the
/// [`KernelPolicy`] its ops run under and the record of the kernels they ran.
///
/// A handle is cheap to clone; [`DeviceGraph::with_policy`] gives another handle on the same
/// uploaded structure (and its cached views) under another policy, so one upload can serve
/// several policies side by side.
#[derive(Clone)]
pub struct DeviceGraph {
    inner: Arc<Inner>,
    policy: KernelPolicy,
    log: Arc<KernelLog>,
}

struct Inner {
    csr: Arc<Csr>,
    device: Device,
    transpose: OnceLock<Transposed>,
    inv_deg: OnceLock<Tensor>,
    /// `1 / deg(row)` per edge (f32, `[nnz]`, CSR order), for half-precision mean backward.
    inv_deg_edges: OnceLock<Tensor>,
    /// [`DeviceGraph::transposed_inv_degree_edge_values`].
    inv_deg_edges_t: OnceLock<Tensor>,
    stats: OnceLock<gnn_graph::csr::DegreeStats>,
    /// The last constant edge-value tensor permuted to the transpose: `(its id, values)`.
    transposed_values: std::sync::Mutex<Option<(candle_core::TensorId, Tensor)>>,
    timing: AtomicBool,
    bwd_ns: AtomicU64,
    /// Time inside timed backward spans that was not this graph's (communication).
    bwd_deduct_ns: AtomicU64,
    #[cfg(feature = "cuda")]
    cuda: Option<crate::cuda::CudaCsr>,
    /// The row schedule with split rows, and the one without (a deterministic policy).
    #[cfg(feature = "cuda")]
    schedule: [OnceLock<Schedule>; 2],
    /// [`crate::schedule::rows_longest_first`] on the device, with its length.
    #[cfg(feature = "cuda")]
    longest_first: OnceLock<(
        candle_core::cuda_backend::cudarc::driver::CudaSlice<u32>,
        usize,
    )>,
    /// The column-blocked schedule for the block width it was built for (`None` inside when
    /// the graph cannot have one: unsorted rows).
    #[cfg(feature = "cuda")]
    blocked: std::sync::Mutex<Option<(usize, Option<Arc<Schedule>>)>>,
    #[cfg(feature = "cuda")]
    bwd_events: std::sync::Mutex<Vec<(CudaEvent, CudaEvent)>>,
}

/// The cached transpose: another graph, or (structurally symmetric graphs: undirected ones,
/// GCN's `A + I`) this graph itself, so its structure is not stored twice. Either way with the
/// edge permutation, `None` once released ([`DeviceGraph::transposed_values`],
/// [`DeviceGraph::release_transpose_permutation`]; rebuilt on request).
enum Transposed {
    Other(DeviceGraph, std::sync::Mutex<Option<Tensor>>),
    Symmetric(std::sync::Mutex<Option<Tensor>>),
}

impl Transposed {
    fn perm_slot(&self) -> &std::sync::Mutex<Option<Tensor>> {
        match self {
            Transposed::Other(_, slot) | Transposed::Symmetric(slot) => slot,
        }
    }
}

#[cfg(feature = "cuda")]
use candle_core::cuda_backend::cudarc::driver::{sys::CUevent_flags, CudaEvent};

/// A row schedule on the device: the items, their count and the edge-group length.
#[cfg(feature = "cuda")]
pub(crate) type Schedule = (
    candle_core::cuda_backend::cudarc::driver::CudaSlice<u32>,
    usize,
    usize,
);

impl std::fmt::Debug for DeviceGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceGraph({}x{}, nnz {}, {:?})",
            self.n_rows(),
            self.n_cols(),
            self.nnz(),
            self.inner.device.location()
        )
    }
}

impl DeviceGraph {
    /// Uploads a copy of `csr` to `device`. Refused with [`gnn_graph::Error::TooManyNonZeros`]
    /// when it holds more than [`gnn_graph::MAX_KERNEL_NNZ`] entries: the kernels' row
    /// offsets and edge positions are 32-bit (a larger graph trains partitioned, each rank's
    /// share below the limit). A host graph of 64-bit offsets that fits is narrowed for the
    /// GPU, and read as it is on the CPU.
    pub fn upload(csr: &Csr, device: &Device) -> Result<Self> {
        gnn_graph::check_kernel_nnz("the graph", csr.nnz())?;
        Self::from_arc(Arc::new(csr.clone()), device)
    }

    /// Uploads a shared CSR without copying it on the host (refused as [`Self::upload`]).
    pub fn from_arc(csr: Arc<Csr>, device: &Device) -> Result<Self> {
        gnn_graph::check_kernel_nnz("the graph", csr.nnz())?;
        #[cfg(feature = "cuda")]
        let cuda = match device {
            Device::Cuda(d) => Some(crate::cuda::CudaCsr::upload(&csr, d)?),
            _ => None,
        };
        let inner = Arc::new(Inner {
            csr,
            device: device.clone(),
            transpose: OnceLock::new(),
            inv_deg: OnceLock::new(),
            inv_deg_edges: OnceLock::new(),
            inv_deg_edges_t: OnceLock::new(),
            stats: OnceLock::new(),
            transposed_values: std::sync::Mutex::new(None),
            timing: AtomicBool::new(false),
            bwd_ns: AtomicU64::new(0),
            bwd_deduct_ns: AtomicU64::new(0),
            #[cfg(feature = "cuda")]
            cuda,
            #[cfg(feature = "cuda")]
            schedule: [OnceLock::new(), OnceLock::new()],
            #[cfg(feature = "cuda")]
            longest_first: OnceLock::new(),
            #[cfg(feature = "cuda")]
            blocked: std::sync::Mutex::new(None),
            #[cfg(feature = "cuda")]
            bwd_events: std::sync::Mutex::new(Vec::new()),
        });
        Ok(Self {
            inner,
            policy: KernelPolicy::default(),
            log: Arc::default(),
        })
    }

    /// The same structure (no copy, shared cached views) under `policy`, with a record of
    /// kernels of its own ([`Self::kernels_used`] starts empty).
    pub fn with_policy(&self, policy: KernelPolicy) -> DeviceGraph {
        Self {
            inner: self.inner.clone(),
            policy,
            log: Arc::default(),
        }
    }

    /// This structure under `parent`'s policy, recording into `parent`'s record: for a graph
    /// derived from another (a partition's slices, head-expanded copies, a halo's scatter), so
    /// that one policy governs every op of a model and one record lists them.
    pub fn with_policy_of(&self, parent: &DeviceGraph) -> DeviceGraph {
        Self {
            inner: self.inner.clone(),
            policy: parent.policy,
            log: parent.log.clone(),
        }
    }

    /// The kernel policy this graph's ops run under.
    pub fn policy(&self) -> &KernelPolicy {
        &self.policy
    }

    /// The kernels this graph's ops have run so far (its transpose's and the graphs that
    /// follow it by [`Self::with_policy_of`] included).
    pub fn kernels_used(&self) -> KernelsUsed {
        self.log.snapshot()
    }

    /// Records that `op` ran `kernel` on this graph.
    pub(crate) fn record(&self, op: &'static str, kernel: &'static str) {
        self.log.record(op, kernel);
    }

    /// Records, for [`Self::kernels_used`], a form of `op` composed from this crate's ops
    /// outside it (the models' row-scaled GCN sum: `"spmm"`, `"row-scaled"`), so a run's
    /// report says which form ran.
    pub fn record_form(&self, op: &'static str, form: &'static str) {
        self.log.record(op, form);
    }

    /// The host structure.
    pub fn csr(&self) -> &Csr {
        &self.inner.csr
    }
    /// The device.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }
    /// Rows (targets, output rows of aggregation).
    pub fn n_rows(&self) -> usize {
        self.inner.csr.n_rows()
    }
    /// Columns (sources, input rows of aggregation).
    pub fn n_cols(&self) -> usize {
        self.inner.csr.n_cols()
    }
    /// Stored edges.
    pub fn nnz(&self) -> usize {
        self.inner.csr.nnz()
    }

    /// The rows' degree statistics ([`Csr::degree_stats`], for the kernel dispatchers),
    /// computed on first use.
    pub fn degree_stats(&self) -> &gnn_graph::csr::DegreeStats {
        self.inner
            .stats
            .get_or_init(|| self.inner.csr.degree_stats())
    }

    /// The transpose (CSC of this graph as a CSR of `A^T`) and, as a `u32` tensor of length
    /// `nnz`, the edge permutation: entry `p` of the transpose is entry `perm[p]` here.
    /// Built on first use. A structurally symmetric graph is its own transpose: `self` is
    /// returned and no second copy of the structure is uploaded. (Handles are cheap clones.)
    pub fn transpose(&self) -> Result<(DeviceGraph, Tensor)> {
        let t = self.transposed()?;
        let perm = {
            let mut slot = t.perm_slot().lock().unwrap_or_else(|e| e.into_inner());
            match slot.as_ref() {
                Some(p) => p.clone(),
                None => {
                    // Released (symmetric values need no permutation, nor does a backward
                    // without values); rebuilt for the caller that asks again.
                    let p = timed_setup(|| match t {
                        Transposed::Symmetric(_) => self.symmetric_perm(),
                        Transposed::Other(..) => {
                            let (_, perm) = self.inner.csr.transpose()?;
                            Ok(Tensor::from_vec(perm, self.nnz(), &self.inner.device)?)
                        }
                    })?;
                    *slot = Some(p.clone());
                    p
                }
            }
        };
        Ok(match t {
            Transposed::Other(g, _) => (g.with_policy_of(self), perm),
            Transposed::Symmetric(_) => (self.clone(), perm),
        })
    }

    /// The transposed structure alone ([`Self::transpose`] without the permutation): what an
    /// SpMM backward without edge values, or with values already permuted, runs on.
    pub fn transpose_graph(&self) -> Result<DeviceGraph> {
        Ok(match self.transposed()? {
            Transposed::Other(g, _) => g.with_policy_of(self),
            Transposed::Symmetric(_) => self.clone(),
        })
    }

    fn transposed(&self) -> Result<&Transposed> {
        if self.inner.transpose.get().is_none() {
            timed_setup(|| self.build_transpose())?;
        }
        Ok(self.inner.transpose.get().expect("set above"))
    }

    /// On a GPU, a symmetric structure's transpose permutation from one device-side search
    /// (`cuda/graph.cu`); `None` on the CPU or when the structure is not symmetric with
    /// strictly increasing rows.
    fn device_symmetric_perm(&self) -> Result<Option<Tensor>> {
        #[cfg(feature = "cuda")]
        if let (Some(c), Device::Cuda(dev)) = (&self.inner.cuda, &self.inner.device) {
            return Ok(c.symmetric_perm(&self.inner.csr, dev)?);
        }
        Ok(None)
    }

    /// The edge permutation of a symmetric structure's transpose: the device search on a
    /// GPU, else the host counting sort.
    fn symmetric_perm(&self) -> Result<Tensor> {
        if let Some(perm) = self.device_symmetric_perm()? {
            return Ok(perm);
        }
        let (_, perm) = self.inner.csr.transpose()?;
        Ok(Tensor::from_vec(perm, self.nnz(), &self.inner.device)?)
    }

    /// Builds the cached transpose: for a symmetric structure (undirected graphs, GCN's
    /// A + I) on a GPU the device search, else the host counting sort and an upload.
    fn build_transpose(&self) -> Result<()> {
        if let Some(perm) = self.device_symmetric_perm()? {
            let tr = Transposed::Symmetric(std::sync::Mutex::new(Some(perm)));
            let _ = self.inner.transpose.set(tr);
            return Ok(());
        }
        let (t, perm) = self.inner.csr.transpose()?;
        let perm = Tensor::from_vec(perm, self.nnz(), &self.inner.device)?;
        let csr = &self.inner.csr;
        let symmetric = t.n_rows() == csr.n_rows()
            && t.indptr() == csr.indptr()
            && t.indices() == csr.indices();
        let tr = if symmetric {
            Transposed::Symmetric(std::sync::Mutex::new(Some(perm)))
        } else {
            Transposed::Other(
                DeviceGraph::from_arc(Arc::new(t), &self.inner.device)?,
                std::sync::Mutex::new(Some(perm)),
            )
        };
        let _ = self.inner.transpose.set(tr);
        Ok(())
    }

    /// True when the graph is structurally symmetric (its transpose is itself); builds the
    /// transpose if needed.
    pub fn is_symmetric(&self) -> Result<bool> {
        Ok(matches!(self.transposed()?, Transposed::Symmetric(_)))
    }

    /// Edge values `v` (`[nnz]`) in the order of the [`Self::transpose`]: `v[perm]`. A constant
    /// `v` (no gradient) is permuted once and cached by its tensor id, so that a training loop
    /// over fixed normalisation values (GCN) does not re-gather `nnz` floats every backward.
    /// When those values turn out symmetric on a symmetric structure (GCN's normalisation),
    /// `v` itself is returned and the `[nnz]` permutation is released from the device (rebuilt
    /// if [`Self::transpose`] is asked for it again).
    pub fn transposed_values(&self, v: &Tensor) -> Result<Tensor> {
        if v.track_op() {
            let (_, perm) = self.transpose()?;
            return Ok(v.index_select(&perm, 0)?);
        }
        let mut cache = self
            .inner
            .transposed_values
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some((id, vt)) = cache.as_ref() {
            if *id == v.id() {
                return Ok(vt.clone());
            }
        }
        let vt = timed_setup(|| -> Result<Tensor> {
            let (_, perm) = self.transpose()?;
            let vt = v.index_select(&perm, 0)?;
            drop(perm);
            // Symmetric values on a symmetric structure (GCN's D^-1/2 (A + I) D^-1/2): keep
            // `v` itself, so the backward does not hold a second `[nnz]` copy. One `[nnz]` u8
            // mask for the comparison (not f32 temporaries), once per value tensor.
            // (No edges: nothing to compare, and `max_all` of an empty tensor is an error.)
            let same = self.is_symmetric()?
                && (vt.elem_count() == 0 || vt.ne(v)?.max_all()?.to_scalar::<u8>()? == 0);
            if same {
                self.release_transpose_perm()?;
            }
            Ok(if same { v.clone() } else { vt })
        })?;
        *cache = Some((v.id(), vt.clone()));
        Ok(vt)
    }

    /// Drops a symmetric graph's transpose permutation from the device (rebuilt by
    /// [`Self::transpose`] on request).
    fn release_transpose_perm(&self) -> Result<()> {
        if let Transposed::Symmetric(slot) = self.transposed()? {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        Ok(())
    }

    /// Builds the transpose now (its one-off host work then lands here, not in the first
    /// backward) and drops its `[nnz]` edge permutation from the device, rebuilt if
    /// [`Self::transpose`] or [`Self::transposed_values`] asks for it: for a graph whose
    /// backward reads no edge values (an unweighted sum between row scalings), which would
    /// otherwise hold `4 · nnz` bytes it never reads.
    pub fn release_transpose_permutation(&self) -> Result<()> {
        let t = self.transposed()?;
        *t.perm_slot().lock().unwrap_or_else(|e| e.into_inner()) = None;
        Ok(())
    }

    /// True while the transpose permutation is held on the device.
    #[cfg(test)]
    fn holds_transpose_perm(&self) -> bool {
        self.inner.transpose.get().is_some_and(|t| {
            t.perm_slot()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some()
        })
    }

    /// `1 / deg(i)` for every edge `p` of row `i`, f32 `[nnz]` in CSR order (cached): the mean's
    /// scale as edge values, so a half-precision mean backward applies it in fp32 inside the
    /// kernel instead of narrowing `dy / deg` (which underflows f16 for rows of ~16 K+ edges).
    pub fn inv_degree_edge_values(&self) -> Result<Tensor> {
        if self.inner.inv_deg_edges.get().is_none() {
            let t = timed_setup(|| {
                let csr = &self.inner.csr;
                let mut v = Vec::with_capacity(csr.nnz());
                for &d in csr.row_degrees().iter() {
                    v.extend(std::iter::repeat_n(1.0 / d.max(1) as f32, d as usize));
                }
                Tensor::from_vec(v, csr.nnz(), &self.inner.device)
            })?;
            let _ = self.inner.inv_deg_edges.set(t);
        }
        Ok(self.inner.inv_deg_edges.get().expect("set above").clone())
    }

    /// [`Self::inv_degree_edge_values`] in the order of the transpose (`1 / deg(source row)`
    /// per transposed entry), f32 `[nnz]`, cached: the half-precision mean backward's values.
    /// A symmetric structure's transposed entry `q` in row `c` with column `r` is edge `(r, c)`,
    /// so its value is `1 / deg(indices[q])`, computed directly: neither the forward-order
    /// values nor the transpose's permutation (released; rebuilt on request) are kept on the
    /// device (2 x `nnz` x 4 bytes).
    pub fn transposed_inv_degree_edge_values(&self) -> Result<Tensor> {
        if self.inner.inv_deg_edges_t.get().is_none() {
            let t = if self.is_symmetric()? {
                timed_setup(|| {
                    let csr = &self.inner.csr;
                    let inv: Vec<f32> = csr
                        .row_degrees()
                        .iter()
                        .map(|&d| 1.0 / d.max(1) as f32)
                        .collect();
                    let v: Vec<f32> = csr.indices().par_iter().map(|&r| inv[r as usize]).collect();
                    self.release_transpose_perm()?;
                    Tensor::from_vec(v, csr.nnz(), &self.inner.device)
                })?
            } else {
                self.transposed_values(&self.inv_degree_edge_values()?)?
            };
            let _ = self.inner.inv_deg_edges_t.set(t);
        }
        Ok(self.inner.inv_deg_edges_t.get().expect("set above").clone())
    }

    /// `1 / row_len` as an `[n_rows, 1]` tensor of `dtype` (0 for empty rows). Cached in f32.
    pub fn inv_degrees(&self, dtype: DType) -> Result<Tensor> {
        if self.inner.inv_deg.get().is_none() {
            let v = self.inner.csr.inverse_row_degrees();
            let t = Tensor::from_vec(v, (self.n_rows(), 1), &self.inner.device)?;
            let _ = self.inner.inv_deg.set(t);
        }
        Ok(self
            .inner
            .inv_deg
            .get()
            .expect("set above")
            .to_dtype(dtype)?)
    }

    /// True when both handles share one uploaded structure.
    pub fn same(&self, other: &DeviceGraph) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Turns on accounting of the time spent in the backward passes of ops on this graph
    /// (they run inside candle's autograd, where the caller cannot time them): wall clock on
    /// the CPU, CUDA events on candle's stream on a GPU (no synchronisation in the pass).
    pub fn set_backward_timing(&self, on: bool) {
        self.inner.timing.store(on, Ordering::Relaxed);
    }

    /// Backward time accumulated since the last call, and resets it (on CUDA, waits for the
    /// recorded events).
    pub fn take_backward_time(&self) -> Result<Duration> {
        let ns = self.inner.bwd_ns.swap(0, Ordering::Relaxed);
        #[cfg(feature = "cuda")]
        let mut ns = ns;
        #[cfg(feature = "cuda")]
        for (a, b) in self
            .inner
            .bwd_events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            b.synchronize()
                .map_err(|e| candle_core::Error::Msg(format!("cuda event: {e}")))?;
            let ms = a
                .elapsed_ms(&b)
                .map_err(|e| candle_core::Error::Msg(format!("cuda event: {e}")))?;
            ns += (ms as f64 * 1e6) as u64;
        }
        let deduct = self.inner.bwd_deduct_ns.swap(0, Ordering::Relaxed);
        Ok(Duration::from_nanos(ns.saturating_sub(deduct)))
    }

    /// Takes `d` off the backward clock: time a timed backward span spent on something else
    /// (the halo exchange inside a partitioned aggregation's backward, which the trainer
    /// reports as communication). For ops outside this crate that time their own backward
    /// ([`Self::backward_timer`]), such as `gnn-comm`'s partitioned aggregation.
    pub fn deduct_backward_time(&self, d: Duration) {
        if self.inner.timing.load(Ordering::Relaxed) {
            self.inner
                .bwd_deduct_ns
                .fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// A guard that adds its lifetime to the backward clock when timing is on
    /// ([`Self::set_backward_timing`]); `None` when it is off. For a custom op's backward on
    /// this graph, here or in another crate.
    pub fn backward_timer(&self) -> Option<BackwardTimer<'_>> {
        if !self.inner.timing.load(Ordering::Relaxed) {
            return None;
        }
        #[cfg(feature = "cuda")]
        if let Device::Cuda(d) = &self.inner.device {
            let ev = d
                .cuda_stream()
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .ok()?;
            return Some(BackwardTimer {
                g: self,
                start: Start::Event(ev),
            });
        }
        Some(BackwardTimer {
            g: self,
            start: Start::Wall(Instant::now()),
        })
    }
}

enum Start {
    Wall(Instant),
    #[cfg(feature = "cuda")]
    Event(CudaEvent),
}

/// Adds the time between its creation and its drop to a graph's backward clock
/// ([`DeviceGraph::backward_timer`]).
pub struct BackwardTimer<'a> {
    g: &'a DeviceGraph,
    start: Start,
}

impl Drop for BackwardTimer<'_> {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.start, Start::Wall(Instant::now())) {
            Start::Wall(t) => {
                self.g
                    .inner
                    .bwd_ns
                    .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            }
            #[cfg(feature = "cuda")]
            Start::Event(a) => {
                if let Device::Cuda(d) = &self.g.inner.device {
                    if let Ok(b) = d
                        .cuda_stream()
                        .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                    {
                        self.g
                            .inner
                            .bwd_events
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((a, b));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gnn_graph::{BuildOptions, Coo};

    fn graph(undirected: bool) -> Csr {
        let src = vec![0, 1, 2, 2, 3];
        let dst = vec![1, 2, 0, 3, 3];
        let opts = if undirected {
            BuildOptions::undirected()
        } else {
            BuildOptions::default()
        };
        Coo::new(4, src, dst).unwrap().to_csr(opts).unwrap()
    }

    #[test]
    fn a_symmetric_graph_is_its_own_transpose() {
        let g = DeviceGraph::upload(&graph(true), &Device::Cpu).unwrap();
        let (t, perm) = g.transpose().unwrap();
        assert!(t.same(&g) && g.is_symmetric().unwrap());
        // Symmetric values are kept as they are (no second copy) ...
        let perm: Vec<u32> = perm.to_vec1().unwrap();
        let (csr, nnz) = (g.csr(), g.nnz());
        let sym: Vec<f32> = (0..csr.n_rows())
            .flat_map(|i| {
                let deg = |v: usize| csr.row_len(v) as f32;
                csr.row(i)
                    .iter()
                    .map(move |&j| 1.0 / (deg(i) * deg(j as usize)).sqrt())
                    .collect::<Vec<_>>()
            })
            .collect();
        let v = Tensor::from_vec(sym, nnz, &Device::Cpu).unwrap();
        assert!(g.holds_transpose_perm());
        assert_eq!(g.transposed_values(&v).unwrap().id(), v.id());
        // ... the permutation is released, the structure still serves as the transpose, and
        // the permutation comes back, the same, for whoever asks for it ...
        assert!(!g.holds_transpose_perm());
        assert!(g.transpose_graph().unwrap().same(&g) && g.is_symmetric().unwrap());
        assert!(!g.holds_transpose_perm());
        assert_eq!(g.transposed_values(&v).unwrap().id(), v.id(), "cached");
        let again: Vec<u32> = g.transpose().unwrap().1.to_vec1().unwrap();
        assert_eq!(again, perm);
        assert!(g.holds_transpose_perm());
        // ... and asymmetric ones are permuted.
        let asym: Vec<f32> = (0..nnz).map(|p| p as f32).collect();
        let w = Tensor::from_vec(asym.clone(), nnz, &Device::Cpu).unwrap();
        let wt: Vec<f32> = g.transposed_values(&w).unwrap().to_vec1().unwrap();
        let want: Vec<f32> = perm.iter().map(|&p| asym[p as usize]).collect();
        assert_eq!(wt, want);
        assert_ne!(wt, asym);
    }

    /// A directed graph's transpose permutation is released on request and comes back the
    /// same; the transposed structure stays.
    #[test]
    fn a_released_transpose_permutation_is_rebuilt_on_request() {
        for undirected in [false, true] {
            let g = DeviceGraph::upload(&graph(undirected), &Device::Cpu).unwrap();
            let (t, perm) = g.transpose().unwrap();
            let perm: Vec<u32> = perm.to_vec1().unwrap();
            g.release_transpose_permutation().unwrap();
            assert!(!g.holds_transpose_perm(), "undirected {undirected}");
            assert!(g.transpose_graph().unwrap().same(&t));
            assert!(!g.holds_transpose_perm());
            let (t2, again) = g.transpose().unwrap();
            assert!(t2.same(&t));
            assert_eq!(again.to_vec1::<u32>().unwrap(), perm);
            assert!(g.holds_transpose_perm());
        }
    }

    #[test]
    fn transposed_inverse_degrees_equal_the_permuted_ones() {
        for undirected in [true, false] {
            let g = DeviceGraph::upload(&graph(undirected), &Device::Cpu).unwrap();
            let got: Vec<f32> = g
                .transposed_inv_degree_edge_values()
                .unwrap()
                .to_vec1()
                .unwrap();
            let fresh = DeviceGraph::upload(&graph(undirected), &Device::Cpu).unwrap();
            let inv = fresh.inv_degree_edge_values().unwrap();
            let want: Vec<f32> = fresh.transposed_values(&inv).unwrap().to_vec1().unwrap();
            assert_eq!(got, want, "undirected {undirected}");
            // The symmetric path builds neither the forward-order values nor keeps a
            // permutation.
            assert_eq!(g.inner.inv_deg_edges.get().is_some(), !undirected);
            assert_eq!(g.holds_transpose_perm(), !undirected);
        }
    }

    #[test]
    fn nested_setup_counts_once() {
        let before = setup_time();
        timed_setup(|| {
            timed_setup(|| std::thread::sleep(Duration::from_millis(50)));
        });
        let spent = setup_time().saturating_sub(before);
        // Other tests may add their own (sub-millisecond) set-up concurrently; counting the
        // nested call twice would add at least 100 ms.
        assert!(spent >= Duration::from_millis(50), "{spent:?}");
        assert!(spent < Duration::from_millis(100), "{spent:?}");
        assert_eq!(SETUP_DEPTH.with(|d| d.get()), 0);
    }

    #[test]
    fn each_policy_handle_keeps_its_own_record_and_derived_graphs_share_it() {
        use crate::{spmm, KernelPolicy, Reduce, SpmmKernel};
        let g = DeviceGraph::upload(&graph(false), &Device::Cpu).unwrap();
        let forced = g.with_policy(KernelPolicy::default().with_spmm(SpmmKernel::Ge));
        assert!(forced.same(&g) && g.kernels_used().is_empty());
        let x = candle_core::Var::ones((4, 3), DType::F32, &Device::Cpu).unwrap();
        let y = spmm(&forced, x.as_tensor(), Reduce::Sum).unwrap();
        // The backward runs on the transpose, a graph of its own here (directed), which
        // records into the forward graph's record under its policy.
        let (t, _) = forced.transpose().unwrap();
        assert!(!t.same(&forced));
        assert_eq!(t.policy(), forced.policy());
        y.sum_all().unwrap().backward().unwrap();
        assert_eq!(forced.kernels_used().kernels("spmm"), ["cpu"]);
        assert_eq!(t.kernels_used(), forced.kernels_used());
        assert!(g.kernels_used().is_empty(), "{}", g.kernels_used());
        // A derived graph follows its parent's policy and record.
        let other = DeviceGraph::upload(&graph(true), &Device::Cpu).unwrap();
        let follower = other.with_policy_of(&forced);
        assert_eq!(follower.policy(), forced.policy());
        let a = x.as_tensor().detach();
        crate::sddmm(&follower, &a, &a).unwrap();
        assert!(forced.kernels_used().contains("sddmm", "cpu"));
        assert!(g.kernels_used().is_empty());
        assert!(other.kernels_used().is_empty());
    }

    #[test]
    fn a_directed_graph_gets_its_own_transpose() {
        let g = DeviceGraph::upload(&graph(false), &Device::Cpu).unwrap();
        let (t, _) = g.transpose().unwrap();
        assert!(!t.same(&g) && !g.is_symmetric().unwrap());
        assert_ne!(t.csr().indices(), g.csr().indices());
    }
}
