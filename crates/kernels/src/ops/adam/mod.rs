//! Fused Adam / AdamW update, in place: two passes per parameter tensor (moments, then the
//! parameter) instead of the dozen element-wise tensor ops (each a kernel launch and a fresh
//! allocation) of a composed update. The arithmetic is the composed one:
//!
//! - `g' = g + l2 * θ` (Adam's coupled weight decay; `l2 = 0` for AdamW)
//! - `m = β1 m + (1 - β1) g'`, `v = β2 v + (1 - β2) g'^2`
//! - `θ = keep * θ - lr * (m / bc1) / (sqrt(v / bc2) + ε)` (`keep = 1 - lr * wd` for AdamW, 1
//!   for Adam; `bc1 = 1 - β1^t`, `bc2 = 1 - β2^t`)
//!
//! The moments live in one tensor `mv` of shape `[2, numel]` (m, then v). f32 and f64, CPU and
//! CUDA; parameters, gradients and moments share a dtype and a device.
//!
//! A step can be gated by an f32 vector (the trainer's loss and gradient sums): it changes
//! nothing when any value of the gate is non-finite. The check runs on the device, so the
//! trainer queues the step behind the backward and reads the gate back once, after it,
//! instead of waiting for the loss and the gradients before launching the update.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
mod sums;
pub use sums::sums_f32;

use super::check_device_of;
use crate::error::{Error, Result};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, InplaceOp2, InplaceOp3, Layout, Tensor};

/// The scalars of one Adam step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamStep {
    /// Learning rate.
    pub lr: f64,
    /// First-moment decay.
    pub beta1: f64,
    /// Second-moment decay.
    pub beta2: f64,
    /// Denominator guard.
    pub eps: f64,
    /// `1 - beta1^t`.
    pub bc1: f64,
    /// `1 - beta2^t`.
    pub bc2: f64,
    /// Coupled (L2) decay added to the gradient: Adam's `weight_decay`, 0 for AdamW.
    pub l2: f64,
    /// Factor on the parameter before the update: `1 - lr * wd` for AdamW, 1 for Adam.
    pub keep: f64,
}

/// Updates `theta` (any shape, contiguous) and its moments `mv` (`[2, numel]`) in place from
/// the gradient `g` (the shape of `theta`). With a `gate` (a contiguous, non-empty f32 vector
/// on the parameter's device), neither changes unless every value of the gate is finite. The
/// gate must have storage of its own: a view of `theta` or `mv` would deadlock (the step
/// read-locks the gate while it write-locks them), so callers build it fresh (a `cat`/`stack`
/// or a copy).
pub fn adam_step(
    theta: &Tensor,
    mv: &Tensor,
    g: &Tensor,
    s: &AdamStep,
    gate: Option<&Tensor>,
) -> Result<()> {
    const OP: &str = "adam_step";
    let n = theta.elem_count();
    let bad = |what: String| Err(Error::shape(OP, what));
    if g.dims() != theta.dims() {
        return bad(format!(
            "gradient {:?} for a parameter {:?}",
            g.dims(),
            theta.dims()
        ));
    }
    if mv.dims() != [2, n] {
        return bad(format!("moments {:?}, expected [2, {n}]", mv.dims()));
    }
    if g.dtype() != theta.dtype() || mv.dtype() != theta.dtype() {
        return Err(Error::dtype(
            OP,
            format!(
                "parameter {:?}, gradient {:?}, moments {:?}: one dtype expected",
                theta.dtype(),
                g.dtype(),
                mv.dtype()
            ),
        ));
    }
    if !theta.is_contiguous() || !mv.is_contiguous() {
        return bad("parameter and moments must be contiguous (they are updated in place)".into());
    }
    check_device_of(OP, theta, g)?;
    check_device_of(OP, theta, mv)?;
    if let Some(t) = gate {
        let len = t.elem_count();
        if t.dtype() != candle_core::DType::F32
            || t.rank() != 1
            || !t.is_contiguous()
            || len == 0
            || len > u32::MAX as usize
        {
            return bad(format!(
                "gate {:?} {:?}: a contiguous, non-empty f32 vector expected",
                t.dtype(),
                t.dims()
            ));
        }
        check_device_of(OP, theta, t)?;
    }
    let g = g.contiguous()?;
    mv.inplace_op3(&g, theta, &Moments(*s, gate.cloned()))?;
    theta.inplace_op2(mv, &Apply(*s, gate.cloned()))?;
    Ok(())
}

