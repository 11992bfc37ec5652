//! Dense ops: the linear product, dropout and its fused epilogues, LayerNorm, masked
//! cross-entropy, Adam, INT8 dequantisation.

use super::*;
use crate::error::Result;
use crate::verify::{missing, Checker};
use crate::{
    dequantize, dropout, masked_cross_entropy, masked_cross_entropy_grad, matmul_nt,
    QuantizedFeatures,
};
use candle_core::{DType, Device, Tensor, Var};

/// `matmul_nt` (the linear layers' product) and its `dw`.
pub(super) fn check_matmul(c: &mut Checker, gpu: &Device) -> Result<()> {
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
    Ok(())
}

/// Dropout: the mask is a hash of (seed, index) on both devices, so outputs are identical;
/// half-precision dropout scales in fp32 and narrows once, so it equals the f32 CPU run on the
/// rounded input, narrowed (exact).
pub(super) fn check_dropout(c: &mut Checker, gpu: &Device) -> Result<()> {
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
    Ok(())
}

/// Fused ReLU + dropout, and with a bias: forward and dx identical to the CPU (same mask, the
/// sum, one product and one narrowing each way; half types against the f32 CPU run on the
/// rounded inputs, narrowed); db, a column sum through a GEMM row, within its summation and
/// narrowing error.
pub(super) fn check_relu_dropout(c: &mut Checker, gpu: &Device) -> Result<()> {
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
    Ok(())
}

/// Fused bias + ELU + dropout (a GAT hidden layer's epilogue): forward, dx and db against the
/// CPU in f32 (half types against the f32 CPU run on the rounded inputs, narrowed). ELU's
/// `expm1` differs from the CPU's by an ulp or two, which a half type's narrowing can turn
/// into one unit of its last place, hence the tolerances.
pub(super) fn check_elu_dropout(c: &mut Checker, gpu: &Device) -> Result<()> {
    let mut dts = vec![DType::F32];
    if gpu.is_cuda() {
        dts.extend([DType::BF16, DType::F16]);
    }
    for dt in dts {
        let tol = match dt {
            DType::BF16 => 1e-2,
            DType::F16 => 2e-3,
            _ => 1e-5,
        };
        for (rows, cols, p) in [(1usize, 1usize, 0.5f32), (1000, 64, 0.6), (333, 41, 0.0)] {
            let x = c.randn((rows, cols))?.to_dtype(dt)?;
            let b = c.randn(cols)?.to_dtype(dt)?;
            let dy = c.randn((rows, cols))?.to_dtype(dt)?;
            let run = |dev: &Device, x: &Tensor, b: &Tensor, dy: &Tensor| {
                let xv = Var::from_tensor(&x.to_device(dev)?)?;
                let bv = Var::from_tensor(&b.to_device(dev)?)?;
                let y = crate::bias_elu_dropout(xv.as_tensor(), bv.as_tensor(), p, 31)?;
                let g = (&y * dy.to_device(dev)?)?.sum_all()?.backward()?;
                let grad =
                    |v: &Var, what| g.get(v.as_tensor()).cloned().ok_or_else(|| missing(what));
                Ok::<_, crate::Error>((y.clone(), grad(&xv, "no dx")?, grad(&bv, "no db")?))
            };
            let f32_of = |t: &Tensor| t.to_dtype(DType::F32);
            let (yc, dxc, dbc) = run(&Device::Cpu, &f32_of(&x)?, &f32_of(&b)?, &f32_of(&dy)?)?;
            let (yg, dxg, dbg) = run(gpu, &x, &b, &dy)?;
            let tag = format!("bias_elu_dropout {dt:?} {rows}x{cols} p={p}");
            for (what, g, cpu) in [("fwd", &yg, &yc), ("dx", &dxg, &dxc), ("db", &dbg, &dbc)] {
                c.check(
                    "dense",
                    format!("{tag} {what}"),
                    cols,
                    g,
                    &cpu.to_dtype(dt)?,
                    tol,
                )?;
            }
        }
    }
    Ok(())
}

