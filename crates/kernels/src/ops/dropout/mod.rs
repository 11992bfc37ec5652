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
use super::matmul::{AggregateParts, LinearProduct};
use crate::error::{Error, Result};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};
use std::sync::Mutex;

/// The keep threshold of probability `p` on the 24-bit hash scale.
pub(crate) fn threshold(p: f32) -> u64 {
    (p as f64 * (1u64 << 24) as f64).round() as u64
}

/// `p`, a drop probability, must lie in `[0, 1)`.
fn check_probability(op: &'static str, p: f32) -> Result<()> {
    if !(0.0..1.0).contains(&p) {
        return Err(Error::Shape {
            op,
            what: format!("drop probability {p} must be in [0, 1)"),
        });
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

/// `dropout(relu(x), p)` in one pass each way (training's hidden activation): the mask of
/// [`dropout`] with the same `seed`, so the result equals the composed pair exactly; `p = 0`
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
/// way (a hidden layer's bias and activation): the mask of [`dropout`] with the same `seed`;
/// `p = 0` is `relu(x + b)`. Backward: `dx = y > 0 ? dy / (1 - p) : 0` (as [`relu_dropout`])
/// and `db = dx.sum(0)` as one GEMM row. The composed ops take a broadcast add (candle's is
/// ~3x a plain add on the GPU), its gradient accumulation and a dim-0 reduction more.
pub fn bias_relu_dropout(x: &Tensor, b: &Tensor, p: f32, seed: u64) -> Result<Tensor> {
    const OP: &str = "bias_relu_dropout";
    check_float_or_half(OP, "x", x)?;
    let (xd, bd) = (x.dims(), b.dims());
    if xd.len() != 2 || bd != [xd[1]] {
        return Err(Error::Shape {
            op: OP,
            what: format!("x {xd:?} and b {bd:?} must be [N, D] and [D]"),
        });
    }
    if b.dtype() != x.dtype() {
        return Err(Error::Shape {
            op: OP,
            what: format!("b is {:?}, x {:?}", b.dtype(), x.dtype()),
        });
    }
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
        let db = super::column_sum(&dx)?;
        Ok((Some(dx), Some(db)))
    }
}

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
/// input needs none). Values and mask equal [`bias_relu_dropout`] of the product, bit for bit.
///
/// Of an [`crate::Aggregate`] (`x = Â h`), the op's first input is `h`: `dw = dzᵀ (Â h)` and
/// `dh = Âᵀ (dz w)`, one gradient for `h` where the composed ops give `Â h` one (through a
/// zero-filled accumulation) and `h` another.
impl LinearProduct {
    /// The layer's output; `b [out]` in the product's dtype, `p in [0, 1)`, mask seed `seed`
    /// (that of [`dropout`] on an `[N, out]` tensor).
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
            return Err(Error::Shape {
                op: OP,
                what: format!("b {:?} must be [{out}], the product's width", b.dims()),
            });
        }
        if b.dtype() != self.dtype() {
            return Err(Error::Shape {
                op: OP,
                what: format!("b is {:?}, the product {:?}", b.dtype(), self.dtype()),
            });
        }
        check_probability(OP, p)?;
        let (x, w, z, agg) = self.into_parts();
        let x = if residual {
            if x.dims() != z.dims() {
                return Err(Error::Shape {
                    op: OP,
                    what: format!(
                        "a residual input {:?} must have the output's shape {:?}",
                        x.dims(),
                        z.dims()
                    ),
                });
            }
            x.contiguous()?
        } else {
            x
        };
        let op = LinearBiasReluDropoutOp {
            p,
            seed,
            residual,
            agg,
            z: Mutex::new(Some(z)),
            mask: Mutex::new(None),
        };
        Ok(x.apply_op3(&w, &b.contiguous()?, op)?)
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
enum MaskBits {
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
        self.z
            .lock()
            .map_err(|_| poisoned())?
            .take()
            .ok_or_else(|| candle_core::Error::Msg(format!("{LBRD}: forward ran twice")))
    }

    fn keep_mask(&self, bits: MaskBits) -> candle_core::Result<()> {
        *self.mask.lock().map_err(|_| poisoned())? = Some(bits);
        Ok(())
    }
}

