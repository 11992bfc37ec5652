//! Host side of the fused Adam step (`cuda/adam.cu`).

use super::AdamStep;
use crate::cuda::{elementwise_cfg, launched};
use crate::ops::optional::Cuda;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaView, LaunchArgs, PushKernelArg};
use candle_core::{CudaStorage, DType, Layout, Result, Storage, Tensor};

fn contiguous(l: &Layout) -> Result<()> {
    if !l.is_contiguous() {
        candle_core::bail!("adam_step: operands must be contiguous");
    }
    Ok(())
}

/// A step's gate as kernel arguments: its values on the GPU (a null pointer without a gate,
/// which the kernels then never read) and their count.
struct GateArgs<'a> {
    values: Option<CudaView<'a, f32>>,
    null: u64,
    len: u32,
}

impl GateArgs<'_> {
    /// Pushes the pointer and the count, the kernels' last two parameters.
    fn push<'b>(&'b self, b: &mut LaunchArgs<'b>) {
        match &self.values {
            Some(v) => b.arg(v),
            None => b.arg(&self.null),
        };
        b.arg(&self.len);
    }
}

/// Runs `f` with the step's gate as kernel arguments, the gate's storage read-locked
/// meanwhile (see [`super::adam_step`]).
fn with_gate<R>(gate: Option<&Tensor>, f: impl FnOnce(&GateArgs<'_>) -> Result<R>) -> Result<R> {
    let Some(t) = gate else {
        return f(&GateArgs {
            values: None,
            null: 0,
            len: 0,
        });
    };
    let (s, l) = t.storage_and_layout();
    let Storage::Cuda(s) = &*s else {
        candle_core::bail!("adam_step: the gate is not on the GPU");
    };
    let n = l.shape().elem_count();
    let values = s
        .as_cuda_slice::<f32>()?
        .slice(l.start_offset()..l.start_offset() + n);
    f(&GateArgs {
        values: Some(values),
        null: 0,
        len: n as u32,
    })
}

/// Moments `mv` (`[2, n]`) from `g` and `theta`, unless `gate` holds a non-finite value.
pub(crate) fn moments(
    (mv, ml): (&mut CudaStorage, &Layout),
    (g, gl): Cuda<'_>,
    (th, tl): Cuda<'_>,
    s: &AdamStep,
    gate: Option<&Tensor>,
) -> Result<()> {
    with_gate(gate, |gate| {
        moments_gated((mv, ml), (g, gl), (th, tl), s, gate)
    })
}

fn moments_gated(
    (mv, ml): (&mut CudaStorage, &Layout),
    (g, gl): Cuda<'_>,
    (th, tl): Cuda<'_>,
    s: &AdamStep,
    gate: &GateArgs<'_>,
) -> Result<()> {
    for l in [ml, gl, tl] {
        contiguous(l)?;
    }
    let n = gl.shape().elem_count();
    let dev = g.device().clone();
    macro_rules! go {
        ($T:ty, $name:expr) => {{
            let gv = g.as_cuda_slice::<$T>()?.slice(gl.start_offset()..);
            let tv = th.as_cuda_slice::<$T>()?.slice(tl.start_offset()..);
            let off = ml.start_offset();
            let mut mvv = mv.as_cuda_slice_mut::<$T>()?.slice_mut(off..off + 2 * n);
            let func = crate::cuda::kernel(&dev, $name, &crate::cuda::ADAM)?;
            let (n_u, b1, b2, l2) = (n as u64, s.beta1 as $T, s.beta2 as $T, s.l2 as $T);
            let mut b = func.builder();
            b.arg(&mut mvv)
                .arg(&gv)
                .arg(&tv)
                .arg(&n_u)
                .arg(&b1)
                .arg(&b2)
                .arg(&l2);
            gate.push(&mut b);
            // SAFETY: mv holds 2n elements from its offset, g and theta n; the grid-stride loop
            // touches indices below n (and n + i) only; the gate's len values are read.
            if n > 0 {
                launched(unsafe { b.launch(elementwise_cfg(n)) }.map(|_| ()))?;
            }
        }};
    }
    match g.dtype() {
        DType::F32 => go!(f32, "adam_moments_f32"),
        DType::F64 => go!(f64, "adam_moments_f64"),
        o => candle_core::bail!("adam_step: unsupported dtype {o:?}"),
    }
    Ok(())
}

/// `theta` from its moments, unless `gate` holds a non-finite value.
pub(crate) fn apply(
    (th, tl): (&mut CudaStorage, &Layout),
    (mv, ml): Cuda<'_>,
    s: &AdamStep,
    gate: Option<&Tensor>,
) -> Result<()> {
    with_gate(gate, |gate| apply_gated((th, tl), (mv, ml), s, gate))
}

fn apply_gated(
    (th, tl): (&mut CudaStorage, &Layout),
    (mv, ml): Cuda<'_>,
    s: &AdamStep,
    gate: &GateArgs<'_>,
) -> Result<()> {
    contiguous(tl)?;
    contiguous(ml)?;
    let n = tl.shape().elem_count();
    let dev = mv.device().clone();
    macro_rules! go {
        ($T:ty, $name:expr) => {{
            let mvv = mv.as_cuda_slice::<$T>()?.slice(ml.start_offset()..);
            let off = tl.start_offset();
            let mut tv = th.as_cuda_slice_mut::<$T>()?.slice_mut(off..off + n);
            let func = crate::cuda::kernel(&dev, $name, &crate::cuda::ADAM)?;
            let n_u = n as u64;
            let (lr, bc1, bc2, eps, keep) = (
                s.lr as $T,
                s.bc1 as $T,
                s.bc2 as $T,
                s.eps as $T,
                s.keep as $T,
            );
            let mut b = func.builder();
            b.arg(&mut tv)
                .arg(&mvv)
                .arg(&n_u)
                .arg(&lr)
                .arg(&bc1)
                .arg(&bc2)
                .arg(&eps)
                .arg(&keep);
            gate.push(&mut b);
            // SAFETY: theta holds n elements from its offset, mv 2n; indices below n only;
            // the gate's len values are read.
            if n > 0 {
                launched(unsafe { b.launch(elementwise_cfg(n)) }.map(|_| ()))?;
            }
        }};
    }
    match mv.dtype() {
        DType::F32 => go!(f32, "adam_apply_f32"),
        DType::F64 => go!(f64, "adam_apply_f64"),
        o => candle_core::bail!("adam_step: unsupported dtype {o:?}"),
    }
    Ok(())
}
