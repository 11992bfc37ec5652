//! `dropout(relu(x [+ b]))` in one pass each way (a hidden layer's epilogue), with the mask
//! of [`crate::dropout`].

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use crate::error::Result;
use crate::ops::check_float_or_half;
use crate::ops::dropout::check_probability;
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};

/// `dropout(relu(x), p)` in one pass each way (training's hidden activation): the mask of
/// [`crate::dropout`] with the same `seed`, so the result equals the composed pair exactly; `p = 0`
/// is ReLU. Backward: `dx = y > 0 ? dy / (1 - p) : 0`, one pass over the output and its
/// gradient (the composed pair takes a comparison, a cast, two products and two gradient
/// accumulations). ReLU's gradient at exactly 0 is 0, as torch's.
pub fn relu_dropout(x: &Tensor, p: f32, seed: u64) -> Result<Tensor> {
    const OP: &str = "relu_dropout";
    check_float_or_half(OP, "x", x)?;
    check_probability(OP, p)?;
    Ok(x.contiguous()?.apply_op1(ReluDropoutOp { p, seed })?)
}

struct ReluDropoutOp {
    p: f32,
    seed: u64,
}

impl CustomOp1 for ReluDropoutOp {
    fn name(&self) -> &'static str {
        "relu_dropout"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = dispatch_float!("relu_dropout", s, cpu_relu_fwd(s, l, self.p, self.seed))?;
        Ok((out, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::relu_dropout(s, l, self.p, self.seed)
    }

    fn bwd(&self, _x: &Tensor, res: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(res.apply_op2_no_bwd(
            &grad.contiguous()?,
            &ReluDropoutBwd { p: self.p },
        )?))
    }
}

/// `dropout(relu(x + b), p)` with `b [D]` broadcast over the rows of `x [N, D]`, one pass each
/// way (a hidden layer's bias and activation): the mask of [`crate::dropout`] with the same `seed`;
/// `p = 0` is `relu(x + b)`. Backward: `dx = y > 0 ? dy / (1 - p) : 0` (as [`relu_dropout`])
/// and `db = dx.sum(0)` as one GEMM row. The composed ops take a broadcast add (candle's is
/// ~3x a plain add on the GPU), its gradient accumulation and a dim-0 reduction more.
pub fn bias_relu_dropout(x: &Tensor, b: &Tensor, p: f32, seed: u64) -> Result<Tensor> {
    const OP: &str = "bias_relu_dropout";
    check_float_or_half(OP, "x", x)?;
    crate::ops::check_row_bias(OP, "x", x, b)?;
    check_probability(OP, p)?;
    Ok(x.contiguous()?
        .apply_op2(&b.contiguous()?, BiasReluDropoutOp { p, seed })?)
}

struct BiasReluDropoutOp {
    p: f32,
    seed: u64,
}

impl candle_core::CustomOp2 for BiasReluDropoutOp {
    fn name(&self) -> &'static str {
        "bias_relu_dropout"
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        b: &CpuStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = dispatch_float!(
            "bias_relu_dropout",
            x,
            cpu_bias_relu_fwd(x, xl, b, bl, self.p, self.seed)
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
        cuda::bias_relu_dropout(x, xl, b, bl, self.p, self.seed)
    }

    fn bwd(
        &self,
        _x: &Tensor,
        _b: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let dx = res.apply_op2_no_bwd(&grad.contiguous()?, &ReluDropoutBwd { p: self.p })?;
        let db = crate::ops::column_sum(&dx)?;
        Ok((Some(dx), Some(db)))
    }
}

fn cpu_bias_relu_fwd<T: candle_core::WithDType>(
    x: &CpuStorage,
    xl: &Layout,
    b: &CpuStorage,
    bl: &Layout,
    p: f32,
    seed: u64,
) -> candle_core::Result<CpuStorage> {
    let xs = crate::ops::cpu_slice::<T>("bias_relu_dropout", x, xl)?;
    let bs = crate::ops::cpu_slice::<T>("bias_relu_dropout", b, bl)?;
    Ok(T::to_cpu_storage_owned(cpu::bias_relu_dropout(
        xs, bs, p, seed,
    )))
}

struct ReluDropoutBwd {
    p: f32,
}

impl candle_core::CustomOp2 for ReluDropoutBwd {
    fn name(&self) -> &'static str {
        "relu_dropout_bwd"
    }

    fn cpu_fwd(
        &self,
        y: &CpuStorage,
        yl: &Layout,
        d: &CpuStorage,
        dl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = dispatch_float!("relu_dropout", y, cpu_relu_bwd(y, yl, d, dl, self.p))?;
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
        cuda::relu_dropout_bwd(y, yl, d, dl, self.p)
    }
}

fn cpu_relu_fwd<T: candle_core::WithDType>(
    s: &CpuStorage,
    l: &Layout,
    p: f32,
    seed: u64,
) -> candle_core::Result<CpuStorage> {
    let x = crate::ops::cpu_slice::<T>("relu_dropout", s, l)?;
    Ok(T::to_cpu_storage_owned(cpu::relu_dropout(x, p, seed)))
}

