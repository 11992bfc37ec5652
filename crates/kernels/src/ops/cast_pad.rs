//! A matrix in another dtype inside a larger (or smaller) window: `out[r, c] = x[r, c]` where
//! `x` has that element, else 0. A parameter narrowed to the activations' dtype and
//! zero-padded to aligned widths in one pass (candle's cast, zero fill and concatenation
//! took three to five launches, and as many gradient steps back), and a gradient cropped
//! to a parameter's shape and widened to f32 in one.
//!
//! Values pass through fp32: exact for every widening; f32 to bf16 / f16 rounds to nearest
//! even, as candle's cast does. f32, bf16 and f16 on either side (`cuda/cast_pad.cu`).

use crate::error::{Error, Result};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Shape, Tensor};

/// `x [R, C]` (f32, bf16 or f16) in `to` (the same three) inside a `[rows, cols]` window:
/// zero-padded where the window is larger, cropped where it is smaller. Differentiable in
/// `x`: its gradient is the output gradient's `[R, C]` corner in `x`'s dtype (one pass).
/// A 1-D `x [R]` is taken as `[R, 1]` and the result is `[rows]` (`cols` must be 1).
pub fn cast_pad(x: &Tensor, to: DType, rows: usize, cols: usize) -> Result<Tensor> {
    const OP: &str = "cast_pad";
    for (what, dt) in [("x", x.dtype()), ("the target", to)] {
        if !matches!(dt, DType::F32 | DType::BF16 | DType::F16) {
            return Err(Error::dtype(
                OP,
                format!("{what} is {dt:?} (f32, bf16, f16)"),
            ));
        }
    }
    let op = Window { to, rows, cols };
    match x.dims() {
        [_, _] => Ok(x.contiguous()?.apply_op1(op)?),
        [r] if cols == 1 => Ok(x
            .reshape((*r, 1))?
            .contiguous()?
            .apply_op1(op)?
            .reshape(rows)?),
        d => Err(Error::shape(
            OP,
            format!("x is {d:?} into [{rows}, {cols}]: expected [R, C], or [R] with one column"),
        )),
    }
}

/// [`cast_pad`]'s op: `x` in `to` inside a `[rows, cols]` window.
struct Window {
    to: DType,
    rows: usize,
    cols: usize,
}

