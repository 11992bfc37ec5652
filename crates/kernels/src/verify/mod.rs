//! GPU correctness check: every sparse op and its backward on a device (the GPU) against the
//! CPU implementation (itself tested against naive references), on random graphs with empty
//! rows and one row of 50 K non-zeros, K in {1, 7, 16, 32, 33, 64, 100, 128, 256, 602}, and on
//! the synthetic Reddit graph. [`run`] prints a table of relative errors (max |gpu - cpu| /
//! max |cpu|) as it goes and returns the rows; the `gpu_check` example writes them as JSON and
//! exits non-zero on any miss.
//!
//! Bounds: SpMM sums and means (forward and backward) and SDDMM are checked element by element
//! against f64 CPU runs, within the first-order rounding bound of the GPU's summation tree
//! (depth x 2^-24 x the sum of the terms' magnitudes, doubled; `sum_bound`): a bound that
//! follows from the kernels' summation order, where a fixed 1e-5 of the largest output held
//! only by luck at K = 1 (a 50 K-edge row sums to ~sqrt(50 K) from terms of total magnitude
//! ~40 K). Sampled SpMM uses the same bound scaled by its estimator. MaxK SpGEMM/SSpMM and the
//! dense matmul keep 1e-5 of the largest output (f64 references; worst seen 1.4e-6 over 20
//! seeds). The edge-scaled SDDMM runs under each CUDA kernel choice (HP-SDDMM at several
//! partitions, DTP's own, the row kernel) for K up to 1024 and a misaligned start. Max/min
//! forward, the MaxK selection, dropout and dequantisation are exact. Every device graph runs
//! under the checker's [`KernelPolicy`] ([`Checker::with_policy`]), and the checks that cover
//! several kernels build graphs under policies that force each one; with a deterministic
//! policy it checks the deterministic-mode kernels the same way.
//!
//! Every input derives from the run's seed, so a miss is replayed by running that seed again.

#[cfg(feature = "cuda")]
pub mod bench;
pub mod floor;
mod suite;

pub use suite::run;

use crate::error::{Error, Result};
use crate::{spmm, spmm_sampled, spmm_weighted, DeviceGraph, KernelPolicy, Reduce, Sampling};
use candle_core::{DType, Device, Tensor, Var};
use gnn_graph::Csr;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// One check: an op's output on the device against the CPU's.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    /// Input graph.
    pub graph: String,
    /// Op and setting.
    pub op: String,
    /// Feature width.
    pub k: usize,
    /// max |device - cpu| / max |cpu|.
    pub rel_err: f64,
    /// The bound on `rel_err` (for elementwise checks: the largest allowed deviation relative
    /// to the output's scale); 0 for exact checks.
    pub bound: f64,
    /// Within the bound.
    pub ok: bool,
}

fn missing(what: &str) -> Error {
    Error::Harness(format!("gpu check: {what}"))
}

fn random_graph(
    c: &Checker,
    n_rows: usize,
    n_cols: usize,
    avg: usize,
    huge: usize,
    seed: u64,
) -> Result<Csr> {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed ^ c.run_seed);
    let mut indptr = vec![0u32];
    let mut indices = Vec::new();
    for i in 0..n_rows {
        let len = if i == 1 {
            huge
        } else if i % 5 == 4 {
            0
        } else {
            r.random_range(1..=2 * avg)
        };
        indices.extend((0..len).map(|_| r.random_range(0..n_cols as u32)));
        indptr.push(indices.len() as u32);
    }
    Ok(Csr::new_checked(n_rows, n_cols, indptr, indices)?)
}

/// The gradient of `t` in `grads` (an error naming `what` if there is none).
fn grad(grads: &candle_core::backprop::GradStore, t: &Tensor, what: &str) -> Result<Tensor> {
    Ok(grads.get(t).ok_or_else(|| missing(what))?.clone())
}

/// `t` on the CPU as f64 values.
fn f64s(t: &Tensor) -> Result<Vec<f64>> {
    Ok(t.to_device(&Device::Cpu)?
        .to_dtype(DType::F64)?
        .flatten_all()?
        .to_vec1::<f64>()?)
}

fn rel_err(gpu: &Tensor, cpu: &Tensor) -> Result<f64> {
    let (a, b) = (f64s(gpu)?, f64s(cpu)?);
    if a.len() != b.len() {
        return Err(missing(&format!("length {} vs {}", a.len(), b.len())));
    }
    // A value finite on one side and not on the other (or two different non-finite values)
    // is an infinite error: `f64::max` would drop a NaN difference and pass it.
    let differ = |x: f64, y: f64| {
        if x.is_finite() && y.is_finite() {
            (x - y).abs()
        } else if x == y || (x.is_nan() && y.is_nan()) {
            0.0
        } else {
            f64::INFINITY
        }
    };
    let scale = b
        .iter()
        .filter(|v| v.is_finite())
        .fold(0f64, |m, v| m.max(v.abs()))
        .max(1e-30);
    Ok(a.iter()
        .zip(&b)
        .fold(0f64, |m, (x, y)| m.max(differ(*x, *y)))
        / scale)
}

