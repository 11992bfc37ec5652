//! Edge-sampled SpMM for inference (ES-SpMM, Lin et al. 2021; AES-SpMM, Song et al. 2025):
//! each row aggregates a fixed-size subset of its edges and rescales, trading accuracy for
//! bandwidth. Inference only: there is no backward.
//!
//! Edge selection for a row with `nnz` entries (positions relative to the row start):
//! - [`Sampling::EsBucket`] `{ s }`: the first `min(s, nnz)` edges.
//! - [`Sampling::EsFastRand`] `{ s }`: when `nnz > s`, edges `(i * 577) mod nnz` for
//!   `i < s`; otherwise the whole row.
//! - [`Sampling::Aes`] `{ w, bands }`: ratio `R = nnz / w`; `R <= bands[0]`: whole row;
//!   else `runs` runs of `n = w / runs` consecutive edges, `runs = min(sample_cnt, w)` with
//!   `sample_cnt` = 4, 8, 16, 32 for `R` in `(b0, b1]`, `(b1, b2]`, `(b2, b3]`, `> b3` (the
//!   `min` lets widths below 32 use single-edge runs); run `i` starts at
//!   `(i * 1429) mod (nnz - n + 1)`. Runs may overlap; an edge picked twice counts twice.
//!
//! Estimator (applied inside the kernel): with `m` sampled edges (with multiplicity),
//! `Sum` returns `(nnz / m) * sum_sampled a_p x[col_p]`, an unbiased-in-spirit estimate of
//! the full sum (exact when the whole row is taken); `Mean` returns
//! `(1 / m) * sum_sampled a_p x[col_p]`. GCN's symmetric normalisation is carried by the
//! edge values `a_p`, so `Sum` with GCN values estimates the GCN aggregation.
//!
//! Precision: f32 and f64 on the CPU; f32, bf16 and f16 features on CUDA (`--precision`), the
//! half types with f32 edge values, fp32 products and accumulation, and the output narrowed to
//! the features' type once, at the end.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use super::optional::{Cpu, CpuOut, OptionalInput, With, Without};
#[cfg(feature = "cuda")]
use super::optional::{Cuda, CudaOut};
use super::{check_device, check_float_or_half, cpu_slice, cpu_slice_opt};
use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use crate::ops::spmm::Reduce;
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, DType, Layout, Shape, Tensor, WithDType};
use serde::{Deserialize, Serialize};

/// ES-SpMM's FastRand stride (a prime).
pub const FASTRAND_PRIME: usize = 577;
/// AES-SpMM's run-start stride (a prime).
pub const AES_PRIME: usize = 1429;
/// Largest sampling width (keeps the kernels' 32-bit position arithmetic exact).
pub const MAX_WIDTH: usize = 1 << 22;
/// AES-SpMM's default band edges for `R = nnz / w`.
pub const AES_BANDS: [f64; 4] = [1.0, 2.0, 10.0, 54.0];

/// Which edges a row keeps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sampling {
    /// ES-SpMM cache-first: the first `s` edges.
    EsBucket {
        /// Shared-memory width.
        s: usize,
    },
    /// ES-SpMM FastRand: `(i * 577) mod nnz`, `i < s`.
    EsFastRand {
        /// Shared-memory width.
        s: usize,
    },
    /// AES-SpMM adaptive runs.
    Aes {
        /// Sampling width.
        w: usize,
        /// Band edges for `R = nnz / w` (default [`AES_BANDS`]).
        bands: [f64; 4],
    },
}

impl Sampling {
    /// AES with the default bands.
    pub fn aes(w: usize) -> Self {
        Sampling::Aes {
            w,
            bands: AES_BANDS,
        }
    }

    /// Checks the width and bands (the op checks again; engines call this up front).
    pub fn validate(&self) -> Result<()> {
        const OP: &str = "spmm_sampled";
        let bad = |what: String| Err(Error::invalid(OP, what));
        match *self {
            Sampling::EsBucket { s } | Sampling::EsFastRand { s } if s == 0 => {
                bad("sampling width s must be >= 1".into())
            }
            Sampling::EsBucket { s } | Sampling::EsFastRand { s } | Sampling::Aes { w: s, .. }
                if s > MAX_WIDTH =>
            {
                Err(Error::unsupported(
                    OP,
                    format!("sampling width {s} exceeds the kernels' {MAX_WIDTH}"),
                ))
            }
            Sampling::Aes { w: 0, .. } => bad("AES width must be >= 1".into()),
            Sampling::Aes { bands, .. }
                if !bands.windows(2).all(|p| p[0] < p[1]) || bands[0] < 1.0 =>
            {
                bad(format!("AES bands {bands:?} must increase from >= 1"))
            }
            _ => Ok(()),
        }
    }

