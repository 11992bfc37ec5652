//! `dropout(elu(x + b))` in one pass each way (a GAT hidden layer's bias, activation and
//! dropout), with the mask of [`crate::dropout`].
//!
//! The composed chain takes candle's broadcast add, ELU and dropout forward, and backward
//! ELU's derivative as eleven element-wise kernels (two comparisons, two casts, products and
//! sums), the dropout's and the add's gradients, their accumulations and a dim-0 reduction:
//! 1.38 ms of a bf16 GAT 2x64 epoch on one H100 at 233 K nodes, both ways
//! (`bench/records/gat-sparse/h100-2026-11-28-2/row-term/call6-kernels.csv.xz`, kernels
//! 233-235 and 326-339). Here: one kernel forward, one backward and the bias's column sum.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use crate::error::Result;
use crate::ops::check_float_or_half;
use crate::ops::dropout::check_probability;
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, Layout, Shape, Tensor};

/// `dropout(elu(x + b), p)` with `b [D]` broadcast over the rows of `x [N, D]` and ELU's
/// alpha 1, one pass each way: the mask of [`crate::dropout`] with the same `seed`, so the
/// result equals the composed ops up to the rounding of `exp(v) - 1`; `p = 0` is
/// `elu(x + b)`. Backward: `dx = y > 0 ? dy / (1 - p) : dy * (y + 1 / (1 - p))` where kept
/// (ELU's derivative `elu(v) + 1` read from the output, as candle's ELU reads it), 0 where
/// dropped, and `db = dx.sum(0)`.
pub fn bias_elu_dropout(x: &Tensor, b: &Tensor, p: f32, seed: u64) -> Result<Tensor> {
    const OP: &str = "bias_elu_dropout";
    check_float_or_half(OP, "x", x)?;
    crate::ops::check_row_bias(OP, "x", x, b)?;
    check_probability(OP, p)?;
    Ok(x.contiguous()?
        .apply_op2(&b.contiguous()?, BiasEluDropoutOp { p, seed })?)
}

struct BiasEluDropoutOp {
    p: f32,
    seed: u64,
}

impl candle_core::CustomOp2 for BiasEluDropoutOp {
    fn name(&self) -> &'static str {
        "bias_elu_dropout"
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        b: &CpuStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = dispatch_float!(
            "bias_elu_dropout",
            x,
            cpu_fwd(x, xl, b, bl, self.p, self.seed)
        )?;
        Ok((out, xl.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        b: &CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::bias_elu_dropout(x, xl, b, bl, self.p, self.seed)
    }

    fn bwd(
        &self,
        _x: &Tensor,
        _b: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let dx = res.apply_op2_no_bwd(
            &grad.contiguous()?,
            &EluDropoutBwd {
                p: self.p,
                seed: self.seed,
            },
        )?;
        let db = crate::ops::column_sum(&dx)?;
        Ok((Some(dx), Some(db)))
    }
}

fn cpu_fwd<T: candle_core::WithDType>(
    x: &CpuStorage,
    xl: &Layout,
    b: &CpuStorage,
    bl: &Layout,
    p: f32,
    seed: u64,
) -> candle_core::Result<CpuStorage> {
    let xs = crate::ops::cpu_slice::<T>("bias_elu_dropout", x, xl)?;
    let bs = crate::ops::cpu_slice::<T>("bias_elu_dropout", b, bl)?;
    Ok(T::to_cpu_storage_owned(cpu::bias_elu_dropout(
        xs, bs, p, seed,
    )))
}

/// The backward: `dx` from the output and its gradient (the mask recomputed from the seed).
struct EluDropoutBwd {
    p: f32,
    seed: u64,
}

impl candle_core::CustomOp2 for EluDropoutBwd {
    fn name(&self) -> &'static str {
        "bias_elu_dropout_bwd"
    }

