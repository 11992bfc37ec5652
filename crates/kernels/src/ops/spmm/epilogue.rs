//! A sum or mean SpMM and its row epilogue as one untracked call, for ops that differentiate
//! through their aggregation themselves (`gnn-models`' lean layers): GCN's `D^-1/2 (A + I)
//! D^-1/2` run as an unweighted sum between two row scalings, with the output layer's bias
//! and narrowing; GraphSAGE's mean with its root term, bias and narrowing; their backward's
//! transposed sums.
//!
//! For bf16 / f16 features on CUDA the epilogue reads the SpMM's fp32 accumulation and rounds
//! once: the separate narrowing pass (fp32 to half, `N·K` elements each way) and the next
//! pass's read of its result are gone. Elsewhere (f32, the CPU, the row-group kernels that
//! write half precision themselves) it is the SpMM then the same epilogue on its result.

use super::op::SpmmOp;
use super::{check_x, transpose_product, Reduce};
use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use crate::ops::optional::Without;
use crate::ops::scale_rows::rows_epilogue;
#[cfg(feature = "cuda")]
use candle_core::{CpuStorage, CudaStorage, CustomOp1, Layout, Shape};
use candle_core::{DType, Tensor};

/// What an aggregation's result `y [R, K]` goes through in the same pass: `out[i, j] =
/// (j < K ? s_i y[i, j] + res[i, j] : 0) + b_j` for `j < cols`.
#[derive(Debug, Clone, Copy)]
pub struct Epilogue<'a> {
    /// Constant row factors `s [R]` (f32); none: 1.
    pub scale: Option<&'a Tensor>,
    /// A residual `[R, K]` in the features' dtype (GraphSAGE's root term).
    pub residual: Option<&'a Tensor>,
    /// A bias `[cols]` in the features' dtype.
    pub bias: Option<&'a Tensor>,
    /// The output's width: the first `cols` columns, or `K` padded with zeros to `cols`.
    pub cols: usize,
}

impl<'a> Epilogue<'a> {
    /// Nothing but the width: `K` columns as they are (the narrowing of a half-precision
    /// result alone).
    pub fn width(cols: usize) -> Self {
        Self {
            scale: None,
            residual: None,
            bias: None,
            cols,
        }
    }
}

/// `e` applied to `reduce_{j in N(i)} x[j]` (sum or mean) of `x [g.n_cols(), K]`, untracked
/// (no gradient reaches `x` or the epilogue's operands): [`super::spmm`] then
/// [`crate::rescale_rows`]-like arithmetic, in `x`'s dtype.
pub fn spmm_then(g: &DeviceGraph, x: &Tensor, reduce: Reduce, e: &Epilogue<'_>) -> Result<Tensor> {
    const OP: &str = "spmm_then";
    sum_or_mean(OP, reduce)?;
    let x = check_x(OP, g, &x.detach())?;
    reduce_then(g, &x, reduce, e)
}

/// `e` applied to `Aᵀ dy` (mean: `Aᵀ D⁻¹ dy`) for `dy [g.n_rows(), K]`, untracked: the input
/// gradient [`super::spmm_transposed`] gives (no edge values), and its epilogue in the same
/// pass; timed as the graph's backward aggregation.
pub fn spmm_transposed_then(
    g: &DeviceGraph,
    dy: &Tensor,
    reduce: Reduce,
    e: &Epilogue<'_>,
) -> Result<Tensor> {
    const OP: &str = "spmm_transposed_then";
    let mean = sum_or_mean(OP, reduce)?;
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
    let dy = dy.detach().contiguous()?;
    if mean && dy.dtype() == DType::F16 {
        // f16's 1/deg rides in fp32 edge values inside the kernel (dy / deg could underflow):
        // the transpose product as it is, then the epilogue on its f16 result.
        let y = transpose_product(g, &dy, None, true)?;
        return finish(&y, e, dy.dtype());
    }
    let dy = if mean {
        SpmmOp {
            g: g.clone(),
            reduce: Reduce::Mean,
        }
        .scaled_grad(&dy)?
    } else {
        dy
    };
    reduce_then(&g.transpose_graph()?, &dy, Reduce::Sum, e)
}

