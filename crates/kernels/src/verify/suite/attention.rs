//! Attention: edge softmax and the fused GAT attention.

use crate::error::Result;
use crate::verify::{max_degrees, missing, put, sum_depth, upload_both, Checker};
use crate::DeviceGraph;
use candle_core::{DType, Device, Tensor, Var};
use gnn_graph::Csr;

/// Edge softmax and its backward on the device against f64 CPU runs, element by element: the
/// forward within `2u (deg + 6 + |s_p - m| + span)` of each probability (`m` the row maximum,
/// `span` the row's largest `m - s`: the f32 `s - m` rounds by `u |s - m|`, which `expf`
/// turns into a relative error; the row sum of `deg` exponentials, one `expf` and one
/// division), the backward within `4u (deg + 6 + 2 span) alpha_p (|dalpha_p| + sum_q alpha_q
/// |dalpha_q|)` (the forward's error carried through `alpha (dalpha - t)` plus the row sum
/// `t`'s own). Scores are normal times `scale` (300: exponentials that overflow
/// without the row maximum).
pub(super) fn check_edge_softmax(
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
pub(super) fn check_gat_attention(
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