    /// Positions (relative to the row start) sampled from a row of `nnz` edges, in kernel
    /// order. The CUDA kernel must select exactly these.
    pub fn positions(&self, nnz: usize) -> Vec<usize> {
        match *self {
            Sampling::EsBucket { s } => (0..nnz.min(s)).collect(),
            Sampling::EsFastRand { s } => {
                if nnz > s {
                    (0..s).map(|i| (i * FASTRAND_PRIME) % nnz).collect()
                } else {
                    (0..nnz).collect()
                }
            }
            Sampling::Aes { w, bands } => {
                let r = nnz as f64 / w as f64;
                let runs = if r <= bands[0] {
                    return (0..nnz).collect();
                } else if r <= bands[1] {
                    4
                } else if r <= bands[2] {
                    8
                } else if r <= bands[3] {
                    16
                } else {
                    32
                }
                .min(w);
                let n = w / runs;
                let span = nnz - n + 1;
                (0..runs)
                    .flat_map(|i| {
                        let start = (i * AES_PRIME) % span;
                        start..start + n
                    })
                    .collect()
            }
        }
    }
}

/// Sampled aggregation `out[i] = estimate of reduce_{p in row i} a_p x[col_p]` (see the
/// module docs); `reduce` is `Sum` or `Mean`; `values` optional as in [`crate::spmm_weighted`].
pub fn spmm_sampled(
    g: &DeviceGraph,
    x: &Tensor,
    values: Option<&Tensor>,
    reduce: Reduce,
    sampling: Sampling,
) -> Result<Tensor> {
    const OP: &str = "spmm_sampled";
    sampling.validate()?;
    if !matches!(reduce, Reduce::Sum | Reduce::Mean) {
        return Err(Error::unsupported(
            OP,
            format!("{reduce:?} has no sampled estimator (sum and mean do)"),
        ));
    }
    check_device(OP, g, x)?;
    check_float_or_half(OP, "x", x)?;
    if x.dims().len() != 2 || x.dims()[0] != g.n_cols() {
        return Err(Error::shape(
            OP,
            format!("x has shape {:?}, expected [{}, K]", x.dims(), g.n_cols()),
        ));
    }
    let x = x.detach().contiguous()?;
    let op = SampledOp {
        g: g.clone(),
        reduce,
        sampling,
    };
    Ok(match values {
        Some(v) => {
            // Half-precision features take f32 edge values (the kernel multiplies in fp32),
            // as the exact SpMM does; half values are widened here.
            let half = matches!(x.dtype(), DType::BF16 | DType::F16);
            let ok = v.dtype() == x.dtype() || half && v.dtype() == DType::F32;
            if v.dims() != [g.nnz()] || !ok {
                return Err(Error::shape(
                    OP,
                    format!(
                        "edge values {:?} {:?} must be [{}] {:?}{}",
                        v.dims(),
                        v.dtype(),
                        g.nnz(),
                        x.dtype(),
                        if half { " or F32" } else { "" }
                    ),
                ));
            }
            let v = if half {
                v.detach().to_dtype(DType::F32)?
            } else {
                v.detach()
            };
            x.apply_op2_no_bwd(&v.contiguous()?, &With(op))?
        }
        None => x.apply_op1_no_bwd(&Without(op))?,
    })
}

struct SampledOp {
    g: DeviceGraph,
    reduce: Reduce,
    sampling: Sampling,
}

fn run<T: WithDType>(
    op: &SampledOp,
    s: &CpuStorage,
    l: &Layout,
    v: Option<(&CpuStorage, &Layout)>,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (_, k) = l.shape().dims2()?;
    let x = cpu_slice::<T>("spmm_sampled", s, l)?;
    let vals = cpu_slice_opt::<T>("spmm_sampled", v)?;
    let out = cpu::spmm_sampled(
        op.g.csr(),
        x,
        k,
        vals,
        op.reduce == Reduce::Mean,
        &op.sampling,
    );
    Ok((
        T::to_cpu_storage_owned(out),
        Shape::from((op.g.n_rows(), k)),
    ))
}

impl OptionalInput<1> for SampledOp {
    const NAMES: [&'static str; 2] = ["spmm_sampled", "spmm_sampled_weighted"];
    fn cpu(&self, [(s, l)]: [Cpu<'_>; 1], v: Option<Cpu<'_>>) -> CpuOut {
        dispatch_float!("spmm_sampled", s, run(self, s, l, v))
    }
    #[cfg(feature = "cuda")]
    fn cuda(&self, [(s, l)]: [Cuda<'_>; 1], v: Option<Cuda<'_>>) -> CudaOut {
        let mean = self.reduce == Reduce::Mean;
        cuda::spmm_sampled(&self.g, s, l, v, mean, &self.sampling)
    }
}