/// Runs checks and keeps their rows; owns the seeded stream of random inputs.
pub struct Checker {
    /// The checks so far.
    pub rows: Vec<Row>,
    /// The policy of the device graphs (checks of several kernels vary it).
    policy: KernelPolicy,
    run_seed: u64,
    inputs: Xoshiro256PlusPlus,
}

impl Checker {
    /// A checker whose inputs all derive from `seed`, device graphs under the default policy.
    pub fn new(seed: u64) -> Self {
        let run_seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Self {
            rows: Vec::new(),
            policy: KernelPolicy::default(),
            run_seed,
            inputs: Xoshiro256PlusPlus::seed_from_u64(run_seed),
        }
    }

    /// The same checker with device graphs under `policy` (e.g. deterministic).
    pub fn with_policy(self, policy: KernelPolicy) -> Self {
        Self { policy, ..self }
    }

    /// The policy of the device graphs.
    pub fn policy(&self) -> &KernelPolicy {
        &self.policy
    }

    /// Whether the sum/mean SpMMs add a row in groups that meet through atomics (not under a
    /// deterministic policy): what [`sum_depth`]'s `grouped` asks.
    fn grouped(&self) -> bool {
        !self.policy.deterministic
    }

    /// A standard-normal f32 CPU tensor from the seeded input stream.
    fn randn<S: Into<candle_core::Shape>>(&mut self, shape: S) -> Result<Tensor> {
        let shape = shape.into();
        let r = &mut self.inputs;
        let v: Vec<f32> = (0..shape.elem_count())
            .map(|_| r.sample::<f32, _>(rand_distr::StandardNormal))
            .collect();
        Ok(Tensor::from_vec(v, shape, &Device::Cpu)?)
    }

    /// Number of checks that missed their bound.
    pub fn misses(&self) -> usize {
        self.rows.iter().filter(|r| !r.ok).count()
    }

    /// The largest relative error among the toleranced (non-exact) checks.
    pub fn worst(&self) -> f64 {
        self.rows
            .iter()
            .filter(|r| r.bound > 0.0)
            .fold(0f64, |m, r| m.max(r.rel_err))
    }

    /// Checks `gpu` against `cpu` within `bound` of the largest `cpu` magnitude (0: exact).
    pub fn check(
        &mut self,
        graph: &str,
        op: String,
        k: usize,
        gpu: &Tensor,
        cpu: &Tensor,
        bound: f64,
    ) -> Result<()> {
        let e =
            rel_err(gpu, cpu).map_err(|e| Error::Harness(format!("{graph} {op} K={k}: {e}")))?;
        self.record(graph, op, k, e, bound, e <= bound, "");
        Ok(())
    }

    /// Prints a row of the table and keeps it.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        graph: &str,
        op: String,
        k: usize,
        e: f64,
        bound: f64,
        ok: bool,
        how: &str,
    ) {
        let verdict = if ok { "ok" } else { "MISS" };
        println!("{graph:<22} {op:<34} {k:>5} {e:>11.2e} {bound:>8.0e}  {verdict}{how}");
        self.rows.push(Row {
            graph: graph.into(),
            op,
            k,
            rel_err: e,
            bound,
            ok,
        });
    }

    /// Checks `|gpu - cpu| <= allowed` element by element (`allowed` a CPU tensor of the same
    /// shape); the row records the relative error and the largest allowed deviation relative
    /// to the output's scale, so the table reads like the others.
    pub fn check_within(
        &mut self,
        graph: &str,
        op: String,
        k: usize,
        gpu: &Tensor,
        cpu: &Tensor,
        allowed: &Tensor,
    ) -> Result<()> {
        let (a, b, lim) = (f64s(gpu)?, f64s(cpu)?, f64s(allowed)?);
        let scale = b.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
        let ok = a
            .iter()
            .zip(&b)
            .zip(&lim)
            .all(|((x, y), l)| (x - y).abs() <= *l);
        let e = rel_err(gpu, cpu)?;
        let bound = lim.iter().fold(0f64, |m, v| m.max(*v)) / scale;
        self.record(graph, op, k, e, bound, ok, " (elementwise)");
        Ok(())
    }
}

/// The most terms an estimator sums per output row under `sampling`.
fn max_terms(sampling: Sampling) -> usize {
    match sampling {
        Sampling::EsBucket { s } | Sampling::EsFastRand { s } => s,
        Sampling::Aes { w, .. } => w,
    }
}

/// Elementwise bound of two f32 evaluations of a sampled estimate: [`sum_bound`] over the
/// estimate of `|v| |x|` (the estimator's `nnz / samples` factor inside), `n + 2` deep for the
/// `n` terms a row sums at most, its doubling covering the two sides.
fn sampled_bound(
    g: &DeviceGraph,
    x: &Tensor,
    vals: Option<&Tensor>,
    reduce: Reduce,
    sampling: Sampling,
) -> Result<Tensor> {
    let abs_v = vals.map(Tensor::abs).transpose()?;
    let abs_out = spmm_sampled(g, &x.abs()?, abs_v.as_ref(), reduce, sampling)?;
    sum_bound(&abs_out, max_terms(sampling) as f64 + 2.0)
}