/// Whether `reduce` is the mean (an error for max / min).
fn sum_or_mean(op: &'static str, reduce: Reduce) -> Result<bool> {
    match reduce {
        Reduce::Sum => Ok(false),
        Reduce::Mean => Ok(true),
        Reduce::Max | Reduce::Min => Err(Error::unsupported(
            op,
            format!("{reduce:?} has no epilogue form; sum or mean only"),
        )),
    }
}

/// `e` on `y`, the result in `to`.
fn finish(y: &Tensor, e: &Epilogue<'_>, to: DType) -> Result<Tensor> {
    // Rows already in the result's dtype (f32, or the row groups' half precision) and at
    // most a row scaling at their own width: the vectorised row scaling, or nothing. The
    // general epilogue reads an element at a time, which there only adds time (f32 GCN
    // without the input cache scales `[N, 128]` both ways).
    if y.dtype() == to && e.residual.is_none() && e.bias.is_none() && e.cols == y.dim(1)? {
        return match e.scale {
            Some(s) => crate::scale_rows(y, s),
            None => Ok(y.clone()),
        };
    }
    rows_epilogue(y, e.scale, e.residual, e.bias, e.cols, to)
}

/// The sum or mean over `g` of contiguous, untracked `x`, then `e`.
fn reduce_then(g: &DeviceGraph, x: &Tensor, reduce: Reduce, e: &Epilogue<'_>) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if matches!(x.dtype(), DType::BF16 | DType::F16) && x.device().is_cuda() {
        let acc = x.apply_op1_no_bwd(&Accumulation {
            g: g.clone(),
            reduce,
        })?;
        return finish(&acc, e, x.dtype());
    }
    let y = x.apply_op1_no_bwd(&Without(SpmmOp {
        g: g.clone(),
        reduce,
    }))?;
    finish(&y, e, x.dtype())
}

/// The CUDA half-precision sum or mean as its kernel leaves it (the fp32 accumulation, or the
/// row groups' half-precision result): [`reduce_then`]'s input on CUDA alone.
#[cfg(feature = "cuda")]
struct Accumulation {
    g: DeviceGraph,
    reduce: Reduce,
}