fn cpu_relu_bwd<T: candle_core::WithDType>(
    y: &CpuStorage,
    yl: &Layout,
    d: &CpuStorage,
    dl: &Layout,
    p: f32,
) -> candle_core::Result<CpuStorage> {
    let y = crate::ops::cpu_slice::<T>("relu_dropout", y, yl)?;
    let d = crate::ops::cpu_slice::<T>("relu_dropout", d, dl)?;
    Ok(T::to_cpu_storage_owned(cpu::relu_dropout_bwd(y, d, p)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::dropout::dropout;
    use candle_core::{DType, Device, Var};

    #[test]
    fn fused_relu_dropout_equals_the_composed_pair_both_ways() {
        let dev = Device::Cpu;
        for (p, dims) in [
            (0.5f32, (100usize, 37usize)),
            (0.0, (7, 3)),
            (0.9, (1, 1000)),
        ] {
            let x0 = Tensor::randn(0f64, 1.0, dims, &dev).unwrap();
            let w = Tensor::randn(0f64, 1.0, dims, &dev).unwrap();
            let (a, b) = (
                Var::from_tensor(&x0).unwrap(),
                Var::from_tensor(&x0).unwrap(),
            );
            let ya = relu_dropout(a.as_tensor(), p, 11).unwrap();
            let yb = dropout(&b.as_tensor().relu().unwrap(), p, 11).unwrap();
            assert_eq!(ya.to_vec2::<f64>().unwrap(), yb.to_vec2::<f64>().unwrap());
            let ga = (&ya * &w).unwrap().sum_all().unwrap().backward().unwrap();
            let gb = (&yb * &w).unwrap().sum_all().unwrap().backward().unwrap();
            // candle's ReLU passes the gradient at exactly 0; randn never hits 0.
            assert_eq!(
                ga.get(a.as_tensor()).unwrap().to_vec2::<f64>().unwrap(),
                gb.get(b.as_tensor()).unwrap().to_vec2::<f64>().unwrap(),
                "p {p}"
            );
        }
        assert!(relu_dropout(&Tensor::ones(3, DType::F32, &dev).unwrap(), 1.0, 0).is_err());
    }

    #[test]
    fn fused_bias_relu_dropout_equals_the_composed_ops_both_ways() {
        let dev = Device::Cpu;
        for (p, (n, d)) in [
            (0.5f32, (100usize, 37usize)),
            (0.0, (7, 3)),
            (0.9, (1, 1000)),
        ] {
            let x0 = Tensor::randn(0f64, 1.0, (n, d), &dev).unwrap();
            let b0 = Tensor::randn(0f64, 1.0, d, &dev).unwrap();
            let w = Tensor::randn(0f64, 1.0, (n, d), &dev).unwrap();
            let (xa, ba) = (
                Var::from_tensor(&x0).unwrap(),
                Var::from_tensor(&b0).unwrap(),
            );
            let (xb, bb) = (
                Var::from_tensor(&x0).unwrap(),
                Var::from_tensor(&b0).unwrap(),
            );
            let ya = bias_relu_dropout(xa.as_tensor(), ba.as_tensor(), p, 5).unwrap();
            let pre = xb.as_tensor().broadcast_add(bb.as_tensor()).unwrap();
            let yb = relu_dropout(&pre, p, 5).unwrap();
            assert_eq!(ya.to_vec2::<f64>().unwrap(), yb.to_vec2::<f64>().unwrap());
            let ga = (&ya * &w).unwrap().sum_all().unwrap().backward().unwrap();
            let gb = (&yb * &w).unwrap().sum_all().unwrap().backward().unwrap();
            assert_eq!(
                ga.get(xa.as_tensor()).unwrap().to_vec2::<f64>().unwrap(),
                gb.get(xb.as_tensor()).unwrap().to_vec2::<f64>().unwrap(),
                "dx, p {p}"
            );
            // db: the same column sums, added in another order.
            let (da, db): (Vec<f64>, Vec<f64>) = (
                ga.get(ba.as_tensor()).unwrap().to_vec1().unwrap(),
                gb.get(bb.as_tensor()).unwrap().to_vec1().unwrap(),
            );
            for (a, b) in da.iter().zip(&db) {
                assert!(
                    (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                    "db {a} vs {b}, p {p}"
                );
            }
        }
        let x = Tensor::ones((4, 3), DType::F32, &dev).unwrap();
        let b = Tensor::ones(3, DType::F32, &dev).unwrap();
        assert!(bias_relu_dropout(&x, &b, 1.0, 0).is_err());
        assert!(
            bias_relu_dropout(&x, &Tensor::ones(4, DType::F32, &dev).unwrap(), 0.5, 0).is_err()
        );
        assert!(bias_relu_dropout(&x, &b.to_dtype(DType::F64).unwrap(), 0.5, 0).is_err());
    }
}
