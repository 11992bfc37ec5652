//! What the fused layers over `(x, w, b)` share: their forward finishes a product of `x` and
//! `w` computed before the op (held by the op until the forward takes it), adds the bias `b`
//! and, for a residual layer, `x` itself. An op implements [`ProductEpilogue`] with the two
//! operands its forward reads, and [`Epilogue`] adapts it to candle's `CustomOp3`.

use super::super::optional::{Cpu, CpuOut};
#[cfg(feature = "cuda")]
use super::super::optional::{Cuda, CudaOut};
use crate::error::{Error, Result};
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp3, Layout, Tensor};
use std::sync::Mutex;

/// The gradients of `(x, w, b)`.
pub(crate) type Grads3 = candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)>;

/// A fused layer op over `(x, w, b)` whose forward reads `x` (as the residual) and `b` only.
pub(crate) trait ProductEpilogue {
    /// The op's name.
    const NAME: &'static str;

    /// The CPU forward.
    fn cpu(&self, x: Cpu<'_>, b: Cpu<'_>) -> CpuOut;

    /// The CUDA forward.
    #[cfg(feature = "cuda")]
    fn cuda(&self, x: Cuda<'_>, b: Cuda<'_>) -> CudaOut;

    /// Gradients of `x`, `w` and `b` for the output gradient `dy`.
    fn grads(&self, x: &Tensor, w: &Tensor, b: &Tensor, dy: &Tensor) -> Grads3;
}

/// A [`ProductEpilogue`] as a candle op over `(x, w, b)`.
pub(crate) struct Epilogue<O>(pub(crate) O);

impl<O: ProductEpilogue> CustomOp3 for Epilogue<O> {
    fn name(&self) -> &'static str {
        O::NAME
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        _w: &CpuStorage,
        _wl: &Layout,
        b: &CpuStorage,
        bl: &Layout,
    ) -> CpuOut {
        self.0.cpu((x, xl), (b, bl))
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
    ) -> CudaOut {
        self.0.cuda((x, xl), (b, bl))
    }

    fn bwd(&self, x: &Tensor, w: &Tensor, b: &Tensor, _res: &Tensor, dy: &Tensor) -> Grads3 {
        self.0.grads(x, w, b, dy)
    }
}

/// The input `x` as the residual of an output of shape `out` (contiguous), or `x` unchanged
/// when the layer has no residual.
pub(crate) fn residual_input(
    op: &'static str,
    x: Tensor,
    residual: bool,
    out: &[usize],
) -> Result<Tensor> {
    if !residual {
        return Ok(x);
    }
    if x.dims() != out {
        return Err(Error::shape(
            op,
            format!(
                "a residual input {:?} must have the output's shape {out:?}",
                x.dims()
            ),
        ));
    }
    Ok(x.contiguous()?)
}

/// The tensor an op holds for its forward, taken once.
pub(crate) fn take_once(op: &str, slot: &Mutex<Option<Tensor>>) -> candle_core::Result<Tensor> {
    slot.lock()
        .map_err(|_| candle_core::Error::Msg(format!("{op}: lock poisoned")))?
        .take()
        .ok_or_else(|| candle_core::Error::Msg(format!("{op}: forward ran twice")))
}
