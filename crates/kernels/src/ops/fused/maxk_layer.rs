//! A MaxK-GNN hidden layer from its input to its output as one differentiable op:
//! `out = Â · dropout(maxk(x wᵀ, k), p) + b [+ x]` over `(x, w, b)`.
//!
//! Composed (`matmul_nt`, [`maxk`], [`crate::dropout`], [`crate::spgemm_bias_residual`]), the layer
//! puts three tensors in candle's graph between `x` and the output: the product `x wᵀ`
//! (`[N, D]`, kept until the backward as MaxK's input), the CBSR values and their dropout
//! (`[N, k]`). candle 0.11 adds every tensor's first gradient into a fresh zero tensor, so
//! the product's gradient costs an `[N, D]` fill and add, and a residual layer's input,
//! reached both through the product and the residual, a fill and two adds. Here the chain
//! `dOut -> SSpMM -> dropout -> scatter -> (dw, dx)` stays inside the op: the product is a
//! temporary freed after the selection, and `x` leaves with one gradient (`dh w + dOut`, one
//! add). Values and gradients equal the composed ops' (same GEMM, same selection, same mask).

use super::linear::LinearProduct;
use super::product::{residual_input, take_once, Epilogue, Grads3, ProductEpilogue};
use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use crate::ops::dropout::DropoutOp;
use crate::ops::matmul::weight_grad;
use crate::ops::maxk::ops::{bias_grad, CbsrMoveOp, CbsrRowOp};
use crate::ops::maxk::{maxk, spgemm_op, Cbsr};
use crate::ops::optional::{Cpu, CpuOut};
#[cfg(feature = "cuda")]
use crate::ops::optional::{Cuda, CudaOut};
use crate::ops::spmm::Reduce;
use candle_core::Tensor;
use std::sync::Mutex;

const OP: &str = "maxk_layer";

/// `maxk(x wᵀ, k)` computed outside the autograd graph (from a [`LinearProduct`]), with an
/// optional dropout of the kept values, waiting for its aggregation
/// ([`MaxkProduct::aggregate`]), which makes the whole layer one op over `(x, w, b)`.
pub struct MaxkProduct {
    x: Tensor,
    w: Tensor,
    cbsr: Cbsr,
    /// The dropout applied to the kept values: `(p, seed)` of [`crate::dropout`].
    drop: Option<(f32, u64)>,
}

impl LinearProduct {
    /// MaxK of the product (`1 <= k <= D <= 1024`, see [`maxk`]); the product is freed here.
    /// A product of an [`crate::Aggregate`] is refused (MaxK-GNN's layer is linear, MaxK,
    /// then the aggregation).
    pub fn maxk(self, k: usize) -> Result<MaxkProduct> {
        let (x, w, z, agg) = self.into_parts();
        if agg.is_some() {
            return Err(Error::unsupported(
                OP,
                "MaxK of an aggregate's product: the layer aggregates after MaxK",
            ));
        }
        let cbsr = maxk(&z, k)?;
        Ok(MaxkProduct {
            x,
            w,
            cbsr,
            drop: None,
        })
    }
}

impl MaxkProduct {
    /// The kept values and their columns (untracked).
    pub fn cbsr(&self) -> &Cbsr {
        &self.cbsr
    }

    /// Inverted dropout of the kept values at rate `p in [0, 1)` with mask seed `seed`: the
    /// mask [`crate::dropout`] draws on the `[N, k]` values with that seed. `p = 0` keeps all.
    pub fn dropout(mut self, p: f32, seed: u64) -> Result<Self> {
        if self.drop.is_some() {
            return Err(Error::invalid(
                OP,
                "dropout applied twice to the same MaxK values",
            ));
        }
        if p == 0.0 {
            return Ok(self);
        }
        let data = crate::ops::dropout::dropout(&self.cbsr.data, p, seed)?;
        self.cbsr = self.cbsr.with_data(data)?;
        self.drop = Some((p, seed));
        Ok(self)
    }

