//! MaxK-GNN: the selection, CBSR SpGEMM / SSpMM, the fused bias and residual, half storage.

use super::*;
use crate::error::Result;
use crate::verify::{grad, max_degrees, missing, put, sum_bound, sum_depth, upload_both, Checker};
use crate::{maxk, spgemm, spgemm_bias, sspmm, Cbsr, DeviceGraph, Reduce};
use candle_core::{DType, Device, Tensor, Var};
use gnn_graph::Csr;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The GPU's MaxK selection `xg` against the CPU's `xc`: kept values and their columns, exact.
pub(super) fn check_selection(
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
pub(super) fn check_maxk(
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
pub(super) fn check_maxk_half(
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
            let dd = grad(&gr, dv.as_tensor(), "ddata")?;
            let db = grad(&gr, bv.as_tensor(), "dbias")?;
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
        let dhg = grad(&gr, hv.as_tensor(), "half dh")?;
        let dbg = grad(&gr, bv.as_tensor(), "half dbias")?.unsqueeze(0)?;
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
