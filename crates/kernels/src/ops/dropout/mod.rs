//! Stateless inverted dropout: `out[i] = x[i] / (1 - p)` when element `i` is kept, else 0.
//!
//! Whether element `i` (row-major index) of a call with seed `s` is kept is a pure function of
//! `(s, i)`: a splitmix64 hash of `s + i * 0x9E3779B97F4A7C15`, its top 24 bits compared with
//! `round(p * 2^24)`. CPU and CUDA compute the same hash, so masks are bit-identical across
//! devices, and a training run's dropout state is just the sequence of seeds (see
//! `gnn_models::DropoutRng`), which makes checkpoints resumable exactly. The backward is the
//! same mask applied to the gradient.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use super::check_float_or_half;
use crate::error::{Error, Result};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};

/// The keep threshold of probability `p` on the 24-bit hash scale.
pub(crate) fn threshold(p: f32) -> u64 {
    (p as f64 * (1u64 << 24) as f64).round() as u64
}

/// `p`, a drop probability, must lie in `[0, 1)`.
pub(crate) fn check_probability(op: &'static str, p: f32) -> Result<()> {
    if !(0.0..1.0).contains(&p) {
        return Err(Error::invalid(
            op,
            format!("drop probability {p} must be in [0, 1)"),
        ));
    }
    Ok(())
}

/// Inverted dropout of `x` with drop probability `p in [0, 1)` and mask seed `seed`
/// (differentiable; `p == 0` returns `x`).
pub fn dropout(x: &Tensor, p: f32, seed: u64) -> Result<Tensor> {
    const OP: &str = "dropout";
    check_float_or_half(OP, "x", x)?;
    check_probability(OP, p)?;
    if p == 0.0 {
        return Ok(x.clone());
    }
    Ok(x.contiguous()?.apply_op1(DropoutOp { p, seed })?)
}

/// The keep mask as 0/1 values (for tests and for reading a mask back).
pub fn dropout_mask(len: usize, p: f32, seed: u64) -> Vec<bool> {
    let t = threshold(p);
    (0..len as u64).map(|i| cpu::keep(seed, i, t)).collect()
}

/// [`dropout`] as an op (its own backward: the same mask on the gradient).
pub(crate) struct DropoutOp {
    pub(crate) p: f32,
    pub(crate) seed: u64,
}

impl CustomOp1 for DropoutOp {
    fn name(&self) -> &'static str {
        "dropout"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = dispatch_float!("dropout", s, cpu_fwd(s, l, self.p, self.seed))?;
        Ok((out, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::dropout(s, l, self.p, self.seed)
    }

    fn bwd(
        &self,
        _x: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(grad.contiguous()?.apply_op1_no_bwd(&DropoutOp {
            p: self.p,
            seed: self.seed,
        })?))
    }
}

fn cpu_fwd<T: candle_core::WithDType>(
    s: &CpuStorage,
    l: &Layout,
    p: f32,
    seed: u64,
) -> candle_core::Result<CpuStorage> {
    let x = super::cpu_slice::<T>("dropout", s, l)?;
    Ok(T::to_cpu_storage_owned(cpu::dropout(x, p, seed)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device, Var};

    #[test]
    fn keeps_about_one_minus_p_scaled_and_backward_uses_the_same_mask() {
        let dev = Device::Cpu;
        let x = Var::from_tensor(&Tensor::ones((100, 37), DType::F64, &dev).unwrap()).unwrap();
        for p in [0.1f32, 0.5, 0.9] {
            let y = dropout(x.as_tensor(), p, 7).unwrap();
            let v: Vec<f64> = y.flatten_all().unwrap().to_vec1().unwrap();
            let kept = v.iter().filter(|&&a| a != 0.0).count() as f64 / v.len() as f64;
            assert!((kept - (1.0 - p as f64)).abs() < 0.03, "p {p}: kept {kept}");
            let scale = 1.0 / (1.0 - p as f64);
            assert!(v.iter().all(|&a| a == 0.0 || (a - scale).abs() < 1e-6));
            let mask = dropout_mask(v.len(), p, 7);
            assert!(v.iter().zip(&mask).all(|(&a, &m)| (a != 0.0) == m));
            let g = y.sum_all().unwrap().backward().unwrap();
            let gx: Vec<f64> = g
                .get(x.as_tensor())
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            assert_eq!(gx, v, "d(sum y)/dx is the scaled mask");
        }
        // Other seeds give other masks; the same seed gives the same one.
        assert_ne!(dropout_mask(500, 0.5, 1), dropout_mask(500, 0.5, 2));
        assert_eq!(dropout_mask(500, 0.5, 3), dropout_mask(500, 0.5, 3));
        assert!(dropout(x.as_tensor(), 1.0, 0).is_err());
        let same = dropout(x.as_tensor(), 0.0, 0).unwrap();
        assert_eq!(
            same.to_vec2::<f64>().unwrap(),
            x.as_tensor().to_vec2::<f64>().unwrap()
        );
    }
}
