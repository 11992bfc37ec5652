//! The checks [`run`] makes, op by op.

use super::{
    max_degrees, missing, put, random_graph, sampled_bound, spmm_run, sum_bound, sum_depth,
    upload_both, Checker, OffsetOperand,
};
use crate::error::Result;
use crate::{
    dequantize, dropout, masked_cross_entropy, matmul_nt, maxk, sddmm, spgemm, spgemm_bias, spmm,
    spmm_sampled, spmm_weighted, sspmm, Cbsr, ColumnBlock, DeviceGraph, KernelPolicy,
    QuantizedFeatures, Reduce, Sampling, SddmmKernel, SpmmKernel,
};
use candle_core::{DType, Device, Tensor, Var};
use gnn_graph::{generate, Csr, Normalization, SyntheticSpec};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A storage type the kernels read, and what narrowing a result to it costs: `unit`, its unit
/// roundoff, and `floor`, half its subnormal spacing (the absolute error of a result below its
/// smallest normal; bf16 shares f32's exponent range, so its subnormals lie below 1e-38). f32
/// results are not narrowed.
#[derive(Debug, Clone, Copy)]
struct Storage {
    dtype: DType,
    unit: f64,
    floor: f64,
}

/// f32 storage: no narrowing.
const F32_STORAGE: Storage = Storage {
    dtype: DType::F32,
    unit: 0.0,
    floor: 0.0,
};

/// bf16 (unit 2^-8) and f16 (unit 2^-11, subnormal half-spacing 2^-25).
const HALF_STORAGE: [Storage; 2] = [
    Storage {
        dtype: DType::BF16,
        unit: 1.0 / 256.0,
        floor: 0.0,
    },
    Storage {
        dtype: DType::F16,
        unit: 1.0 / 2048.0,
        floor: 1.0 / 33_554_432.0,
    },
];

impl Storage {
    /// `t` rounded to this type, as f64 (what the CPU reference computes on).
    fn round(&self, t: &Tensor) -> Result<Tensor> {
        Ok(t.to_dtype(self.dtype)?.to_dtype(DType::F64)?)
    }

    /// The bound on narrowing a result of `magnitude` to this type: one unit roundoff,
    /// doubled as margin, plus `floor`.
    fn narrowing(&self, magnitude: &Tensor) -> Result<Tensor> {
        Ok(((magnitude.to_dtype(DType::F64)? * (2.0 * self.unit))? + self.floor)?)
    }
}

/// Half-precision storage (`--precision bf16/f16`): sum/mean SpMM forward and `dx` backward
/// of bf16 / f16 `x` (fp32 edge values) against an f64 CPU run on the same rounded inputs.
/// Elementwise bound: the fp32 summation bound of [`sum_bound`] (mean's `1/deg` is applied in
/// fp32 in both directions) plus the final narrowing of the output to the half type: one unit
/// roundoff of the terms' magnitudes (doubled as margin) and half the subnormal spacing, the
/// absolute error of a result below the type's smallest normal (f16: 2^-25; bf16 shares f32's
/// exponent range, so its subnormals lie below 1e-38).
#[allow(clippy::too_many_arguments)]
fn check_spmm_half(
    c: &mut Checker,
    name: &str,
    csr: &Csr,
    k: usize,
    gpu: &Device,
    x: &Tensor,
    v: &Tensor,
    w: &Tensor,
    (gc, gg): (&DeviceGraph, &DeviceGraph),
) -> Result<()> {
    let cpu = Device::Cpu;
    let (deg_rows, deg_cols) = max_degrees(csr);
    for st in HALF_STORAGE {
        let dt = st.dtype;
        let (xh, wh) = (st.round(x)?, st.round(w)?);
        for reduce in [Reduce::Sum, Reduce::Mean] {
            for weighted in [false, true] {
                let tag = format!(
                    "{dt:?} {reduce:?}{}",
                    if weighted { " weighted" } else { "" }
                )
                .to_lowercase();
                let (oc, gcpu) =
                    spmm_run(&cpu, gc, &xh, v, &wh, reduce, weighted, DType::F64, true)?;
                let (abs_out, abs_g) = spmm_run(
                    &cpu,
                    gc,
                    &xh.abs()?,
                    &v.abs()?,
                    &wh.abs()?,
                    reduce,
                    weighted,
                    DType::F64,
                    true,
                )?;
                let bound = |abs: &Tensor, depth: f64| -> Result<Tensor> {
                    Ok((sum_bound(abs, depth)? + st.narrowing(abs)?)?)
                };
                let (dxc, _) = gcpu.ok_or_else(|| missing("cpu half grads"))?;
                let (abs_dx, _) = abs_g.ok_or_else(|| missing("abs half grads"))?;
                let lim_out = bound(&abs_out, sum_depth(deg_rows, c.grouped()))?;
                let lim_dx = bound(&abs_dx, sum_depth(deg_cols, c.grouped()))?;
                // The dispatcher's pick, and GE-SpMM's row and narrow-row kernels forced.
                for (ki, kernel) in [SpmmKernel::Auto, SpmmKernel::Ge, SpmmKernel::Narrow]
                    .into_iter()
                    .enumerate()
                {
                    let gg = &gg.with_policy(gg.policy().with_spmm(kernel));
                    let run = || -> Result<(Tensor, Tensor)> {
                        let xg = Var::from_tensor(&x.to_dtype(dt)?.to_device(gpu)?)?;
                        let vg = v.to_device(gpu)?;
                        let og = if weighted {
                            spmm_weighted(gg, xg.as_tensor(), &vg, reduce)?
                        } else {
                            spmm(gg, xg.as_tensor(), reduce)?
                        };
                        let grads = (&og * w.to_dtype(dt)?.to_device(gpu)?)?
                            .sum_all()?
                            .backward()?;
                        let dxg = grads
                            .get(xg.as_tensor())
                            .ok_or_else(|| missing("no half dx"))?
                            .clone();
                        Ok((og, dxg))
                    };
                    let (og, dxg) = run()?;
                    if og.dtype() != dt {
                        return Err(missing(&format!("{tag}: output is {:?}", og.dtype())));
                    }
                    let tag = if ki == 0 {
                        tag.clone()
                    } else {
                        format!("{tag} {kernel}")
                    };
                    c.check_within(name, format!("{tag} fwd"), k, &og, &oc, &lim_out)?;
                    c.check_within(name, format!("{tag} bwd dx"), k, &dxg, &dxc, &lim_dx)?;
                }
            }
        }
    }
    Ok(())
}

/// Max/min SpMM of bf16 / f16 `x` (f32 edge values): forward exact against an f32 CPU run on
/// the same rounded inputs, narrowed to the half type (the kernel forms the same f32 products
/// and keeps the same edge, so only the final narrowing differs, and the CPU result is rounded
/// alike); `dx` (the argmax scatter, fp32 atomics, narrowed) within the summation bound plus
/// the narrowing, as [`check_spmm_half`]; the edge-value gradient (f32) within the K-term dot
/// product bound of the f32 check. Skipped in deterministic mode (the backward needs atomics).
#[allow(clippy::too_many_arguments)]
fn check_spmm_half_extreme(
    c: &mut Checker,
    name: &str,
    csr: &Csr,
    k: usize,
    gpu: &Device,
    (x, v, w): (&Tensor, &Tensor, &Tensor),
    (gc, gg): (&DeviceGraph, &DeviceGraph),
) -> Result<()> {
    if c.policy.deterministic {
        return Ok(());
    }
    let cpu = Device::Cpu;
    let (_, deg_cols) = max_degrees(csr);
    for st in HALF_STORAGE {
        let dt = st.dtype;
        let round = |t: &Tensor| -> Result<Tensor> { Ok(st.round(t)?.to_dtype(DType::F32)?) };
        let (xh, wh) = (round(x)?, round(w)?);
        for reduce in [Reduce::Max, Reduce::Min] {
            for weighted in [false, true] {
                let tag = format!(
                    "{dt:?} {reduce:?}{}",
                    if weighted { " weighted" } else { "" }
                )
                .to_lowercase();
                let (oc, gcpu) =
                    spmm_run(&cpu, gc, &xh, v, &wh, reduce, weighted, DType::F32, true)?;
                let (dxc, dvc) = gcpu.ok_or_else(|| missing("cpu half extreme grads"))?;
                // What each gradient sums: the sum's magnitudes bound the argmax subset's.
                let (_, abs_g) = spmm_run(
                    &cpu,
                    gc,
                    &xh.abs()?,
                    &v.abs()?,
                    &wh.abs()?,
                    Reduce::Sum,
                    weighted,
                    DType::F64,
                    true,
                )?;
                let (abs_dx, abs_dv) = abs_g.ok_or_else(|| missing("abs half extreme grads"))?;
                let xg = Var::from_tensor(&x.to_dtype(dt)?.to_device(gpu)?)?;
                let vg = Var::from_tensor(&v.to_device(gpu)?)?;
                let og = if weighted {
                    spmm_weighted(gg, xg.as_tensor(), vg.as_tensor(), reduce)?
                } else {
                    spmm(gg, xg.as_tensor(), reduce)?
                };
                if og.dtype() != dt {
                    return Err(missing(&format!("{tag}: output is {:?}", og.dtype())));
                }
                let want = oc.to_dtype(dt)?;
                c.check(name, format!("{tag} fwd"), k, &og, &want, 0.0)?;
                // Untracked: the kernel without the argmax output.
                let og1 = if weighted {
                    spmm_weighted(
                        gg,
                        &xg.as_tensor().detach(),
                        &vg.as_tensor().detach(),
                        reduce,
                    )?
                } else {
                    spmm(gg, &xg.as_tensor().detach(), reduce)?
                };
                c.check(name, format!("{tag} fwd (no argmax)"), k, &og1, &want, 0.0)?;
                let grads = (&og * w.to_dtype(dt)?.to_device(gpu)?)?
                    .sum_all()?
                    .backward()?;
                let dxg = grads
                    .get(xg.as_tensor())
                    .ok_or_else(|| missing("no half extreme dx"))?;
                if dxg.dtype() != dt {
                    return Err(missing(&format!("{tag}: dx is {:?}", dxg.dtype())));
                }
                let lim =
                    (sum_bound(&abs_dx, sum_depth(deg_cols, false))? + st.narrowing(&abs_dx)?)?;
                c.check_within(name, format!("{tag} bwd dx"), k, dxg, &dxc, &lim)?;
                if weighted {
                    let dvg = grads
                        .get(vg.as_tensor())
                        .ok_or_else(|| missing("no half extreme dvalues"))?;
                    let lim = sum_bound(&abs_dv, k as f64 + 2.0)?;
                    c.check_within(name, format!("{tag} bwd dvalues"), k, dvg, &dvc, &lim)?;
                }
            }
        }
    }
    Ok(())
}

