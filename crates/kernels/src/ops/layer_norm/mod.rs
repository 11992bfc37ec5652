//! LayerNorm over the rows of a `[n, d]` tensor (torch's `LayerNorm(d)`: biased variance,
//! elementwise affine), forward and backward each one pass over the rows instead of a chain of
//! candle ops (a row mean, a centring, a square, a second mean, a square root, a division, a
//! scale and a shift, each a full pass with its own temporary, and their gradients). Statistics
//! are fp32 (f64 for f64 input); half-precision `x` (CUDA) keeps its dtype, with fp32
//! `weight` and `bias`.
//!
//! Backward: `dx = rstd (g - mean(g) - xhat mean(g xhat))` with `g = dy w`, one op;
//! `dw = sum_rows dy xhat`, `db = sum_rows dy`, another (per-block partial sums on the GPU,
//! added in a fixed order: deterministic). Both recompute the row statistics from `x`, so
//! nothing but `x` is kept between the passes.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use super::{check_device_of, check_float_or_half, cpu_slice};
use crate::error::{Error, Result};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Layout, Shape, Tensor, WithDType};

const OP: &str = "layer_norm";

/// The widest row the CUDA kernels take (a warp holds the row in registers, 32 per lane).
pub const MAX_CUDA_WIDTH: usize = 1024;

/// `(x - mean) / sqrt(var + eps) * weight + bias` over each row of `x` (`[n, d]`); `weight`
/// and `bias` are `[d]`, f32 (f64 when `x` is f64). Gradients flow to all three.
pub fn layer_norm(x: &Tensor, weight: &Tensor, bias: &Tensor, eps: f64) -> Result<Tensor> {
    check_float_or_half(OP, "x", x)?;
    let (_, d) = x
        .dims2()
        .map_err(|_| Error::shape(OP, format!("x has shape {:?}, expected [n, d]", x.dims())))?;
    let want = if x.dtype() == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    for (what, p) in [("weight", weight), ("bias", bias)] {
        check_device_of(OP, x, p)?;
        if p.dims() != [d] || p.dtype() != want {
            return Err(Error::shape(
                OP,
                format!(
                    "{what} is {:?} {:?}, expected [{d}] {want:?} for x {:?} {:?}",
                    p.dims(),
                    p.dtype(),
                    x.dims(),
                    x.dtype()
                ),
            ));
        }
    }
    if !(eps.is_finite() && eps > 0.0) {
        return Err(Error::invalid(
            OP,
            format!("eps is {eps}; it must be finite and positive"),
        ));
    }
    if x.device().is_cuda() && d > MAX_CUDA_WIDTH {
        return Err(Error::unsupported(
            OP,
            format!("rows of {d} values; the CUDA kernels take at most {MAX_CUDA_WIDTH}"),
        ));
    }
    Ok(x.contiguous()?.apply_op3(
        &weight.contiguous()?,
        &bias.contiguous()?,
        RowOp {
            pass: Pass::Forward,
            eps,
        },
    )?)
}

/// The two one-pass-per-row ops: the forward (inputs `x`, `w`, bias) and the `dx` backward
/// (inputs `x`, `w`, `dy`); the CPU and CUDA sides share the choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    Forward,
    Dx,
}

struct RowOp {
    pass: Pass,
    eps: f64,
}

fn width(l: &Layout) -> candle_core::Result<usize> {
    Ok(l.shape().dims2()?.1)
}

fn rows_cpu<T: WithDType>(
    op: &RowOp,
    (x, xl): (&CpuStorage, &Layout),
    (w, wl): (&CpuStorage, &Layout),
    (t, tl): (&CpuStorage, &Layout),
) -> candle_core::Result<(CpuStorage, Shape)> {
    let pass = match op.pass {
        Pass::Forward => cpu::forward::<T>,
        Pass::Dx => cpu::backward_x::<T>,
    };
    let out = pass(
        cpu_slice::<T>(OP, x, xl)?,
        cpu_slice::<T>(OP, w, wl)?,
        cpu_slice::<T>(OP, t, tl)?,
        width(xl)?,
        op.eps,
    );
    Ok((T::to_cpu_storage_owned(out), xl.shape().clone()))
}

impl CustomOp3 for RowOp {
    fn name(&self) -> &'static str {
        match self.pass {
            Pass::Forward => OP,
            Pass::Dx => "layer_norm_backward",
        }
    }
    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        w: &CpuStorage,
        wl: &Layout,
        t: &CpuStorage,
        tl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!(OP, x, rows_cpu(self, (x, xl), (w, wl), (t, tl)))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        w: &CudaStorage,
        wl: &Layout,
        t: &CudaStorage,
        tl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        match self.pass {
            Pass::Forward => cuda::forward((x, xl), (w, wl), (t, tl), self.eps),
            Pass::Dx => cuda::backward_x((x, xl), (w, wl), (t, tl), self.eps),
        }
    }
    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        if self.pass == Pass::Dx {
            candle_core::bail!("layer_norm: the dx pass runs inside the backward; it has none");
        }
        let dy = dy.contiguous()?;
        let track_x = x.track_op();
        // Detached: the gradients must not record ops that hold x, w or dy.
        let x = x.detach();
        let dx = if track_x {
            let op = RowOp {
                pass: Pass::Dx,
                eps: self.eps,
            };
            Some(x.apply_op3_no_bwd(&w.detach(), &dy, &op)?)
        } else {
            None
        };
        let (dw, db) = if w.track_op() || b.track_op() {
            let d = w.dim(0)?;
            // [blocks, 2, d] partial sums (one block on the CPU), added here.
            let sums = x
                .apply_op2_no_bwd(&dy, &ParamGradsOp { eps: self.eps })?
                .sum(0)?;
            (
                Some(sums.narrow(0, 0, 1)?.reshape(d)?),
                Some(sums.narrow(0, 1, 1)?.reshape(d)?),
            )
        } else {
            (None, None)
        };
        Ok((dx, dw, db))
    }
}

/// `[blocks, 2, d]` partial sums of `(dw; db)` from `(x, dy)`.
struct ParamGradsOp {
    eps: f64,
}

fn param_grads_cpu<T: WithDType>(
    eps: f64,
    (x, xl): (&CpuStorage, &Layout),
    (g, gl): (&CpuStorage, &Layout),
) -> candle_core::Result<(CpuStorage, Shape)> {
    let d = width(xl)?;
    let s = cpu::param_grads(
        cpu_slice::<T>(OP, x, xl)?,
        cpu_slice::<T>(OP, g, gl)?,
        d,
        eps,
    );
    let s = if s.is_empty() {
        vec![T::zero(); 2 * d]
    } else {
        s
    };
    Ok((T::to_cpu_storage_owned(s), Shape::from((1, 2, d))))
}

impl CustomOp2 for ParamGradsOp {
    fn name(&self) -> &'static str {
        "layer_norm_param_grads"
    }
    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        g: &CpuStorage,
        gl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!(OP, x, param_grads_cpu(self.eps, (x, xl), (g, gl)))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        g: &CudaStorage,
        gl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::param_grads((x, xl), (g, gl), self.eps)
    }
}
