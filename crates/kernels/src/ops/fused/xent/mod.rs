//! Fused masked cross-entropy: `loss = sum_i w_i (logsumexp(x_i) - x_i[y_i])` over the rows of
//! logits `x [N, C]`, labels `y [N]` (u32) and row weights `w [N]` (f32; `1 / n_train` on the
//! training rows and 0 elsewhere gives the mean cross-entropy over the training split).
//!
//! One pass per direction instead of candle's composed log-softmax (max, subtract, exp, sum,
//! log, subtract, multiply, sum: about eight kernels forward and as many backward, each over
//! the whole `[N, C]`, each gradient accumulated into a fresh zero tensor). Forward writes the
//! losses' partial sums (one per row on the CPU; one per block of rows on the GPU, summed in a
//! fixed order, so the loss is the same on every run); backward recomputes each row's
//! logsumexp and writes
//! `g_i w_i (softmax(x_i) - onehot(y_i))`. Rows with `w_i = 0` give nothing; up to 128 classes
//! their logits are read anyway (rows of at most 256 bytes are copied to shared memory a tile
//! at a time, and a warp issues its rows' loads before it knows their weights), wider rows
//! cost a read of `w_i` only.
//! Logits may be f32 / f64 (CPU, CUDA f32) or bf16 / f16 (CUDA); the arithmetic is fp32 (f64
//! on the CPU for f64 logits) and the gradient comes back in the logits' dtype. A label
//! outside `0..C` makes its row's loss NaN (the trainer's non-finite guard names it) rather
//! than reading out of bounds.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use crate::error::{Error, Result};
use crate::ops::{check_device_of, check_float_or_half};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp3, DType, Layout, Shape, Tensor};

/// The masked mean cross-entropy (a scalar f32) of `logits [N, C]` against `labels [N]` (u32)
/// with row weights `weight [N]` (f32); differentiable in `logits`.
pub fn masked_cross_entropy(logits: &Tensor, labels: &Tensor, weight: &Tensor) -> Result<Tensor> {
    check("masked_cross_entropy", logits, labels, weight)?;
    let rows = logits.contiguous()?.apply_op3(
        &labels.contiguous()?,
        &weight.contiguous()?,
        Xent(Pass::Loss),
    )?;
    Ok(rows.sum_all()?)
}

/// The gradient of [`masked_cross_entropy`] in `logits` for the loss's upstream gradient
/// `grad` (one float element: `[]` or `[1]`): `grad · w_i (softmax(x_i) -
/// onehot(y_i))`, in the logits' dtype, outside the autograd graph. For a fused op that takes
/// the loss into its own backward: the logits' gradient then goes straight to it, where
/// candle would first add it into a zero-filled `[N, C]` tensor.
pub fn masked_cross_entropy_grad(
    logits: &Tensor,
    labels: &Tensor,
    weight: &Tensor,
    grad: &Tensor,
) -> Result<Tensor> {
    const OP: &str = "masked_cross_entropy_grad";
    check(OP, logits, labels, weight)?;
    check_device_of(OP, logits, grad)?;
    check_float_or_half(OP, "the loss's gradient", grad)?;
    if grad.elem_count() != 1 {
        return Err(Error::shape(
            OP,
            format!(
                "the loss's gradient has shape {:?}, expected one element",
                grad.dims()
            ),
        ));
    }
    Ok(grad_of(logits, labels, weight, grad)?)
}

/// Checks the operands of [`masked_cross_entropy`] for `op`.
fn check(op: &'static str, logits: &Tensor, labels: &Tensor, weight: &Tensor) -> Result<()> {
    check_float_or_half(op, "logits", logits)?;
    let (n, _) = logits.dims2().map_err(|_| {
        Error::shape(
            op,
            format!("logits have shape {:?}, expected [N, C]", logits.dims()),
        )
    })?;
    for (what, t, dt) in [
        ("labels", labels, DType::U32),
        ("weight", weight, DType::F32),
    ] {
        check_device_of(op, logits, t)?;
        if t.dims() != [n] || t.dtype() != dt {
            return Err(Error::shape(
                op,
                format!(
                    "{what} are {:?} {:?}, expected [{n}] {dt:?} (one per logits row)",
                    t.dims(),
                    t.dtype()
                ),
            ));
        }
    }
    Ok(())
}

/// `dx` for the loss's gradient `grad` (its first element), validated operands.
fn grad_of(x: &Tensor, y: &Tensor, w: &Tensor, grad: &Tensor) -> candle_core::Result<Tensor> {
    if w.elem_count() == 0 {
        return x.zeros_like();
    }
    let g = grad.flatten_all()?.narrow(0, 0, 1)?.to_dtype(DType::F32)?;
    let wg = w.contiguous()?.broadcast_mul(&g)?;
    x.contiguous()?
        .apply_op3_no_bwd(&y.contiguous()?, &wg, &Xent(Pass::Grad))
}