/// The moments pass, gated by the vector if any.
struct Moments(AdamStep, Option<Tensor>);
/// The parameter pass, gated by the vector if any.
struct Apply(AdamStep, Option<Tensor>);

/// Whether a CPU step may run: no gate, or every gate value finite.
fn cpu_gate_open(gate: Option<&Tensor>) -> candle_core::Result<bool> {
    let Some(t) = gate else {
        return Ok(true);
    };
    let (s, l) = t.storage_and_layout();
    let candle_core::Storage::Cpu(s) = &*s else {
        candle_core::bail!("adam_step: the gate is not on the CPU");
    };
    Ok(super::cpu_slice::<f32>("adam_step", s, l)?
        .iter()
        .all(|v| v.is_finite()))
}

impl InplaceOp3 for Moments {
    fn name(&self) -> &'static str {
        "adam_moments"
    }
    fn cpu_fwd(
        &self,
        mv: &mut CpuStorage,
        ml: &Layout,
        g: &CpuStorage,
        gl: &Layout,
        th: &CpuStorage,
        tl: &Layout,
    ) -> candle_core::Result<()> {
        if !cpu_gate_open(self.1.as_ref())? {
            return Ok(());
        }
        macro_rules! go {
            ($T:ty, $v:expr) => {{
                let g = super::cpu_slice::<$T>("adam_step", g, gl)?;
                let th = super::cpu_slice::<$T>("adam_step", th, tl)?;
                let off = ml.start_offset();
                cpu::moments(&mut $v[off..off + 2 * g.len()], g, th, &self.0);
                Ok(())
            }};
        }
        match mv {
            CpuStorage::F32(v) => go!(f32, v),
            CpuStorage::F64(v) => go!(f64, v),
            o => candle_core::bail!("adam_step: unsupported dtype {:?}", o.dtype()),
        }
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        mv: &mut CudaStorage,
        ml: &Layout,
        g: &CudaStorage,
        gl: &Layout,
        th: &CudaStorage,
        tl: &Layout,
    ) -> candle_core::Result<()> {
        cuda::moments((mv, ml), (g, gl), (th, tl), &self.0, self.1.as_ref())
    }
}

impl InplaceOp2 for Apply {
    fn name(&self) -> &'static str {
        "adam_apply"
    }
    fn cpu_fwd(
        &self,
        th: &mut CpuStorage,
        tl: &Layout,
        mv: &CpuStorage,
        ml: &Layout,
    ) -> candle_core::Result<()> {
        if !cpu_gate_open(self.1.as_ref())? {
            return Ok(());
        }
        macro_rules! go {
            ($T:ty, $t:expr) => {{
                let mv = super::cpu_slice::<$T>("adam_step", mv, ml)?;
                let (off, n) = (tl.start_offset(), tl.shape().elem_count());
                cpu::apply(&mut $t[off..off + n], mv, &self.0);
                Ok(())
            }};
        }
        match th {
            CpuStorage::F32(t) => go!(f32, t),
            CpuStorage::F64(t) => go!(f64, t),
            o => candle_core::bail!("adam_step: unsupported dtype {:?}", o.dtype()),
        }
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        th: &mut CudaStorage,
        tl: &Layout,
        mv: &CudaStorage,
        ml: &Layout,
    ) -> candle_core::Result<()> {
        cuda::apply((th, tl), (mv, ml), &self.0, self.1.as_ref())
    }
}