/// Sampled SpMM of bf16 / f16 features (f32 edge values) against an f64 CPU run on the same
/// rounded features: the same edges picked, elementwise within the fp32 summation bound of
/// [`sampled_bound`] plus the output's narrowing to the half type (as [`check_spmm_half`]).
#[allow(clippy::too_many_arguments)]
fn check_sampled_half(
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

/// Forward and backward of one op configuration on both devices.
fn check_spmm(
    c: &mut Checker,
    name: &str,
    csr: &Csr,
    k: usize,
    gpu: &Device,
    seed: u64,
    backward: bool,
) -> Result<()> {
    let cpu = Device::Cpu;
    let (gc, gg) = upload_both(c, csr, gpu)?;
    let x = c.randn((csr.n_cols(), k))?;
    let vals: Vec<f32> = {
        let mut r = Xoshiro256PlusPlus::seed_from_u64(seed ^ c.run_seed);
        (0..csr.nnz()).map(|_| r.random_range(-1.0..1.0)).collect()
    };
    let v = Tensor::from_vec(vals, csr.nnz(), &cpu)?;
    let w = c.randn((csr.n_rows(), k))?;
    // Sums are checked element by element against an f64 CPU run, within the rounding bound
    // of the GPU's summation tree (`sum_bound`): the GPU adds long rows in 1,024-edge groups
    // (the row schedule), and at K = 1 a 50 K-edge row sums to ~sqrt(50 K) from terms whose
    // magnitudes add to ~40 K, so a bound relative to the largest output (1e-5 before) held
    // by luck (seed 14 missed at 1.5e-5). Max/min forward stay exact in f32 (same edge, same
    // f32 product).
    let (deg_rows, deg_cols) = max_degrees(csr);
    let (xa, va, wa) = (x.abs()?, v.abs()?, w.abs()?);
    for reduce in [Reduce::Sum, Reduce::Mean, Reduce::Max, Reduce::Min] {
        let exact = matches!(reduce, Reduce::Max | Reduce::Min);
        let ref_dt = if exact { DType::F32 } else { DType::F64 };
        // Max/min backward is refused in deterministic mode (it needs scatter atomics).
        let backward = backward && !(exact && c.policy.deterministic);
        for weighted in [false, true] {
            let tag =
                format!("{reduce:?}{}", if weighted { " weighted" } else { "" }).to_lowercase();
            // The same run on |x|, |values|, |w| in f64: the magnitudes each output sums.
            // Max/min sum a subset of the sum's terms, so the sum's magnitudes bound them.
            let abs_reduce = if reduce == Reduce::Mean {
                Reduce::Mean
            } else {
                Reduce::Sum
            };
            let (abs_out, abs_grads) = spmm_run(
                &cpu,
                &gc,
                &xa,
                &va,
                &wa,
                abs_reduce,
                weighted,
                DType::F64,
                backward,
            )?;
            let abs_out = &abs_out;
            let fwd = |c: &mut Checker, op: String, og: &Tensor, oc: &Tensor| -> Result<()> {
                if exact {
                    c.check(name, op, k, og, oc, 0.0)
                } else {
                    let lim = sum_bound(abs_out, sum_depth(deg_rows, c.grouped()))?;
                    c.check_within(name, op, k, og, oc, &lim)
                }
            };
            let (oc, _) = spmm_run(&cpu, &gc, &x, &v, &w, reduce, weighted, ref_dt, false)?;
            let (og, _) = spmm_run(gpu, &gg, &x, &v, &w, reduce, weighted, ref_dt, false)?;
            fwd(c, format!("{tag} fwd"), &og, &oc)?;
            if backward {
                let (oc2, gcpu) = spmm_run(&cpu, &gc, &x, &v, &w, reduce, weighted, ref_dt, true)?;
                let (og2, ggpu) = spmm_run(gpu, &gg, &x, &v, &w, reduce, weighted, ref_dt, true)?;
                fwd(c, format!("{tag} fwd (argmax path)"), &og2, &oc2)?;
                let ((dxc, dvc), (dxg, dvg)) = (
                    gcpu.ok_or_else(|| missing("cpu grads"))?,
                    ggpu.ok_or_else(|| missing("gpu grads"))?,
                );
                // dx: transposed sums (sum/mean) or argmax scatter atomics (max/min) over a
                // column's edges; dvalues: K-term dot products.
                let (abs_dx, abs_dv) = abs_grads.as_ref().ok_or_else(|| missing("abs grads"))?;
                let lim = sum_bound(abs_dx, sum_depth(deg_cols, !exact && c.grouped()))?;
                c.check_within(name, format!("{tag} bwd dx"), k, &dxg, &dxc, &lim)?;
                if weighted {
                    let lim = sum_bound(abs_dv, k as f64 + 2.0)?;
                    c.check_within(name, format!("{tag} bwd dvalues"), k, &dvg, &dvc, &lim)?;
                }
            }
        }
    }
    // Half precision is a CUDA path (the CPU kernels refuse it, tested in tests/spmm.rs).
    if gpu.is_cuda() {
        check_spmm_half(c, name, csr, k, gpu, &x, &v, &w, (&gc, &gg))?;
        check_spmm_half_extreme(c, name, csr, k, gpu, (&x, &v, &w), (&gc, &gg))?;
    }
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
            let vals = if weighted { Some(&v) } else { None };
            let oc = spmm_sampled(&gc, &x, vals, reduce, sampling)?;
            let og = spmm_sampled(
                &gg,
                &xg,
                if weighted { Some(&vg) } else { None },
                reduce,
                sampling,
            )?;
            let lim = sampled_bound(&gc, &x, vals, reduce, sampling)?;
            c.check_within(
                name,
                format!("sampled {sampling:?} {reduce:?}").to_lowercase(),
                k,
                &og,
                &oc,
                &lim,
            )?;
            if gpu.is_cuda() {
                check_sampled_half(c, name, k, (&gc, &gg), (&x, &v), weighted, reduce, sampling)?;
            }
        }
    }
    if backward {
        // SDDMM and its gradients.
        let a = c.randn((csr.n_rows(), k))?;
        let sd = |dev: &Device,
                  g: &DeviceGraph,
                  a: &Tensor,
                  b: &Tensor,
                  v: &Tensor|
         -> Result<(Tensor, Tensor, Tensor)> {
            let av = Var::from_tensor(&put(a, dev, DType::F64)?)?;
            let bv = Var::from_tensor(&put(b, dev, DType::F64)?)?;
            let e = sddmm(g, av.as_tensor(), bv.as_tensor())?;
            let gr = (&e * put(v, dev, DType::F64)?)?.sum_all()?.backward()?;
            Ok((
                e,
                gr.get(av.as_tensor()).ok_or_else(|| missing("da"))?.clone(),
                gr.get(bv.as_tensor()).ok_or_else(|| missing("db"))?.clone(),
            ))
        };
        let (ec, dac, dbc) = sd(&cpu, &gc, &a, &x, &v)?;
        let (eg, dag, dbg) = sd(gpu, &gg, &a, &x, &v)?;
        // Elementwise summation bounds, as for the SpMM sums: the forward is K-term dot
        // products; dA = S B and dB = S^T A are row-scheduled SpMMs.
        let (ea, daa, dba) = sd(&cpu, &gc, &a.abs()?, &xa, &va)?;
        let lim = sum_bound(&ea, sum_depth(k, false))?;
        c.check_within(name, "sddmm fwd".into(), k, &eg, &ec, &lim)?;
        let lim = sum_bound(&daa, sum_depth(deg_rows, c.grouped()))?;
        c.check_within(name, "sddmm bwd da".into(), k, &dag, &dac, &lim)?;
        let lim = sum_bound(&dba, sum_depth(deg_cols, c.grouped()))?;
        c.check_within(name, "sddmm bwd db".into(), k, &dbg, &dbc, &lim)?;
    }
    Ok(())
}

/// The GPU's MaxK selection `xg` against the CPU's `xc`: kept values and their columns, exact.
fn check_selection(
    c: &mut Checker,
    name: &str,
    tag: &str,
    d: usize,
    xg: &Cbsr,
    xc: &Cbsr,
) -> Result<()> {
    c.check(
        name,
        format!("{tag} select"),
        d,
        &xg.to_dense()?,
        &xc.to_dense()?,
        0.0,
    )?;
    c.check(
        name,
        format!("{tag} index"),
        d,
        &xg.index().to_device(&Device::Cpu)?,
        xc.index(),
        0.0,
    )
}