/// Which direction the op runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Partial sums of the row losses, f32: `[N]` (one per row) on the CPU, one per block of
    /// rows on the GPU. Only their sum means anything: every element's upstream gradient is
    /// the loss's (the op's output feeds `sum_all` alone).
    Loss,
    /// `dx [N, C]` (logits' dtype) for row weights already multiplied by the upstream
    /// gradient.
    Grad,
}

/// The fused cross-entropy over `(logits, labels, weights)` in one direction.
struct Xent(Pass);

fn dims(l: &Layout) -> candle_core::Result<(usize, usize)> {
    l.shape().dims2()
}

impl CustomOp3 for Xent {
    fn name(&self) -> &'static str {
        match self.0 {
            Pass::Loss => "masked_cross_entropy",
            Pass::Grad => "masked_cross_entropy_bwd",
        }
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        y: &CpuStorage,
        yl: &Layout,
        w: &CpuStorage,
        wl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (y, w) = (labels_cpu(y, yl)?, weights_cpu(w, wl)?);
        match self.0 {
            Pass::Loss => {
                let (n, c) = dims(xl)?;
                let out = dispatch_float!("masked_cross_entropy", x, cpu_rows(x, xl, y, w, c))?;
                Ok((CpuStorage::F32(out), Shape::from(n)))
            }
            Pass::Grad => dispatch_float!("masked_cross_entropy", x, cpu_grad(x, xl, y, w)),
        }
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        y: &CudaStorage,
        yl: &Layout,
        w: &CudaStorage,
        wl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::run(self.0, (x, xl), (y, yl), (w, wl))
    }

    fn bwd(
        &self,
        x: &Tensor,
        y: &Tensor,
        w: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        if self.0 == Pass::Grad {
            return Err(candle_core::Error::BackwardNotSupported { op: self.name() });
        }
        if !x.track_op() {
            return Ok((None, None, None));
        }
        // Every partial's gradient is the loss's (the output feeds `sum_all` alone).
        Ok((Some(grad_of(x, y, w, grad)?), None, None))
    }
}

fn labels_cpu<'a>(y: &'a CpuStorage, l: &Layout) -> candle_core::Result<&'a [u32]> {
    crate::ops::cpu_slice::<u32>("masked_cross_entropy", y, l)
}

fn weights_cpu<'a>(w: &'a CpuStorage, l: &Layout) -> candle_core::Result<&'a [f32]> {
    crate::ops::cpu_slice::<f32>("masked_cross_entropy", w, l)
}

fn cpu_rows<T: candle_core::WithDType>(
    x: &CpuStorage,
    xl: &Layout,
    y: &[u32],
    w: &[f32],
    c: usize,
) -> candle_core::Result<Vec<f32>> {
    let x = crate::ops::cpu_slice::<T>("masked_cross_entropy", x, xl)?;
    Ok(cpu::row_losses(x, y, w, c))
}

