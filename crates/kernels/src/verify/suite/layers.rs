//! Fused hidden layers (aggregate-first GCN, MaxK-GNN) against the composed ops.

use crate::error::Result;
use crate::verify::{missing, Checker};
use crate::{
    dropout, matmul_nt, maxk, spgemm_bias, spmm, spmm_weighted, DeviceGraph, KernelPolicy, Reduce,
};
use candle_core::{DType, Device, Tensor, Var};
use gnn_graph::Csr;

/// The bounds of the fused layers against the composed ops, by dtype (half types on a CUDA
/// device only).
pub(super) fn layer_dtypes(gpu: &Device) -> Vec<(DType, f64)> {
    let mut dts = vec![(DType::F32, 1e-5)];
    if gpu.is_cuda() {
        dts.extend([(DType::BF16, 1e-2), (DType::F16, 2e-3)]);
    }
    dts
}

/// One layer configuration's inputs, CPU tensors in their dtype: `x`, `w`, `b` (tracked),
/// `dy` (the output's upstream gradient) and, when `values` is set, the edge values.
struct LayerInputs<'a> {
    csr: &'a Csr,
    values: Option<&'a Tensor>,
    xwb: [Tensor; 3],
    dy: Tensor,
}

impl LayerInputs<'_> {
    /// `[y, dx, dw, db]` on `dev`, the graph under `policy`, `y = forward(graph, values, [x,
    /// w, b])`.
    fn run(
        &self,
        dev: &Device,
        policy: KernelPolicy,
        forward: impl Fn(&DeviceGraph, Option<&Tensor>, [&Tensor; 3]) -> Result<Tensor>,
    ) -> Result<[Tensor; 4]> {
        let g = DeviceGraph::upload(self.csr, dev)?.with_policy(policy);
        let v = self.values.map(|v| v.to_device(dev)).transpose()?;
        let [x, w, b] = &self.xwb;
        let vars = [
            Var::from_tensor(&x.to_device(dev)?)?,
            Var::from_tensor(&w.to_device(dev)?)?,
            Var::from_tensor(&b.to_device(dev)?)?,
        ];
        let ts = [
            vars[0].as_tensor(),
            vars[1].as_tensor(),
            vars[2].as_tensor(),
        ];
        let y = forward(&g, v.as_ref(), ts)?;
        let grads = (&y * self.dy.to_device(dev)?)?.sum_all()?.backward()?;
        let grad = |t: &Tensor| -> Result<Tensor> {
            grads
                .get(t)
                .cloned()
                .ok_or_else(|| missing("fused layer: a gradient"))
        };
        Ok([y.clone(), grad(ts[0])?, grad(ts[1])?, grad(ts[2])?])
    }
}