/// MaxK on GPU vs CPU (indices and values exact), SpGEMM / SSpMM (atomics: 1e-5) and the
/// gradient of `sum(w * spgemm(maxk(h)))` with respect to `h`.
fn check_maxk(
    c: &mut Checker,
    name: &str,
    csr: &Csr,
    d: usize,
    k: usize,
    gpu: &Device,
    seed: u64,
) -> Result<()> {
    let cpu = Device::Cpu;
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed ^ c.run_seed);
    // Half the rows from 9 distinct values (ties everywhere), half continuous.
    let hv: Vec<f32> = (0..csr.n_cols() * d)
        .map(|i| {
            if (i / d) & 1 == 0 {
                r.random_range(-4..5) as f32 * 0.25
            } else {
                r.random_range(-1.0..1.0)
            }
        })
        .collect();
    let h = Tensor::from_vec(hv, (csr.n_cols(), d), &cpu)?;
    let w = c.randn((csr.n_rows(), d))?;
    let vals = c.randn(csr.nnz())?;
    let (gc, gg) = upload_both(c, csr, gpu)?;
    let xc = maxk(&h, k)?;
    let xg = maxk(&h.to_device(gpu)?, k)?;
    let tag = format!("maxk d={d} k={k}");
    check_selection(c, name, &tag, d, &xg, &xc)?;
    // Sums against an f64 CPU run, as in `check_spmm` (the selection above stays f32: its
    // values convert exactly, so f64 selects the same entries).
    let x64 = xc.with_data(xc.data().to_dtype(DType::F64)?)?;
    let (v64, vgpu) = (vals.to_dtype(DType::F64)?, vals.to_device(gpu)?);
    let (w64, wgpu) = (w.to_dtype(DType::F64)?, w.to_device(gpu)?);
    for (reduce, weighted) in [(Reduce::Sum, true), (Reduce::Mean, false)] {
        let (vc, vg) = if weighted {
            (Some(&v64), Some(&vgpu))
        } else {
            (None, None)
        };
        let oc = spgemm(&gc, &x64, vc, reduce)?;
        let og = spgemm(&gg, &xg, vg, reduce)?;
        let r = format!("{reduce:?}").to_lowercase();
        c.check(name, format!("{tag} spgemm {r}"), d, &og, &oc, 1e-5)?;
        let sc = sspmm(&gc, &w64, &xc, vc, reduce)?;
        let sg = sspmm(&gg, &wgpu, &xg, vg, reduce)?;
        c.check(name, format!("{tag} sspmm {r}"), d, &sg, &sc, 1e-5)?;
    }
    let grad = |dev: &Device, g: &DeviceGraph| -> Result<Tensor> {
        let hv = Var::from_tensor(&put(&h, dev, DType::F64)?)?;
        let y = spgemm(g, &maxk(hv.as_tensor(), k)?, None, Reduce::Mean)?;
        let gr = (y * put(&w, dev, DType::F64)?)?.sum_all()?.backward()?;
        Ok(gr.get(hv.as_tensor()).ok_or_else(|| missing("dh"))?.clone())
    };
    let (dc, dg) = (grad(&cpu, &gc)?, grad(gpu, &gg)?);
    c.check(name, format!("{tag} grad dh"), d, &dg, &dc, 1e-5)?;
    // The fused bias (GCN's MaxK layer): output and both gradients.
    let bias = c.randn(d)?;
    let with_bias = |dev: &Device, g: &DeviceGraph| -> Result<(Tensor, Tensor, Tensor)> {
        let hv = Var::from_tensor(&put(&h, dev, DType::F64)?)?;
        let bv = Var::from_tensor(&put(&bias, dev, DType::F64)?)?;
        let v = put(&vals, dev, DType::F64)?;
        let y = spgemm_bias(
            g,
            &maxk(hv.as_tensor(), k)?,
            Some(&v),
            Reduce::Sum,
            Some(bv.as_tensor()),
        )?;
        let gr = (&y * put(&w, dev, DType::F64)?)?.sum_all()?.backward()?;
        let dh = gr.get(hv.as_tensor()).ok_or_else(|| missing("dh"))?.clone();
        let db = gr
            .get(bv.as_tensor())
            .ok_or_else(|| missing("dbias"))?
            .unsqueeze(0)?;
        Ok((y, dh, db))
    };
    let ((yc, dhc, dbc), (yg, dhg, dbg)) = (with_bias(&cpu, &gc)?, with_bias(gpu, &gg)?);
    c.check(name, format!("{tag} spgemm+bias"), d, &yg, &yc, 1e-5)?;
    c.check(name, format!("{tag} spgemm+bias dh"), d, &dhg, &dhc, 1e-5)?;
    c.check(
        name,
        format!("{tag} spgemm+bias dbias"),
        d,
        &dbg,
        &dbc,
        1e-5,
    )?;
    // The fused residual (a residual MaxK layer): output and all three gradients.
    let resid = c.randn((csr.n_rows(), d))?;
    let with_residual = |dev: &Device, g: &DeviceGraph| -> Result<[Tensor; 4]> {
        let hv = Var::from_tensor(&put(&h, dev, DType::F64)?)?;
        let bv = Var::from_tensor(&put(&bias, dev, DType::F64)?)?;
        let rv = Var::from_tensor(&put(&resid, dev, DType::F64)?)?;
        let v = put(&vals, dev, DType::F64)?;
        let y = crate::spgemm_bias_residual(
            g,
            &maxk(hv.as_tensor(), k)?,
            Some(&v),
            Reduce::Sum,
            bv.as_tensor(),
            rv.as_tensor(),
        )?;
        let gr = (&y * put(&w, dev, DType::F64)?)?.sum_all()?.backward()?;
        let get = |t: &Tensor, what: &str| -> Result<Tensor> {
            Ok(gr.get(t).ok_or_else(|| missing(what))?.clone())
        };
        let db = get(bv.as_tensor(), "dbias")?.unsqueeze(0)?;
        Ok([
            y,
            get(hv.as_tensor(), "dh")?,
            db,
            get(rv.as_tensor(), "dresidual")?,
        ])
    };
    let (rc, rg) = (with_residual(&cpu, &gc)?, with_residual(gpu, &gg)?);
    for (i, what) in ["", " dh", " dbias", " dresidual"].into_iter().enumerate() {
        c.check(
            name,
            format!("{tag} spgemm+bias+residual{what}"),
            d,
            &rg[i],
            &rc[i],
            1e-5,
        )?;
    }
    if gpu.is_cuda() {
        check_maxk_half(c, name, csr, d, k, gpu, (&h, &w, &vals), (&gc, &gg))?;
    }
    Ok(())
}

/// Half-precision MaxK (`--precision bf16/f16`): the selection on bf16 / f16 rows against the
/// f32 CPU selection of the same rounded values (exact: rounding keeps the order, and equal
/// halves are equal floats, so ties break alike), then the SpGEMM with fused bias, the SSpMM
/// and the gradients with respect to `h` and the bias against an f64 CPU run on the rounded
/// inputs, element by element within the fp32 summation bound plus the output's narrowing
/// (as [`check_spmm_half`]). Edge values stay f32, as the models pass them.
#[allow(clippy::too_many_arguments)]
fn check_maxk_half(
    c: &mut Checker,
    name: &str,
    csr: &Csr,
    d: usize,
    k: usize,
    gpu: &Device,
    (h, w, vals): (&Tensor, &Tensor, &Tensor),
    (gc, gg): (&DeviceGraph, &DeviceGraph),
) -> Result<()> {
    let (deg_rows, deg_cols) = max_degrees(csr);
    let bias = c.randn(d)?;
    for st in HALF_STORAGE {
        let dt = st.dtype;
        let tag = format!("maxk {dt:?} d={d} k={k}").to_lowercase();
        let round = |t: &Tensor| -> Result<Tensor> { Ok(st.round(t)?.to_dtype(DType::F32)?) };
        let (hr, wr, br) = (round(h)?, round(w)?, round(&bias)?);
        let xc = maxk(&hr, k)?;
        let xg = maxk(&h.to_dtype(dt)?.to_device(gpu)?, k)?;
        if xg.data().dtype() != dt {
            return Err(missing(&format!(
                "{tag}: CBSR data is {:?}",
                xg.data().dtype()
            )));
        }
        check_selection(c, name, &tag, d, &xg, &xc)?;
        let f64_of = |t: &Tensor| t.to_dtype(DType::F64);
        let v64 = f64_of(vals)?;
        // CPU reference in f64 on the rounded inputs; `abs`: the same pattern (selected from
        // the signed values) with every operand's magnitude, for the bounds. The gradient is
        // taken with respect to the CBSR data and scattered, which equals the gradient with
        // respect to `h` (MaxK's backward is that scatter).
        let reference = |abs: bool| -> Result<(Tensor, Tensor, Tensor)> {
            let m = |t: Tensor| -> Result<Tensor> { Ok(if abs { t.abs()? } else { t }) };
            let x = maxk(&f64_of(&hr)?, k)?;
            let dv = Var::from_tensor(&m(x.data().clone())?)?;
            let bv = Var::from_tensor(&m(f64_of(&br)?)?)?;
            let y = spgemm_bias(
                gc,
                &x.with_data(dv.as_tensor().clone())?,
                Some(&m(v64.clone())?),
                Reduce::Sum,
                Some(bv.as_tensor()),
            )?;
            let gr = (&y * m(f64_of(&wr)?)?)?.sum_all()?.backward()?;
            let dd = gr
                .get(dv.as_tensor())
                .ok_or_else(|| missing("ddata"))?
                .clone();
            let db = gr
                .get(bv.as_tensor())
                .ok_or_else(|| missing("dbias"))?
                .clone();
            Ok((y, x.with_data(dd)?.to_dense()?, db.unsqueeze(0)?))
        };
        let ((yc, dhc, dbc), (ya, dha, dba)) = (reference(false)?, reference(true)?);
        let hv = Var::from_tensor(&h.to_dtype(dt)?.to_device(gpu)?)?;
        let bv = Var::from_tensor(&bias.to_dtype(dt)?.to_device(gpu)?)?;
        let y = spgemm_bias(
            gg,
            &maxk(hv.as_tensor(), k)?,
            Some(&vals.to_device(gpu)?),
            Reduce::Sum,
            Some(bv.as_tensor()),
        )?;
        if y.dtype() != dt {
            return Err(missing(&format!("{tag}: SpGEMM output is {:?}", y.dtype())));
        }
        let gr = (&y * w.to_dtype(dt)?.to_device(gpu)?)?
            .sum_all()?
            .backward()?;
        let dhg = gr
            .get(hv.as_tensor())
            .ok_or_else(|| missing("half dh"))?
            .clone();
        let dbg = gr
            .get(bv.as_tensor())
            .ok_or_else(|| missing("half dbias"))?
            .unsqueeze(0)?;
        let lim = (sum_bound(&ya, sum_depth(deg_rows + 1, c.grouped()))? + st.narrowing(&ya)?)?;
        c.check_within(name, format!("{tag} spgemm+bias"), d, &y, &yc, &lim)?;
        // dh: the SSpMM (atomics, any order) then the exact scatter.
        let lim = (sum_bound(&dha, sum_depth(deg_cols, false))? + st.narrowing(&dha)?)?;
        c.check_within(name, format!("{tag} spgemm+bias dh"), d, &dhg, &dhc, &lim)?;
        let lim = (sum_bound(&dba, sum_depth(csr.n_rows(), false))? + st.narrowing(&dba)?)?;
        c.check_within(
            name,
            format!("{tag} spgemm+bias dbias"),
            d,
            &dbg,
            &dbc,
            &lim,
        )?;
        // The mean SSpMM alone (1/deg applied to the gradient row in f32).
        let wg = w.to_dtype(dt)?.to_device(gpu)?;
        let sg = sspmm(gg, &wg, &xg, None, Reduce::Mean)?;
        let sc = sspmm(gc, &f64_of(&wr)?, &xc, None, Reduce::Mean)?;
        let sa = sspmm(gc, &f64_of(&wr)?.abs()?, &xc, None, Reduce::Mean)?;
        let lim = (sum_bound(&sa, sum_depth(deg_cols, false))? + st.narrowing(&sa)?)?;
        c.check_within(name, format!("{tag} sspmm mean"), d, &sg, &sc, &lim)?;
    }
    Ok(())
}