    /// The layer's output `Â · values + b` (`[n_rows, D]`), plus `x` itself when `residual`
    /// (then `x` must be `[n_rows, D]`), as one op over `(x, w, b)`: `g` and `values` as for
    /// [`crate::spgemm`] (sum or mean, constant edge values), `b [D]` in the values' dtype.
    pub fn aggregate(
        self,
        g: &DeviceGraph,
        values: Option<&Tensor>,
        reduce: Reduce,
        b: &Tensor,
        residual: bool,
    ) -> Result<Tensor> {
        let spgemm = spgemm_op(g, &self.cbsr, values, reduce, Some(b))?;
        let d = self.cbsr.dim;
        let x = residual_input(OP, self.x, residual, &[g.n_rows(), d])?;
        let op = MaxkLayerOp {
            spgemm,
            index: self.cbsr.index.contiguous()?,
            data: Mutex::new(Some(self.cbsr.data.contiguous()?)),
            drop: self.drop,
            residual,
        };
        Ok(x.apply_op3(&self.w, &b.contiguous()?, Epilogue(op))?)
    }
}

/// Holds the CBSR values until the forward's SpGEMM consumes them; the backward needs only the
/// index, the mask seed and the op's inputs.
struct MaxkLayerOp {
    spgemm: CbsrRowOp,
    index: Tensor,
    data: Mutex<Option<Tensor>>,
    drop: Option<(f32, u64)>,
    residual: bool,
}

impl MaxkLayerOp {
    fn take_data(&self) -> candle_core::Result<Tensor> {
        take_once(OP, &self.data)
    }
}

impl ProductEpilogue for MaxkLayerOp {
    const NAME: &'static str = OP;

    fn cpu(&self, x: Cpu<'_>, b: Cpu<'_>) -> CpuOut {
        let data = self.take_data()?;
        let (ds, dl) = data.storage_and_layout();
        let (is, il) = self.index.storage_and_layout();
        let (candle_core::Storage::Cpu(ds), candle_core::Storage::Cpu(is)) = (&*ds, &*is) else {
            candle_core::bail!("{OP}: the CBSR values or index are not on the CPU");
        };
        let r = self.residual.then_some(x);
        self.spgemm.fwd_cpu(ds, dl, is, il, Some(b), r)
    }

    #[cfg(feature = "cuda")]
    fn cuda(&self, x: Cuda<'_>, b: Cuda<'_>) -> CudaOut {
        let data = self.take_data()?;
        let (ds, dl) = data.storage_and_layout();
        let (is, il) = self.index.storage_and_layout();
        let (candle_core::Storage::Cuda(ds), candle_core::Storage::Cuda(is)) = (&*ds, &*is) else {
            candle_core::bail!("{OP}: the CBSR values or index are not on the GPU");
        };
        let r = self.residual.then_some(x);
        // The values' buffer goes back to the stream-ordered pool after this launch.
        self.spgemm.fwd_cuda(ds, dl, is, il, Some(b), r)
    }

    fn grads(&self, x: &Tensor, w: &Tensor, b: &Tensor, grad: &Tensor) -> Grads3 {
        let grad = grad.contiguous()?;
        let db = bias_grad(b, &grad)?;
        let (x_tracks, w_tracks) = (x.track_op(), w.track_op());
        if !x_tracks && !w_tracks {
            return Ok((None, None, db));
        }
        // Products with the tracked inputs themselves would record ops, and the gradients
        // returned would hold their operands (`dz`, `[N, D]`) alive until the gradient store
        // is dropped, after the optimiser step.
        let (x, w) = (x.detach(), w.detach());
        // d(values) = (Âᵀ dOut) at the pattern, through the dropout's mask, into the dense
        // product's gradient (zeros off the pattern).
        let mut dc = self.spgemm.grad(&self.index, &grad)?;
        if let Some((p, seed)) = self.drop {
            dc = dc.apply_op1_no_bwd(&DropoutOp { p, seed })?;
        }
        let scatter = CbsrMoveOp {
            k: self.spgemm.k,
            d: self.spgemm.d,
            scatter: true,
        };
        let dz = dc.apply_op2_no_bwd(&self.index, &scatter)?;
        drop(dc);
        let dw = if w_tracks {
            Some(weight_grad(&dz, &x)?)
        } else {
            None
        };
        if !x_tracks {
            return Ok((None, dw, db));
        }
        let mut dx = dz.matmul(&w)?;
        drop(dz);
        if self.residual {
            dx = (dx + grad)?;
        }
        Ok((Some(dx), dw, db))
    }
}