impl CustomOp1 for Window {
    fn name(&self) -> &'static str {
        "cast_pad"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (xr, xc) = l.shape().dims2()?;
        let (rows, cols) = (self.rows, self.cols);
        let Some((a, b)) = l.contiguous_offsets() else {
            candle_core::bail!("cast_pad: input must be contiguous");
        };
        let v: Vec<f32> = match s {
            CpuStorage::F32(d) => d[a..b].to_vec(),
            CpuStorage::BF16(d) => d[a..b].iter().map(|x| x.to_f32()).collect(),
            CpuStorage::F16(d) => d[a..b].iter().map(|x| x.to_f32()).collect(),
            other => candle_core::bail!("cast_pad: {:?} (f32, bf16, f16)", other.dtype()),
        };
        let Some(len) = rows.checked_mul(cols) else {
            candle_core::bail!("cast_pad: a [{rows}, {cols}] window overflows usize");
        };
        let mut out = vec![0f32; len];
        for r in 0..rows.min(xr) {
            let w = cols.min(xc);
            out[r * cols..r * cols + w].copy_from_slice(&v[r * xc..r * xc + w]);
        }
        // candle's own cast (round to nearest, ties to even, as the GPU's), not a rounding
        // of ours: the two differed on ties.
        let out = CpuStorage::F32(out).to_dtype(&Layout::contiguous((rows, cols)), self.to)?;
        Ok((out, Shape::from((rows, cols))))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        use crate::cuda::launched;
        use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
        if !l.is_contiguous() {
            candle_core::bail!("cast_pad: input must be contiguous");
        }
        let (xr, xc) = l.shape().dims2()?;
        let (rows, cols) = (self.rows, self.cols);
        if [xr, xc, rows, cols]
            .iter()
            .any(|v| u32::try_from(*v).is_err())
        {
            candle_core::bail!(
                "cast_pad: [{xr}, {xc}] into [{rows}, {cols}] (more than u32 counts)"
            );
        }
        let dev = s.device().clone();
        let n = rows * cols;
        let (xr, xc, r32, c32) = (xr as u32, xc as u32, rows as u32, cols as u32);
        macro_rules! run {
            ($X:ty, $xn:expr, $T:ty, $tn:expr) => {{
                let xv = s.as_cuda_slice::<$X>()?.slice(l.start_offset()..);
                // SAFETY: the kernel writes all rows * cols elements.
                let out = unsafe { dev.alloc::<$T>(n.max(1))? };
                if n > 0 {
                    let func = crate::cuda::kernel(
                        &dev,
                        &format!("cast_pad_{}_{}", $xn, $tn),
                        &crate::cuda::CAST_PAD,
                    )?;
                    let mut a = func.builder();
                    a.arg(&xv).arg(&xr).arg(&xc).arg(&out).arg(&r32).arg(&c32);
                    let cfg = LaunchConfig {
                        grid_dim: (n.div_ceil(256).clamp(1, 1 << 16) as u32, 1, 1),
                        block_dim: (256, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    // SAFETY: x holds xr * xc elements from its offset, out rows * cols; the
                    // kernel reads x only inside [xr, xc].
                    launched(unsafe { a.launch(cfg) }.map(|_| ()))?;
                }
                CudaStorage::wrap_cuda_slice(out, dev.clone())
            }};
        }
        macro_rules! into {
            ($X:ty, $xn:expr) => {
                match self.to {
                    DType::F32 => run!($X, $xn, f32, "f32"),
                    DType::BF16 => run!($X, $xn, half::bf16, "bf16"),
                    DType::F16 => run!($X, $xn, half::f16, "f16"),
                    other => candle_core::bail!("cast_pad: into {other:?} (f32, bf16, f16)"),
                }
            };
        }
        let out = match s.dtype() {
            DType::F32 => into!(f32, "f32"),
            DType::BF16 => into!(half::bf16, "bf16"),
            DType::F16 => into!(half::f16, "f16"),
            other => candle_core::bail!("cast_pad: {other:?} (f32, bf16, f16)"),
        };
        Ok((out, Shape::from((rows, cols))))
    }

    fn bwd(
        &self,
        arg: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        let (xr, xc) = arg.dims2()?;
        let back = Window {
            to: arg.dtype(),
            rows: xr,
            cols: xc,
        };
        Ok(Some(grad.contiguous()?.apply_op1_no_bwd(&back)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// Padding, cropping and both at once, f32 into bf16 and back, 1-D, empty windows and
    /// errors; the gradient is the output gradient's corner in the input's dtype.
    #[test]
    fn windows_pad_crop_and_differentiate() {
        let dev = Device::Cpu;
        let x = Tensor::new(&[[1f32, 2.0, 3.0], [4.0, 5.0, 6.0]], &dev).unwrap();
        let p = cast_pad(&x, DType::F32, 3, 4).unwrap();
        assert_eq!(
            p.to_vec2::<f32>().unwrap(),
            [[1.0, 2.0, 3.0, 0.0], [4.0, 5.0, 6.0, 0.0], [0.0; 4]]
        );
        let c = cast_pad(&x, DType::BF16, 1, 2).unwrap();
        assert_eq!(c.dtype(), DType::BF16);
        assert_eq!(
            c.to_dtype(DType::F32).unwrap().to_vec2::<f32>().unwrap(),
            [[1.0, 2.0]]
        );
        let back = cast_pad(&p.to_dtype(DType::BF16).unwrap(), DType::F32, 2, 3).unwrap();
        assert_eq!(back.to_vec2::<f32>().unwrap(), x.to_vec2::<f32>().unwrap());
        // The same as candle's cast (round to nearest, ties to even) for f32 into bf16 and
        // f16, ties included (1 + 2^-8 and 1 + 3 * 2^-8 are halfway between bf16 values).
        let mut v: Vec<f32> = Tensor::randn(0f32, 1.0, 33, &dev)
            .unwrap()
            .to_vec1()
            .unwrap();
        v.extend([
            f32::from_bits(0x3F80_8000),
            f32::from_bits(0x3F81_8000),
            -1.5e-3,
        ]);
        let r = Tensor::from_vec(v, (6, 6), &dev).unwrap();
        for to in [DType::BF16, DType::F16] {
            let ours = cast_pad(&r, to, 6, 6)
                .unwrap()
                .to_dtype(DType::F32)
                .unwrap();
            let theirs = r.to_dtype(to).unwrap().to_dtype(DType::F32).unwrap();
            assert_eq!(
                ours.to_vec2::<f32>().unwrap(),
                theirs.to_vec2::<f32>().unwrap()
            );
        }
        let r = Tensor::randn(0f32, 1.0, (7, 5), &dev).unwrap();
        let ours = cast_pad(&r, DType::BF16, 7, 5)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap();
        let theirs = r
            .to_dtype(DType::BF16)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap();
        assert_eq!(
            ours.to_vec2::<f32>().unwrap(),
            theirs.to_vec2::<f32>().unwrap()
        );
        // 1-D.
        let b = Tensor::new(&[1f32, -1.0], &dev).unwrap();
        assert_eq!(
            cast_pad(&b, DType::F32, 4, 1)
                .unwrap()
                .to_vec1::<f32>()
                .unwrap(),
            [1.0, -1.0, 0.0, 0.0]
        );
        assert!(cast_pad(&b, DType::F32, 4, 2).is_err());
        assert_eq!(cast_pad(&x, DType::F32, 0, 4).unwrap().dims(), [0, 4]);
        assert!(cast_pad(&x.to_dtype(DType::F64).unwrap(), DType::F32, 2, 3).is_err());
        assert!(cast_pad(&x, DType::U32, 2, 3).is_err());
        // Gradient: d/dx sum(w * cast_pad(x)) = w's [2, 3] corner, in x's dtype.
        let v = Var::from_tensor(&x).unwrap();
        let w = Tensor::arange(0f32, 12.0, &dev)
            .unwrap()
            .reshape((3, 4))
            .unwrap();
        let y = cast_pad(v.as_tensor(), DType::BF16, 3, 4).unwrap();
        let loss = (y.to_dtype(DType::F32).unwrap() * &w)
            .unwrap()
            .sum_all()
            .unwrap();
        let g = loss.backward().unwrap();
        let gx = g.get(v.as_tensor()).unwrap();
        assert_eq!(gx.dtype(), DType::F32);
        assert_eq!(
            gx.to_vec2::<f32>().unwrap(),
            [[0.0, 1.0, 2.0], [4.0, 5.0, 6.0]]
        );
    }
}
