//! The lean forms of GCN's and GraphSAGE's layers on a partitioned graph: each layer's
//! products, bias, activation (and, for GCN, the next layer's aggregation of it) as one op
//! ([`gnn_kernels::attach_backward`]) that keeps only what its backward reads.
//!
//! Composed, candle's graph keeps every op's inputs until the backward ends, read or not. A
//! GraphSAGE hidden layer kept five `[N, out]` tensors (the two products, their sum, the
//! activation, and the aggregation of the input), its output layer four of `[N, classes]`,
//! and a GCN hidden layer its activation (the next aggregation's input, which that
//! aggregation's backward never reads) beside the aggregation the next product needs. Here:
//! - [`linear`]: `act(a · wᵀ + b)` over `(a, w, b)`, optionally followed by the graph's
//!   fused aggregation (GCN: the next layer's `Â h`); keeps `a` and the activation's mask
//!   (a bit per element), not the product, the activation or its aggregation's input;
//! - [`pair`]: `act(a · w_aᵀ + h · w_hᵀ + b)` over `(a, h, [w_a | w_h | b])` (GraphSAGE's
//!   neighbour and root terms); keeps `a`, `h` and the mask.
//!
//! Forward values equal the composed layers' bit for bit (the same products, sums and
//! epilogue kernel, in the same order); the gradients are the same sums with the weight
//! gradients as `dzᵀ x` products (the composed matmul's `(xᵀ dz)ᵀ`), equal up to rounding.

use super::like;
use crate::dropout::DropoutRng;
use crate::error::Result;
use crate::graph::{FusedAggregation, ModelGraph};
use crate::timer::Phase;
use candle_core::Tensor;
use gnn_kernels::{
    attach_backward, bias_relu_dropout_untracked, column_sum, weight_grad, EpilogueMask,
};

/// What follows a lean layer's products: the bias alone (an output layer), or the bias, ReLU
/// and dropout (`None`: dropout off) of a hidden layer.
pub(crate) enum Act<'a> {
    /// `z + b`.
    Bias,
    /// `dropout(relu(z + b))`.
    Relu(Option<(&'a mut DropoutRng, f32)>),
}

/// `z + b` or the hidden epilogue of `z` (untracked), and its mask when it has one.
fn finish(
    g: &ModelGraph,
    z: Tensor,
    b: &Tensor,
    act: Act<'_>,
) -> Result<(Tensor, Option<EpilogueMask>)> {
    let _t = g.phase(Phase::Elementwise);
    let b = b.detach();
    Ok(match act {
        Act::Bias => (z.broadcast_add(&b)?, None),
        Act::Relu(Some((rng, p))) => {
            let (y, m) = rng.bias_relu_dropout_untracked(&z, &b, p)?;
            (y, Some(m))
        }
        Act::Relu(None) => {
            let (y, m) = bias_relu_dropout_untracked(&z, &b, 0.0, 0)?;
            (y, Some(m))
        }
    })
}

/// The pre-activation's gradient from the output's: through the mask, or as it is.
fn pre_activation_grad(mask: Option<&EpilogueMask>, dy: &Tensor) -> candle_core::Result<Tensor> {
    match mask {
        Some(m) => m
            .backward(dy)
            .map_err(|e| candle_core::Error::Msg(e.to_string())),
        None => dy.contiguous(),
    }
}

fn msg(e: crate::Error) -> candle_core::Error {
    candle_core::Error::Msg(e.to_string())
}

/// `act(a · wᵀ + b)` (`a [N, in]`, `w [out, in]`, `b [out]`, all in `a`'s dtype), then, with
/// `aggregate`, that aggregation of it; one op over `(a, w, b)` keeping `a` and the mask.
pub(crate) fn linear(
    g: &ModelGraph,
    a: &Tensor,
    w: &Tensor,
    b: &Tensor,
    act: Act<'_>,
    aggregate: Option<FusedAggregation>,
) -> Result<Tensor> {
    let z = {
        let _t = g.phase(Phase::Gemm);
        a.detach().matmul(&w.detach().t()?)?
    };
    let (y, mask) = finish(g, z, b, act)?;
    let out = match &aggregate {
        Some(agg) => {
            let _t = g.phase(Phase::Aggregation);
            agg.forward(&y)?
        }
        None => y,
    };
    Ok(attach_backward(
        out,
        [a, w, b],
        Box::new(move |[a, w, b], dy| {
            // Back through the aggregation (collective: every rank's backward reaches it).
            let dy = match &aggregate {
                Some(agg) => agg.backward(dy).map_err(msg)?,
                None => dy.contiguous()?,
            };
            let dz = pre_activation_grad(mask.as_ref(), &dy)?;
            drop(dy);
            let dw = w
                .track_op()
                .then(|| weight_grad(&dz, &a.detach()))
                .transpose()?;
            let db = b.track_op().then(|| column_sum(&dz)).transpose()?;
            let da = a.track_op().then(|| dz.matmul(&w.detach())).transpose()?;
            Ok([da, dw, db])
        }),
    )?)
}

/// `act(a · w_aᵀ + h · w_hᵀ + b)` (`a [N, in_a]`, `h [N, in_h]`, `w_a [out, in_a]`,
/// `w_h [out, in_h]`, `b [out]`; parameters as tracked f32 masters or already in `a`'s
/// dtype); one op over `(a, h, [w_a | w_h | b])` keeping `a`, `h` and the mask.
pub(crate) fn pair(
    g: &ModelGraph,
    a: &Tensor,
    w_a: &Tensor,
    h: &Tensor,
    w_h: &Tensor,
    b: &Tensor,
    act: Act<'_>,
) -> Result<Tensor> {
    let (out_dim, in_a) = w_a.dims2()?;
    let in_h = w_h.dim(1)?;
    // One tracked tensor for the three parameters (their gradients split back through the
    // concatenation), in the activations' dtype.
    let wb = Tensor::cat(
        &[
            &like(w_a, a)?,
            &like(w_h, a)?,
            &like(b, a)?.reshape((out_dim, 1))?,
        ],
        1,
    )?;
    let parts = move |wb: &Tensor| -> candle_core::Result<(Tensor, Tensor, Tensor)> {
        let wb = wb.detach();
        Ok((
            wb.narrow(1, 0, in_a)?.contiguous()?,
            wb.narrow(1, in_a, in_h)?.contiguous()?,
            wb.narrow(1, in_a + in_h, 1)?
                .contiguous()?
                .reshape(out_dim)?,
        ))
    };
    let (wa, wh, bias) = parts(&wb)?;
    let z = {
        let _t = g.phase(Phase::Gemm);
        let l = a.detach().matmul(&wa.t()?)?;
        let r = h.detach().matmul(&wh.t()?)?;
        (l + r)?
    };
    let (out, mask) = finish(g, z, &bias, act)?;
    Ok(attach_backward(
        out,
        [a, h, &wb],
        Box::new(move |[a, h, wb], dy| {
            let dz = pre_activation_grad(mask.as_ref(), dy)?;
            let (wa, wh, _) = parts(wb)?;
            let dwb = if wb.track_op() {
                let db = column_sum(&dz)?.reshape((out_dim, 1))?;
                Some(Tensor::cat(
                    &[
                        &weight_grad(&dz, &a.detach())?,
                        &weight_grad(&dz, &h.detach())?,
                        &db,
                    ],
                    1,
                )?)
            } else {
                None
            };
            let da = a.track_op().then(|| dz.matmul(&wa)).transpose()?;
            let dh = h.track_op().then(|| dz.matmul(&wh)).transpose()?;
            Ok([da, dh, dwb])
        }),
    )?)
}