/// Runs the whole suite on `gpu` (seeded by `c`): SpMM sum/mean/max/min forward and backward,
/// sampled SpMM, SDDMM, the dense matmul, MaxK selection/SpGEMM/SSpMM, dropout,
/// dequantisation, and (when `reddit_scale > 0`) the Reddit-shaped graph generated from
/// `seed` at that scale.
pub fn run(c: &mut Checker, gpu: &Device, reddit_scale: f64, seed: u64) -> Result<()> {
    println!(
        "{:<22} {:<34} {:>5} {:>11} {:>8}  result",
        "graph", "op", "K", "rel err", "bound"
    );
    let g1 = random_graph(c, 3000, 2500, 8, 50_000, 1)?;
    let g2 = random_graph(c, 700, 900, 3, 0, 2)?;
    for (i, k) in [1usize, 7, 16, 32, 33, 64, 100, 128, 256, 602]
        .into_iter()
        .enumerate()
    {
        check_spmm(c, "random+50K-row", &g1, k, gpu, 10 + i as u64, true)?;
        check_spmm(c, "random-rect", &g2, k, gpu, 20 + i as u64, k <= 128)?;
    }
    // GE-SpMM's row kernel over column-blocked schedules (the built-in block is 2^18
    // columns, wider than these graphs, so narrow blocks are forced): f32 and half, sum and
    // mean, forward and backward (the transpose is blocked too). Blocking needs sorted rows.
    if gpu.is_cuda() && !c.policy.deterministic {
        let sorted = |g: &Csr| {
            let mut g = g.clone();
            g.sort_rows();
            g
        };
        let (s1, s2) = (sorted(&g1), sorted(&g2));
        for block in [7usize, 300] {
            for g in [&s1, &s2] {
                let blocked = crate::schedule::ColumnBlockedSchedule::build(
                    g.indptr(),
                    g.indices(),
                    g.n_cols(),
                    block,
                    crate::schedule::CHUNK,
                );
                if blocked.is_none_or(|b| b.len() <= g.n_rows()) {
                    return Err(missing("a column-blocked schedule of the sorted graph"));
                }
            }
            // GE-SpMM's row kernel over blocks of `block` columns (check_spmm_half's sweep
            // forces each kernel in turn under the same blocks).
            let base = c.policy;
            c.policy = base
                .with_spmm(SpmmKernel::Ge)
                .with_column_block(ColumnBlock::Fixed(block));
            let r = (|| -> Result<()> {
                for (i, k) in [1usize, 33, 128, 256].into_iter().enumerate() {
                    let name = format!("random+50K-row blk{block}");
                    check_spmm(c, &name, &s1, k, gpu, 40 + i as u64, true)?;
                    let name = format!("random-rect blk{block}");
                    check_spmm(c, &name, &s2, k, gpu, 50 + i as u64, true)?;
                }
                Ok(())
            })();
            c.policy = base;
            r?;
        }
    }
    // matmul_nt (the linear layers' product)
    for k in [41usize, 128, 602] {
        let x = c.randn((1000, k))?;
        let w = c.randn((64, k))?;
        let run = |dev: &Device| -> Result<(Tensor, Tensor)> {
            let wv = Var::from_tensor(&w.to_device(dev)?)?;
            let y = matmul_nt(&x.to_device(dev)?, wv.as_tensor())?;
            let g = y.sqr()?.sum_all()?.backward()?;
            Ok((
                y,
                g.get(wv.as_tensor()).ok_or_else(|| missing("dw"))?.clone(),
            ))
        };
        let ((yc, dwc), (yg, dwg)) = (run(&Device::Cpu)?, run(gpu)?);
        c.check("dense", "matmul_nt fwd".into(), k, &yg, &yc, 1e-5)?;
        c.check("dense", "matmul_nt bwd dw".into(), k, &dwg, &dwc, 1e-5)?;
    }
    // MaxK-GNN: selection (exact, ties included), CBSR SpGEMM/SSpMM and the gradient chain.
    for (gname, csr) in [("random+50K-row", &g1), ("random-rect", &g2)] {
        for (d, k) in [
            (16usize, 1usize),
            (40, 7),
            (256, 32),
            (256, 33),
            (256, 256),
            (300, 17),
            (1024, 64),
        ] {
            check_maxk(c, gname, csr, d, k, gpu, (d * 7 + k) as u64)?;
        }
    }
    // Dropout: the mask is a hash of (seed, index) on both devices, so outputs are identical.
    for (rows, cols, p) in [
        (1usize, 1usize, 0.5f32),
        (333, 7, 0.1),
        (4096, 602, 0.5),
        (1000, 128, 0.9),
    ] {
        let x = c.randn((rows, cols))?;
        let yc = dropout(&x, p, 17 + rows as u64)?;
        let yg = dropout(&x.to_device(gpu)?, p, 17 + rows as u64)?;
        c.check(
            "dense",
            format!("dropout {rows}x{cols} p={p}"),
            cols,
            &yg,
            &yc,
            0.0,
        )?;
    }
    // Half-precision dropout: the same mask, the scale applied in fp32 and narrowed once, so
    // the result equals the f32 CPU run on the rounded input, narrowed (exact).
    if gpu.is_cuda() {
        for dt in [DType::BF16, DType::F16] {
            let x = c.randn((1000, 128))?.to_dtype(dt)?;
            let yc = dropout(&x.to_dtype(DType::F32)?, 0.5, 5)?.to_dtype(dt)?;
            let yg = dropout(&x.to_device(gpu)?, 0.5, 5)?;
            c.check(
                "dense",
                format!("dropout {dt:?} 1000x128"),
                128,
                &yg,
                &yc,
                0.0,
            )?;
        }
    }
    // Fused ReLU + dropout, and with a bias: forward and dx identical to the CPU (same mask,
    // the sum, one product and one narrowing each way; half types against the f32 CPU run on
    // the rounded inputs, narrowed); db, a column sum through a GEMM row, within its
    // summation and narrowing error.
    let mut dts = vec![DType::F32];
    if gpu.is_cuda() {
        dts.extend([DType::BF16, DType::F16]);
    }
    for dt in dts {
        for (rows, cols, p) in [(1usize, 1usize, 0.5f32), (1000, 128, 0.5), (333, 41, 0.0)] {
            let x = c.randn((rows, cols))?.to_dtype(dt)?;
            let b = c.randn(cols)?.to_dtype(dt)?;
            let dy = c.randn((rows, cols))?.to_dtype(dt)?;
            // (y, dx, db) on `dev`; with `b`, the bias op (mask seed 29), else plain (23).
            let run = |dev: &Device, x: &Tensor, b: Option<&Tensor>, dy: &Tensor| {
                let xv = Var::from_tensor(&x.to_device(dev)?)?;
                let bv = b
                    .map(|b| Var::from_tensor(&b.to_device(dev)?))
                    .transpose()?;
                let y = match &bv {
                    Some(bv) => crate::bias_relu_dropout(xv.as_tensor(), bv.as_tensor(), p, 29)?,
                    None => crate::relu_dropout(xv.as_tensor(), p, 23)?,
                };
                let g = (&y * dy.to_device(dev)?)?.sum_all()?.backward()?;
                let dx = g
                    .get(xv.as_tensor())
                    .ok_or_else(|| missing("no dx"))?
                    .clone();
                let db = match &bv {
                    Some(bv) => Some(
                        g.get(bv.as_tensor())
                            .ok_or_else(|| missing("no db"))?
                            .clone(),
                    ),
                    None => None,
                };
                Ok::<_, crate::Error>((y, dx, db))
            };
            let f32_of = |t: &Tensor| t.to_dtype(DType::F32);
            let (xc, bc, dyc) = (f32_of(&x)?, f32_of(&b)?, f32_of(&dy)?);
            for (op, dx_tag, with_bias) in [
                ("relu_dropout", "bwd", false),
                ("bias_relu_dropout", "dx", true),
            ] {
                let (yc, dxc, dbc) = run(&Device::Cpu, &xc, with_bias.then_some(&bc), &dyc)?;
                let (yg, dxg, dbg) = run(gpu, &x, with_bias.then_some(&b), &dy)?;
                let tag = format!("{op} {dt:?} {rows}x{cols} p={p}");
                c.check(
                    "dense",
                    format!("{tag} fwd"),
                    cols,
                    &yg,
                    &yc.to_dtype(dt)?,
                    0.0,
                )?;
                c.check(
                    "dense",
                    format!("{tag} {dx_tag}"),
                    cols,
                    &dxg,
                    &dxc.to_dtype(dt)?,
                    0.0,
                )?;
                if let (Some(dbg), Some(dbc)) = (dbg, dbc) {
                    let tol = match dt {
                        DType::BF16 => 1e-2,
                        DType::F16 => 2e-3,
                        _ => 1e-5,
                    };
                    c.check(
                        "dense",
                        format!("{tag} db"),
                        cols,
                        &dbg,
                        &dbc.to_dtype(dt)?,
                        tol,
                    )?;
                }
            }
        }
    }
    check_linear_bias_relu_dropout(c, gpu)?;
    check_layer_norm(c, gpu)?;
    // Fused masked cross-entropy: loss and logits gradient against an f64 CPU run (on the
    // rounded logits for bf16 / f16). C = 1, 7, 41, 100; every fifth row out of the split.
    for (n, classes) in [(1usize, 1usize), (333, 7), (4096, 41), (1000, 100)] {
        let x = (c.randn((n, classes))? * 3.0)?;
        let y: Vec<u32> = (0..n).map(|i| ((i * 31 + 7) % classes) as u32).collect();
        let w: Vec<f32> = (0..n)
            .map(|i| if i % 5 == 4 { 0.0 } else { 1.0 / n as f32 })
            .collect();
        let mut dts = vec![(DType::F32, 1e-5, 1e-5)];
        if gpu.is_cuda() {
            dts.extend([(DType::BF16, 1e-5, 8e-3), (DType::F16, 1e-5, 1e-3)]);
        }
        for (dt, loss_bound, grad_bound) in dts {
            let xr = x.to_dtype(dt)?.to_dtype(DType::F64)?;
            let run = |dev: &Device, x: &Tensor| -> Result<(Tensor, Tensor)> {
                let xv = Var::from_tensor(&x.to_device(dev)?)?;
                let l = masked_cross_entropy(
                    xv.as_tensor(),
                    &Tensor::from_vec(y.clone(), n, dev)?,
                    &Tensor::from_vec(w.clone(), n, dev)?,
                )?;
                let g = l.backward()?;
                let dx = g.get(xv.as_tensor()).ok_or_else(|| missing("no xent dx"))?;
                Ok((l.reshape(1)?, dx.clone()))
            };
            let (lc, gc) = run(&Device::Cpu, &xr)?;
            let (lg, gg) = run(gpu, &x.to_dtype(dt)?)?;
            let tag = format!("masked xent {dt:?} {n}x{classes}").to_lowercase();
            c.check(
                "dense",
                format!("{tag} loss"),
                classes,
                &lg,
                &lc,
                loss_bound,
            )?;
            c.check("dense", format!("{tag} dx"), classes, &gg, &gc, grad_bound)?;
        }
    }
    // Fused Adam / AdamW: three steps on both devices from the same start and gradients
    // (the GPU contracts multiply-adds into FMAs, so a few ulps apart).
    for (kind, (l2, keep)) in [("adam", (5e-4, 1.0)), ("adamw", (0.0, 1.0 - 0.01 * 5e-4))] {
        for dims in [vec![1usize], vec![41, 128], vec![128, 602]] {
            let n: usize = dims.iter().product();
            let theta0 = c.randn(dims.as_slice())?;
            let grads: Vec<Tensor> = (0..3)
                .map(|_| c.randn(dims.as_slice()))
                .collect::<Result<_>>()?;
            let run = |dev: &Device| -> Result<(Tensor, Tensor)> {
                let theta = theta0.to_device(dev)?.copy()?;
                let mv = Tensor::zeros((2, n), DType::F32, dev)?;
                for (t, g) in grads.iter().enumerate() {
                    let step = crate::AdamStep {
                        lr: 0.01,
                        beta1: 0.9,
                        beta2: 0.999,
                        eps: 1e-8,
                        bc1: 1.0 - 0.9f64.powi(t as i32 + 1),
                        bc2: 1.0 - 0.999f64.powi(t as i32 + 1),
                        l2,
                        keep,
                    };
                    crate::adam_step(&theta, &mv, &g.to_device(dev)?, &step)?;
                }
                Ok((theta, mv))
            };
            let ((tc, mc), (tg, mg)) = (run(&Device::Cpu)?, run(gpu)?);
            c.check("dense", format!("{kind} step theta"), n, &tg, &tc, 1e-6)?;
            c.check("dense", format!("{kind} step moments"), n, &mg, &mc, 1e-6)?;
        }
    }
    // INT8 dequantisation: identical bits (no FMA on either side).
    for (rows, cols) in [(1usize, 1usize), (333, 7), (1000, 602), (4096, 128)] {
        let x = c.randn((rows, cols))?;
        let q = QuantizedFeatures::quantize(&x.flatten_all()?.to_vec1()?, rows, cols)?;
        let run = |dev: &Device| -> Result<Tensor> {
            dequantize(
                &Tensor::from_vec(q.codes.clone(), (rows, cols), dev)?,
                &Tensor::from_vec(q.scale.clone(), cols, dev)?,
                &Tensor::from_vec(q.min.clone(), cols, dev)?,
            )
        };
        let (yc, yg) = (run(&Device::Cpu)?, run(gpu)?);
        c.check(
            "dense",
            format!("dequantize {rows}x{cols}"),
            cols,
            &yg,
            &yc,
            0.0,
        )?;
    }
    if reddit_scale > 0.0 {
        let spec = SyntheticSpec::reddit().scaled(reddit_scale)?;
        let (ds, rep) = generate(&spec, seed)?;
        println!("{rep}");
        let name = format!("reddit@{}", reddit_scale);
        // GCN-normalised weighted sum at the layer widths, mean and max forward.
        let a = ds.graph.rebuild(gnn_graph::BuildOptions {
            self_loops: gnn_graph::SelfLoops::Add,
            ..Default::default()
        })?;
        let norm = Tensor::from_vec(
            Normalization::GcnSymmetric.edge_values(&a),
            a.nnz(),
            &Device::Cpu,
        )?;
        let (norm64, normg) = (norm.to_dtype(DType::F64)?, norm.to_device(gpu)?);
        check_transpose(c, &name, &a, gpu)?;
        let (gc, gg) = upload_both(c, &a, gpu)?;
        let (deg_rows, _) = max_degrees(&a);
        for k in [41usize, 128] {
            let x = c.randn((a.n_cols(), k))?;
            // Exact sum and mean references in f64, as above; max and sampled stay f32.
            let (x64, xg) = (x.to_dtype(DType::F64)?, x.to_device(gpu)?);
            let oc = spmm_weighted(&gc, &x64, &norm64, Reduce::Sum)?;
            let og = spmm_weighted(&gg, &xg, &normg, Reduce::Sum)?;
            let x64a = x64.abs()?;
            let lim = sum_bound(
                &spmm_weighted(&gc, &x64a, &norm64.abs()?, Reduce::Sum)?,
                sum_depth(deg_rows, c.grouped()),
            )?;
            c.check_within(&name, "gcn-normalised sum fwd".into(), k, &og, &oc, &lim)?;
            for sampling in [
                Sampling::EsBucket { s: 32 },
                Sampling::EsFastRand { s: 32 },
                Sampling::aes(32),
                Sampling::aes(256),
            ] {
                let oc = spmm_sampled(&gc, &x, Some(&norm), Reduce::Sum, sampling)?;
                let og = spmm_sampled(&gg, &xg, Some(&normg), Reduce::Sum, sampling)?;
                let op = format!("sampled {sampling:?} gcn").to_lowercase();
                let lim = sampled_bound(&gc, &x, Some(&norm), Reduce::Sum, sampling)?;
                c.check_within(&name, op, k, &og, &oc, &lim)?;
            }
            for reduce in [Reduce::Mean, Reduce::Max] {
                let xr = if reduce == Reduce::Max { &x } else { &x64 };
                let oc = spmm(&gc, xr, reduce)?;
                let og = spmm(&gg, &xg, reduce)?;
                let op = format!("{reduce:?} fwd").to_lowercase();
                if reduce == Reduce::Max {
                    c.check(&name, op, k, &og, &oc, 0.0)?;
                } else {
                    let lim =
                        sum_bound(&spmm(&gc, &x64a, reduce)?, sum_depth(deg_rows, c.grouped()))?;
                    c.check_within(&name, op, k, &og, &oc, &lim)?;
                }
            }
        }
    }
    // Edge softmax (attention) forward and backward.
    for (gname, csr, scale) in [("random+50K-row", &g1, 4.0), ("random-rect", &g2, 300.0)] {
        check_edge_softmax(c, gname, csr, gpu, scale)?;
        // GAT scores are O(1..10) in practice; at x300 ds_dst (a row sum that cancels to ~0:
        // sum alpha (dalpha - t) = 0 but for the slope) has a bound ~1e8 times its largest
        // value, a check that cannot fail (H100 seed 1,
        // c6f0242:docs/perf/h100-2026-11-24-hp-spmm), so the fused op is checked at x4 and x30.
        check_gat_attention(c, gname, csr, gpu, scale.min(30.0))?;
    }
    // HP-SpMM and GE-SpMM, each forced, against the CPU: sum and mean, edge values or not,
    // forward and dx (the transposed SpMM runs the same kernel), aligned and misaligned x.
    let g3 = random_graph(c, 2000, 2000, 2, 0, 3)?;
    for (i, k) in [1usize, 4, 7, 16, 32, 33, 41, 64, 100, 128, 256, 602]
        .into_iter()
        .enumerate()
    {
        check_hp_spmm(c, "random+50K-row", &g1, k, gpu, i % 2 == 1)?;
        check_hp_spmm(c, "random-rect", &g2, k, gpu, i % 2 == 0)?;
        check_hp_spmm(c, "sparse-empty-rows", &g3, k, gpu, i % 3 == 0)?;
    }
    // The transpose's edge permutation (the device search for symmetric structures, else the
    // host counting sort): symmetric graphs with self loops, empty rows and a hub row, and
    // the unsorted / rectangular / directed ones that must take the host path.
    let sym = |csr: &Csr| {
        csr.rebuild(gnn_graph::BuildOptions {
            symmetrize: true,
            self_loops: gnn_graph::SelfLoops::Add,
            ..Default::default()
        })
    };
    let g4 = random_graph(c, 3000, 3000, 8, 50_000, 4)?;
    let directed = g3.rebuild(gnn_graph::BuildOptions::default())?;
    // Edges among the first 1,000 of 2,000 nodes: rows 1,000.. are empty.
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x7a);
    let (src, dst): (Vec<u32>, Vec<u32>) = (0..6_000)
        .map(|_| (r.random_range(0..1000u32), r.random_range(0..1000u32)))
        .unzip();
    let half_isolated =
        gnn_graph::Coo::new(2000, src, dst)?.to_csr(gnn_graph::BuildOptions::undirected())?;
    for (gname, csr) in [
        ("sym-hub-row", sym(&g4)?),
        ("sym-half-isolated", half_isolated),
        (
            "sym-no-loops",
            g3.rebuild(gnn_graph::BuildOptions::undirected())?,
        ),
        ("unsorted-dup", g3.clone()),
        ("directed-sorted", directed),
        ("random-rect", g2.clone()),
    ] {
        check_transpose(c, gname, &csr, gpu)?;
        if csr.n_rows() == csr.n_cols() && gname.starts_with("sym") {
            check_aggregate_layer(c, gname, &csr, gpu)?;
            check_maxk_layer(c, gname, &csr, gpu)?;
        }
    }
    // HP-SDDMM against the CPU at every partition, and the row kernel; K up to 1024, a start
    // one element into its buffer (no vector loads), the 50 K-edge row.
    for (i, k) in [1usize, 7, 16, 32, 33, 128, 602, 1023, 1024]
        .into_iter()
        .enumerate()
    {
        check_sddmm(c, "random+50K-row", &g1, k, gpu, i % 3 == 1)?;
        check_sddmm(c, "random-rect", &g2, k, gpu, i % 3 == 2)?;
    }
    Ok(())
}