fn cpu_grad<T: candle_core::WithDType>(
    x: &CpuStorage,
    xl: &Layout,
    y: &[u32],
    w: &[f32],
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (_, c) = dims(xl)?;
    let xs = crate::ops::cpu_slice::<T>("masked_cross_entropy", x, xl)?;
    Ok((
        T::to_cpu_storage_owned(cpu::grad(xs, y, w, c)),
        xl.shape().clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// The composed reference: `-sum(log_softmax(x) * onehot * w)`.
    fn reference(x: &Tensor, y: &[u32], w: &[f32]) -> Tensor {
        let (n, c) = x.dims2().unwrap();
        let mut m = vec![0f64; n * c];
        for i in 0..n {
            m[i * c + y[i] as usize] = w[i] as f64;
        }
        let m = Tensor::from_vec(m, (n, c), x.device()).unwrap();
        let logp = candle_nn_free_log_softmax(x);
        (logp * m).unwrap().sum_all().unwrap().neg().unwrap()
    }

    fn candle_nn_free_log_softmax(x: &Tensor) -> Tensor {
        let max = x.max_keepdim(1).unwrap();
        let z = x.broadcast_sub(&max).unwrap();
        let lse = z.exp().unwrap().sum_keepdim(1).unwrap().log().unwrap();
        z.broadcast_sub(&lse).unwrap()
    }

    #[test]
    fn fused_loss_and_gradient_match_the_composed_reference() {
        let dev = Device::Cpu;
        // C = 1, 7, 41, 100 (not multiples of 32); a row with weight 0; large logits.
        for (n, c) in [(5usize, 1usize), (13, 7), (40, 41), (9, 100)] {
            let x = (Tensor::randn(0f64, 3.0, (n, c), &dev).unwrap() + 50.0).unwrap();
            let y: Vec<u32> = (0..n).map(|i| ((i * 7 + 3) % c) as u32).collect();
            let w: Vec<f32> = (0..n)
                .map(|i| if i % 4 == 1 { 0.0 } else { 1.0 / n as f32 })
                .collect();
            let (yt, wt) = (
                Tensor::from_vec(y.clone(), n, &dev).unwrap(),
                Tensor::from_vec(w.clone(), n, &dev).unwrap(),
            );
            let xv = Var::from_tensor(&x).unwrap();
            let fused = masked_cross_entropy(xv.as_tensor(), &yt, &wt).unwrap();
            let g_fused = fused.backward().unwrap();
            let xr = Var::from_tensor(&x).unwrap();
            let reference = reference(xr.as_tensor(), &y, &w);
            let g_ref = reference.backward().unwrap();
            let (a, b) = (
                fused.to_scalar::<f32>().unwrap() as f64,
                reference.to_scalar::<f64>().unwrap(),
            );
            assert!(
                (a - b).abs() <= 1e-6 * b.abs().max(1.0),
                "{n}x{c}: {a} vs {b}"
            );
            let ga = g_fused.get(xv.as_tensor()).unwrap();
            let gb = g_ref.get(xr.as_tensor()).unwrap();
            let d = (ga - gb)
                .unwrap()
                .abs()
                .unwrap()
                .max_keepdim(0)
                .unwrap()
                .max_keepdim(1)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f64>()
                .unwrap()[0];
            assert!(d < 1e-12, "{n}x{c}: gradient off by {d}");
            // Rows with weight 0 get no gradient.
            let row1: Vec<f64> = ga.get(1).unwrap().to_vec1().unwrap();
            assert!(row1.iter().all(|&v| v == 0.0));
        }
    }

    #[test]
    fn the_untracked_gradient_is_the_backward_times_the_loss_gradient() {
        let dev = Device::Cpu;
        let (n, c) = (23usize, 41usize);
        let x = Tensor::randn(0f32, 2.0, (n, c), &dev).unwrap();
        let y: Vec<u32> = (0..n).map(|i| ((i * 5 + 1) % c) as u32).collect();
        let w: Vec<f32> = (0..n).map(|i| if i % 3 == 0 { 0.0 } else { 0.1 }).collect();
        let (yt, wt) = (
            Tensor::from_vec(y, n, &dev).unwrap(),
            Tensor::from_vec(w, n, &dev).unwrap(),
        );
        let xv = Var::from_tensor(&x).unwrap();
        // The loss scaled by 3 (as f16 loss scaling does): its gradient is 3 at the loss.
        let scaled = (masked_cross_entropy(xv.as_tensor(), &yt, &wt).unwrap() * 3.0).unwrap();
        let want = scaled.backward().unwrap();
        let want: Vec<Vec<f32>> = want.get(xv.as_tensor()).unwrap().to_vec2().unwrap();
        for g in [
            Tensor::new(3f32, &dev).unwrap(),
            Tensor::new(&[3f64], &dev).unwrap(),
        ] {
            let got: Vec<Vec<f32>> = masked_cross_entropy_grad(&x, &yt, &wt, &g)
                .unwrap()
                .to_vec2()
                .unwrap();
            assert_eq!(got, want, "grad {:?}", g.dims());
        }
        let two = Tensor::new(&[1f32, 1.0], &dev).unwrap();
        let e = masked_cross_entropy_grad(&x, &yt, &wt, &two)
            .unwrap_err()
            .to_string();
        assert!(e.contains("one element"), "{e}");
        let int = Tensor::new(&[3u32], &dev).unwrap();
        let e = masked_cross_entropy_grad(&x, &yt, &wt, &int)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("masked_cross_entropy_grad") && e.contains("gradient"),
            "{e}"
        );
    }

    #[test]
    fn labels_out_of_range_give_nan_and_bad_shapes_are_refused() {
        let dev = Device::Cpu;
        let x = Tensor::zeros((2, 3), DType::F32, &dev).unwrap();
        let w = Tensor::from_vec(vec![0.5f32, 0.5], 2, &dev).unwrap();
        let y = Tensor::from_vec(vec![0u32, 3], 2, &dev).unwrap();
        let l = masked_cross_entropy(&x, &y, &w).unwrap();
        assert!(l.to_scalar::<f32>().unwrap().is_nan());
        // No rows: a zero loss and an empty gradient.
        let x0 = Var::from_tensor(&Tensor::zeros((0, 3), DType::F32, &dev).unwrap()).unwrap();
        let (y0, w0) = (
            Tensor::zeros(0, DType::U32, &dev).unwrap(),
            Tensor::zeros(0, DType::F32, &dev).unwrap(),
        );
        let l0 = masked_cross_entropy(x0.as_tensor(), &y0, &w0).unwrap();
        assert_eq!(l0.to_scalar::<f32>().unwrap(), 0.0);
        let g0 = l0.backward().unwrap();
        assert_eq!(g0.get(x0.as_tensor()).unwrap().dims(), [0, 3]);
        let y3 = Tensor::from_vec(vec![0u32, 1, 2], 3, &dev).unwrap();
        let e = masked_cross_entropy(&x, &y3, &w).unwrap_err().to_string();
        assert!(e.contains("labels") && e.contains("[2]"), "{e}");
    }
}
