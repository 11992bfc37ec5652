//! SpMM: sum/mean/max/min forward and backward, half storage, each CUDA kernel forced,
//! column-blocked schedules, and the Reddit-shaped graph.

use super::*;
use crate::error::Result;
use crate::verify::{
    max_degrees, missing, put, sampled_bound, spmm_run, sum_bound, sum_depth, upload_both, Checker,
    OffsetOperand,
};
use crate::{
    spmm, spmm_sampled, spmm_weighted, ColumnBlock, DeviceGraph, Reduce, Sampling, SpmmKernel,
};
use candle_core::{DType, Device, Tensor, Var};
use gnn_graph::{generate, Csr, Normalization, SyntheticSpec};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Half-precision storage (`--precision bf16/f16`): sum/mean SpMM forward and `dx` backward
/// of bf16 / f16 `x` (fp32 edge values) against an f64 CPU run on the same rounded inputs.
/// Elementwise bound: the fp32 summation bound of [`sum_bound`] (mean's `1/deg` is applied in
/// fp32 in both directions) plus the final narrowing of the output to the half type: one unit
/// roundoff of the terms' magnitudes (doubled as margin) and half the subnormal spacing, the
/// absolute error of a result below the type's smallest normal (f16: 2^-25; bf16 shares f32's
/// exponent range, so its subnormals lie below 1e-38).
#[allow(clippy::too_many_arguments)]
pub(super) fn check_spmm_half(
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
                let tag = half_tag(dt, reduce, weighted);
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
                // The dispatcher's pick, GE-SpMM's row and narrow-row kernels and the row
                // groups (output in the storage type) forced.
                for (ki, kernel) in [
                    SpmmKernel::Auto,
                    SpmmKernel::Ge,
                    SpmmKernel::Narrow,
                    SpmmKernel::Group,
                ]
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
pub(super) fn check_spmm_half_extreme(
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
                let tag = half_tag(dt, reduce, weighted);
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

/// Forward and backward of one op configuration on both devices.
pub(super) fn check_spmm(
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
            let tag = reduce_tag(reduce, weighted);
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
    super::sampled::check_sampled(c, name, k, gpu, (&gc, &gg), (&x, &v))?;
    if backward {
        super::sddmm::check_sddmm_grads(c, name, csr, k, gpu, (&gc, &gg), (&x, &v))?;
    }
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
pub(super) fn check_hp_spmm(
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
            SpmmKernel::Group,
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

/// GE-SpMM's row kernel over column-blocked schedules of `g1` and `g2` (the built-in block is
/// 2^18 columns, wider than these graphs, so narrow blocks are forced): f32 and half, sum and
/// mean, forward and backward (the transpose is blocked too). Blocking needs sorted rows.
pub(super) fn check_column_blocked(
    c: &mut Checker,
    g1: &Csr,
    g2: &Csr,
    gpu: &Device,
) -> Result<()> {
    let sorted = |g: &Csr| {
        let mut g = g.clone();
        g.sort_rows();
        g
    };
    let (s1, s2) = (sorted(g1), sorted(g2));
    for block in [7usize, 300] {
        for g in [&s1, &s2] {
            let blocked = crate::schedule::ColumnBlockedSchedule::build(
                &g.kernel_indptr("the graph")?,
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
    Ok(())
}

/// The Reddit-shaped graph generated from `seed` at `scale`: its transpose, then the
/// GCN-normalised weighted sum, sampled SpMM, mean and max forward at the layer widths.
pub(super) fn check_reddit(c: &mut Checker, gpu: &Device, scale: f64, seed: u64) -> Result<()> {
    let spec = SyntheticSpec::reddit().scaled(scale)?;
    let (ds, rep) = generate(&spec, seed)?;
    println!("{rep}");
    let name = format!("reddit@{}", scale);
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
    super::graph::check_transpose(c, &name, &a, gpu)?;
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
                let lim = sum_bound(&spmm(&gc, &x64a, reduce)?, sum_depth(deg_rows, c.grouped()))?;
                c.check_within(&name, op, k, &og, &oc, &lim)?;
            }
        }
    }
    Ok(())
}

/// A row's label for a reduction, `"sum"` or `"max weighted"`.
fn reduce_tag(reduce: Reduce, weighted: bool) -> String {
    format!("{reduce:?}{}", if weighted { " weighted" } else { "" }).to_lowercase()
}

/// [`reduce_tag`] after a half storage's dtype, `"bf16 mean weighted"`.
fn half_tag(dt: DType, reduce: Reduce, weighted: bool) -> String {
    format!("{dt:?} {}", reduce_tag(reduce, weighted)).to_lowercase()
}

/// A sum or mean with its row epilogue in one call ([`crate::spmm_then`]: row factors, a
/// residual, a bias, narrowing or padding to `cols`) and the transposed form
/// ([`crate::spmm_transposed_then`]), in f32, bf16 and f16 (the half types rounded once from
/// the fp32 accumulation), against an f64 CPU run on the same rounded inputs, element by
/// element within the fp32 summation bound plus one narrowing of the result. Widths: K = 7,
/// 41 (not whole 16-byte steps), 48 -> 41 and 41 -> 48 (GCN's output layer and its backward),
/// 128 with every operand; 48 with the width alone (the bare narrowing); 48 -> 41 with the
/// factor and bias (GCN's output layer), with the residual and bias (GraphSAGE's), and 41 with
/// the residual and bias. The graphs have empty rows and a 50 K-edge row.
pub(super) fn check_spmm_then(
    c: &mut Checker,
    gpu: &Device,
    graphs: [(&str, &Csr); 2],
) -> Result<()> {
    let mut sts = vec![F32_STORAGE];
    if gpu.is_cuda() {
        sts.extend(HALF_STORAGE);
    }
    for (name, csr) in graphs {
        let (gc, gg) = upload_both(c, csr, gpu)?;
        let (deg_rows, deg_cols) = max_degrees(csr);
        let (n, m) = (csr.n_rows(), csr.n_cols());
        // Operands: SCALE | RESIDUAL | BIAS (GCN's: the factor and bias; GraphSAGE's: the
        // residual and bias; none: the bare narrowing).
        const SCALE: u8 = 1;
        const RESIDUAL: u8 = 2;
        const BIAS: u8 = 4;
        const ALL: u8 = SCALE | RESIDUAL | BIAS;
        const SCALE_BIAS: u8 = SCALE | BIAS;
        for (k, cols, ops) in [
            (7usize, 7usize, ALL),
            (41, 41, ALL),
            (48, 41, ALL),
            (41, 48, ALL),
            (128, 128, ALL),
            (48, 48, 0),
            (48, 41, SCALE_BIAS),
            (48, 41, RESIDUAL | BIAS),
            (41, 41, RESIDUAL | BIAS),
        ] {
            let x = c.randn((m, k))?;
            let dy = c.randn((n, k))?;
            let (s_rows, s_cols) = (c.randn(n)?.abs()?, c.randn(m)?.abs()?);
            let (r_rows, r_cols) = (c.randn((n, k))?, c.randn((m, k))?);
            let b = c.randn(cols)?;
            for reduce in [Reduce::Sum, Reduce::Mean] {
                for st in &sts {
                    let dt = st.dtype;
                    let rd = |t: &Tensor| st.round(t);
                    let on = |t: &Tensor| -> Result<Tensor> { Ok(t.to_dtype(dt)?.to_device(gpu)?) };
                    let at = |t: &Tensor| -> Result<Tensor> { Ok(t.to_device(gpu)?) };
                    // (x, s, residual) of one direction, on the CPU in f64 (and |.|) and the GPU.
                    let sides = [
                        ("", rd(&x)?, &s_rows, rd(&r_rows)?, deg_rows),
                        ("transposed ", rd(&dy)?, &s_cols, rd(&r_cols)?, deg_cols),
                    ];
                    for (dir, xin, s, res, deg) in sides {
                        let bh = rd(&b)?;
                        let run = |dev_g: &DeviceGraph,
                                   x: &Tensor,
                                   s: &Tensor,
                                   r: &Tensor,
                                   b: &Tensor|
                         -> Result<Tensor> {
                            let e = crate::Epilogue {
                                scale: (ops & SCALE != 0).then_some(s),
                                residual: (ops & RESIDUAL != 0).then_some(r),
                                bias: (ops & BIAS != 0).then_some(b),
                                cols,
                            };
                            if dir.is_empty() {
                                crate::spmm_then(dev_g, x, reduce, &e)
                            } else {
                                crate::spmm_transposed_then(dev_g, x, reduce, &e)
                            }
                        };
                        let oc = run(&gc, &xin, s, &res, &bh)?;
                        let oa = run(&gc, &xin.abs()?, s, &res.abs()?, &bh.abs()?)?;
                        let og = run(&gg, &on(&xin)?, &at(s)?, &on(&res)?, &on(&bh)?)?;
                        if og.dtype() != dt {
                            return Err(missing(&format!(
                                "spmm_then {dt:?} gave {:?}",
                                og.dtype()
                            )));
                        }
                        let mut lim =
                            (sum_bound(&oa, sum_depth(deg, c.grouped()))? + st.narrowing(&oa)?)?;
                        if !dir.is_empty() && reduce == Reduce::Mean {
                            // One more rounding in the storage type: bf16 scales dy by 1/deg
                            // before the sum (as `spmm_transposed` does), f16 rounds the
                            // transposed mean's result before the epilogue.
                            lim = (lim + st.narrowing(&oa)?)?;
                        }
                        let what = match ops {
                            ALL => "",
                            0 => " width only",
                            SCALE_BIAS => " scale+bias",
                            _ => " residual+bias",
                        };
                        let tag = format!("spmm_then {dir}{reduce:?} {dt:?} {k}->{cols}{what}")
                            .to_lowercase();
                        c.check_within(name, tag, k, &og, &oc, &lim)?;
                    }
                }
            }
        }
    }
    Ok(())
}
