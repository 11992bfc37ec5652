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

/// The fused GAT aggregation (`heads` heads of `width`, storage `dt`, attention dropout `p`;
/// `offset`: xs starts one element into its buffer, so no vector loads) and its three
/// gradients on the device against the f64 CPU run on the same rounded inputs, element by
/// element. Each edge's alpha is within `eps = 2u (deg_i + 8 + 4 M)` of itself (the f32 score,
/// `- lse` and `exp`, with `u` f32's unit roundoff, `deg_i` its row's length and `M` the
/// edge's `|s_dst| + |s_src| + |lse|`); a score gradient's dot product adds `2u (F + 5)`. Each
/// output sums its terms (a row's, or a column's for dxs and ds_src), adding `u len` of their
/// magnitude; the storage rounds the output, the gradient of xs and D's `out` by `u_T` (f16
/// also by half its subnormal step, 2^-25, absolute). So an element is held within
/// `4 (sum eps |term| + (u len + u_T) sum |term|)`, the terms `alpha |x|` (out),
/// `alpha |dout|` (dxs) and `alpha (|<dout, x>| + |D|)` with the dot products' magnitudes
/// (ds_dst over a row, ds_src over a column). D is computed from the device's output, so each
/// score gradient term also carries `alpha sum_f |dout_f| bound(out_f)`: out's error is relative
/// to its terms, which can cancel (a one-column head makes that likely).
pub(super) fn check_gat_aggregate(
    c: &mut Checker,
    name: &str,
    csr: &Csr,
    gpu: &Device,
    (heads, width, dt, p, offset): (usize, usize, DType, f32, bool),
) -> Result<()> {
    const SLOPE: f64 = 0.2;
    let (gc, gg) = upload_both(c, csr, gpu)?;
    let (n, m, hf) = (csr.n_rows(), csr.n_cols(), heads * width);
    let skip = offset as usize;
    let xs_buf = c.randn(m * hf + skip)?.to_dtype(dt)?;
    let xs = xs_buf.narrow(0, skip, m * hf)?.reshape((m, hf))?;
    let dy = c.randn((n, hf))?.to_dtype(dt)?;
    let sd = (c.randn((n, heads))? * 2.0)?;
    let ss = (c.randn((m, heads))? * 2.0)?;
    let mask = (p > 0.0).then_some((p, 7 + heads as u64));
    let run = |g: &DeviceGraph, f: DType| -> Result<[Tensor; 4]> {
        let dev = g.device();
        let on = |t: &Tensor, d: DType| -> Result<Tensor> { Ok(t.to_dtype(d)?.to_device(dev)?) };
        let scores = if f == DType::F64 { f } else { DType::F32 };
        let x = on(&xs_buf, f)?.narrow(0, skip, m * hf)?.reshape((m, hf))?;
        let (x, a, b) = (
            Var::from_tensor(&x)?,
            Var::from_tensor(&on(&sd, scores)?)?,
            Var::from_tensor(&on(&ss, scores)?)?,
        );
        let scores = crate::gat_score_pair(b.as_tensor(), a.as_tensor())?;
        let out = crate::gat_aggregate(g, x.as_tensor(), &scores, 0, heads, SLOPE, mask)?;
        let gr = (&out * on(&dy, f)?)?.sum_all()?.backward()?;
        let get = |v: &Var| {
            gr.get(v.as_tensor())
                .cloned()
                .ok_or_else(|| missing("gat aggregate grad"))
        };
        Ok([out.clone(), get(&x)?, get(&a)?, get(&b)?])
    };
    let want = run(&gc, DType::F64)?;
    let got = run(&gg, dt)?;
    // Magnitudes, from the reference's own alpha: `a` sums |term|, `b` sums eps |term|.
    let v = |t: &Tensor| -> Result<Vec<f64>> {
        Ok(t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?)
    };
    let (x, d, sdv, ssv, out) = (v(&xs)?, v(&dy)?, v(&sd)?, v(&ss)?, v(&want[0])?);
    let keep = mask.map(|(p, seed)| crate::ops::dropout::dropout_mask(csr.nnz() * heads, p, seed));
    let scale = 1.0 / (1.0 - p as f64);
    let leaky = |z: f64| if z > 0.0 { z } else { SLOPE * z };
    let u = f32::EPSILON as f64 / 2.0;
    let u_t = match dt {
        DType::BF16 => 2f64.powi(-8),
        DType::F16 => 2f64.powi(-11),
        _ => u,
    };
    // f16 keeps 2^-24 steps below 2^-14 (subnormals): half a step absolute, whatever the size.
    let floor = if dt == DType::F16 {
        2f64.powi(-25)
    } else {
        1e-30
    };
    struct Mag {
        a: Vec<f64>,
        b: Vec<f64>,
    }
    let mag = |len: usize| Mag {
        a: vec![0f64; len],
        b: vec![0f64; len],
    };
    let add = |mg: &mut Mag, k: usize, t: f64, eps: f64| {
        mg.a[k] += t;
        mg.b[k] += eps * t;
    };
    let (mut m_out, mut m_dx, mut m_dst, mut m_src) =
        (mag(n * hf), mag(m * hf), mag(n * heads), mag(m * heads));
    let mut col_len = vec![0usize; m];
    for &j in csr.indices() {
        col_len[j as usize] += 1;
    }
    for i in 0..n {
        let r = csr.row_range(i);
        for h in 0..heads {
            let e: Vec<f64> = r
                .clone()
                .map(|q| leaky(sdv[i * heads + h] + ssv[csr.indices()[q] as usize * heads + h]))
                .collect();
            let mx = e.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let lse = mx + e.iter().map(|v| (v - mx).exp()).sum::<f64>().ln();
            let cs = h * width..(h + 1) * width;
            let dabs: f64 = cs
                .clone()
                .map(|f| (d[i * hf + f] * out[i * hf + f]).abs())
                .sum();
            // Per edge: alpha, the dropout factor and alpha's error bound.
            let edge = |k: usize, q: usize| {
                let j = csr.indices()[q] as usize;
                let big = sdv[i * heads + h].abs() + ssv[j * heads + h].abs() + lse.abs();
                let eps = 2.0 * u * (r.len() as f64 + 8.0 + 4.0 * big);
                let kept = keep
                    .as_ref()
                    .map_or(1.0, |k| if k[q * heads + h] { scale } else { 0.0 });
                (j, (e[k] - lse).exp(), kept, eps)
            };
            for (k, q) in r.clone().enumerate() {
                let (j, a, kept, eps) = edge(k, q);
                for f in cs.clone() {
                    add(&mut m_out, i * hf + f, a * kept * x[j * hf + f].abs(), eps);
                }
            }
            // D is the dot product of dout with the device's out, so it carries out's error,
            // which is relative to out's terms, not to out (they cancel): sum |dout| bound(out).
            let d_err: f64 = cs
                .clone()
                .map(|f| {
                    let o = i * hf + f;
                    let b = 4.0 * (m_out.b[o] + (u * r.len() as f64 + u_t) * m_out.a[o]) + floor;
                    d[o].abs() * b
                })
                .sum();
            for (k, q) in r.clone().enumerate() {
                let (j, a, kept, eps) = edge(k, q);
                let dot: f64 = cs
                    .clone()
                    .map(|f| (d[i * hf + f] * x[j * hf + f]).abs())
                    .sum();
                let g = a * (kept * dot + dabs);
                let eps_g = eps + 2.0 * u * (width as f64 + 5.0);
                add(&mut m_dst, i * heads + h, g, eps_g);
                add(&mut m_src, j * heads + h, g, eps_g);
                // Absolute, with the same factor 4 of slack as the rest (`lim`).
                m_dst.b[i * heads + h] += a * d_err;
                m_src.b[j * heads + h] += a * d_err;
                for f in cs.clone() {
                    add(&mut m_dx, j * hf + f, a * kept * d[i * hf + f].abs(), eps);
                }
            }
        }
    }
    // `len(k)`: the terms output element k sums (its row's or its column's).
    let lim = |mg: Mag, shape: &[usize], len: &dyn Fn(usize) -> usize| -> Result<Tensor> {
        let v: Vec<f64> = (0..mg.a.len())
            .map(|k| 4.0 * (mg.b[k] + (u * len(k) as f64 + u_t) * mg.a[k]) + floor)
            .collect();
        Ok(Tensor::from_vec(v, shape, &Device::Cpu)?)
    };
    let row_len = |i: usize| csr.row_range(i).len();
    let m_out = lim(m_out, &[n, hf], &|k| row_len(k / hf))?;
    let m_dx = lim(m_dx, &[m, hf], &|k| col_len[k / hf])?;
    let m_dst = lim(m_dst, &[n, heads], &|k| row_len(k / heads))?;
    let m_src = lim(m_src, &[m, heads], &|k| col_len[k / heads])?;
    let tag = format!(
        "gat_aggregate {heads}x{width} {dt:?} p{p}{}",
        if offset { " +1" } else { "" }
    );
    c.check_within(name, format!("{tag} fwd"), hf, &got[0], &want[0], &m_out)?;
    c.check_within(name, format!("{tag} bwd dxs"), hf, &got[1], &want[1], &m_dx)?;
    c.check_within(
        name,
        format!("{tag} bwd ds_dst"),
        hf,
        &got[2],
        &want[2],
        &m_dst,
    )?;
    c.check_within(
        name,
        format!("{tag} bwd ds_src"),
        hf,
        &got[3],
        &want[3],
        &m_src,
    )?;
    Ok(())
}

