//! `y = x · wᵀ` (a linear layer's product) with a backward that computes only the
//! gradients that are needed.
//!
//! candle 0.11's `matmul` backward always computes both operand gradients. For a GNN's first
//! layer `x` is the input feature matrix, which needs none: on Reddit that is a wasted
//! `[N, out] x [out, in]` GEMM (36 GFLOP at N = 233 K, in = 602, out = 128) and two
//! `N x in` buffers per epoch. Here the product runs untracked and a custom op over `(x, w)`
//! hands it over, whose backward returns `dw = dyᵀ x` only. The price is one copy of `y`
//! (`N x out`) in the forward, far below the GEMM it saves; the graph keeps `x` (the input,
//! alive anyway) and the op's output, not the product a second time.

use crate::error::{Error, Result};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CudaStorage, CustomOp2, Layout, Shape, Tensor};
use std::sync::Mutex;

/// `x [N, in] · w [out, in]ᵀ -> [N, out]`, differentiable in `w` (and in `x` when it tracks).
pub fn matmul_nt(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    check_nt("matmul_nt", x, w)?;
    if x.track_op() || !w.track_op() {
        return Ok(x.matmul(&w.t()?)?);
    }
    // An untracked input (the features, a cached aggregation): the op over `(x, w)` hands
    // over the product computed here, so the graph keeps `x` (alive anyway) and not the
    // product beside the op's output (one `[N, out]` tensor less per such layer).
    let y = x.matmul(&w.detach().t()?)?;
    Ok(x.apply_op2(
        w,
        AttachWeightGrad {
            y: Mutex::new(Some(y)),
        },
    )?)
}

/// Over `(x, w)`: hands over the product `x · wᵀ` computed before the op (taken once);
/// backward gives the weight `w` the gradient `dyᵀ x` (`x` does not track).
struct AttachWeightGrad {
    y: Mutex<Option<Tensor>>,
}

impl AttachWeightGrad {
    fn take(&self) -> candle_core::Result<Tensor> {
        self.y
            .lock()
            .map_err(|_| candle_core::Error::Msg("matmul_nt: lock poisoned".into()))?
            .take()
            .ok_or_else(|| candle_core::Error::Msg("matmul_nt: forward ran twice".into()))
    }
}

impl CustomOp2 for AttachWeightGrad {
    fn name(&self) -> &'static str {
        "matmul_nt"
    }
    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let y = self.take()?;
        let (s, l) = y.storage_and_layout();
        match &*s {
            candle_core::Storage::Cpu(s) => Ok((s.try_clone(l)?, l.shape().clone())),
            _ => candle_core::bail!("matmul_nt: the product is not on the CPU"),
        }
    }
    fn cuda_fwd(
        &self,
        _: &CudaStorage,
        _: &Layout,
        _: &CudaStorage,
        _: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let y = self.take()?;
        let (s, l) = y.storage_and_layout();
        match &*s {
            candle_core::Storage::Cuda(s) => Ok((s.try_clone(l)?, l.shape().clone())),
            _ => candle_core::bail!("matmul_nt: the product is not on the GPU"),
        }
    }
    fn bwd(
        &self,
        x: &Tensor,
        _w: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        Ok((None, Some(weight_grad(dy, &x.detach())?)))
    }
}

/// `dyᵀ x`, a linear layer's weight gradient (`dy [N, out]`, `x [N, in]`).
pub fn weight_grad(dy: &Tensor, x: &Tensor) -> candle_core::Result<Tensor> {
    // On the CPU a contiguous dyᵀ keeps candle's GEMM on its fast path (a strided lhs is
    // ~5x slower); cuBLAS takes the transposed operand as it is, where the copy cost an
    // extra pass over dy (0.68 ms of a 40 ms epoch at N = 233 K, 256 wide, bf16).
    let dyt = dy.t()?;
    let dyt = if dy.device().is_cpu() {
        dyt.contiguous()?
    } else {
        dyt
    };
    dyt.matmul(x)
}

/// `x` and `w` must be `[N, in]` and `[out, in]`.
pub(crate) fn check_nt(op: &'static str, x: &Tensor, w: &Tensor) -> Result<()> {
    let (xd, wd) = (x.dims(), w.dims());
    if xd.len() != 2 || wd.len() != 2 || xd[1] != wd[1] {
        return Err(Error::shape(
            op,
            format!("x {xd:?} and w {wd:?} must be [N, in] and [out, in]"),
        ));
    }
    if x.dtype() != w.dtype() {
        return Err(Error::dtype(
            op,
            format!("x is {:?}, w {:?}", x.dtype(), w.dtype()),
        ));
    }
    Ok(())
}
