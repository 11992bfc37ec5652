//! An unweighted sum SpMM and its epilogue ([`crate::rescale_rows`]: the row scaling, bias and
//! width of a normalised aggregation) as one untracked call, for ops that differentiate
//! through their aggregation themselves (`gnn-models`' GCN layers over `D^-1/2 (A + I)
//! D^-1/2`, run as an unweighted sum between two row scalings).
//!
//! For bf16 / f16 features on CUDA the epilogue reads the SpMM's fp32 accumulation and rounds
//! once: the separate narrowing pass (fp32 to half, `N·K` elements each way) and the rescale's
//! read of its result are gone, and the value is rounded once instead of twice. Elsewhere (f32,
//! the CPU, the row-group kernels that write half precision themselves) it is exactly
//! `rescale_rows(spmm(g, x, Sum), s, b, cols)`.

use super::op::SpmmOp;
use super::{check_x, Reduce};
use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use crate::ops::optional::Without;
use crate::ops::scale_rows::rescale_rows_to;
use candle_core::Tensor;
#[cfg(feature = "cuda")]
use candle_core::{CpuStorage, CudaStorage, CustomOp1, Layout, Shape};

/// `out[i, j] = (j < K ? s_i (A x)[i, j] : 0) + b_j` for `j < cols`: [`super::spmm`]'s sum of
/// `x [n_cols, K]` then [`crate::rescale_rows`] (`s [n_rows]` f32, `b [cols]` in `x`'s
/// dtype), untracked (no gradient reaches `x`, `s` or `b`).
pub fn spmm_rescaled(
    g: &DeviceGraph,
    x: &Tensor,
    s: &Tensor,
    b: Option<&Tensor>,
    cols: usize,
) -> Result<Tensor> {
    let x = check_x("spmm_rescaled", g, &x.detach())?;
    sum_then_rescale(g, &x, s, b, cols)
}

/// `diag(s) Aᵀ dy`: [`super::spmm_transposed`]'s sum (no edge values) with its result's rows
/// scaled by `s [n_cols]` (f32) in the same pass as the narrowing, untracked; timed as the
/// graph's backward aggregation.
pub fn spmm_transposed_rescaled(g: &DeviceGraph, dy: &Tensor, s: &Tensor) -> Result<Tensor> {
    const OP: &str = "spmm_transposed_rescaled";
    crate::ops::check_device(OP, g, dy)?;
    crate::ops::check_float_or_half(OP, "dy", dy)?;
    let dims = dy.dims();
    if dims.len() != 2 || dims[0] != g.n_rows() {
        return Err(Error::shape(
            OP,
            format!(
                "dy has shape {dims:?}, expected [{}, K] (one row per output row)",
                g.n_rows()
            ),
        ));
    }
    let _timer = g.backward_timer();
    let gt = g.transpose_graph()?;
    sum_then_rescale(&gt, &dy.detach().contiguous()?, s, None, dims[1])
}

/// The sum over `g` of contiguous, untracked `x`, then its epilogue.
fn sum_then_rescale(
    g: &DeviceGraph,
    x: &Tensor,
    s: &Tensor,
    b: Option<&Tensor>,
    cols: usize,
) -> Result<Tensor> {
    let b = b.map(Tensor::detach);
    #[cfg(feature = "cuda")]
    if matches!(
        x.dtype(),
        candle_core::DType::BF16 | candle_core::DType::F16
    ) && x.device().is_cuda()
    {
        let acc = x.apply_op1_no_bwd(&Accumulation { g: g.clone() })?;
        return rescale_rows_to(&acc, s, b.as_ref(), cols, x.dtype());
    }
    let sum = x.apply_op1_no_bwd(&Without(SpmmOp {
        g: g.clone(),
        reduce: Reduce::Sum,
    }))?;
    rescale_rows_to(&sum, s, b.as_ref(), cols, x.dtype())
}

/// The CUDA half-precision sum as its kernel leaves it (the fp32 accumulation, or the row
/// groups' half-precision result): [`sum_then_rescale`]'s input on CUDA alone.
#[cfg(feature = "cuda")]
struct Accumulation {
    g: DeviceGraph,
}

