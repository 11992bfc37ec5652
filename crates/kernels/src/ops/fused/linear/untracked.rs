//! The bias + ReLU + dropout epilogue outside the autograd graph, with its mask as bits, for
//! fused layers assembled from several ops ([`crate::attach_backward`]): a layer whose
//! activation is consumed at once (by the next layer's aggregation, say) keeps the mask, a
//! bit per element, instead of the activation.

use super::epilogue::{cpu_bias_relu_bits_fwd, MaskBits, MaskBitsBwd};
use crate::error::{Error, Result};
use crate::ops::check_float_or_half;
use crate::ops::dropout::check_probability;
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Shape, Tensor};
use std::sync::Mutex;

/// The mask of [`bias_relu_dropout_untracked`]: which elements passed (ReLU and dropout),
/// one bit each, and the rate.
pub struct EpilogueMask(MaskBitsBwd);

impl EpilogueMask {
    /// The pre-activation's gradient `dz = pass ? dy / (1 - p) : 0` for the activation's `dy`.
    pub fn backward(&self, dy: &Tensor) -> Result<Tensor> {
        Ok(dy.contiguous()?.apply_op1_no_bwd(&self.0)?)
    }
}

/// `dropout(relu(z + b), p)` (`z [N, D]`, `b [D]` in `z`'s dtype, mask seed `seed`: the mask
/// and values of [`crate::bias_relu_dropout`], bit for bit), untracked, and its mask for the
/// backward.
pub fn bias_relu_dropout_untracked(
    z: &Tensor,
    b: &Tensor,
    p: f32,
    seed: u64,
) -> Result<(Tensor, EpilogueMask)> {
    add_bias_relu_dropout_untracked(z, None, b, p, seed)
}

/// [`bias_relu_dropout_untracked`] of `z + q` when `q` is given (`q` of `z`'s shape and dtype,
/// the sum rounded to that dtype as a separate add would round it, then the bias): one pass
/// where an add and the epilogue took two (GraphSAGE's two products: the add alone wrote and
/// read an `[N, out]` tensor, 126 us of a bf16 2x128 epoch on an H200).
pub fn add_bias_relu_dropout_untracked(
    z: &Tensor,
    q: Option<&Tensor>,
    b: &Tensor,
    p: f32,
    seed: u64,
) -> Result<(Tensor, EpilogueMask)> {
    const OP: &str = "bias_relu_dropout_untracked";
    check_float_or_half(OP, "z", z)?;
    crate::ops::check_row_bias(OP, "z", z, b)?;
    check_probability(OP, p)?;
    if let Some(q) = q {
        crate::ops::check_device_of(OP, z, q)?;
        if q.dims() != z.dims() || q.dtype() != z.dtype() {
            return Err(Error::shape(
                OP,
                format!(
                    "q is {:?} {:?}, z {:?} {:?}",
                    q.dims(),
                    q.dtype(),
                    z.dims(),
                    z.dtype()
                ),
            ));
        }
    }
    let op = BitsFwd {
        p,
        seed,
        mask: Mutex::new(None),
    };
    let (z, b) = (z.detach().contiguous()?, b.detach().contiguous()?);
    let out = match q {
        Some(q) => z.apply_op3_no_bwd(&q.detach().contiguous()?, &b, &op)?,
        None => z.apply_op2_no_bwd(&b, &op)?,
    };
    let bits = op
        .mask
        .into_inner()
        .map_err(|_| Error::Candle(candle_core::Error::Msg(format!("{OP}: lock poisoned"))))?
        .ok_or_else(|| Error::Candle(candle_core::Error::Msg(format!("{OP}: no mask written"))))?;
    Ok((out, EpilogueMask(MaskBitsBwd { p, bits })))
}

/// The forward kernel, keeping the mask it writes.
struct BitsFwd {
    p: f32,
    seed: u64,
    mask: Mutex<Option<MaskBits>>,
}

impl BitsFwd {
    fn keep(&self, bits: MaskBits) -> candle_core::Result<()> {
        *self.mask.lock().map_err(|_| {
            candle_core::Error::Msg("bias_relu_dropout_untracked: lock poisoned".into())
        })? = Some(bits);
        Ok(())
    }

