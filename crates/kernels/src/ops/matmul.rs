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
use candle_core::Tensor;

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
    // Backward: the weight's gradient `dyᵀ x` only (`x` does not track).
    crate::ops::fused::attach::attach_backward(
        y,
        &[x, w],
        Box::new(|inputs, dy| Ok(vec![None, Some(weight_grad(dy, &inputs[0].detach())?)])),
    )
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