/// Largest row and column degree of `csr`: the longest sums a forward or transposed product
/// makes.
fn max_degrees(csr: &Csr) -> (usize, usize) {
    let rows = csr.degree_stats().max as usize;
    let mut cols = vec![0usize; csr.n_cols()];
    for &j in csr.indices() {
        cols[j as usize] += 1;
    }
    (rows, cols.into_iter().max().unwrap_or(0))
}

/// Depth of the GPU's summation tree for sums of up to `terms` products, plus one rounding for
/// each product and the mean's division. `grouped`: the sum/mean SpMM kernels, which add a
/// row in sequential groups whose partial sums meet through atomic adds: GE-SpMM's row
/// schedule in groups of `CHUNK` edges, HP-SpMM in groups of at most 512 edges and at least 8
/// (a row shares at most `terms / 8 + 1` groups), so the depth covers both whichever the
/// dispatcher picks (a deterministic policy runs each row as one group: pass
/// [`Checker::grouped`]). Otherwise any order (atomics, or one group), `terms` deep.
fn sum_depth(terms: usize, grouped: bool) -> f64 {
    let chunk = crate::schedule::CHUNK;
    let depth = if grouped {
        (terms.min(chunk) + terms.div_ceil(8) + 1).min(terms)
    } else {
        terms
    };
    depth as f64 + 2.0
}

/// Elementwise bound on the f32 rounding of a sum against an exact (f64) reference: at most
/// `depth * u` times the sum of the terms' magnitudes (`abs`, the same computation on absolute
/// inputs; the standard first-order summation bound, u = 2^-24), doubled for the second-order
/// terms and the f64 reference's own rounding.
pub(crate) fn sum_bound(abs: &Tensor, depth: f64) -> Result<Tensor> {
    let u = f32::EPSILON as f64 / 2.0;
    Ok(((abs.to_dtype(DType::F64)? * (2.0 * depth * u))? + 1e-30)?)
}

/// One SpMM configuration on `dev` (inputs in `dtype` on the CPU), forward only or with the
/// gradients of `sum(out * w)` with respect to `x` and the edge values (zeros if unweighted).
#[allow(clippy::too_many_arguments)]
fn spmm_run(
    dev: &Device,
    g: &DeviceGraph,
    x: &Tensor,
    v: &Tensor,
    w: &Tensor,
    reduce: Reduce,
    weighted: bool,
    dtype: DType,
    track: bool,
) -> Result<(Tensor, Option<(Tensor, Tensor)>)> {
    let xd = Var::from_tensor(&put(x, dev, dtype)?)?;
    let vd = Var::from_tensor(&put(v, dev, dtype)?)?;
    let (xt, vt) = if track {
        (xd.as_tensor().clone(), vd.as_tensor().clone())
    } else {
        (put(x, dev, dtype)?, put(v, dev, dtype)?)
    };
    let out = if weighted {
        spmm_weighted(g, &xt, &vt, reduce)?
    } else {
        spmm(g, &xt, reduce)?
    };
    if !track {
        return Ok((out, None));
    }
    let grads = (&out * put(w, dev, dtype)?)?.sum_all()?.backward()?;
    let dx = grads
        .get(xd.as_tensor())
        .ok_or_else(|| missing("no dx"))?
        .clone();
    let dv = if weighted {
        grads
            .get(vd.as_tensor())
            .ok_or_else(|| missing("no dv"))?
            .clone()
    } else {
        dx.zeros_like()?
    };
    Ok((out, Some((dx, dv))))
}

/// The graph on both sides: the CPU reference's copy and the device's, under the checker's
/// policy.
fn upload_both(c: &Checker, csr: &Csr, gpu: &Device) -> Result<(DeviceGraph, DeviceGraph)> {
    Ok((
        DeviceGraph::upload(csr, &Device::Cpu)?,
        DeviceGraph::upload(csr, gpu)?.with_policy(c.policy),
    ))
}

/// A random `[rows, k]` operand that starts one element into its buffer when `offset` is set
/// (so the kernels cannot use vector loads on it).
struct OffsetOperand {
    buf: Tensor,
    skip: usize,
    rows: usize,
    k: usize,
}

impl OffsetOperand {
    /// Draws the buffer from the checker's stream.
    fn new(c: &mut Checker, rows: usize, k: usize, offset: bool) -> Result<Self> {
        let skip = offset as usize;
        Ok(Self {
            buf: c.randn(rows * k + skip)?,
            skip,
            rows,
            k,
        })
    }

    /// The operand on `dev` (in `dt` on the CPU, see [`put`]).
    fn on(&self, dev: &Device, dt: DType) -> Result<Tensor> {
        Ok(put(&self.buf, dev, dt)?
            .narrow(0, self.skip, self.rows * self.k)?
            .reshape((self.rows, self.k))?)
    }
}

/// `t` on `dev`; on the CPU (the reference side) in `dtype`.
fn put(t: &Tensor, dev: &Device, dtype: DType) -> Result<Tensor> {
    Ok(if dev.is_cpu() {
        t.to_dtype(dtype)?
    } else {
        t.to_device(dev)?
    })
}