/// [`DeviceGraph::transpose`]'s edge permutation on the device graph against the host
/// counting sort's (exact), and its symmetry verdict against the host's.
/// A hidden layer whose product comes last ([`crate::LinearProduct::bias_relu_dropout`]),
/// input tracked or not: against the composed `bias_relu_dropout(matmul_nt(x, w), b)` on the
/// GPU (the same cuBLAS product and epilogue kernel: `y` and `dx` identical; `dw`, `db` summed
/// in another order, within the dtype's GEMM bound), and in f32 against the CPU (the GEMMs'
/// rounding alone, 1e-5).
/// The fused LayerNorm on the device (f32, bf16, f16 storage; f32 weight and bias) against the
/// CPU op in f64 on the same rounded inputs: `y`, `dx`, `dw`, `db` elementwise. Bounds, with
/// `u` the fp32 unit roundoff, `d` the row width and `n` the rows: the row statistics are
/// d-term fp32 sums, so `xhat` is within `(2d + 16) u (|xhat| + 1)` (the `+ 1` for the mean's
/// error relative to the row's spread, data centred as here); `y` within that times `|w|` plus
/// `(2d + 16) u |b|`; `dx = rstd (g - mean g - xhat mean(g xhat))` within `(4d + 32) u rstd
/// (|g| + mean|g| + (|xhat| + 1) mean(|g| (|xhat| + 1)))`; `dw`, `db` are n-term sums within
/// `(n + 2d + 32) u sum_rows |dy| (|xhat| + 1)`. Half outputs (`y`, `dx`) add their narrowing
/// (two units of the half type on the magnitude, and half f16's subnormal spacing).
fn check_layer_norm(c: &mut Checker, gpu: &Device) -> Result<()> {
    let cpu = Device::Cpu;
    let u = 2f64.powi(-24);
    for (n, d) in [
        (1usize, 1usize),
        (37, 33),
        (1000, 256),
        (300, 602),
        (64, 1024),
        (5000, 64),
    ] {
        let x = (c.randn((n, d))? * 3.0)?;
        let w = (c.randn(d)? + 1.0)?;
        let b = c.randn(d)?;
        let wt = c.randn((n, d))?;
        // Half precision is a CUDA path.
        let halves: &[Storage] = if gpu.is_cuda() { &HALF_STORAGE } else { &[] };
        for st in std::iter::once(&F32_STORAGE).chain(halves) {
            let dt = st.dtype;
            let (xr, wtr) = (st.round(&x)?, st.round(&wt)?);
            let run = |dev: &Device, x: &Tensor, w: &Tensor, b: &Tensor, wt: &Tensor| {
                let (xv, wv, bv) = (
                    Var::from_tensor(&x.to_device(dev)?)?,
                    Var::from_tensor(&w.to_device(dev)?)?,
                    Var::from_tensor(&b.to_device(dev)?)?,
                );
                let y = crate::layer_norm(xv.as_tensor(), wv.as_tensor(), bv.as_tensor(), 1e-5)?;
                let gr = (&y * wt.to_device(dev)?)?.sum_all()?.backward()?;
                let get = |v: &Var| {
                    gr.get(v.as_tensor())
                        .cloned()
                        .ok_or_else(|| missing("layer_norm grad"))
                };
                Ok::<_, crate::Error>([y.clone(), get(&xv)?, get(&wv)?, get(&bv)?])
            };
            let (w64, b64) = (w.to_dtype(DType::F64)?, b.to_dtype(DType::F64)?);
            let want = run(&cpu, &xr, &w64, &b64, &wtr)?;
            let got = run(gpu, &x.to_dtype(dt)?, &w, &b, &wt.to_dtype(dt)?)?;
            // Magnitudes, in f64 on the CPU from the rounded inputs.
            let df = d as f64;
            let mean = (xr.sum_keepdim(1)? / df)?;
            let xc = xr.broadcast_sub(&mean)?;
            let rstd = ((xc.sqr()?.sum_keepdim(1)? / df)? + 1e-5)?
                .sqrt()?
                .recip()?;
            let xh1 = (xc.broadcast_mul(&rstd)?.abs()? + 1.0)?;
            let g = wtr.broadcast_mul(&w64)?.abs()?;
            let fd = 2.0 * df + 16.0;
            let lim_y = ((xh1.broadcast_mul(&w64.abs()?)?.broadcast_add(&b64.abs()?)?) * (fd * u))?;
            let mg = (g.sum_keepdim(1)? / df)?;
            let mgx = ((&g * &xh1)?.sum_keepdim(1)? / df)?;
            let lim_dx = ((g.broadcast_add(&mg)? + xh1.broadcast_mul(&mgx)?)?
                .broadcast_mul(&rstd)?
                * (2.0 * fd * u))?;
            let fp = n as f64 + fd + 16.0;
            let lim_dw = ((wtr.abs()? * &xh1)?.sum(0)? * (fp * u))?;
            let lim_db = (wtr.abs()?.sum(0)? * (fp * u))?;
            let lims = [
                (lim_y + st.narrowing(&want[0].abs()?)?)?,
                (lim_dx + st.narrowing(&want[1].abs()?)?)?,
                lim_dw,
                lim_db,
            ];
            let dtypes = [dt, dt, DType::F32, DType::F32];
            for (j, what) in ["fwd", "bwd dx", "bwd dw", "bwd db"].iter().enumerate() {
                if got[j].dtype() != dtypes[j] {
                    return Err(missing(&format!(
                        "layer_norm {dt:?} {what}: {:?}, expected {:?}",
                        got[j].dtype(),
                        dtypes[j]
                    )));
                }
                let op = format!("layer_norm {dt:?} {what} n={n}").to_lowercase();
                c.check_within("dense", op, d, &got[j], &want[j], &lims[j])?;
            }
        }
    }
    Ok(())
}

