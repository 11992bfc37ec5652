//! `y = x · wᵀ` (a linear layer's product) with a backward that computes only the
//! gradients that are needed.
//!
//! candle 0.11's `matmul` backward always computes both operand gradients. For a GNN's first
//! layer `x` is the input feature matrix, which needs none: on Reddit that is a wasted
//! `[N, out] x [out, in]` GEMM (36 GFLOP at N = 233 K, in = 602, out = 128) and two
//! `N x in` buffers per epoch. Here the product runs untracked and the result is attached to
//! `w` by a custom op whose backward returns `dw = dyᵀ x` only (and `dx = dy w` when `x`
//! tracks). The price is one copy of `y` (`N x out`), far below the GEMM it saves.

use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use crate::ops::spmm::{spmm, spmm_weighted, Reduce};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CudaStorage, CustomOp2, Layout, Shape, Tensor};

/// `x [N, in] · w [out, in]ᵀ -> [N, out]`, differentiable in `w` (and in `x` when it tracks).
pub fn matmul_nt(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    check_nt("matmul_nt", x, w)?;
    if x.track_op() || !w.track_op() {
        return Ok(x.matmul(&w.t()?)?);
    }
    let y = x.matmul(&w.detach().t()?)?;
    Ok(y.apply_op2(w, AttachWeightGrad { x: x.detach() })?)
}

/// Returns its first input unchanged; backward gives the second input (the weight) the
/// gradient `dyᵀ x`.
struct AttachWeightGrad {
    x: Tensor,
}

impl CustomOp2 for AttachWeightGrad {
    fn name(&self) -> &'static str {
        "matmul_nt"
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        Ok((s.try_clone(l)?, l.shape().clone()))
    }
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        _: &CudaStorage,
        _: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        Ok((s.try_clone(l)?, l.shape().clone()))
    }
    fn bwd(
        &self,
        _y: &Tensor,
        _w: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        Ok((None, Some(weight_grad(dy, &self.x)?)))
    }
}

/// `dyᵀ x`, a linear layer's weight gradient (`dy [N, out]`, `x [N, in]`).
pub(crate) fn weight_grad(dy: &Tensor, x: &Tensor) -> candle_core::Result<Tensor> {
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

/// `x · wᵀ` computed outside the autograd graph, for an op that consumes it and attaches the
/// gradients itself ([`LinearProduct::bias_relu_dropout`]): the product is then a temporary,
/// not a tensor the graph holds until the backward. Made from an [`Aggregate`]
/// ([`LinearProduct::of_aggregate`]), the product is `(Â h) · wᵀ` and the op differentiates to
/// `h` itself.
pub struct LinearProduct {
    x: Tensor,
    w: Tensor,
    z: Tensor,
    agg: Option<AggregateParts>,
}

/// `Â h` (a sum or mean SpMM, optional constant edge values) computed outside the autograd
/// graph, remembering `h` and the graph, for a [`LinearProduct`] whose op returns `h`'s
/// gradient `Âᵀ dx` itself.
///
/// Composed, `matmul_nt(spmm(h))` puts the aggregation's output in candle's graph: its
/// gradient, like every tensor's first gradient in candle 0.11, is added into a fresh zero
/// tensor (a fill and an add of `[N, in]`), and so is the first of `h`'s. Inside one op the
/// chain `dz -> dx -> Âᵀ dx` stays in our hands: one gradient for `h` leaves the op.
pub struct Aggregate {
    h: Tensor,
    parts: AggregateParts,
}

/// What the op's backward needs of an [`Aggregate`].
pub(crate) struct AggregateParts {
    pub(crate) g: DeviceGraph,
    pub(crate) values: Option<Tensor>,
    pub(crate) mean: bool,
    /// `Â h`, untracked.
    pub(crate) a: Tensor,
}

impl Aggregate {
    /// `Â h` over `g` with `reduce` (sum or mean) and constant edge `values` (`[nnz]`; a
    /// tracked `values` is refused: its gradient would be lost), the SpMM run now.
    pub fn new(
        g: &DeviceGraph,
        h: &Tensor,
        values: Option<&Tensor>,
        reduce: Reduce,
    ) -> Result<Self> {
        let mean = crate::ops::spmm::transpose_operands("aggregate", reduce, values)?;
        let hd = h.detach();
        let a = match values {
            Some(v) => spmm_weighted(g, &hd, v, reduce)?,
            None => spmm(g, &hd, reduce)?,
        };
        Ok(Self {
            h: h.clone(),
            parts: AggregateParts {
                g: g.clone(),
                values: values.cloned(),
                mean,
                a,
            },
        })
    }

    /// `Â h` (untracked).
    pub fn value(&self) -> &Tensor {
        &self.parts.a
    }
}

impl LinearProduct {
    /// `x [N, in] · w [out, in]ᵀ`, the GEMM run now (untracked).
    pub fn new(x: &Tensor, w: &Tensor) -> Result<Self> {
        check_nt("linear", x, w)?;
        let z = x.detach().matmul(&w.detach().t()?)?;
        Ok(Self {
            x: x.clone(),
            w: w.clone(),
            z,
            agg: None,
        })
    }

    /// `(Â h) · wᵀ` from an [`Aggregate`], the GEMM run now (untracked); the consuming op's
    /// first input is `h`.
    pub fn of_aggregate(agg: Aggregate, w: &Tensor) -> Result<Self> {
        let a = &agg.parts.a;
        check_nt("linear", a, w)?;
        let z = a.matmul(&w.detach().t()?)?;
        Ok(Self {
            x: agg.h,
            w: w.clone(),
            z,
            agg: Some(agg.parts),
        })
    }

    /// `out`, the product's width.
    pub fn out_dim(&self) -> usize {
        self.z.dims().get(1).copied().unwrap_or(0)
    }

    /// The product's dtype (that of `x` and `w`).
    pub fn dtype(&self) -> candle_core::DType {
        self.z.dtype()
    }

    /// `(input, w, product, aggregation)`, for the consuming op: the input is `x`, or `h` of
    /// an [`Aggregate`].
    pub(crate) fn into_parts(self) -> (Tensor, Tensor, Tensor, Option<AggregateParts>) {
        (self.x, self.w, self.z, self.agg)
    }
}

/// `x` and `w` must be `[N, in]` and `[out, in]`.
fn check_nt(op: &'static str, x: &Tensor, w: &Tensor) -> Result<()> {
    let (xd, wd) = (x.dims(), w.dims());
    if xd.len() != 2 || wd.len() != 2 || xd[1] != wd[1] {
        return Err(Error::Shape {
            op,
            what: format!("x {xd:?} and w {wd:?} must be [N, in] and [out, in]"),
        });
    }
    if x.dtype() != w.dtype() {
        return Err(Error::Shape {
            op,
            what: format!("x is {:?}, w {:?}", x.dtype(), w.dtype()),
        });
    }
    Ok(())
}