    /// The epilogue of `z` (of `z + q` where `q` is given) on the CPU, keeping its mask.
    fn cpu(
        &self,
        (z, zl): (&CpuStorage, &Layout),
        q: Option<(&CpuStorage, &Layout)>,
        (b, bl): (&CpuStorage, &Layout),
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let pre = q.is_some();
        let (out, bits) = dispatch_float!(
            "bias_relu_dropout_untracked",
            z,
            cpu_bias_relu_bits_fwd(z, zl, b, bl, q, pre, self.p, self.seed)
        )?;
        self.keep(MaskBits::Cpu(bits))?;
        Ok((out, zl.shape().clone()))
    }

    /// The same on the GPU.
    #[cfg(feature = "cuda")]
    fn cuda(
        &self,
        (z, zl): (&CudaStorage, &Layout),
        q: Option<(&CudaStorage, &Layout)>,
        (b, bl): (&CudaStorage, &Layout),
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let pre = q.is_some();
        let (out, bits, shape) =
            super::cuda::bias_relu_dropout_bits(z, zl, b, bl, q, pre, self.p, self.seed)?;
        self.keep(MaskBits::Cuda(bits))?;
        Ok((out, shape))
    }
}

/// `(z, q, b)`: the epilogue of `z + q`.
impl CustomOp3 for BitsFwd {
    fn name(&self) -> &'static str {
        "add_bias_relu_dropout_untracked"
    }

    fn cpu_fwd(
        &self,
        z: &CpuStorage,
        zl: &Layout,
        q: &CpuStorage,
        ql: &Layout,
        b: &CpuStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.cpu((z, zl), Some((q, ql)), (b, bl))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        z: &CudaStorage,
        zl: &Layout,
        q: &CudaStorage,
        ql: &Layout,
        b: &CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        self.cuda((z, zl), Some((q, ql)), (b, bl))
    }
}

/// `(z, b)`: the epilogue of `z`.
impl CustomOp2 for BitsFwd {
    fn name(&self) -> &'static str {
        "bias_relu_dropout_untracked"
    }

    fn cpu_fwd(
        &self,
        z: &CpuStorage,
        zl: &Layout,
        b: &CpuStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.cpu((z, zl), None, (b, bl))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        z: &CudaStorage,
        zl: &Layout,
        b: &CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        self.cuda((z, zl), None, (b, bl))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn values_and_gradient_are_the_tracked_epilogues() {
        let dev = Device::Cpu;
        let z = Var::from_tensor(&Tensor::randn(0f32, 1.0, (9, 37), &dev).unwrap()).unwrap();
        let b = Tensor::randn(0f32, 1.0, 37, &dev).unwrap();
        let g = Tensor::randn(0f32, 1.0, (9, 37), &dev).unwrap();
        for p in [0.0, 0.5] {
            let y = crate::bias_relu_dropout(&z, &b, p, 11).unwrap();
            let want = (&y * &g).unwrap().sum_all().unwrap().backward().unwrap();
            let (out, mask) = bias_relu_dropout_untracked(&z, &b, p, 11).unwrap();
            assert!(!out.track_op());
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            assert_eq!(flat(&out), flat(&y), "p {p}");
            let dz = mask.backward(&g).unwrap();
            assert_eq!(flat(&dz), flat(want.get(&z).unwrap()), "p {p}");
        }
        // With an addend: the epilogue of the sum, bit for bit, and the same mask.
        let q = Tensor::randn(0f32, 1.0, (9, 37), &dev).unwrap();
        let sum = (z.as_tensor() + &q).unwrap();
        for p in [0.0, 0.5] {
            let (want, wm) = bias_relu_dropout_untracked(&sum, &b, p, 11).unwrap();
            let (got, gm) = add_bias_relu_dropout_untracked(&z, Some(&q), &b, p, 11).unwrap();
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            assert_eq!(flat(&got), flat(&want), "p {p}");
            assert_eq!(
                flat(&gm.backward(&g).unwrap()),
                flat(&wm.backward(&g).unwrap()),
                "p {p}"
            );
        }
        let q_short = Tensor::zeros((9, 36), candle_core::DType::F32, &dev).unwrap();
        assert!(add_bias_relu_dropout_untracked(&z, Some(&q_short), &b, 0.5, 1).is_err());
        let short = Tensor::zeros(5, candle_core::DType::F32, &dev).unwrap();
        assert!(bias_relu_dropout_untracked(&z, &short, 0.5, 1).is_err());
    }
}
