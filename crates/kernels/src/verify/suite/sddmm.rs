//! SDDMM: plain with its gradients, and edge-scaled under each CUDA kernel, half features.

use super::*;
use crate::error::Result;
use crate::verify::{
    max_degrees, missing, put, sum_bound, sum_depth, upload_both, Checker, OffsetOperand,
};
use crate::{sddmm, DeviceGraph, SddmmKernel};
use candle_core::{DType, Device, Tensor, Var};
use gnn_graph::Csr;

/// SDDMM of a random `a` with `x` and the gradients of `sum(e * v)` (the op as
/// [`check_spmm`](super::spmm::check_spmm) sees it), elementwise within summation bounds.
pub(super) fn check_sddmm_grads(
    c: &mut Checker,
    name: &str,
    csr: &Csr,
    k: usize,
    gpu: &Device,
    (gc, gg): (&DeviceGraph, &DeviceGraph),
    (x, v): (&Tensor, &Tensor),
) -> Result<()> {
    let cpu = Device::Cpu;
    let (deg_rows, deg_cols) = max_degrees(csr);
    let (xa, va) = (x.abs()?, v.abs()?);
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
    let (ec, dac, dbc) = sd(&cpu, gc, &a, x, v)?;
    let (eg, dag, dbg) = sd(gpu, gg, &a, x, v)?;
    // Elementwise summation bounds, as for the SpMM sums: the forward is K-term dot
    // products; dA = S B and dB = S^T A are row-scheduled SpMMs.
    let (ea, daa, dba) = sd(&cpu, gc, &a.abs()?, &xa, &va)?;
    let lim = sum_bound(&ea, sum_depth(k, false))?;
    c.check_within(name, "sddmm fwd".into(), k, &eg, &ec, &lim)?;
    let lim = sum_bound(&daa, sum_depth(deg_rows, c.grouped()))?;
    c.check_within(name, "sddmm bwd da".into(), k, &dag, &dac, &lim)?;
    let lim = sum_bound(&dba, sum_depth(deg_cols, c.grouped()))?;
    c.check_within(name, "sddmm bwd db".into(), k, &dbg, &dbc, &lim)?;
    Ok(())
}

/// The edge-scaled SDDMM forward under each CUDA kernel choice (HP at the smallest, middle and
/// largest partition, DTP's own choice, the row kernel) and its three gradients, against f64
/// CPU runs within the summation bounds; `offset` starts `a` one element into its buffer. On
/// a CUDA device also with bf16 / f16 features (`a`, `b`; f32 edge values and f32 result)
/// against the CPU run on the same rounded features: the same fp32 bounds (a product of two
/// halves is exact in fp32), plus the half narrowing for `da` and `db`, which come back in the
/// features' type.
pub(super) fn check_sddmm(
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
