//! Sampled SpMM (ES-SpMM, AES-SpMM): the same edges picked on both devices.

use super::*;
use crate::error::Result;
use crate::verify::{missing, sampled_bound, Checker};
use crate::{spmm_sampled, DeviceGraph, Reduce, Sampling};
use candle_core::{DType, Device, Tensor};

/// Sampled SpMM (inference) of `x` (`v` the edge values) on both graphs, and on a CUDA device
/// with half features.
pub(super) fn check_sampled(
    c: &mut Checker,
    name: &str,
    k: usize,
    gpu: &Device,
    (gc, gg): (&DeviceGraph, &DeviceGraph),
    (x, v): (&Tensor, &Tensor),
) -> Result<()> {
    // Sampled SpMM (inference): the GPU must pick the same edges as the CPU. The estimator
    // scales a short sample by nnz / samples (3,125 for 16 edges of the 50 K-edge row), which
    // scales both sides' f32 rounding with it: the bound is the summation bound of each
    // element (`sampled_bound`), not a fixed 1e-5 of the largest output.
    let (xg, vg) = (x.to_device(gpu)?, v.to_device(gpu)?);
    for sampling in [
        Sampling::EsBucket { s: 16 },
        Sampling::EsFastRand { s: 16 },
        Sampling::EsBucket { s: 100 },
        Sampling::EsFastRand { s: 100 },
        Sampling::aes(64),
        Sampling::aes(32),
        Sampling::aes(16),
    ] {
        for (reduce, weighted) in [(Reduce::Sum, true), (Reduce::Mean, false)] {
            let vals = weighted.then_some(v);
            let oc = spmm_sampled(gc, x, vals, reduce, sampling)?;
            let og = spmm_sampled(gg, &xg, weighted.then_some(&vg), reduce, sampling)?;
            let lim = sampled_bound(gc, x, vals, reduce, sampling)?;
            c.check_within(
                name,
                format!("sampled {sampling:?} {reduce:?}").to_lowercase(),
                k,
                &og,
                &oc,
                &lim,
            )?;
            if gpu.is_cuda() {
                check_sampled_half(c, name, k, (gc, gg), (x, v), weighted, reduce, sampling)?;
            }
        }
    }
    Ok(())
}

/// Sampled SpMM of bf16 / f16 features (f32 edge values) against an f64 CPU run on the same
/// rounded features: the same edges picked, elementwise within the fp32 summation bound of
/// [`sampled_bound`] plus the output's narrowing to the half type (as [`check_spmm_half`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn check_sampled_half(
    c: &mut Checker,
    name: &str,
    k: usize,
    (gc, gg): (&DeviceGraph, &DeviceGraph),
    (x, v): (&Tensor, &Tensor),
    weighted: bool,
    reduce: Reduce,
    sampling: Sampling,
) -> Result<()> {
    for st in HALF_STORAGE {
        let dt = st.dtype;
        let xh = st.round(x)?;
        let v64 = v.to_dtype(DType::F64)?;
        let vals = weighted.then_some(&v64);
        let oc = spmm_sampled(gc, &xh, vals, reduce, sampling)?;
        let vg = v.to_device(gg.device())?;
        let og = spmm_sampled(
            gg,
            &x.to_dtype(dt)?.to_device(gg.device())?,
            weighted.then_some(&vg),
            reduce,
            sampling,
        )?;
        if og.dtype() != dt {
            return Err(missing(&format!(
                "sampled {dt:?}: output is {:?}",
                og.dtype()
            )));
        }
        let abs_v = vals.map(Tensor::abs).transpose()?;
        let abs_out = spmm_sampled(gc, &xh.abs()?, abs_v.as_ref(), reduce, sampling)?;
        let lim = (sampled_bound(gc, &xh, vals, reduce, sampling)? + st.narrowing(&abs_out)?)?;
        let tag = format!("sampled {dt:?} {sampling:?} {reduce:?}").to_lowercase();
        c.check_within(name, tag, k, &og, &oc, &lim)?;
    }
    Ok(())
}