#[cfg(feature = "cuda")]
impl CustomOp1 for Accumulation {
    fn name(&self) -> &'static str {
        "spmm_accumulation"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        candle_core::bail!(
            "spmm_accumulation: CUDA half precision only (the CPU takes spmm then rescale_rows)"
        )
    }

    fn cuda_fwd(&self, x: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        super::cuda::spmm_half_acc(&self.g, x, l, None, Reduce::Sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::spmm::reference::spmm_reference;
    use candle_core::{DType, Device, Var};
    use gnn_graph::Csr;

    /// Against the f64 reference SpMM then the row scaling, bias and width by hand, over a
    /// graph with an empty row and a long one, f32 and f64, narrower, equal and wider widths;
    /// the transposed form against the reference over the transpose. Nothing is tracked.
    #[test]
    fn spmm_rescaled_equals_the_reference_then_the_epilogue() {
        let dev = Device::Cpu;
        // Rows: 0 -> {1, 2}, 1 -> {}, 2 -> {0, 1, 2, 3, 3}, 3 -> {0}; 4 columns.
        let csr =
            Csr::new_checked(4, 4, vec![0, 2, 2, 7, 8], vec![1, 2, 0, 1, 2, 3, 3, 0]).unwrap();
        let g = DeviceGraph::upload(&csr, &dev).unwrap();
        for dt in [DType::F64, DType::F32] {
            for (k, cols) in [(5usize, 3usize), (5, 5), (3, 6)] {
                let x0 = Tensor::randn(0f32, 1.0, (4, k), &dev).unwrap();
                let x = Var::from_tensor(&x0.to_dtype(dt).unwrap()).unwrap();
                let s = Tensor::rand(0.5f32, 2.0, 4, &dev).unwrap();
                let b = Tensor::randn(0f32, 1.0, cols, &dev)
                    .unwrap()
                    .to_dtype(dt)
                    .unwrap();
                let got = spmm_rescaled(&g, x.as_tensor(), &s, Some(&b), cols).unwrap();
                assert!(!got.track_op());
                let xs = x0.to_dtype(DType::F64).unwrap().flatten_all().unwrap();
                let xs = xs.to_vec1::<f64>().unwrap();
                let sum = spmm_reference(&csr, &xs, k, None, Reduce::Sum);
                let (sv, bv) = (
                    s.to_dtype(DType::F64).unwrap().to_vec1::<f64>().unwrap(),
                    b.to_dtype(DType::F64).unwrap().to_vec1::<f64>().unwrap(),
                );
                let got = got.to_dtype(DType::F64).unwrap().to_vec2::<f64>().unwrap();
                for i in 0..4 {
                    for j in 0..cols {
                        let v = if j < k { sv[i] * sum[i * k + j] } else { 0.0 };
                        let want = v + bv[j];
                        assert!(
                            (got[i][j] - want).abs() <= 1e-5 * (1.0 + want.abs()),
                            "{dt:?} k {k} cols {cols} [{i}, {j}]: {} vs {want}",
                            got[i][j]
                        );
                    }
                }
                // Transposed: s_j (Aᵀ dy)_j.
                let dy0 = Tensor::randn(0f32, 1.0, (4, k), &dev).unwrap();
                let dy = dy0.to_dtype(dt).unwrap();
                let got = spmm_transposed_rescaled(&g, &dy, &s).unwrap();
                let dys = dy0.to_dtype(DType::F64).unwrap().flatten_all().unwrap();
                let t = csr.transpose().unwrap().0;
                let sum = spmm_reference(&t, &dys.to_vec1::<f64>().unwrap(), k, None, Reduce::Sum);
                let got = got.to_dtype(DType::F64).unwrap().to_vec2::<f64>().unwrap();
                for (j, row) in got.iter().enumerate() {
                    for (c, v) in row.iter().enumerate() {
                        let want = sv[j] * sum[j * k + c];
                        assert!(
                            (v - want).abs() <= 1e-5 * (1.0 + want.abs()),
                            "{dt:?} t [{j}, {c}]"
                        );
                    }
                }
            }
        }
        // Shapes are checked: x must have a row per column, dy a row per row.
        let s = Tensor::ones(4, DType::F32, &dev).unwrap();
        let bad = Tensor::zeros((3, 2), DType::F32, &dev).unwrap();
        assert!(spmm_rescaled(&g, &bad, &s, None, 2).is_err());
        assert!(spmm_transposed_rescaled(&g, &bad, &s).is_err());
    }
}