/// GAT's node scores ([`crate::gat_scores`]) on the device against f64 CPU runs on the same
/// (storage-rounded) inputs: both scores (fp32 sums of `width` products, 1e-5 of the largest),
/// `dxs` (two products rounded once to the storage type: its unit roundoff, doubled) and both
/// attention vectors' gradients (fp32 sums over every row, per-block partials then one GEMM
/// row, 1e-4). Shapes: eight heads of 8 (GAT's hidden layer), one of 41 (its output), three of
/// 5, two of 200 (two column tiles of the gradient kernel), a single element, and no rows.
pub(super) fn check_gat_scores(c: &mut Checker, gpu: &Device) -> Result<()> {
    let mut dts = vec![(DType::F32, 1e-5)];
    if gpu.is_cuda() {
        dts.extend([(DType::BF16, 1e-2), (DType::F16, 2e-3)]);
    }
    for (dt, dx_bound) in dts {
        for (n, heads, width) in [
            (3000usize, 8usize, 8usize),
            (2000, 1, 41),
            (777, 3, 5),
            (500, 2, 200),
            (1, 1, 1),
            (0, 2, 4),
        ] {
            let hf = heads * width;
            let x = c.randn((n, hf))?.to_dtype(dt)?;
            let att = [c.randn((1, heads, width))?, c.randn((1, heads, width))?];
            let ds = c.randn((2, n, heads))?;
            // (s_src, s_dst, dxs, da_src, da_dst) on `dev`, in `att_dt`.
            let run = |dev: &Device, x: &Tensor, att_dt: DType| -> Result<Vec<Tensor>> {
                let xv = Var::from_tensor(&x.to_device(dev)?)?;
                let av = att
                    .iter()
                    .map(|a| Var::from_tensor(&a.to_dtype(att_dt)?.to_device(dev)?))
                    .collect::<candle_core::Result<Vec<_>>>()?;
                let both =
                    crate::gat_scores(xv.as_tensor(), av[0].as_tensor(), av[1].as_tensor(), heads)?;
                let (s, d) = (both.get(0)?, both.get(1)?);
                let g = (&both * ds.to_dtype(att_dt)?.to_device(dev)?)?
                    .sum_all()?
                    .backward()?;
                let grad =
                    |v: &Var, what| g.get(v.as_tensor()).cloned().ok_or_else(|| missing(what));
                Ok(vec![
                    s,
                    d,
                    grad(&xv, "no dxs")?,
                    grad(&av[0], "no da_src")?,
                    grad(&av[1], "no da_dst")?,
                ])
            };
            let cpu = run(&Device::Cpu, &x.to_dtype(DType::F64)?, DType::F64)?;
            let dev = run(gpu, &x, DType::F32)?;
            let tag = format!("gat_scores {heads}x{width} {dt:?} n={n}");
            for (i, (what, bound)) in [
                ("s_src", 1e-5),
                ("s_dst", 1e-5),
                ("dxs", dx_bound),
                ("da_src", 1e-4),
                ("da_dst", 1e-4),
            ]
            .into_iter()
            .enumerate()
            {
                // dxs is narrowed to the storage type; the reference is rounded the same way.
                let want = if i == 2 {
                    cpu[i].to_dtype(dt)?
                } else {
                    cpu[i].clone()
                };
                c.check(
                    "attention",
                    format!("{tag} {what}"),
                    hf,
                    &dev[i],
                    &want,
                    bound,
                )?;
            }
        }
    }
    Ok(())
}
