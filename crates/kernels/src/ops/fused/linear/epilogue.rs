//! The linear product's epilogue as one op: `dropout(relu(x · wᵀ + b)) [+ x]` over
//! `(x, w, b)`, the product a temporary and the mask kept as bits.

use super::super::product::{residual_input, take_once, Epilogue, Grads3, ProductEpilogue};
use super::{AggregateParts, LinearProduct};
use crate::error::{Error, Result};
use crate::ops::dropout::check_probability;
use crate::ops::optional::{Cpu, CpuOut};
#[cfg(feature = "cuda")]
use crate::ops::optional::{Cuda, CudaOut};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};
use std::sync::Mutex;

/// A hidden layer whose linear product comes last: `dropout(relu(x · wᵀ + b), p)` from a
/// [`LinearProduct`], as one differentiable op over `(x, w, b)` that keeps nothing for its
/// backward but those inputs, its output and the mask as bits.
///
/// Composed, as `bias_relu_dropout(matmul_nt(x, w), b)`, candle's graph would hold the product
/// `x · wᵀ` from the forward to the end of the backward (it is the activation op's input),
/// though no backward reads it: one `[N, out]` tensor per hidden layer (0.22 GiB at Reddit's
/// 233 K nodes and width 256 in f32). Here the product is a temporary, freed once the
/// activation is written. Backward, from the mask: `dz = pass ? dy / (1 - p) : 0`,
/// `db = Σ_rows dz`, `dw = dzᵀ x`, and `dx = dz w` only when `x` tracks (a first layer's
/// input needs none). Values and mask equal [`crate::bias_relu_dropout`] of the product, bit for bit.
///
/// Of an [`crate::Aggregate`] (`x = Â h`), the op's first input is `h`: `dw = dzᵀ (Â h)` and
/// `dh = Âᵀ (dz w)`, one gradient for `h` where the composed ops give `Â h` one (through a
/// zero-filled accumulation) and `h` another.
impl LinearProduct {
    /// The layer's output; `b [out]` in the product's dtype, `p in [0, 1)`, mask seed `seed`
    /// (that of [`crate::dropout`] on an `[N, out]` tensor).
    pub fn bias_relu_dropout(self, b: &Tensor, p: f32, seed: u64) -> Result<Tensor> {
        self.epilogue(b, p, seed, false)
    }

    /// [`Self::bias_relu_dropout`] plus the op's input (`x`, or `h` of an aggregate) as a
    /// residual, `out = dropout(relu(...)) + x`, added in the same pass (a residual hidden
    /// layer; the input must have the output's shape). In the backward the output's gradient
    /// is added to the input's inside the op (one add), so the input leaves with one gradient.
    pub fn bias_relu_dropout_residual(self, b: &Tensor, p: f32, seed: u64) -> Result<Tensor> {
        self.epilogue(b, p, seed, true)
    }

    fn epilogue(self, b: &Tensor, p: f32, seed: u64, residual: bool) -> Result<Tensor> {
        const OP: &str = LBRD;
        let out = self.out_dim();
        if b.dims() != [out] {
            return Err(Error::shape(
                OP,
                format!("b {:?} must be [{out}], the product's width", b.dims()),
            ));
        }
        if b.dtype() != self.dtype() {
            return Err(Error::dtype(
                OP,
                format!("b is {:?}, the product {:?}", b.dtype(), self.dtype()),
            ));
        }
        check_probability(OP, p)?;
        let (x, w, z, agg) = self.into_parts();
        let x = residual_input(OP, x, residual, z.dims())?;
        let op = LinearBiasReluDropoutOp {
            p,
            seed,
            residual,
            agg,
            z: Mutex::new(Some(z)),
            mask: Mutex::new(None),
        };
        Ok(x.apply_op3(&w, &b.contiguous()?, Epilogue(op))?)
    }
}

/// Holds the product until its forward consumes it (then drops it, so the graph keeps only
/// the inputs, the output and the mask), and the mask from the forward to the backward.
struct LinearBiasReluDropoutOp {
    p: f32,
    seed: u64,
    residual: bool,
    agg: Option<AggregateParts>,
    z: Mutex<Option<Tensor>>,
    mask: Mutex<Option<MaskBits>>,
}

/// A forward's pass/fail mask, bit `i % 32` of word `i / 32` for element `i`.
pub(super) enum MaskBits {
    Cpu(Vec<u32>),
    #[cfg(feature = "cuda")]
    Cuda(CudaStorage),
}

const LBRD: &str = "linear_bias_relu_dropout";

fn poisoned() -> candle_core::Error {
    candle_core::Error::Msg(format!("{LBRD}: lock poisoned"))
}

impl LinearBiasReluDropoutOp {
    fn take_product(&self) -> candle_core::Result<Tensor> {
        take_once(LBRD, &self.z)
    }

    fn keep_mask(&self, bits: MaskBits) -> candle_core::Result<()> {
        *self.mask.lock().map_err(|_| poisoned())? = Some(bits);
        Ok(())
    }
}

impl ProductEpilogue for LinearBiasReluDropoutOp {
    const NAME: &'static str = LBRD;