#[cfg(feature = "cuda")]
impl CustomOp1 for Accumulation {
    fn name(&self) -> &'static str {
        "spmm_accumulation"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        candle_core::bail!(
            "spmm_accumulation: CUDA half precision only (the CPU runs spmm, then its epilogue)"
        )
    }

    fn cuda_fwd(&self, x: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        super::cuda::spmm_half_acc(&self.g, x, l, None, self.reduce)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::spmm::reference::spmm_reference;
    use candle_core::{Device, Var};
    use gnn_graph::Csr;

    fn f64s(t: &Tensor) -> Vec<f64> {
        t.to_dtype(DType::F64)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f64>()
            .unwrap()
    }

    /// Against the f64 reference SpMM (sum and mean) then the row factors, residual, bias and
    /// width by hand, over a graph with an empty row and a long one, f32 and f64, narrower,
    /// equal and wider widths, each operand present or not; the transposed form against the
    /// reference over the transpose (mean: `Aᵀ D⁻¹ dy`). Nothing is tracked; max is refused.
    #[test]
    fn spmm_then_equals_the_reference_then_the_epilogue() {
        let dev = Device::Cpu;
        // Rows: 0 -> {1, 2}, 1 -> {}, 2 -> {0, 1, 2, 3, 3}, 3 -> {0}; 4 columns.
        let csr =
            Csr::new_checked(4, 4, vec![0, 2, 2, 7, 8], vec![1, 2, 0, 1, 2, 3, 3, 0]).unwrap();
        let deg = [2.0, 0.0, 5.0, 1.0];
        let t = csr.transpose().unwrap().0;
        let g = DeviceGraph::upload(&csr, &dev).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-5 * (1.0 + b.abs());
        for dt in [DType::F64, DType::F32] {
            for (k, cols) in [(5usize, 3usize), (5, 5), (3, 6)] {
                // (reduce, the residual and bias, the factor): every operand, none, the factor
                // alone (GCN's inner sums), or (GraphSAGE's) the residual and bias alone.
                for (reduce, with, scaled) in [
                    (Reduce::Sum, true, true),
                    (Reduce::Mean, true, true),
                    (Reduce::Mean, true, false),
                    (Reduce::Sum, false, false),
                    (Reduce::Sum, false, true),
                    (Reduce::Mean, false, true),
                ] {
                    let rnd = |shape: (usize, usize)| {
                        Tensor::randn(0f32, 1.0, shape, &dev)
                            .unwrap()
                            .to_dtype(dt)
                            .unwrap()
                    };
                    let x = Var::from_tensor(&rnd((4, k))).unwrap();
                    let res = rnd((4, k));
                    let b = rnd((1, cols)).reshape(cols).unwrap();
                    let s = Tensor::rand(0.5f32, 2.0, 4, &dev).unwrap();
                    let e = Epilogue {
                        scale: scaled.then_some(&s),
                        residual: with.then_some(&res),
                        bias: with.then_some(&b),
                        cols,
                    };
                    let got = spmm_then(&g, x.as_tensor(), reduce, &e).unwrap();
                    assert!(!got.track_op());
                    assert_eq!(got.dims(), [4, cols]);
                    let y = spmm_reference(&csr, &f64s(x.as_tensor()), k, None, reduce);
                    let (sv, rv, bv) = (f64s(&s), f64s(&res), f64s(&b));
                    let what =
                        format!("{dt:?} {reduce:?} k {k} cols {cols} with {with} scaled {scaled}");
                    // `got` against the epilogue applied by hand to the reference's `y`.
                    let expect = |got: &[f64], y: &[f64], dir: &str| {
                        for i in 0..4 {
                            for j in 0..cols {
                                let mut want = 0.0;
                                if j < k {
                                    want = y[i * k + j];
                                    if scaled {
                                        want *= sv[i];
                                    }
                                    if with {
                                        want += rv[i * k + j];
                                    }
                                }
                                if with {
                                    want += bv[j];
                                }
                                assert!(close(got[i * cols + j], want), "{what}{dir} [{i}, {j}]");
                            }
                        }
                    };
                    expect(&f64s(&got), &y, "");
                    // Transposed (row factors of A's columns, residual [n_cols, K]).
                    let dy = rnd((4, k));
                    let got = f64s(&spmm_transposed_then(&g, &dy, reduce, &e).unwrap());
                    let mut dys = f64s(&dy);
                    if reduce == Reduce::Mean {
                        for (i, d) in deg.iter().enumerate() {
                            let inv = if *d > 0.0 { 1.0 / d } else { 0.0 };
                            dys[i * k..(i + 1) * k].iter_mut().for_each(|v| *v *= inv);
                        }
                    }
                    expect(&got, &spmm_reference(&t, &dys, k, None, Reduce::Sum), " t");
                }
            }
        }
        // Shapes, reductions and operands are checked.
        let x = Tensor::zeros((4, 2), DType::F32, &dev).unwrap();
        let bad = Tensor::zeros((3, 2), DType::F32, &dev).unwrap();
        let w2 = Epilogue::width(2);
        assert!(spmm_then(&g, &bad, Reduce::Sum, &w2).is_err());
        assert!(spmm_transposed_then(&g, &bad, Reduce::Sum, &w2).is_err());
        assert!(spmm_then(&g, &x, Reduce::Max, &w2).is_err());
        let res = Epilogue {
            residual: Some(&bad),
            ..w2
        };
        assert!(spmm_then(&g, &x, Reduce::Sum, &res).is_err());
        let b64 = Tensor::zeros(2, DType::F64, &dev).unwrap();
        let bias = Epilogue {
            bias: Some(&b64),
            ..w2
        };
        assert!(spmm_then(&g, &x, Reduce::Sum, &bias).is_err());
    }
}