/// A hidden layer whose product comes last ([`crate::LinearProduct::bias_relu_dropout`]),
/// input tracked or not: against the composed `bias_relu_dropout(matmul_nt(x, w), b)` on the
/// GPU (the same cuBLAS product and epilogue kernel: `y` and `dx` identical; `dw`, `db` summed
/// in another order, within the dtype's GEMM bound), and in f32 against the CPU (the GEMMs'
/// rounding alone, 1e-5).
pub(super) fn check_linear_bias_relu_dropout(c: &mut Checker, gpu: &Device) -> Result<()> {
    for (dt, bound) in super::layers::layer_dtypes(gpu) {
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

/// The untracked epilogue of a sum ([`crate::add_bias_relu_dropout_untracked`]: GraphSAGE's
/// two products added in the epilogue's pass) against the epilogue of the sum made by a
/// separate add, on the GPU (values and the mask's backward identical: the sum is rounded to
/// the storage type first, as the add rounds it), and in f32 against the CPU. The vector
/// kernel (128 and 256 columns) and the scalar one (41).
pub(super) fn check_add_bias_relu_dropout(c: &mut Checker, gpu: &Device) -> Result<()> {
    let mut dts = vec![DType::F32];
    if gpu.is_cuda() {
        dts.extend([DType::BF16, DType::F16]);
    }
    for dt in dts {
        for (n, d, p) in [(1000usize, 128usize, 0.5f32), (333, 41, 0.0), (1, 256, 0.5)] {
            let z = c.randn((n, d))?.to_dtype(dt)?;
            let q = c.randn((n, d))?.to_dtype(dt)?;
            let b = c.randn(d)?.to_dtype(dt)?;
            let dy = c.randn((n, d))?.to_dtype(dt)?;
            let run = |dev: &Device, fused: bool| -> Result<(Tensor, Tensor)> {
                let (z, q, b) = (z.to_device(dev)?, q.to_device(dev)?, b.to_device(dev)?);
                let (y, m) = if fused {
                    crate::add_bias_relu_dropout_untracked(&z, Some(&q), &b, p, 23)?
                } else {
                    crate::bias_relu_dropout_untracked(&(z + q)?, &b, p, 23)?
                };
                let dz = m.backward(&dy.to_device(dev)?)?;
                Ok((y, dz))
            };
            let (fy, fdz) = run(gpu, true)?;
            let (sy, sdz) = run(gpu, false)?;
            let tag = format!("add_bias_relu_dropout {dt:?} {n}x{d} p={p}").to_lowercase();
            c.check("dense", format!("{tag} fwd vs add"), d, &fy, &sy, 0.0)?;
            c.check("dense", format!("{tag} dz vs add"), d, &fdz, &sdz, 0.0)?;
            if dt == DType::F32 {
                let (cy, cdz) = run(&Device::Cpu, true)?;
                c.check("dense", format!("{tag} fwd"), d, &fy, &cy, 1e-6)?;
                c.check("dense", format!("{tag} dz"), d, &fdz, &cdz, 1e-6)?;
            }
        }
    }
    Ok(())
}

/// The fused LayerNorm on the device (f32, bf16, f16 storage; f32 weight and bias) against the
/// CPU op in f64 on the same rounded inputs: `y`, `dx`, `dw`, `db` elementwise. Bounds, with
/// `u` the fp32 unit roundoff, `d` the row width and `n` the rows: the row statistics are
/// d-term fp32 sums, so `xhat` is within `(2d + 16) u (|xhat| + 1)` (the `+ 1` for the mean's
/// error relative to the row's spread, data centred as here); `y` within that times `|w|` plus
/// `(2d + 16) u |b|`; `dx = rstd (g - mean g - xhat mean(g xhat))` within `(4d + 32) u rstd
/// (|g| + mean|g| + (|xhat| + 1) mean(|g| (|xhat| + 1)))`; `dw`, `db` are n-term sums within
/// `(n + 2d + 32) u sum_rows |dy| (|xhat| + 1)`. Half outputs (`y`, `dx`) add their narrowing
/// (two units of the half type on the magnitude, and half f16's subnormal spacing).
pub(super) fn check_layer_norm(c: &mut Checker, gpu: &Device) -> Result<()> {
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

/// Fused masked cross-entropy: loss and logits gradient against an f64 CPU run (on the
/// rounded logits for bf16 / f16); every fifth row out of the split. The widths sit on both
/// sides of each kernel shape's edge: the shared-memory tiles take rows of at most 256 bytes
/// (f32 C <= 64, bf16 / f16 C <= 128), the register rows C <= 128, the generic loop the rest.
/// 150,001 rows take more tiles than the grid's cap, so blocks stride the rows; one case reads
/// its logits from a view one row in (not 16-byte aligned: the tiles' element-wise copy), and
/// one has no rows. Then a label out of range: the loss is NaN on both devices and the other
/// rows' gradients agree.
pub(super) fn check_xent(c: &mut Checker, gpu: &Device) -> Result<()> {
    for (n, classes, offset) in [
        (1usize, 1usize, false),
        (333, 7, false),
        (4096, 41, false),
        (150_001, 41, false),
        (4097, 41, true),
        (0, 41, false),
        (700, 32, false),
        (700, 64, false),
        (700, 65, false),
        (1000, 100, false),
        (700, 128, false),
        (700, 129, true),
        (500, 200, false),
    ] {
        let rows = n + offset as usize;
        let x = (c.randn((rows, classes))? * 3.0)?;
        let y: Vec<u32> = (0..n).map(|i| ((i * 31 + 7) % classes) as u32).collect();
        // Row weights 1 / n, but at most 4,096 rows' mean: f16's gradients of a mean over
        // 150,001 rows (about 2e-7) are subnormal, off by up to 3e-3 in the CPU's f64 terms
        // (the trainer scales an f16 loss for this reason).
        let wn = 1.0 / n.clamp(1, 4096) as f32;
        let w: Vec<f32> = (0..n).map(|i| if i % 5 == 4 { 0.0 } else { wn }).collect();
        let mut dts = vec![(DType::F32, 1e-5, 1e-5)];
        if gpu.is_cuda() {
            dts.extend([(DType::BF16, 1e-5, 8e-3), (DType::F16, 1e-5, 1e-3)]);
        }
        for (dt, loss_bound, grad_bound) in dts {
            let xr = x.to_dtype(dt)?.to_dtype(DType::F64)?;
            let run = |dev: &Device, x: &Tensor| -> Result<(Tensor, Tensor)> {
                let xv = Var::from_tensor(&x.to_device(dev)?)?;
                let logits = xv.narrow(0, offset as usize, n)?;
                let l = masked_cross_entropy(
                    &logits,
                    &Tensor::from_vec(y.clone(), n, dev)?,
                    &Tensor::from_vec(w.clone(), n, dev)?,
                )?;
                let g = l.backward()?;
                // No rows: no gradient reaches the logits (none flows through an empty sum).
                let dx = match g.get(xv.as_tensor()) {
                    Some(dx) => dx.clone(),
                    None if n == 0 => xv.zeros_like()?,
                    None => return Err(missing("no xent dx")),
                };
                Ok((l.reshape(1)?, dx))
            };
            let (lc, gc) = run(&Device::Cpu, &xr)?;
            let (lg, gg) = run(gpu, &x.to_dtype(dt)?)?;
            let at = if offset { " at row 1" } else { "" };
            let tag = format!("masked xent {dt:?} {n}x{classes}{at}").to_lowercase();
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
    check_xent_bad_label(c, gpu)?;
    check_xent_grad(c, gpu)
}

/// The logits' gradient outside autograd ([`crate::masked_cross_entropy_grad`], a fused op's
/// loss head) for a loss gradient of 3 (f16 loss scaling's kind): against the CPU's f64
/// autograd of `3 · loss`, within the fused backward's bounds, and equal on the GPU to that
/// device's own autograd (the same kernel); 41 classes (the tiled kernel) and 129.
fn check_xent_grad(c: &mut Checker, gpu: &Device) -> Result<()> {
    let mut dts = vec![(DType::F32, 1e-5)];
    if gpu.is_cuda() {
        dts.extend([(DType::BF16, 8e-3), (DType::F16, 1e-3)]);
    }
    for (n, classes) in [(4096usize, 41usize), (700, 129)] {
        let x = (c.randn((n, classes))? * 3.0)?;
        let y: Vec<u32> = (0..n).map(|i| ((i * 17 + 5) % classes) as u32).collect();
        let w: Vec<f32> = (0..n)
            .map(|i| if i % 3 == 2 { 0.0 } else { 1.0 / n as f32 })
            .collect();
        for (dt, bound) in &dts {
            let autograd = |dev: &Device, x: &Tensor| -> Result<Tensor> {
                let xv = Var::from_tensor(&x.to_device(dev)?)?;
                let l = masked_cross_entropy(
                    xv.as_tensor(),
                    &Tensor::from_vec(y.clone(), n, dev)?,
                    &Tensor::from_vec(w.clone(), n, dev)?,
                )?;
                let g = (l * 3.0)?.backward()?;
                Ok(g.get(xv.as_tensor())
                    .ok_or_else(|| missing("no xent dx"))?
                    .clone())
            };
            let xd = x.to_dtype(*dt)?;
            let cpu = autograd(&Device::Cpu, &xd.to_dtype(DType::F64)?)?;
            let own = autograd(gpu, &xd)?;
            let got = masked_cross_entropy_grad(
                &xd.to_device(gpu)?,
                &Tensor::from_vec(y.clone(), n, gpu)?,
                &Tensor::from_vec(w.clone(), n, gpu)?,
                &Tensor::new(3f32, gpu)?,
            )?;
            let tag = format!("masked xent grad x3 {dt:?} {n}x{classes}").to_lowercase();
            c.check("dense", tag.clone(), classes, &got, &cpu, *bound)?;
            c.check(
                "dense",
                format!("{tag} = autograd"),
                classes,
                &got,
                &own,
                0.0,
            )?;
        }
    }
    Ok(())
}

/// A label `>= C` (row 3 of 300, C = 41 and 129: the tile and the generic shape): the loss is
/// NaN on the GPU as on the CPU, and the gradient (that row's softmax alone, its label matching
/// no column) agrees with the CPU's.
fn check_xent_bad_label(c: &mut Checker, gpu: &Device) -> Result<()> {
    let n = 300;
    for classes in [41usize, 129] {
        let x = c.randn((n, classes))?;
        let mut y: Vec<u32> = (0..n).map(|i| (i % classes) as u32).collect();
        y[3] = classes as u32;
        let w = vec![1.0 / n as f32; n];
        let run = |dev: &Device| -> Result<(f32, Tensor)> {
            let xv = Var::from_tensor(&x.to_device(dev)?)?;
            let l = masked_cross_entropy(
                xv.as_tensor(),
                &Tensor::from_vec(y.clone(), n, dev)?,
                &Tensor::from_vec(w.clone(), n, dev)?,
            )?;
            let g = l.backward()?;
            let dx = g.get(xv.as_tensor()).ok_or_else(|| missing("no xent dx"))?;
            Ok((l.to_scalar::<f32>()?, dx.clone()))
        };
        let ((lc, gc), (lg, gg)) = (run(&Device::Cpu)?, run(gpu)?);
        let tag = format!("masked xent f32 {n}x{classes} label {classes}");
        let nan = lc.is_nan() && lg.is_nan();
        c.record(
            "dense",
            format!("{tag} loss nan"),
            classes,
            0.0,
            0.0,
            nan,
            "",
        );
        c.check("dense", format!("{tag} dx"), classes, &gg, &gc, 1e-5)?;
    }
    Ok(())
}

/// The step check's sums ([`crate::sums_f32`], 64 partial sums per tensor): a loss-like scalar and
/// tensors of 0, 41 x 128, 128 x 602 and 1,000,003 elements against the CPU's f64 sums, each
/// within the f32 summation bound of its per-thread strides and tree; then a NaN and an
/// infinity in one tensor each make that sum (and only that one) non-finite on the GPU.
pub(super) fn check_sums(c: &mut Checker, gpu: &Device) -> Result<()> {
    let shapes: [&[usize]; 5] = [&[1], &[0, 41], &[41, 128], &[128, 602], &[1_000_003]];
    let ts = shapes
        .iter()
        .map(|s| c.randn(*s))
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<&Tensor> = ts.iter().collect();
    let cpu = crate::sums_f32(&refs)?;
    let abs = ts
        .iter()
        .map(Tensor::abs)
        .collect::<candle_core::Result<Vec<_>>>()?;
    let abs = crate::sums_f32(&abs.iter().collect::<Vec<_>>())?;
    let on: Vec<Tensor> = ts
        .iter()
        .map(|t| t.to_device(gpu))
        .collect::<candle_core::Result<_>>()?;
    let got = crate::sums_f32(&on.iter().collect::<Vec<_>>())?;
    // Each accumulator takes at most ceil(n / (64 blocks x 2,048)) terms, then at most 20
    // roundings on any one path: 3 over the 8 accumulators, 5 over the lanes, 7 adding the 8
    // warps in order, 5 over the 64 partials.
    let depth = 1_000_003usize.div_ceil(64 * 2048) as f64 + 20.0;
    let lim = crate::verify::sum_bound(&abs, depth)?;
    c.check_within("dense", "sums_f32 5 tensors".into(), 5, &got, &cpu, &lim)?;
    // Non-finite values: a NaN in the second matrix, an infinity in the long vector.
    let mut bad = on.clone();
    let nan = Tensor::new(&[f32::NAN], gpu)?;
    bad[2] = Tensor::cat(
        &[&bad[2].flatten_all()?.narrow(0, 1, 41 * 128 - 1)?, &nan],
        0,
    )?;
    let inf = Tensor::new(&[f32::INFINITY], gpu)?;
    bad[4] = Tensor::cat(&[&inf, &bad[4].narrow(0, 1, 1_000_002)?], 0)?;
    let v = crate::sums_f32(&bad.iter().collect::<Vec<_>>())?
        .to_device(&Device::Cpu)?
        .to_vec1::<f32>()?;
    let ok =
        v[0].is_finite() && v[1] == 0.0 && v[2].is_nan() && v[3].is_finite() && !v[4].is_finite();
    c.record("dense", "sums_f32 nan and inf".into(), 5, 0.0, 0.0, ok, "");
    // 70 tensors: three launches of the partial sums (32 tensors each at most), one finish;
    // sizes from 0 to 300,007 elements, some views starting mid-storage.
    let many = (0..70usize)
        .map(|i| {
            let n = (i * i * 61 + i) % 300_008;
            let t = c.randn(n + 3)?;
            Ok(t.narrow(0, i % 3, n)?)
        })
        .collect::<Result<Vec<_>>>()?;
    let cpu = crate::sums_f32(&many.iter().collect::<Vec<_>>())?;
    let abs = many
        .iter()
        .map(Tensor::abs)
        .collect::<candle_core::Result<Vec<_>>>()?;
    let abs = crate::sums_f32(&abs.iter().collect::<Vec<_>>())?;
    let on = many
        .iter()
        .map(|t| t.to_device(gpu))
        .collect::<candle_core::Result<Vec<_>>>()?;
    let got = crate::sums_f32(&on.iter().collect::<Vec<_>>())?;
    let depth = 300_008usize.div_ceil(64 * 2048) as f64 + 20.0;
    let lim = crate::verify::sum_bound(&abs, depth)?;
    c.check_within("dense", "sums_f32 70 tensors".into(), 70, &got, &cpu, &lim)?;
    Ok(())
}

/// Column sums ([`crate::column_sum`], a bias's gradient) in f32, bf16 and f16 against the f64
/// sum of the same stored values: one element, one column, widths of 7, 41 and 300 (periods
/// of several rows), 8, 48, 128 and 1,000 (whole 16-byte chunks a row), 602 and 1,030 (the
/// scalar kernel, in tiles of columns), arrays ending inside a chunk, up to 100 K rows, and
/// views starting past their storage's first row (16-byte aligned or not). Each sum within
/// the f32 summation bound of the kernel's longest chain plus the output dtype's rounding.
pub(super) fn check_column_sum(c: &mut Checker, gpu: &Device) -> Result<()> {
    let shapes = [
        (1usize, 1usize, 0usize),
        (233, 1, 0),
        (1_000, 41, 0),
        (50_000, 48, 0),
        (20_000, 128, 0),
        (100_000, 8, 0),
        (70_000, 7, 0),
        (3, 602, 0),
        (999, 41, 0),
        (500, 300, 0),
        (64, 1_000, 0),
        (257, 1_030, 0),
        (1_001, 48, 1),
        (1_001, 44, 1),
    ];
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        let eps = match dtype {
            DType::F32 => f32::EPSILON as f64,
            DType::BF16 => 1.0 / 128.0,
            _ => 1.0 / 1024.0,
        };
        for &(n, d, skip) in &shapes {
            let full = c.randn((n + skip, d))?.to_dtype(dtype)?;
            let x = full.narrow(0, skip, n)?;
            let exact = crate::ops::column_sum::column_sum_reference(&x.to_dtype(DType::F64)?)?;
            let abs =
                crate::ops::column_sum::column_sum_reference(&x.to_dtype(DType::F64)?.abs()?)?;
            let got = crate::column_sum(&full.to_device(gpu)?.narrow(0, skip, n)?)?
                .to_device(&Device::Cpu)?
                .to_dtype(DType::F64)?;
            // The longest chain: a thread's periods (at most 17 + n / 512), a block's slots
            // and a period's rows in sequence (at most 256 x 8), a finishing thread's 16
            // partials and the 32 slots.
            let depth = (n.div_ceil(512) + 2_200) as f64;
            let lim =
                ((crate::verify::sum_bound(&abs, depth)? * (1.0 + eps))? + (exact.abs()? * eps)?)?;
            let tag = format!(
                "column_sum {n}x{d}{} {dtype:?}",
                if skip > 0 { " view" } else { "" }
            );
            c.check_within("dense", tag, d, &got, &exact, &lim)?;
            // Integers in [-4, 4]: every partial and sum is exact in fp32, so the result is
            // the exact sum rounded once (candle's cast from f32): a dropped or doubled chunk
            // shows however loose the bound above is for long columns.
            let ints = (c.randn((n + skip, d))? * 2.0)?
                .round()?
                .clamp(-4f32, 4f32)?
                .to_dtype(dtype)?;
            let x = ints.narrow(0, skip, n)?;
            let want = crate::ops::column_sum::column_sum_reference(&x.to_dtype(DType::F64)?)?
                .to_dtype(DType::F32)?
                .to_dtype(dtype)?;
            let got = crate::column_sum(&ints.to_device(gpu)?.narrow(0, skip, n)?)?;
            let tag = format!("column_sum {n}x{d} integers {dtype:?}");
            c.check("dense", tag, d, &got, &want, 0.0)?;
        }
    }
    Ok(())
}

/// [`crate::cast_pad`] on the GPU against the CPU, exactly (the same conversions): every pair
/// of f32, bf16 and f16, windows padding rows and columns (a parameter to aligned widths),
/// cropping both (its gradient back), one 1-D bias, an empty window, and a gradient-sized
/// `[153,431, 41]` into 48 columns, and a view starting past its storage's first row into a
/// window with more rows and fewer columns.
pub(super) fn check_cast_pad(c: &mut Checker, gpu: &Device) -> Result<()> {
    let kinds = [DType::F32, DType::BF16, DType::F16];
    let cases: [(usize, usize, usize, usize); 5] = [
        (128, 602, 128, 608),
        (41, 128, 48, 128),
        (48, 128, 41, 120),
        (7, 3, 0, 5),
        (153_431, 41, 153_431, 48),
    ];
    for from in kinds {
        for to in kinds {
            for &(r, cols_in, rows, cols) in &cases {
                if r > 1_000 && (from, to) != (DType::BF16, DType::BF16) {
                    continue;
                }
                let x = c.randn((r, cols_in))?.to_dtype(from)?;
                let cpu = crate::cast_pad(&x, to, rows, cols)?;
                let got = crate::cast_pad(&x.to_device(gpu)?, to, rows, cols)?;
                let tag = format!("cast_pad {r}x{cols_in}->{rows}x{cols} {from:?}->{to:?}");
                c.check("dense", tag, cols, &got, &cpu, 0.0)?;
            }
            // Rows padded while columns are cropped, from a view starting at row 1.
            let full = c.randn((42, 128))?.to_dtype(from)?;
            let x = full.narrow(0, 1, 41)?;
            let cpu = crate::cast_pad(&x, to, 48, 100)?;
            let got = crate::cast_pad(&full.to_device(gpu)?.narrow(0, 1, 41)?, to, 48, 100)?;
            let tag = format!("cast_pad view 41x128->48x100 {from:?}->{to:?}");
            c.check("dense", tag, 100, &got, &cpu, 0.0)?;
            let b = c.randn(41)?.to_dtype(from)?;
            let cpu = crate::cast_pad(&b, to, 48, 1)?;
            let got = crate::cast_pad(&b.to_device(gpu)?, to, 48, 1)?;
            let tag = format!("cast_pad 41->48 {from:?}->{to:?}");
            c.check("dense", tag, 1, &got, &cpu, 0.0)?;
        }
    }
    Ok(())
}

/// Fused Adam / AdamW: four steps on both devices from the same start and gradients (the
/// GPU contracts multiply-adds into FMAs, so a few ulps apart): ungated, gated by finite
/// values, gated by a NaN (skipped: the CPU leaves both tensors alone, so must the GPU), and
/// gated by an infinity (skipped).
pub(super) fn check_adam(c: &mut Checker, gpu: &Device) -> Result<()> {
    let gates: [Option<Vec<f32>>; 4] = [
        None,
        Some(vec![0.5, -3.0, 1e30]),
        Some(vec![0.5, f32::NAN]),
        Some(vec![f32::INFINITY]),
    ];
    for (kind, (l2, keep)) in [("adam", (5e-4, 1.0)), ("adamw", (0.0, 1.0 - 0.01 * 5e-4))] {
        for dims in [vec![1usize], vec![41, 128], vec![128, 602]] {
            let n: usize = dims.iter().product();
            let theta0 = c.randn(dims.as_slice())?;
            let grads: Vec<Tensor> = (0..gates.len())
                .map(|_| c.randn(dims.as_slice()))
                .collect::<Result<_>>()?;
            // The state after the last open step (step 1), then after every step.
            let run = |dev: &Device| -> Result<((Tensor, Tensor), (Tensor, Tensor))> {
                let theta = theta0.to_device(dev)?.copy()?;
                let mv = Tensor::zeros((2, n), DType::F32, dev)?;
                let mut open = None;
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
                    let gate = gates[t]
                        .as_ref()
                        .map(|v| Tensor::new(v.as_slice(), dev))
                        .transpose()?;
                    crate::adam_step(&theta, &mv, &g.to_device(dev)?, &step, gate.as_ref())?;
                    if t == 1 {
                        open = Some((theta.copy()?, mv.copy()?));
                    }
                }
                let open =
                    open.ok_or_else(|| crate::Error::Harness("adam: no open step".into()))?;
                Ok((open, (theta, mv)))
            };
            let ((_, (tc, mc)), ((to, mo), (tg, mg))) = (run(&Device::Cpu)?, run(gpu)?);
            c.check("dense", format!("{kind} step theta"), n, &tg, &tc, 1e-6)?;
            c.check("dense", format!("{kind} step moments"), n, &mg, &mc, 1e-6)?;
            // The closed gates (NaN, infinity) left the GPU's state exactly as the last open
            // step did.
            c.check(
                "dense",
                format!("{kind} closed gate theta"),
                n,
                &tg,
                &to,
                0.0,
            )?;
            c.check(
                "dense",
                format!("{kind} closed gate moments"),
                n,
                &mg,
                &mo,
                0.0,
            )?;
        }
    }
    Ok(())
}

/// INT8 dequantisation: identical bits (no FMA on either side).
pub(super) fn check_dequantize(c: &mut Checker, gpu: &Device) -> Result<()> {
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
    Ok(())
}

/// The output layers' bias add ([`crate::bias_add`], and [`crate::bias_add_residual`] with the
/// second term a column range of a wider matrix, read in place): the sum, the gradients of
/// each input against the CPU in f32; a sum rounded once to the storage type (its unit
/// roundoff, doubled), `db` a column sum over every row (1e-4 in f32; half gradients round to
/// their type). Shapes: GAT's 41 classes, two column tiles (300), one column, one row.
pub(super) fn check_bias_add(c: &mut Checker, gpu: &Device) -> Result<()> {
    let mut dts = vec![(DType::F32, 1e-6, 1e-4)];
    if gpu.is_cuda() {
        dts.extend([(DType::BF16, 1e-2, 1e-2), (DType::F16, 2e-3, 2e-3)]);
    }
    for (dt, bound, db_bound) in dts {
        for (rows, cols) in [(5000usize, 41usize), (777, 300), (333, 1), (1, 64)] {
            for residual in [false, true] {
                let x = c.randn((rows, cols))?.to_dtype(dt)?;
                let b = c.randn(cols)?.to_dtype(dt)?;
                let dy = c.randn((rows, cols))?.to_dtype(dt)?;
                let wide = c.randn((rows, 2 * cols + 3))?.to_dtype(dt)?;
                let run = |dev: &Device, x: &Tensor, b: &Tensor, wide: &Tensor, dy: &Tensor| {
                    let xv = Var::from_tensor(&x.to_device(dev)?)?;
                    let bv = Var::from_tensor(&b.to_device(dev)?)?;
                    let wv = Var::from_tensor(&wide.to_device(dev)?)?;
                    let y = if residual {
                        let r = wv.as_tensor().narrow(1, cols + 1, cols)?;
                        crate::bias_add_residual(xv.as_tensor(), &r, bv.as_tensor())?
                    } else {
                        crate::bias_add(xv.as_tensor(), bv.as_tensor())?
                    };
                    let g = (&y * dy.to_device(dev)?)?.sum_all()?.backward()?;
                    let grad =
                        |v: &Var, what| g.get(v.as_tensor()).cloned().ok_or_else(|| missing(what));
                    let dr = if residual {
                        Some(grad(&wv, "no dr")?)
                    } else {
                        None
                    };
                    Ok::<_, crate::Error>((y.clone(), grad(&xv, "no dx")?, grad(&bv, "no db")?, dr))
                };
                let f32_of = |t: &Tensor| t.to_dtype(DType::F32);
                let (yc, dxc, dbc, drc) = run(
                    &Device::Cpu,
                    &f32_of(&x)?,
                    &f32_of(&b)?,
                    &f32_of(&wide)?,
                    &f32_of(&dy)?,
                )?;
                let (yg, dxg, dbg, drg) = run(gpu, &x, &b, &wide, &dy)?;
                let name = if residual {
                    "bias_add_residual"
                } else {
                    "bias_add"
                };
                let tag = format!("{name} {dt:?} {rows}x{cols}");
                let mut checks = vec![
                    ("fwd", &yg, &yc, bound),
                    ("dx", &dxg, &dxc, bound),
                    ("db", &dbg, &dbc, db_bound),
                ];
                if let (Some(g), Some(cpu)) = (&drg, &drc) {
                    checks.push(("dr", g, cpu, bound));
                }
                for (what, g, cpu, bd) in checks {
                    c.check(
                        "dense",
                        format!("{tag} {what}"),
                        cols,
                        g,
                        &cpu.to_dtype(dt)?,
                        bd,
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// The row scaling ([`crate::scale_rows`], GCN's `D^-1/2` and a mean's `1/deg` taken out of
/// the SpMM): the product and `dx` against the CPU in f32, rounded once to the storage type
/// (its unit roundoff, doubled). Shapes: 48 columns (16-byte steps in every dtype), 41 (one
/// element at a time), one column, one huge row, no rows, and a row range of a larger matrix
/// (a start offset on the vector path).
pub(super) fn check_scale_rows(c: &mut Checker, gpu: &Device) -> Result<()> {
    let mut dts = vec![(DType::F32, 1e-6)];
    if gpu.is_cuda() {
        dts.extend([(DType::BF16, 1e-2), (DType::F16, 2e-3)]);
    }
    for (dt, bound) in dts {
        for (rows, cols, skip) in [
            (5000usize, 48usize, 0usize),
            (5000, 41, 0),
            (777, 1, 0),
            (1, 100_000, 0),
            (0, 48, 0),
            (300, 48, 7),
        ] {
            let x = c.randn((rows + skip, cols))?.to_dtype(dt)?;
            let s = c.randn(rows + skip)?.abs()?;
            let dy = c.randn((rows, cols))?.to_dtype(dt)?;
            let run = |dev: &Device, x: &Tensor, s: &Tensor, dy: &Tensor| {
                let xv = Var::from_tensor(&x.to_device(dev)?)?;
                let s = s.to_device(dev)?.narrow(0, skip, rows)?;
                let y = crate::scale_rows(&xv.as_tensor().narrow(0, skip, rows)?, &s)?;
                let g = (&y * dy.to_device(dev)?)?.sum_all()?.backward()?;
                let dx = g
                    .get(xv.as_tensor())
                    .cloned()
                    .ok_or_else(|| missing("no dx"))?;
                Ok::<_, crate::Error>((y, dx))
            };
            let f32_of = |t: &Tensor| t.to_dtype(DType::F32);
            let (yc, dxc) = run(&Device::Cpu, &f32_of(&x)?, &s, &f32_of(&dy)?)?;
            let (yg, dxg) = run(gpu, &x, &s, &dy)?;
            let tag = format!("scale_rows {dt:?} {rows}x{cols}+{skip}");
            for (what, g, cpu) in [("fwd", &yg, &yc), ("dx", &dxg, &dxc)] {
                c.check(
                    "dense",
                    format!("{tag} {what}"),
                    cols,
                    g,
                    &cpu.to_dtype(dt)?,
                    bound,
                )?;
            }
        }
    }
    Ok(())
}

/// The row scaling into another width with a bias ([`crate::rescale_rows`]: GCN's output
/// epilogue from the aligned width back to the classes, and its backward's padding): the
/// result and `dx`, `db` against the CPU in f32, rounded once to the storage type (`db` a
/// column sum: 1e-4 in f32). Shapes: 48 -> 41 and 41 -> 48 columns, one column, no rows,
/// and rows wider than a block (700 -> 1000, 1000 -> 700).
pub(super) fn check_rescale_rows(c: &mut Checker, gpu: &Device) -> Result<()> {
    let mut dts = vec![(DType::F32, 1e-6, 1e-4)];
    if gpu.is_cuda() {
        dts.extend([(DType::BF16, 1e-2, 1e-2), (DType::F16, 2e-3, 2e-3)]);
    }
    for (dt, bound, db_bound) in dts {
        for (rows, k, cols) in [
            (5000usize, 48usize, 41usize),
            (5000, 41, 48),
            (777, 1, 1),
            (0, 48, 41),
            // Rows wider than a block (the kernel steps its row and column by the block's
            // quotient and remainder).
            (300, 700, 1000),
            (301, 1000, 700),
        ] {
            for bias in [false, true] {
                let x = c.randn((rows, k))?.to_dtype(dt)?;
                let s = c.randn(rows)?.abs()?;
                let b = c.randn(cols)?.to_dtype(dt)?;
                let dy = c.randn((rows, cols))?.to_dtype(dt)?;
                let run = |dev: &Device, x: &Tensor, b: &Tensor, dy: &Tensor| {
                    let xv = Var::from_tensor(&x.to_device(dev)?)?;
                    let bv = Var::from_tensor(&b.to_device(dev)?)?;
                    let s = s.to_device(dev)?;
                    let y = crate::rescale_rows(
                        xv.as_tensor(),
                        &s,
                        bias.then(|| bv.as_tensor()),
                        cols,
                    )?;
                    let g = (&y * dy.to_device(dev)?)?.sum_all()?.backward()?;
                    let dx = g
                        .get(xv.as_tensor())
                        .cloned()
                        .ok_or_else(|| missing("no dx"))?;
                    let db = g.get(bv.as_tensor()).cloned();
                    Ok::<_, crate::Error>((y, dx, db))
                };
                let f32_of = |t: &Tensor| t.to_dtype(DType::F32);
                let (yc, dxc, dbc) = run(&Device::Cpu, &f32_of(&x)?, &f32_of(&b)?, &f32_of(&dy)?)?;
                let (yg, dxg, dbg) = run(gpu, &x, &b, &dy)?;
                let tag = format!("rescale_rows {dt:?} {rows}x{k}->{cols} bias {bias}");
                let mut checks = vec![("fwd", &yg, &yc, bound), ("dx", &dxg, &dxc, bound)];
                if let (Some(g), Some(cpu)) = (&dbg, &dbc) {
                    checks.push(("db", g, cpu, db_bound));
                } else if bias {
                    return Err(missing(&format!("{tag}: no db")));
                }
                for (what, g, cpu, bd) in checks {
                    c.check(
                        "dense",
                        format!("{tag} {what}"),
                        cols,
                        g,
                        &cpu.to_dtype(dt)?,
                        bd,
                    )?;
                }
            }
        }
    }
    Ok(())
}