    fn cpu(&self, x: Cpu<'_>, (b, bl): Cpu<'_>) -> CpuOut {
        let z = self.take_product()?;
        let (zs, zl) = z.storage_and_layout();
        let candle_core::Storage::Cpu(zs) = &*zs else {
            candle_core::bail!("{LBRD}: the product is not on the CPU");
        };
        let r = self.residual.then_some(x);
        let (out, bits) = dispatch_float!(
            LBRD,
            zs,
            cpu_bias_relu_bits_fwd(zs, zl, b, bl, r, false, self.p, self.seed)
        )?;
        self.keep_mask(MaskBits::Cpu(bits))?;
        Ok((out, zl.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda(&self, x: Cuda<'_>, (b, bl): Cuda<'_>) -> CudaOut {
        let z = self.take_product()?;
        let (zs, zl) = z.storage_and_layout();
        let candle_core::Storage::Cuda(zs) = &*zs else {
            candle_core::bail!("{LBRD}: the product is not on the GPU");
        };
        let r = self.residual.then_some(x);
        // The product's buffer goes back to the stream-ordered pool after this launch.
        let (out, bits, shape) =
            super::cuda::bias_relu_dropout_bits(zs, zl, b, bl, r, false, self.p, self.seed)?;
        self.keep_mask(MaskBits::Cuda(bits))?;
        Ok((out, shape))
    }

    fn grads(&self, x: &Tensor, w: &Tensor, b: &Tensor, grad: &Tensor) -> Grads3 {
        let bits = self
            .mask
            .lock()
            .map_err(|_| poisoned())?
            .take()
            .ok_or_else(|| candle_core::Error::Msg(format!("{LBRD}: backward without forward")))?;
        let grad = grad.contiguous()?;
        let dz = grad.apply_op1_no_bwd(&MaskBitsBwd { p: self.p, bits })?;
        // Products with the tracked inputs themselves would record ops, and the gradients
        // returned would hold `dz` (`[N, out]`) alive until the gradient store is dropped.
        let (xd, wd) = (x.detach(), w.detach());
        // The product's input: `x`, or `Â h` of an aggregate.
        let input = self.agg.as_ref().map_or(&xd, |a| &a.a);
        let dw = if w.track_op() {
            Some(crate::ops::matmul::weight_grad(&dz, input)?)
        } else {
            None
        };
        let db = if b.track_op() {
            Some(crate::ops::column_sum(&dz)?)
        } else {
            None
        };
        if !x.track_op() {
            return Ok((None, dw, db));
        }
        let mut dx = dz.matmul(&wd)?;
        drop(dz);
        if let Some(a) = &self.agg {
            let _timer = a.g.backward_timer();
            dx = crate::ops::spmm::transpose_product(&a.g, &dx, a.values.as_ref(), a.mean)?;
        }
        if self.residual {
            dx = (dx + grad)?;
        }
        Ok((Some(dx), dw, db))
    }
}

/// `dx = pass ? dy / (1 - p) : 0` from a forward's [`MaskBits`] (taken by the backward).
pub(super) struct MaskBitsBwd {
    pub(super) p: f32,
    pub(super) bits: MaskBits,
}

impl CustomOp1 for MaskBitsBwd {
    fn name(&self) -> &'static str {
        "mask_bits_bwd"
    }

    // Without the `cuda` feature the mask has one variant.
    #[allow(irrefutable_let_patterns)]
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let MaskBits::Cpu(bits) = &self.bits else {
            candle_core::bail!("mask_bits_bwd: the mask is not on the CPU");
        };
        if bits.len() < l.shape().elem_count().div_ceil(32) {
            candle_core::bail!(
                "mask_bits_bwd: a mask of {} words for {:?}",
                bits.len(),
                l.shape()
            );
        }
        let out = dispatch_float!("mask_bits_bwd", s, cpu_mask_bits_bwd(s, l, bits, self.p))?;
        Ok((out, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        let MaskBits::Cuda(bits) = &self.bits else {
            candle_core::bail!("mask_bits_bwd: the mask is not on the GPU");
        };
        super::cuda::mask_bits_bwd(s, l, bits, self.p)
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn cpu_bias_relu_bits_fwd<T: candle_core::WithDType>(
    x: &CpuStorage,
    xl: &Layout,
    b: &CpuStorage,
    bl: &Layout,
    r: Option<(&CpuStorage, &Layout)>,
    pre: bool,
    p: f32,
    seed: u64,
) -> candle_core::Result<(CpuStorage, Vec<u32>)> {
    let xs = crate::ops::cpu_slice::<T>(LBRD, x, xl)?;
    let bs = crate::ops::cpu_slice::<T>(LBRD, b, bl)?;
    let rs = crate::ops::cpu_slice_opt::<T>(LBRD, r)?;
    let (out, bits) = super::cpu::bias_relu_dropout_bits(xs, bs, rs, pre, p, seed);
    Ok((T::to_cpu_storage_owned(out), bits))
}

fn cpu_mask_bits_bwd<T: candle_core::WithDType>(
    s: &CpuStorage,
    l: &Layout,
    bits: &[u32],
    p: f32,
) -> candle_core::Result<CpuStorage> {
    let dy = crate::ops::cpu_slice::<T>("mask_bits_bwd", s, l)?;
    Ok(T::to_cpu_storage_owned(super::cpu::mask_bits_bwd(
        bits, dy, p,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bias_relu_dropout;
    use candle_core::{DType, Device, Var};

    #[test]
    fn linear_bias_relu_dropout_equals_the_composed_ops_both_ways() {
        use crate::matmul_nt;
        let dev = Device::Cpu;
        let close = |a: &Tensor, b: &Tensor, what: &str| {
            let (a, b): (Vec<f64>, Vec<f64>) = (
                a.flatten_all().unwrap().to_vec1().unwrap(),
                b.flatten_all().unwrap().to_vec1().unwrap(),
            );
            assert_eq!(a.len(), b.len(), "{what}");
            for (x, y) in a.iter().zip(&b) {
                assert!(
                    (x - y).abs() <= 1e-12 * (1.0 + y.abs()),
                    "{what}: {x} vs {y}"
                );
            }
        };
        // Widths not a multiple of 32, one row, a single wide row, no rows.
        for (p, (n, i, o)) in [
            (0.5f32, (60usize, 37usize, 33usize)),
            (0.0, (7, 3, 5)),
            (0.9, (1, 300, 70)),
            (0.3, (0, 4, 6)),
        ] {
            let x0 = Tensor::randn(0f64, 1.0, (n, i), &dev).unwrap();
            let w0 = Tensor::randn(0f64, 1.0, (o, i), &dev).unwrap();
            let b0 = Tensor::randn(0f64, 1.0, o, &dev).unwrap();
            let r = Tensor::randn(0f64, 1.0, (n, o), &dev).unwrap();
            for x_tracks in [true, false] {
                let vars = |t: &Tensor| Var::from_tensor(t).unwrap();
                let (xa, wa, ba) = (vars(&x0), vars(&w0), vars(&b0));
                let (xb, wb, bb) = (vars(&x0), vars(&w0), vars(&b0));
                let (xa_t, xb_t) = if x_tracks {
                    (xa.as_tensor().clone(), xb.as_tensor().clone())
                } else {
                    (x0.clone(), x0.clone())
                };
                let ya = LinearProduct::new(&xa_t, wa.as_tensor())
                    .unwrap()
                    .bias_relu_dropout(ba.as_tensor(), p, 9)
                    .unwrap();
                let yb = bias_relu_dropout(
                    &matmul_nt(&xb_t, wb.as_tensor()).unwrap(),
                    bb.as_tensor(),
                    p,
                    9,
                )
                .unwrap();
                assert_eq!(ya.dims(), [n, o]);
                assert_eq!(
                    ya.to_vec2::<f64>().unwrap(),
                    yb.to_vec2::<f64>().unwrap(),
                    "values, p {p}"
                );
                let ga = (&ya * &r).unwrap().sum_all().unwrap().backward().unwrap();
                let gb = (&yb * &r).unwrap().sum_all().unwrap().backward().unwrap();
                let what = format!("p {p}, ({n}, {i}, {o}), x tracks {x_tracks}");
                // The op's gradients record no op: they hold no backward intermediate alive.
                for v in [&xa, &wa, &ba] {
                    if let Some(g) = ga.get(v.as_tensor()) {
                        assert!(!g.track_op(), "a gradient records an op, {what}");
                    }
                }
                for (a, b, name) in [(&wa, &wb, "dw"), (&ba, &bb, "db")] {
                    close(
                        ga.get(a.as_tensor()).unwrap(),
                        gb.get(b.as_tensor()).unwrap(),
                        &format!("{name}, {what}"),
                    );
                }
                if x_tracks {
                    close(
                        ga.get(xa.as_tensor()).unwrap(),
                        gb.get(xb.as_tensor()).unwrap(),
                        &format!("dx, {what}"),
                    );
                } else {
                    assert!(ga.get(&x0).is_none(), "an untracked input gets no gradient");
                }
            }
        }
        let x = Tensor::ones((4, 3), DType::F32, &dev).unwrap();
        let w = Tensor::ones((2, 3), DType::F32, &dev).unwrap();
        let b = Tensor::ones(2, DType::F32, &dev).unwrap();
        let z = || LinearProduct::new(&x, &w).unwrap();
        assert!(z().bias_relu_dropout(&b, 1.0, 0).is_err());
        assert!(z().bias_relu_dropout(&x, 0.5, 0).is_err());
        assert!(z()
            .bias_relu_dropout(&b.to_dtype(DType::F64).unwrap(), 0.5, 0)
            .is_err());
        let w_in4 = Tensor::ones((2, 4), DType::F32, &dev).unwrap();
        assert!(LinearProduct::new(&x, &w_in4).is_err(), "in 3 against in 4");
        assert!(LinearProduct::new(&x, &w.to_dtype(DType::F64).unwrap()).is_err());
    }
}