/// A GCN hidden layer as one op from its input ([`crate::Aggregate`] +
/// [`crate::LinearProduct::of_aggregate`] + the bias/ReLU/dropout epilogue, with or without
/// the residual) against the composed ops on the GPU and, in f32, against the CPU; values and
/// every gradient within the dtype's bound.
pub(super) fn check_aggregate_layer(
    c: &mut Checker,
    gname: &str,
    csr: &Csr,
    gpu: &Device,
) -> Result<()> {
    let n = csr.n_rows();
    let values = (c.randn(csr.nnz())?.abs()? * 0.1)?;
    for (dt, bound) in layer_dtypes(gpu) {
        for (i, o, p, reduce, weighted) in [
            (33usize, 33usize, 0.5f32, Reduce::Sum, true),
            (64, 128, 0.3, Reduce::Mean, false),
            (128, 128, 0.0, Reduce::Mean, true),
        ] {
            let h = c.randn((n, i))?.to_dtype(dt)?;
            let w = (c.randn((o, i))? * 0.1)?.to_dtype(dt)?;
            let b = c.randn(o)?.to_dtype(dt)?;
            let dy = c.randn((n, o))?.to_dtype(dt)?;
            let inputs = LayerInputs {
                csr,
                values: weighted.then_some(&values),
                xwb: [h, w, b],
                dy,
            };
            for residual in [false, true] {
                if residual && i != o {
                    continue;
                }
                // (y, dh, dw, db), fused or composed, on `dev`.
                let run = |dev: &Device, fused: bool, policy: KernelPolicy| {
                    inputs.run(dev, policy, |g, v, [ht, wt, bt]| {
                        if fused {
                            let z = crate::LinearProduct::of_aggregate(
                                crate::Aggregate::new(g, ht, v, reduce)?,
                                wt,
                            )?;
                            return if residual {
                                z.bias_relu_dropout_residual(bt, p, 41)
                            } else {
                                z.bias_relu_dropout(bt, p, 41)
                            };
                        }
                        let a = match v {
                            Some(v) => spmm_weighted(g, ht, v, reduce)?,
                            None => spmm(g, ht, reduce)?,
                        };
                        let y = crate::bias_relu_dropout(&matmul_nt(&a, wt)?, bt, p, 41)?;
                        Ok(if residual { (y + ht)? } else { y })
                    })
                };
                let head = format!("aggregate_layer {dt:?} {i}->{o}");
                // Deterministic against the composed ops: a SpMM whose atomics added in
                // another order moves `Â h` by an ulp, which flips the ReLU of products near 0
                // and moves `dw`, `db` by whole terms: a run-to-run difference of the kernels,
                // not of the op.
                let layer = FusedLayer {
                    gname,
                    tag: layer_tag(head, reduce, weighted, residual, p),
                    rows: ["fwd", "dh", "dw", "db"],
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
pub(super) fn check_maxk_layer(
    c: &mut Checker,
    gname: &str,
    csr: &Csr,
    gpu: &Device,
) -> Result<()> {
    let n = csr.n_rows();
    let values = (c.randn(csr.nnz())?.abs()? * 0.1)?;
    // Integers in [-2, 2] times `scale`: exact in every dtype here, and their products' sums.
    let grid = |c: &mut Checker, shape: (usize, usize), scale: f64| -> Result<Tensor> {
        Ok(((c.randn(shape)? * 1.2)?.round()?.clamp(-2.0, 2.0)? * scale)?)
    };
    for (dt, bound) in layer_dtypes(gpu) {
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
            let inputs = LayerInputs {
                csr,
                values: weighted.then_some(&values),
                xwb: [x, w, b],
                dy,
            };
            for residual in [false, true] {
                if residual && i != o {
                    continue;
                }
                // (y, dx, dw, db), fused or composed, on `dev`.
                let run = |dev: &Device, fused: bool, policy: KernelPolicy| {
                    inputs.run(dev, policy, |g, v, [xt, wt, bt]| {
                        if fused {
                            return crate::LinearProduct::new(xt, wt)?
                                .maxk(k)?
                                .dropout(p, 43)?
                                .aggregate(g, v, reduce, bt, residual);
                        }
                        let m = maxk(&matmul_nt(xt, wt)?, k)?;
                        let m = m.with_data(dropout(m.data(), p, 43)?)?;
                        if residual {
                            crate::spgemm_bias_residual(g, &m, v, reduce, bt, xt)
                        } else {
                            spgemm_bias(g, &m, v, reduce, Some(bt))
                        }
                    })
                };
                let head = format!("maxk_layer {dt:?} {i}->{o} k={k}");
                // The SpGEMM's and SSpMM's split rows add with float atomics: not bit for bit,
                // but the selection comes before them, so no decision flips.
                let layer = FusedLayer {
                    gname,
                    tag: layer_tag(head, reduce, weighted, residual, p),
                    rows: ["fwd", "dx", "dw", "db"],
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

/// A layer configuration's tag: `head`, the reduction, ` w` when weighted, ` +res` with the
/// residual, and the dropout rate.
fn layer_tag(head: String, reduce: Reduce, weighted: bool, residual: bool, p: f32) -> String {
    format!(
        "{head} {reduce:?}{}{} p={p}",
        if weighted { " w" } else { "" },
        if residual { " +res" } else { "" }
    )
}

/// One fused layer configuration for [`check_fused_layer`]: the graph's name and the
/// configuration's tag, the names of the four compared tensors (output, input gradient, `dw`,
/// `db`), the output width, the dtype and its bound against the composed ops.
struct FusedLayer<'a> {
    gname: &'a str,
    tag: String,
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