impl candle_core::CustomOp3 for LinearBiasReluDropoutOp {
    fn name(&self) -> &'static str {
        LBRD
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        _w: &CpuStorage,
        _wl: &Layout,
        b: &CpuStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let z = self.take_product()?;
        let (zs, zl) = z.storage_and_layout();
        let candle_core::Storage::Cpu(zs) = &*zs else {
            candle_core::bail!("{LBRD}: the product is not on the CPU");
        };
        let r = self.residual.then_some((x, xl));
        let (out, bits) = dispatch_float!(
            LBRD,
            zs,
            cpu_bias_relu_bits_fwd(zs, zl, b, bl, r, self.p, self.seed)
        )?;
        self.keep_mask(MaskBits::Cpu(bits))?;
        Ok((out, zl.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        _w: &CudaStorage,
        _wl: &Layout,
        b: &CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let z = self.take_product()?;
        let (zs, zl) = z.storage_and_layout();
        let candle_core::Storage::Cuda(zs) = &*zs else {
            candle_core::bail!("{LBRD}: the product is not on the GPU");
        };
        let r = self.residual.then_some((x, xl));
        // The product's buffer goes back to the stream-ordered pool after this launch.
        let (out, bits, shape) = cuda::bias_relu_dropout_bits(zs, zl, b, bl, r, self.p, self.seed)?;
        self.keep_mask(MaskBits::Cuda(bits))?;
        Ok((out, shape))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
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
            Some(super::matmul::weight_grad(&dz, input)?)
        } else {
            None
        };
        let db = if b.track_op() {
            Some(super::column_sum(&dz)?)
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
            dx = super::spmm::transpose_product(&a.g, &dx, a.values.as_ref(), a.mean)?;
        }
        if self.residual {
            dx = (dx + grad)?;
        }
        Ok((Some(dx), dw, db))
    }
}

/// `dx = pass ? dy / (1 - p) : 0` from a forward's [`MaskBits`] (taken by the backward).
struct MaskBitsBwd {
    p: f32,
    bits: MaskBits,
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
        cuda::mask_bits_bwd(s, l, bits, self.p)
    }
}

fn cpu_bias_relu_bits_fwd<T: candle_core::WithDType>(
    x: &CpuStorage,
    xl: &Layout,
    b: &CpuStorage,
    bl: &Layout,
    r: Option<(&CpuStorage, &Layout)>,
    p: f32,
    seed: u64,
) -> candle_core::Result<(CpuStorage, Vec<u32>)> {
    let xs = super::cpu_slice::<T>(LBRD, x, xl)?;
    let bs = super::cpu_slice::<T>(LBRD, b, bl)?;
    let rs = super::cpu_slice_opt::<T>(LBRD, r)?;
    let (out, bits) = cpu::bias_relu_dropout_bits(xs, bs, rs, p, seed);
    Ok((T::to_cpu_storage_owned(out), bits))
}

fn cpu_mask_bits_bwd<T: candle_core::WithDType>(
    s: &CpuStorage,
    l: &Layout,
    bits: &[u32],
    p: f32,
) -> candle_core::Result<CpuStorage> {
    let dy = super::cpu_slice::<T>("mask_bits_bwd", s, l)?;
    Ok(T::to_cpu_storage_owned(cpu::mask_bits_bwd(bits, dy, p)))
}

fn cpu_bias_relu_fwd<T: candle_core::WithDType>(
    x: &CpuStorage,
    xl: &Layout,
    b: &CpuStorage,
    bl: &Layout,
    p: f32,
    seed: u64,
) -> candle_core::Result<CpuStorage> {
    let xs = super::cpu_slice::<T>("bias_relu_dropout", x, xl)?;
    let bs = super::cpu_slice::<T>("bias_relu_dropout", b, bl)?;
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
    let x = super::cpu_slice::<T>("relu_dropout", s, l)?;
    Ok(T::to_cpu_storage_owned(cpu::relu_dropout(x, p, seed)))
}

fn cpu_relu_bwd<T: candle_core::WithDType>(
    y: &CpuStorage,
    yl: &Layout,
    d: &CpuStorage,
    dl: &Layout,
    p: f32,
) -> candle_core::Result<CpuStorage> {
    let y = super::cpu_slice::<T>("relu_dropout", y, yl)?;
    let d = super::cpu_slice::<T>("relu_dropout", d, dl)?;
    Ok(T::to_cpu_storage_owned(cpu::relu_dropout_bwd(y, d, p)))
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
