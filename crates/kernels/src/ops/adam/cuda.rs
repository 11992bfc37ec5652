//! Host side of the fused Adam step (`cuda/adam.cu`).

use super::AdamStep;
use crate::cuda::{elementwise_cfg, launched};
use crate::ops::optional::Cuda;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::CudaView;
use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
use candle_core::{CudaStorage, DType, Layout, Result, Storage, Tensor};

fn contiguous(l: &Layout) -> Result<()> {
    if !l.is_contiguous() {
        candle_core::bail!("adam_step: operands must be contiguous");
    }
    Ok(())
}

/// Runs `f` with the step's gate on the GPU (none without a gate) and its length, the
/// gate's storage read-locked meanwhile (see [`super::adam_step`]).
fn with_gate<R>(
    gate: Option<&Tensor>,
    f: impl FnOnce(Option<&CudaView<'_, f32>>, u32) -> Result<R>,
) -> Result<R> {
    let Some(t) = gate else {
        return f(None, 0);
    };
    let (s, l) = t.storage_and_layout();
    let Storage::Cuda(s) = &*s else {
        candle_core::bail!("adam_step: the gate is not on the GPU");
    };
    let n = l.shape().elem_count();
    let v = s
        .as_cuda_slice::<f32>()?
        .slice(l.start_offset()..l.start_offset() + n);
    f(Some(&v), n as u32)
}

/// Moments `mv` (`[2, n]`) from `g` and `theta`, unless `gate` holds a non-finite value.
pub(crate) fn moments(
    (mv, ml): (&mut CudaStorage, &Layout),
    (g, gl): Cuda<'_>,
    (th, tl): Cuda<'_>,
    s: &AdamStep,
    gate: Option<&Tensor>,
) -> Result<()> {
    with_gate(gate, |gate, gate_len| {
        moments_gated((mv, ml), (g, gl), (th, tl), s, gate, gate_len)
    })
}

fn moments_gated(
    (mv, ml): (&mut CudaStorage, &Layout),
    (g, gl): Cuda<'_>,
    (th, tl): Cuda<'_>,
    s: &AdamStep,
    gate: Option<&CudaView<'_, f32>>,
    gate_len: u32,
) -> Result<()> {
    // A null pointer where there is no gate (the kernels read none of it then).
    let null = 0u64;
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
            match gate {
                Some(v) => b.arg(v),
                None => b.arg(&null),
            };
            b.arg(&gate_len);
            // SAFETY: mv holds 2n elements from its offset, g and theta n; the grid-stride loop
            // touches indices below n (and n + i) only; the gate's gate_len values are read.
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
    with_gate(gate, |gate, gate_len| {
        apply_gated((th, tl), (mv, ml), s, gate, gate_len)
    })
}

fn apply_gated(
    (th, tl): (&mut CudaStorage, &Layout),
    (mv, ml): Cuda<'_>,
    s: &AdamStep,
    gate: Option<&CudaView<'_, f32>>,
    gate_len: u32,
) -> Result<()> {
    let null = 0u64;
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
            match gate {
                Some(v) => b.arg(v),
                None => b.arg(&null),
            };
            b.arg(&gate_len);
            // SAFETY: theta holds n elements from its offset, mv 2n; indices below n only;
            // the gate's gate_len values are read.
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