fn check_linear_bias_relu_dropout(c: &mut Checker, gpu: &Device) -> Result<()> {
    let mut dts = vec![(DType::F32, 1e-5)];
    if gpu.is_cuda() {
        dts.extend([(DType::BF16, 1e-2), (DType::F16, 2e-3)]);
    }
    for (dt, bound) in dts {
        for (n, i, o, p) in [
            (1000usize, 602usize, 64usize, 0.5f32),
            (333, 41, 33, 0.0),
            (1, 128, 256, 0.5),
        ] {
            let x = c.randn((n, i))?.to_dtype(dt)?;
            let w = (c.randn((o, i))? * 0.1)?.to_dtype(dt)?;
            let b = c.randn(o)?.to_dtype(dt)?;
            let dy = c.randn((n, o))?.to_dtype(dt)?;
            for x_tracks in [true, false] {
                // (y, dx, dw, db), fused or composed, on `dev`.
                let run = |dev: &Device, fused: bool| -> Result<[Option<Tensor>; 4]> {
                    let xv = Var::from_tensor(&x.to_device(dev)?)?;
                    let wv = Var::from_tensor(&w.to_device(dev)?)?;
                    let bv = Var::from_tensor(&b.to_device(dev)?)?;
                    let xt = if x_tracks {
                        xv.as_tensor().clone()
                    } else {
                        xv.as_tensor().detach()
                    };
                    let y = if fused {
                        crate::LinearProduct::new(&xt, wv.as_tensor())?.bias_relu_dropout(
                            bv.as_tensor(),
                            p,
                            31,
                        )?
                    } else {
                        crate::bias_relu_dropout(
                            &matmul_nt(&xt, wv.as_tensor())?,
                            bv.as_tensor(),
                            p,
                            31,
                        )?
                    };
                    let g = (&y * dy.to_device(dev)?)?.sum_all()?.backward()?;
                    let grad = |v: &Var| g.get(v.as_tensor()).cloned();
                    Ok([Some(y.clone()), grad(&xv), grad(&wv), grad(&bv)])
                };
                let fused = run(gpu, true)?;
                let composed = run(gpu, false)?;
                let tag = format!("linear_bias_relu_dropout {dt:?} {n}x{i}->{o} p={p}");
                let tag = if x_tracks {
                    tag
                } else {
                    format!("{tag} x fixed")
                };
                for (k, (name, exact)) in
                    [("fwd", true), ("dx", true), ("dw", false), ("db", false)]
                        .into_iter()
                        .enumerate()
                {
                    match (&fused[k], &composed[k]) {
                        (Some(f), Some(m)) => c.check(
                            "dense",
                            format!("{tag} {name} vs composed"),
                            o,
                            f,
                            m,
                            if exact { 0.0 } else { bound },
                        )?,
                        (None, None) => {}
                        _ => return Err(missing(&format!("{tag} {name}: one side has none"))),
                    }
                }
                if dt == DType::F32 {
                    let cpu = run(&Device::Cpu, true)?;
                    for (k, name) in ["fwd", "dx", "dw", "db"].into_iter().enumerate() {
                        if let (Some(f), Some(r)) = (&fused[k], &cpu[k]) {
                            c.check("dense", format!("{tag} {name}"), o, f, r, 1e-5)?;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// A GCN hidden layer as one op from its input ([`crate::Aggregate`] +
/// [`crate::LinearProduct::of_aggregate`] + the bias/ReLU/dropout epilogue, with or without
/// the residual) against the composed ops on the GPU and, in f32, against the CPU; values and
/// every gradient within the dtype's bound.
fn check_aggregate_layer(c: &mut Checker, gname: &str, csr: &Csr, gpu: &Device) -> Result<()> {
    let mut dts = vec![(DType::F32, 1e-5)];
    if gpu.is_cuda() {
        dts.extend([(DType::BF16, 1e-2), (DType::F16, 2e-3)]);
    }
    let n = csr.n_rows();
    let values = (c.randn(csr.nnz())?.abs()? * 0.1)?;
    for (dt, bound) in dts {
        for (i, o, p, reduce, weighted) in [
            (33usize, 33usize, 0.5f32, Reduce::Sum, true),
            (64, 128, 0.3, Reduce::Mean, false),
            (128, 128, 0.0, Reduce::Mean, true),
        ] {
            let h = c.randn((n, i))?.to_dtype(dt)?;
            let w = (c.randn((o, i))? * 0.1)?.to_dtype(dt)?;
            let b = c.randn(o)?.to_dtype(dt)?;
            let dy = c.randn((n, o))?.to_dtype(dt)?;
            for residual in [false, true] {
                if residual && i != o {
                    continue;
                }
                // (y, dh, dw, db), fused or composed, on `dev`.
                let run =
                    |dev: &Device, fused: bool, policy: KernelPolicy| -> Result<[Tensor; 4]> {
                        let g = DeviceGraph::upload(csr, dev)?.with_policy(policy);
                        let v = values.to_device(dev)?;
                        let v = weighted.then_some(&v);
                        let hv = Var::from_tensor(&h.to_device(dev)?)?;
                        let wv = Var::from_tensor(&w.to_device(dev)?)?;
                        let bv = Var::from_tensor(&b.to_device(dev)?)?;
                        let (ht, wt, bt) = (hv.as_tensor(), wv.as_tensor(), bv.as_tensor());
                        let y = if fused {
                            let z = crate::LinearProduct::of_aggregate(
                                crate::Aggregate::new(&g, ht, v, reduce)?,
                                wt,
                            )?;
                            if residual {
                                z.bias_relu_dropout_residual(bt, p, 41)?
                            } else {
                                z.bias_relu_dropout(bt, p, 41)?
                            }
                        } else {
                            let a = match v {
                                Some(v) => spmm_weighted(&g, ht, v, reduce)?,
                                None => spmm(&g, ht, reduce)?,
                            };
                            let y = crate::bias_relu_dropout(&matmul_nt(&a, wt)?, bt, p, 41)?;
                            if residual {
                                (y + ht)?
                            } else {
                                y
                            }
                        };
                        let grads = (&y * dy.to_device(dev)?)?.sum_all()?.backward()?;
                        let grad = |v: &Var| -> Result<Tensor> {
                            grads
                                .get(v.as_tensor())
                                .cloned()
                                .ok_or_else(|| missing("aggregate layer: a gradient"))
                        };
                        Ok([y.clone(), grad(&hv)?, grad(&wv)?, grad(&bv)?])
                    };
                let tag = format!(
                    "aggregate_layer {dt:?} {i}->{o} {reduce:?}{}{} p={p}",
                    if weighted { " w" } else { "" },
                    if residual { " +res" } else { "" }
                );
                // Deterministic against the composed ops: a SpMM whose atomics added in
                // another order moves `Â h` by an ulp, which flips the ReLU of products near 0
                // and moves `dw`, `db` by whole terms: a run-to-run difference of the kernels,
                // not of the op.
                let rows = ["fwd", "dh", "dw", "db"];
                let layer = FusedLayer {
                    gname,
                    tag: &tag,
                    rows,
                    width: o,
                    dt,
                    bound,
                };
                check_fused_layer(c, gpu, &layer, true, run)?;
            }
        }
    }
    Ok(())
}

/// A MaxK-GNN hidden layer as one op from its input ([`crate::LinearProduct::maxk`], dropout,
/// then [`crate::MaxkProduct::aggregate`], with or without the residual) against the composed
/// ops on the GPU (the same GEMM, so the same selection) and, in f32, against the CPU; values
/// and every gradient within the dtype's bound. Inputs are small multiples of powers of two,
/// so the product is exact on both devices (TF32 included) and both select the same entries,
/// ties broken alike.
fn check_maxk_layer(c: &mut Checker, gname: &str, csr: &Csr, gpu: &Device) -> Result<()> {
    let mut dts = vec![(DType::F32, 1e-5)];
    if gpu.is_cuda() {
        dts.extend([(DType::BF16, 1e-2), (DType::F16, 2e-3)]);
    }
    let n = csr.n_rows();
    let values = (c.randn(csr.nnz())?.abs()? * 0.1)?;
    // Integers in [-2, 2] times `scale`: exact in every dtype here, and their products' sums.
    let grid = |c: &mut Checker, shape: (usize, usize), scale: f64| -> Result<Tensor> {
        Ok(((c.randn(shape)? * 1.2)?.round()?.clamp(-2.0, 2.0)? * scale)?)
    };
    for (dt, bound) in dts {
        for (i, o, k, p, reduce, weighted) in [
            (33usize, 33usize, 5usize, 0.5f32, Reduce::Sum, true),
            (64, 128, 32, 0.3, Reduce::Mean, false),
            (256, 256, 32, 0.2, Reduce::Sum, true),
            (40, 40, 40, 0.0, Reduce::Sum, false),
        ] {
            let x = grid(c, (n, i), 0.5)?.to_dtype(dt)?;
            let w = grid(c, (o, i), 0.25)?.to_dtype(dt)?;
            let b = c.randn(o)?.to_dtype(dt)?;
            let dy = c.randn((n, o))?.to_dtype(dt)?;
            for residual in [false, true] {
                if residual && i != o {
                    continue;
                }
                // (y, dx, dw, db), fused or composed, on `dev`.
                let run =
                    |dev: &Device, fused: bool, policy: KernelPolicy| -> Result<[Tensor; 4]> {
                        let g = DeviceGraph::upload(csr, dev)?.with_policy(policy);
                        let v = values.to_device(dev)?;
                        let v = weighted.then_some(&v);
                        let xv = Var::from_tensor(&x.to_device(dev)?)?;
                        let wv = Var::from_tensor(&w.to_device(dev)?)?;
                        let bv = Var::from_tensor(&b.to_device(dev)?)?;
                        let (xt, wt, bt) = (xv.as_tensor(), wv.as_tensor(), bv.as_tensor());
                        let y = if fused {
                            crate::LinearProduct::new(xt, wt)?
                                .maxk(k)?
                                .dropout(p, 43)?
                                .aggregate(&g, v, reduce, bt, residual)?
                        } else {
                            let m = maxk(&matmul_nt(xt, wt)?, k)?;
                            let m = m.with_data(dropout(m.data(), p, 43)?)?;
                            if residual {
                                crate::spgemm_bias_residual(&g, &m, v, reduce, bt, xt)?
                            } else {
                                spgemm_bias(&g, &m, v, reduce, Some(bt))?
                            }
                        };
                        let grads = (&y * dy.to_device(dev)?)?.sum_all()?.backward()?;
                        let grad = |v: &Var| -> Result<Tensor> {
                            grads
                                .get(v.as_tensor())
                                .cloned()
                                .ok_or_else(|| missing("maxk layer: a gradient"))
                        };
                        Ok([y.clone(), grad(&xv)?, grad(&wv)?, grad(&bv)?])
                    };
                let tag = format!(
                    "maxk_layer {dt:?} {i}->{o} k={k} {reduce:?}{}{} p={p}",
                    if weighted { " w" } else { "" },
                    if residual { " +res" } else { "" }
                );
                // The SpGEMM's and SSpMM's split rows add with float atomics: not bit for bit,
                // but the selection comes before them, so no decision flips.
                let rows = ["fwd", "dx", "dw", "db"];
                let layer = FusedLayer {
                    gname,
                    tag: &tag,
                    rows,
                    width: o,
                    dt,
                    bound,
                };
                check_fused_layer(c, gpu, &layer, false, run)?;
            }
        }
    }
    Ok(())
}

/// One fused layer configuration for [`check_fused_layer`]: the graph's name and the
/// configuration's tag, the names of the four compared tensors (output, input gradient, `dw`,
/// `db`), the output width, the dtype and its bound against the composed ops.
struct FusedLayer<'a> {
    gname: &'a str,
    tag: &'a str,
    rows: [&'a str; 4],
    width: usize,
    dt: DType,
    bound: f64,
}

/// A fused layer op against the composed ops it replaces on the GPU, within the dtype's bound,
/// and in f32 against the CPU (1e-5). `run(device, fused, policy)` gives the output and the
/// three gradients, its graph under `policy`. `deterministic`: the comparison with the
/// composed ops runs under a deterministic policy, without float atomics (for layers where an
/// ulp can flip a decision), and the CPU comparison takes a run under the checker's policy.
fn check_fused_layer(
    c: &mut Checker,
    gpu: &Device,
    l: &FusedLayer<'_>,
    deterministic: bool,
    run: impl Fn(&Device, bool, KernelPolicy) -> Result<[Tensor; 4]>,
) -> Result<()> {
    let exact = c
        .policy
        .with_deterministic(deterministic || c.policy.deterministic);
    let (fused, composed) = (run(gpu, true, exact)?, run(gpu, false, exact)?);
    for (j, name) in l.rows.into_iter().enumerate() {
        let what = format!("{} {name} vs composed", l.tag);
        c.check(l.gname, what, l.width, &fused[j], &composed[j], l.bound)?;
    }
    if l.dt == DType::F32 {
        let fused = if deterministic {
            run(gpu, true, c.policy)?
        } else {
            fused
        };
        let cpu = run(&Device::Cpu, true, c.policy)?;
        for (j, name) in l.rows.into_iter().enumerate() {
            let what = format!("{} {name}", l.tag);
            c.check(l.gname, what, l.width, &fused[j], &cpu[j], 1e-5)?;
        }
    }
    Ok(())
}

fn check_transpose(c: &mut Checker, gname: &str, csr: &Csr, gpu: &Device) -> Result<()> {
    let (_, want) = csr.transpose();
    let want = Tensor::from_vec(want, csr.nnz(), &Device::Cpu)?;
    let g = DeviceGraph::upload(csr, gpu)?;
    let (_, perm) = g.transpose()?;
    c.check(gname, "transpose permutation".into(), 0, &perm, &want, 0.0)?;
    let (dev, host) = (g.is_symmetric()?, csr.is_symmetric());
    let op = format!("transpose is itself: {dev} (host {host})");
    c.record(
        gname,
        op,
        0,
        (dev != host) as u8 as f64,
        0.0,
        dev == host,
        "",
    );
    Ok(())
}

/// A forced SpMM kernel as the check names have always spelled it (`hp(64)`, `ge`, `auto`),
/// so that runs before and after policies compare row by row.
fn kernel_label(kernel: SpmmKernel) -> String {
    match kernel {
        SpmmKernel::Hp(n) => format!("hp({n})"),
        other => other.to_string(),
    }
}

/// Sum/mean SpMM under each CUDA kernel choice (HP-SpMM at the smallest, a middle and the
/// largest partition and DTP's own, GE-SpMM, the dispatcher), with and without edge values,
/// forward and `dx`, against f64 CPU runs within the summation bound of their grouping (any
/// order for HP: a row's partial sums meet through atomics); `offset` starts x one element
/// into its buffer (scalar loads).
fn check_hp_spmm(
    c: &mut Checker,
    name: &str,
    csr: &Csr,
    k: usize,
    gpu: &Device,
    offset: bool,
) -> Result<()> {
    let cpu = Device::Cpu;
    let (gc, gg) = upload_both(c, csr, gpu)?;
    let (n, m, nnz) = (csr.n_rows(), csr.n_cols(), csr.nnz());
    let x = OffsetOperand::new(c, m, k, offset)?;
    let v = c.randn(nnz)?;
    let w = c.randn((n, k))?;
    let (deg_rows, deg_cols) = max_degrees(csr);
    // The CPU has one kernel whatever the policy: one pass there.
    let kernels: &[SpmmKernel] = if gpu.is_cuda() {
        &[
            SpmmKernel::Hp(8),
            SpmmKernel::Hp(64),
            SpmmKernel::Hp(512),
            SpmmKernel::Hp(0),
            SpmmKernel::Ge,
            SpmmKernel::Narrow,
            SpmmKernel::Auto,
        ]
    } else {
        &[SpmmKernel::Auto]
    };
    for reduce in [Reduce::Sum, Reduce::Mean] {
        for weighted in [false, true] {
            let run = |g: &DeviceGraph, x: Tensor, v: &Tensor, w: &Tensor, dt: DType| {
                let dev = g.device();
                let xv = Var::from_tensor(&x)?;
                let out = if weighted {
                    spmm_weighted(g, xv.as_tensor(), &put(v, dev, dt)?, reduce)?
                } else {
                    spmm(g, xv.as_tensor(), reduce)?
                };
                let gr = (&out * put(w, dev, dt)?)?.sum_all()?.backward()?;
                let dx = gr
                    .get(xv.as_tensor())
                    .cloned()
                    .ok_or_else(|| missing("spmm dx"))?;
                Ok::<_, crate::Error>((out, dx))
            };
            let want = run(&gc, x.on(&cpu, DType::F64)?, &v, &w, DType::F64)?;
            let abs = run(
                &gc,
                x.on(&cpu, DType::F64)?.abs()?,
                &v.abs()?,
                &w.abs()?,
                DType::F64,
            )?;
            let lim_out = sum_bound(&abs.0, sum_depth(deg_rows, false))?;
            let lim_dx = sum_bound(&abs.1, sum_depth(deg_cols, false))?;
            for &kernel in kernels {
                let gk = gg.with_policy(gg.policy().with_spmm(kernel));
                let got = run(&gk, x.on(gpu, DType::F32)?, &v, &w, DType::F32)?;
                let tag = format!(
                    "spmm {reduce:?}{} {}{}",
                    if weighted { " weighted" } else { "" },
                    kernel_label(kernel),
                    if offset { " +1" } else { "" }
                )
                .to_lowercase();
                c.check_within(name, format!("{tag} fwd"), k, &got.0, &want.0, &lim_out)?;
                c.check_within(name, format!("{tag} dx"), k, &got.1, &want.1, &lim_dx)?;
            }
        }
    }
    Ok(())
}

/// The edge-scaled SDDMM forward under each CUDA kernel choice (HP at the smallest, middle and
/// largest partition, DTP's own choice, the row kernel) and its three gradients, against f64
/// CPU runs within the summation bounds; `offset` starts `a` one element into its buffer. On
/// a CUDA device also with bf16 / f16 features (`a`, `b`; f32 edge values and f32 result)
/// against the CPU run on the same rounded features: the same fp32 bounds (a product of two
/// halves is exact in fp32), plus the half narrowing for `da` and `db`, which come back in the
/// features' type.
fn check_sddmm(
    c: &mut Checker,
    name: &str,
    csr: &Csr,
    k: usize,
    gpu: &Device,
    offset: bool,
) -> Result<()> {
    let cpu = Device::Cpu;
    let (gc, gg) = upload_both(c, csr, gpu)?;
    let (n, m, nnz) = (csr.n_rows(), csr.n_cols(), csr.nnz());
    let a = OffsetOperand::new(c, n, k, offset)?;
    let b = c.randn((m, k))?;
    let v = c.randn(nnz)?;
    let w = c.randn(nnz)?;
    // `a`, `b` already in their dtype on the run's device; `v`, `w` moved there as they are.
    let run = |g: &DeviceGraph, a: Tensor, b: Tensor, v: &Tensor, w: &Tensor| {
        let dev = a.device().clone();
        let (av, bv, vv) = (
            Var::from_tensor(&a)?,
            Var::from_tensor(&b)?,
            Var::from_tensor(&v.to_device(&dev)?)?,
        );
        let e = crate::sddmm_scaled(g, av.as_tensor(), bv.as_tensor(), vv.as_tensor())?;
        let gr = (&e * w.to_device(&dev)?)?.sum_all()?.backward()?;
        let get = |t: &Var| {
            gr.get(t.as_tensor())
                .cloned()
                .ok_or_else(|| missing("sddmm grad"))
        };
        Ok::<_, crate::Error>([e.clone(), get(&av)?, get(&bv)?, get(&vv)?])
    };
    let (deg_rows, deg_cols) = max_degrees(csr);
    let depths = [
        sum_depth(k, false),
        sum_depth(deg_rows, c.grouped()),
        sum_depth(deg_cols, c.grouped()),
        sum_depth(k, false),
    ];
    let tags = ["fwd", "bwd da", "bwd db", "bwd dvalues"];
    // Half precision is a CUDA path (the CPU kernels refuse it, tested in tests/spmm.rs).
    let halves: &[Storage] = if gpu.is_cuda() { &HALF_STORAGE } else { &[] };
    for st in std::iter::once(&F32_STORAGE).chain(halves) {
        let dt = st.dtype;
        let (ar, br) = (st.round(&a.on(&cpu, DType::F32)?)?, st.round(&b)?);
        let (v64, w64) = (v.to_dtype(DType::F64)?, w.to_dtype(DType::F64)?);
        let want = run(&gc, ar.clone(), br.clone(), &v64, &w64)?;
        // The same on magnitudes (the edge gradients' weights too): what each output sums.
        let abs = run(&gc, ar.abs()?, br.abs()?, &v64.abs()?, &w64.abs()?)?;
        // The CPU has one kernel whatever the policy: one pass there.
        let kernels: &[SddmmKernel] = if gpu.is_cuda() {
            &[
                SddmmKernel::Auto,
                SddmmKernel::Hp(8),
                SddmmKernel::Hp(64),
                SddmmKernel::Hp(512),
                SddmmKernel::Rows,
            ]
        } else {
            &[SddmmKernel::Auto]
        };
        for (i, &kernel) in kernels.iter().enumerate() {
            let gk = gg.with_policy(gg.policy().with_sddmm(kernel));
            let got = run(
                &gk,
                a.on(gpu, DType::F32)?.to_dtype(dt)?,
                b.to_dtype(dt)?.to_device(gpu)?,
                &v,
                &w,
            )?;
            let dtypes = [DType::F32, dt, dt, DType::F32];
            let label = match kernel {
                SddmmKernel::Auto => "auto".to_string(),
                SddmmKernel::Rows => "rows".to_string(),
                SddmmKernel::Hp(n) => format!("hp({n})"),
            };
            let prefix = if dt == DType::F32 {
                String::new()
            } else {
                format!("{dt:?} ").to_lowercase()
            };
            // Every kernel's forward; the backward (SpMMs, not SDDMM kernels) once.
            let checks = if i == 0 { 4 } else { 1 };
            for j in 0..checks {
                if got[j].dtype() != dtypes[j] {
                    return Err(missing(&format!(
                        "sddmm {dt:?} {}: {:?}, expected {:?}",
                        tags[j],
                        got[j].dtype(),
                        dtypes[j]
                    )));
                }
                let mut lim = sum_bound(&abs[j], depths[j])?;
                if dtypes[j] != DType::F32 {
                    lim = (lim + st.narrowing(&abs[j])?)?;
                }
                let op = format!(
                    "sddmm_scaled {prefix}{} {label}{}",
                    tags[j],
                    if offset { " +1" } else { "" }
                );
                c.check_within(name, op, k, &got[j], &want[j], &lim)?;
            }
        }
    }
    Ok(())
}

/// Edge softmax and its backward on the device against f64 CPU runs, element by element: the
/// forward within `2u (deg + 6 + |s_p - m| + span)` of each probability (`m` the row maximum,
/// `span` the row's largest `m - s`: the f32 `s - m` rounds by `u |s - m|`, which `expf`
/// turns into a relative error; the row sum of `deg` exponentials, one `expf` and one
/// division), the backward within `4u (deg + 6 + 2 span) alpha_p (|dalpha_p| + sum_q alpha_q
/// |dalpha_q|)` (the forward's error carried through `alpha (dalpha - t)` plus the row sum
/// `t`'s own). Scores are normal times `scale` (300: exponentials that overflow
/// without the row maximum).
fn check_edge_softmax(
    c: &mut Checker,
    name: &str,
    csr: &Csr,
    gpu: &Device,
    scale: f64,
) -> Result<()> {
    let cpu = Device::Cpu;
    let (gc, gg) = upload_both(c, csr, gpu)?;
    let s = (c.randn(csr.nnz())? * scale)?;
    let d = c.randn(csr.nnz())?;
    let run = |dev: &Device, g: &DeviceGraph, dt: DType| -> Result<(Tensor, Tensor)> {
        let sv = Var::from_tensor(&put(&s, dev, dt)?)?;
        let a = crate::edge_softmax(g, sv.as_tensor())?;
        let gr = (&a * put(&d, dev, dt)?)?.sum_all()?.backward()?;
        let ds = gr
            .get(sv.as_tensor())
            .cloned()
            .ok_or_else(|| missing("edge softmax grad"))?;
        Ok((a, ds))
    };
    let (ac, dsc) = run(&cpu, &gc, DType::F64)?;
    let (ag, dsg) = run(gpu, &gg, DType::F32)?;
    let (a, dv, sv) = (
        ac.to_vec1::<f64>()?,
        d.to_dtype(DType::F64)?.to_vec1::<f64>()?,
        s.to_dtype(DType::F64)?.to_vec1::<f64>()?,
    );
    let u = f32::EPSILON as f64 / 2.0;
    let (mut fwd, mut bwd) = (vec![0f64; a.len()], vec![0f64; a.len()]);
    for i in 0..csr.n_rows() {
        let r = csr.row_range(i);
        let deg = r.len() as f64;
        let m = r.clone().map(|p| sv[p]).fold(f64::NEG_INFINITY, f64::max);
        // f32 `s - m` rounds by u |s - m|, which `exp` turns into a relative error.
        let span = r.clone().map(|p| m - sv[p]).fold(0.0, f64::max);
        let t_abs: f64 = r.clone().map(|p| a[p] * dv[p].abs()).sum();
        for p in r {
            let eps = 2.0 * u * (deg + 6.0 + (m - sv[p]) + span);
            fwd[p] = eps * a[p] + 1e-30;
            bwd[p] =
                2.0 * u * (deg + 6.0 + 2.0 * span) * 2.0 * a[p] * (dv[p].abs() + t_abs) + 1e-30;
        }
    }
    let n = a.len();
    let fwd = Tensor::from_vec(fwd, n, &cpu)?;
    let bwd = Tensor::from_vec(bwd, n, &cpu)?;
    let tag = format!("edge_softmax x{scale}");
    c.check_within(name, format!("{tag} fwd"), 1, &ag, &ac, &fwd)?;
    c.check_within(name, format!("{tag} bwd"), 1, &dsg, &dsc, &bwd)?;
    Ok(())
}

/// The fused GAT attention and its two score gradients on the device against f64 CPU runs,
/// element by element. Per edge the f32 score `LeakyReLU(s_dst + s_src)` and its `- m` carry
/// rounding `u (|s_dst| + |s_src| + |e - m|)`, which `exp` turns into a relative error; with
/// `M` the row's largest such magnitude, alpha is bounded as the edge softmax's,
/// `2u (deg + 6 + 4M) alpha`, and each edge gradient `dz` by
/// `4u (deg + 6 + 4M) alpha (|dalpha| + sum alpha |dalpha|)`; where `z` is within rounding of 0 the slope may differ, so the bound there
/// is the whole `|dz| / slope`. The score gradients sum these bounds plus the summation bound
/// of their row (`ds_dst`) or column (`ds_src`, over the transpose).
fn check_gat_attention(
    c: &mut Checker,
    name: &str,
    csr: &Csr,
    gpu: &Device,
    scale: f64,
) -> Result<()> {
    const SLOPE: f64 = 0.2;
    let cpu = Device::Cpu;
    let (gc, gg) = upload_both(c, csr, gpu)?;
    let (n, m) = (csr.n_rows(), csr.n_cols());
    let sd = (c.randn(n)? * scale)?;
    let ss = (c.randn(m)? * scale)?;
    let d = c.randn(csr.nnz())?;
    let run = |g: &DeviceGraph, dt: DType| -> Result<[Tensor; 3]> {
        let dev = g.device();
        let (a, b) = (
            Var::from_tensor(&put(&sd, dev, dt)?)?,
            Var::from_tensor(&put(&ss, dev, dt)?)?,
        );
        let alpha = crate::gat_attention(g, a.as_tensor(), b.as_tensor(), SLOPE)?;
        let gr = (&alpha * put(&d, dev, dt)?)?.sum_all()?.backward()?;
        let get = |v: &Var| {
            gr.get(v.as_tensor())
                .cloned()
                .ok_or_else(|| missing("gat attention grad"))
        };
        Ok([alpha.clone(), get(&a)?, get(&b)?])
    };
    let want = run(&gc, DType::F64)?;
    let got = run(&gg, DType::F32)?;
    let v = |t: &Tensor| -> Result<Vec<f64>> { Ok(t.to_dtype(DType::F64)?.to_vec1::<f64>()?) };
    let (alpha, dv, sdv, ssv) = (v(&want[0])?, v(&d)?, v(&sd)?, v(&ss)?);
    let u = f32::EPSILON as f64 / 2.0;
    let leaky = |z: f64| if z > 0.0 { z } else { SLOPE * z };
    let nnz = alpha.len();
    let (mut fwd, mut dz_err, mut dz_abs) = (vec![0f64; nnz], vec![0f64; nnz], vec![0f64; nnz]);
    let mut dst_lim = vec![0f64; n];
    for i in 0..n {
        let r = csr.row_range(i);
        let deg = r.len() as f64;
        let cols = &csr.indices()[r.clone()];
        let e: Vec<f64> = cols
            .iter()
            .map(|&j| leaky(sdv[i] + ssv[j as usize]))
            .collect();
        let mx = e.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let big = cols
            .iter()
            .zip(&e)
            .map(|(&j, ep)| sdv[i].abs() + ssv[j as usize].abs() + (ep - mx).abs() + mx.abs())
            .fold(0.0, f64::max);
        let t_abs: f64 = r.clone().map(|p| alpha[p] * dv[p].abs()).sum();
        let t: f64 = r.clone().map(|p| alpha[p] * dv[p]).sum();
        let eps = 2.0 * u * (deg + 6.0 + 4.0 * big);
        for (q, p) in r.enumerate() {
            let z = sdv[i] + ssv[cols[q] as usize];
            fwd[p] = eps * alpha[p] + 1e-30;
            let mag = alpha[p] * (dv[p].abs() + t_abs);
            let dz = alpha[p] * (dv[p] - t);
            dz_abs[p] = mag;
            dz_err[p] = 2.0 * eps * mag
                + if z.abs() <= 4.0 * u * (sdv[i].abs() + ssv[cols[q] as usize].abs()) {
                    dz.abs() / SLOPE
                } else {
                    0.0
                };
            dst_lim[i] += dz_err[p] + 2.0 * u * (deg + 2.0) * mag;
        }
    }
    let (_, deg_cols) = max_degrees(csr);
    let mut src_lim = vec![1e-30f64; m];
    for (p, &j) in csr.indices().iter().enumerate() {
        src_lim[j as usize] += dz_err[p] + 2.0 * u * sum_depth(deg_cols, c.grouped()) * dz_abs[p];
    }
    let tag = format!("gat_attention x{scale}");
    let t = |v: Vec<f64>| -> Result<Tensor> {
        let l = v.len();
        Ok(Tensor::from_vec(
            v.into_iter().map(|x| x + 1e-30).collect::<Vec<_>>(),
            l,
            &cpu,
        )?)
    };
    c.check_within(name, format!("{tag} fwd"), 1, &got[0], &want[0], &t(fwd)?)?;
    c.check_within(
        name,
        format!("{tag} bwd ds_dst"),
        1,
        &got[1],
        &want[1],
        &t(dst_lim)?,
    )?;
    c.check_within(
        name,
        format!("{tag} bwd ds_src"),
        1,
        &got[2],
        &want[2],
        &t(src_lim)?,
    )?;
    Ok(())
}