    fn cpu_fwd(
        &self,
        y: &CpuStorage,
        yl: &Layout,
        d: &CpuStorage,
        dl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = dispatch_float!(
            "bias_elu_dropout",
            y,
            cpu_bwd(y, yl, d, dl, self.p, self.seed)
        )?;
        Ok((out, yl.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        y: &CudaStorage,
        yl: &Layout,
        d: &CudaStorage,
        dl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::bias_elu_dropout_bwd(y, yl, d, dl, self.p, self.seed)
    }
}

fn cpu_bwd<T: candle_core::WithDType>(
    y: &CpuStorage,
    yl: &Layout,
    d: &CpuStorage,
    dl: &Layout,
    p: f32,
    seed: u64,
) -> candle_core::Result<CpuStorage> {
    let y = crate::ops::cpu_slice::<T>("bias_elu_dropout", y, yl)?;
    let d = crate::ops::cpu_slice::<T>("bias_elu_dropout", d, dl)?;
    Ok(T::to_cpu_storage_owned(cpu::bias_elu_dropout_bwd(
        y, d, p, seed,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::dropout::dropout;
    use candle_core::{DType, Device, Var};

    /// Against candle's composed broadcast add, ELU and dropout, values and both gradients,
    /// in f64 (exp(v) - 1 against exp_m1, so within rounding), over shapes with one row, one
    /// column and p = 0.
    #[test]
    fn fused_bias_elu_dropout_equals_the_composed_ops_both_ways() {
        let dev = Device::Cpu;
        for (p, (n, d)) in [
            (0.5f32, (100usize, 37usize)),
            (0.0, (7, 3)),
            (0.9, (1, 1000)),
            (0.6, (257, 1)),
        ] {
            let x0 = Tensor::randn(0f64, 1.0, (n, d), &dev).unwrap();
            let b0 = Tensor::randn(0f64, 1.0, d, &dev).unwrap();
            let w = Tensor::randn(0f64, 1.0, (n, d), &dev).unwrap();
            let vars = || {
                (
                    Var::from_tensor(&x0).unwrap(),
                    Var::from_tensor(&b0).unwrap(),
                )
            };
            let ((xa, ba), (xb, bb)) = (vars(), vars());
            let ya = bias_elu_dropout(xa.as_tensor(), ba.as_tensor(), p, 5).unwrap();
            let pre = xb.as_tensor().broadcast_add(bb.as_tensor()).unwrap();
            let yb = dropout(&pre.elu(1.0).unwrap(), p, 5).unwrap();
            let close = |a: &[f64], b: &[f64], what: &str| {
                for (u, v) in a.iter().zip(b) {
                    assert!(
                        (u - v).abs() <= 1e-12 * (1.0 + v.abs()),
                        "{what} p {p}: {u} vs {v}"
                    );
                }
            };
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f64>().unwrap();
            close(&flat(&ya), &flat(&yb), "y");
            let ga = (&ya * &w).unwrap().sum_all().unwrap().backward().unwrap();
            let gb = (&yb * &w).unwrap().sum_all().unwrap().backward().unwrap();
            for (a, b, what) in [(&xa, &xb, "dx"), (&ba, &bb, "db")] {
                let (da, db) = (
                    ga.get(a.as_tensor()).unwrap(),
                    gb.get(b.as_tensor()).unwrap(),
                );
                close(&flat(da), &flat(db), what);
            }
        }
        let x = Tensor::ones((4, 3), DType::F32, &dev).unwrap();
        let b = Tensor::ones(3, DType::F32, &dev).unwrap();
        assert!(bias_elu_dropout(&x, &b, 1.0, 0).is_err());
        assert!(bias_elu_dropout(&x, &Tensor::ones(4, DType::F32, &dev).unwrap(), 0.5, 0).is_err());
        assert!(bias_elu_dropout(&x, &b.to_dtype(DType::F64).unwrap(), 0.5, 0).is_err());
    }
}
