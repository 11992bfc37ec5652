//! The lean forms of GCN's and GraphSAGE's layers (on a partitioned graph, and on a whole one
//! after [`crate::ModelGraph::with_lean_layers`]): each layer's
//! products, bias, activation (and, for GCN, the next layer's aggregation of it) as one op
//! ([`gnn_kernels::attach_backward`]) that keeps only what its backward reads.
//!
//! Composed, candle's graph keeps every op's inputs until the backward ends, read or not. A
//! GraphSAGE hidden layer kept five `[N, out]` tensors (the two products, their sum, the
//! activation, and the aggregation of the input), its output layer four of `[N, classes]`,
//! and a GCN hidden layer its activation (the next aggregation's input, which that
//! aggregation's backward never reads) beside the aggregation the next product needs. Here:
//! - [`linear`]: `act(a · wᵀ + b)` over `(a, w, b)`, the graph's fused aggregation run on
//!   the product (a layer that multiplies first) or on the activation (GCN: the next
//!   layer's `Â h`); keeps `a` and the activation's mask (a bit per element), not the
//!   product, its aggregation, the activation or the next aggregation's input;
//! - [`pair`]: `act(a · w_aᵀ + h · w_hᵀ + b)` over `(a, h, [w_a | w_h | b])` (GraphSAGE's
//!   neighbour and root terms; `a` the aggregation of `h`, or `Â (h · w_aᵀ)` made inside for
//!   a layer that multiplies first); keeps its inputs and the mask; the root term is added
//!   in the epilogue's pass;
//! - [`hidden_and_output`] (GCN) and [`pair_hidden_and_output`] (GraphSAGE-mean): in
//!   training, a hidden layer over a constant input and the output layer after it as one op,
//!   so that the hidden activation's gradient is not accumulated by candle into a
//!   zero-filled tensor between two ops. Given a [`LossHead`], they also take the training
//!   loss into the op: it returns the loss, and the logits' gradient goes straight to the
//!   output layer's backward instead of into a zero-filled `[rows, classes]` tensor.
//!
//! Forward values equal the composed layers' bit for bit on the CPU (the same products, sums
//! and epilogue kernel, in the same order); under half precision a GraphSAGE output layer
//! rounds its two terms and bias once where the composed one rounds the terms' sum first
//! (over a whole graph's mean, from the SpMM's fp32 accumulation:
//! [`gnn_kernels::spmm_then`]; otherwise [`gnn_kernels::bias_add_residual`]). The gradients are the same sums with
//! the weight gradients as `dzᵀ x` products (the composed matmul's `(xᵀ dz)ᵀ`), equal up to
//! rounding.

use super::{like, unpadded, weight_like, zero_padded};
use crate::dropout::DropoutRng;
use crate::error::Result;
use crate::graph::{FusedAggregation, ModelGraph};
use crate::timer::Phase;
use candle_core::Tensor;
use gnn_kernels::{
    add_bias_relu_dropout_untracked, attach_backward, column_sum, masked_cross_entropy,
    masked_cross_entropy_grad, weight_grad, AttachedBackward, EpilogueMask,
};

/// A training pass's loss, for the op that makes the logits to take in
/// ([`crate::Gnn::forward_offering_loss`]): the masked cross-entropy
/// ([`gnn_kernels::masked_cross_entropy`]) against `labels` with row weights `weight`, one
/// per logits row.
#[derive(Clone, Copy)]
pub(crate) struct LossHead<'a> {
    /// `[rows]` u32.
    pub labels: &'a Tensor,
    /// `[rows]` f32.
    pub weight: &'a Tensor,
}

/// `out` (untracked) attached over `inputs` with `backward` ([`attach_backward`]); with a
/// loss head, the loss of `out` attached instead (a scalar f32): its backward makes the
/// logits' gradient from the loss's and hands it to `backward`, so candle never accumulates
/// it (a zero fill and an add over `[rows, classes]`). The logits are kept for that gradient,
/// as the separate loss op kept them.
fn attach_output(
    out: Tensor,
    inputs: &[&Tensor],
    backward: Box<AttachedBackward>,
    loss: Option<LossHead<'_>>,
) -> Result<Tensor> {
    let Some(head) = loss else {
        return Ok(attach_backward(out, inputs, backward)?);
    };
    let value = masked_cross_entropy(&out, head.labels, head.weight)?;
    let (labels, weight) = (head.labels.clone(), head.weight.clone());
    Ok(attach_backward(
        value,
        inputs,
        Box::new(move |ins, dl| {
            let dy =
                masked_cross_entropy_grad(&out, &labels, &weight, dl).map_err(|e| msg(e.into()))?;
            backward(ins, &dy)
        }),
    )?)
}

/// What follows a lean layer's products: the bias alone (an output layer), or the bias, ReLU
/// and dropout (`None`: dropout off) of a hidden layer.
pub(crate) enum Act<'a> {
    /// `z + b`.
    Bias,
    /// `dropout(relu(z + b))`.
    Relu(Option<(&'a mut DropoutRng, f32)>),
}

/// `z [+ r] + b` or the hidden epilogue of `z [+ r]` (untracked), and its mask when it has
/// one. An output layer adds both terms and the bias in one pass
/// ([`gnn_kernels::bias_add_residual`], `r` read in place where it is a column range).
fn finish(
    g: &ModelGraph,
    z: Tensor,
    r: Option<Tensor>,
    b: &Tensor,
    act: Act<'_>,
) -> Result<(Tensor, Option<EpilogueMask>)> {
    let _t = g.phase(Phase::Elementwise);
    let b = b.detach();
    // A hidden layer's second term is added in the epilogue's pass.
    Ok(match (act, r) {
        (Act::Bias, Some(r)) => (gnn_kernels::bias_add_residual(&z, &r, &b)?, None),
        (Act::Bias, None) => (gnn_kernels::bias_add(&z, &b)?, None),
        (Act::Relu(Some((rng, p))), r) => {
            let (y, m) = rng.add_bias_relu_dropout_untracked(&z, r.as_ref(), &b, p)?;
            (y, Some(m))
        }
        (Act::Relu(None), r) => {
            let (y, m) = add_bias_relu_dropout_untracked(&z, r.as_ref(), &b, 0.0, 0)?;
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

/// Where a lean layer's op runs the graph's fused aggregation.
pub(crate) enum Agg {
    /// Not at all (its input is an aggregation already, or the layer has none).
    None,
    /// On the product, before the bias: `act(Â (a · wᵀ) + b)` (a layer that multiplies
    /// first, its output narrower than its input).
    Product(FusedAggregation),
    /// On the activation: `Â act(a · wᵀ + b)` (a hidden layer with the next layer's
    /// aggregation of its output).
    Activation(FusedAggregation),
}

/// `act(a · wᵀ + b)` (`a [N, in]`, `w [out, in]`, `b [out]`, all in `a`'s dtype) with the
/// graph's fused aggregation where `agg` says; one op over `(a, w, b)` keeping `a` and the
/// mask: [`linear_parts`] attached.
pub(crate) fn linear(
    g: &ModelGraph,
    a: &Tensor,
    w: &Tensor,
    b: &Tensor,
    act: Act<'_>,
    agg: Agg,
) -> Result<Tensor> {
    let p = linear_parts(g, a, w, b, act, agg)?;
    let backward = p.backward;
    Ok(attach_backward(
        p.out,
        &[a, w, b],
        Box::new(move |ins, dy| {
            let need = [ins[0].track_op(), ins[1].track_op(), ins[2].track_op()];
            Ok(backward(dy, need)?.into())
        }),
    )?)
}

/// A lean linear layer's backward: `(dy, whether a, w and b need one) -> (da, dw, db)`.
type LinearBackward =
    dyn Fn(&Tensor, [bool; 3]) -> candle_core::Result<[Option<Tensor>; 3]> + Send + Sync;

/// A lean linear layer computed but not attached ([`linear_parts`]): its output (untracked)
/// and its backward.
struct LinearParts {
    out: Tensor,
    backward: Box<LinearBackward>,
}

/// [`linear`]'s output and backward, not attached (the backward holds `a` and the mask).
fn linear_parts(
    g: &ModelGraph,
    a: &Tensor,
    w: &Tensor,
    b: &Tensor,
    act: Act<'_>,
    agg: Agg,
) -> Result<LinearParts> {
    // An output layer that multiplies first, on a graph that pads outputs: the product, its
    // aggregation and the bias on aligned columns (zero weight rows and bias), the result
    // narrowed back ([`ModelGraph::with_padded_outputs`]).
    let out_dim = w.dim(0)?;
    let pad = match (&act, &agg) {
        (Act::Bias, Agg::Product(_)) if g.pads_outputs() => crate::aligned_width(out_dim) - out_dim,
        _ => 0,
    };
    let (wp, bp) = (
        zero_padded(&w.detach(), 0, pad)?,
        zero_padded(&b.detach(), 0, pad)?,
    );
    let a = a.detach();
    let mut z = {
        let _t = g.phase(Phase::Gemm);
        a.matmul(&wp.t()?)?
    };
    // An output layer over a scaled GCN sum ([`crate::FusedAggregation::is_scaled`]): its outer
    // row scaling, bias and narrowing in one pass; the backward pads and scales in one.
    let scaled = match (&act, &agg) {
        (Act::Bias, Agg::Product(f)) if f.is_scaled() => Some(f.clone()),
        _ => None,
    };
    if let Some(f) = scaled {
        let y = {
            let _t = g.phase(Phase::Aggregation);
            f.forward_bias(&z, &b.detach(), out_dim)?
                .ok_or_else(|| crate::Error::Config("a scaled sum gave no epilogue".into()))?
        };
        drop(z);
        return Ok(LinearParts {
            out: y,
            backward: Box::new(move |dy, [need_a, need_w, need_b]| {
                let db = need_b.then(|| column_sum(dy)).transpose()?;
                let dz = f
                    .backward_widened(dy, out_dim + pad)
                    .map_err(msg)?
                    .ok_or_else(|| {
                        candle_core::Error::Msg("a scaled sum has no backward".into())
                    })?;
                let dw = need_w
                    .then(|| weight_grad(&dz, &a).and_then(|t| unpadded(t, 0, out_dim)))
                    .transpose()?;
                let da = need_a.then(|| dz.matmul(&wp)).transpose()?;
                Ok([da, dw, db])
            }),
        });
    }
    if let Agg::Product(f) = &agg {
        let _t = g.phase(Phase::Aggregation);
        z = f.forward(&z)?;
    }
    let (y, mask) = finish(g, z, None, &bp, act)?;
    let out = match &agg {
        Agg::Activation(f) => {
            let _t = g.phase(Phase::Aggregation);
            let out = f.forward(&y)?;
            drop(y);
            out
        }
        _ => unpadded(y, 1, out_dim)?,
    };
    Ok(LinearParts {
        out,
        backward: Box::new(move |dy, [need_a, need_w, need_b]| {
            // Back through the aggregation (collective: every rank's backward reaches it).
            let dy = match &agg {
                Agg::Activation(f) => f.backward(dy).map_err(msg)?,
                _ if pad > 0 => zero_padded(dy, 1, pad)?,
                _ => dy.contiguous()?,
            };
            let dz = pre_activation_grad(mask.as_ref(), &dy)?;
            drop(dy);
            let db = need_b
                .then(|| column_sum(&dz).and_then(|t| unpadded(t, 0, out_dim)))
                .transpose()?;
            let dz = match &agg {
                Agg::Product(f) => f.backward(&dz).map_err(msg)?,
                _ => dz,
            };
            let dw = need_w
                .then(|| weight_grad(&dz, &a).and_then(|t| unpadded(t, 0, out_dim)))
                .transpose()?;
            let da = need_a.then(|| dz.matmul(&wp)).transpose()?;
            Ok([da, dw, db])
        }),
    })
}

/// Where a lean GraphSAGE layer's neighbour term comes from ([`pair`]).
pub(crate) enum Neighbour<'a> {
    /// An aggregation of `h` made before by an op of its own (which takes its gradient on):
    /// an input of the op.
    Tracked(&'a Tensor),
    /// An aggregation that needs no gradient (the cached aggregation of the features): held
    /// by the op for the weight gradient, not an input.
    Constant(&'a Tensor),
    /// `Â (h · w_aᵀ)`, made inside (a layer that multiplies first).
    Product(FusedAggregation),
}

/// `act(n · w_aᵀ + h · w_hᵀ + b)` (`w_a [out, in_a]`, `w_h [out, in_h]`, `b [out]`;
/// parameters as tracked f32 masters or already in `h`'s dtype), GraphSAGE's neighbour and
/// root terms, the neighbour term `n · w_aᵀ` as `neighbour` says. One op over `(h, [w_a |
/// w_h | b])` (`(a, h, [w_a | w_h | b])` for a tracked aggregation `a`) keeping its inputs,
/// a held aggregation and the mask. `rows`: on a graph restricted to some rows (the output
/// has their rows alone), those rows: the root product `h · w_hᵀ` is taken on every row and
/// its `rows` selected (`out` columns gathered, not `in`), its gradient scattered back inside
/// the op, where it joins the neighbour term's gradient of `h` in one product. Computed, not
/// attached ([`pair`] attaches it); `need_dh`: whether the backward gives `h` a gradient.
#[allow(clippy::too_many_arguments)]
fn pair_parts(
    g: &ModelGraph,
    neighbour: Neighbour<'_>,
    w_a: &Tensor,
    h: &Tensor,
    rows: Option<&crate::OutputRows>,
    w_h: &Tensor,
    b: &Tensor,
    act: Act<'_>,
    need_dh: bool,
) -> Result<PairParts> {
    let out_dim = w_a.dim(0)?;
    // Each weight at its input's width (inputs wider than the weights carry zero-weighted
    // padding columns: [`weight_like`]); the neighbour term's input is `h` itself when the
    // neighbour term is its aggregated product.
    let w_a = match &neighbour {
        Neighbour::Tracked(a) | Neighbour::Constant(a) => weight_like(w_a, a)?,
        Neighbour::Product(_) => weight_like(w_a, h)?,
    };
    let w_h = weight_like(w_h, h)?;
    let (in_a, in_h) = (w_a.dim(1)?, w_h.dim(1)?);
    // One tracked tensor for the three parameters (their gradients split back through the
    // concatenation), in the activations' dtype.
    let wb = Tensor::cat(&[&w_a, &w_h, &like(b, h)?.reshape((out_dim, 1))?], 1)?;
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
    // An output layer whose neighbour term is its aggregated product, on a graph that pads
    // outputs: both products, the aggregation and the bias on aligned columns (zero weight
    // rows and bias), the result narrowed back ([`ModelGraph::with_padded_outputs`]).
    let pad = match (&neighbour, &act) {
        (Neighbour::Product(_), Act::Bias) if g.pads_outputs() => {
            crate::aligned_width(out_dim) - out_dim
        }
        _ => 0,
    };
    // The neighbour product's input, held for the weight gradient (`None`: the op's first
    // input, or `h` itself for an aggregated product).
    let (held, tracked, product_agg) = match neighbour {
        Neighbour::Tracked(a) => (None, Some(a.clone()), None),
        Neighbour::Constant(a) => (Some(a.detach()), None, None),
        Neighbour::Product(f) => (None, None, Some(f)),
    };
    // The root product's rows the output has: every row, or the restricted ones.
    let sel = rows.cloned();
    let own_rows = |r: Tensor| -> Result<Tensor> {
        match &sel {
            Some(s) => {
                let _t = g.phase(Phase::Aggregation);
                s.select(&r)
            }
            None => Ok(r),
        }
    };
    // An output layer over a whole graph's plain sum or mean: the root term, the bias and the
    // narrowing in the aggregation's own epilogue pass (in half precision from its fp32
    // accumulation: no cast, add or narrowing copy of their own).
    let whole_output = matches!(act, Act::Bias);
    let (z, root) = match (&held, &tracked, &product_agg) {
        (Some(a), _, _) | (None, Some(a), _) => {
            let (l, r) = {
                let _t = g.phase(Phase::Gemm);
                let l = a.detach().matmul(&wa.t()?)?;
                (l, h.detach().matmul(&wh.t()?)?)
            };
            // The root term is added in the epilogue's pass (no `[N, out]` sum of its own).
            (l, Some(own_rows(r)?))
        }
        (None, None, Some(f)) if pad > 0 || sel.is_some() => {
            // Two aligned products: the neighbour term's goes to the aggregation as it is
            // (no copy out of a shared product, no padded copy for the SpMM).
            // (So too where the root product's rows are selected.)
            let (l, r) = {
                let _t = g.phase(Phase::Gemm);
                let hd = h.detach();
                (
                    hd.matmul(&zero_padded(&wa, 0, pad)?.t()?)?,
                    hd.matmul(&zero_padded(&wh, 0, pad)?.t()?)?,
                )
            };
            let r = own_rows(r)?;
            let _t = g.phase(Phase::Aggregation);
            match whole_output {
                true => match f.forward_residual_bias(&l, &r, &bias, out_dim)? {
                    Some(y) => (y, None),
                    None => (f.forward(&l)?, Some(r)),
                },
                false => (f.forward(&l)?, Some(r)),
            }
        }
        (None, None, Some(f)) => {
            // The composed layer's order: one product with [w_a; w_h], the neighbour half
            // aggregated, the root half added.
            let p = {
                let _t = g.phase(Phase::Gemm);
                h.detach().matmul(&Tensor::cat(&[&wa, &wh], 0)?.t()?)?
            };
            let (pl, pr) = (p.narrow(1, 0, out_dim)?, p.narrow(1, out_dim, out_dim)?);
            let l = {
                let _t = g.phase(Phase::Aggregation);
                f.forward(&pl)?
            };
            // The root half is added with the bias: read in place by an output layer's
            // `bias_add_residual`, copied out first by a hidden layer's epilogue.
            (l, Some(pr))
        }
        (None, None, None) => unreachable!("every neighbour term sets one"),
    };
    // A finished output (root term and bias added, `out_dim` wide) has no root left over.
    let (out, mask) = match (whole_output, product_agg.is_some(), &root) {
        (true, true, None) => (z, None),
        _ => {
            let (out, mask) = finish(g, z, root, &zero_padded(&bias, 0, pad)?, act)?;
            (unpadded(out, 1, out_dim)?, mask)
        }
    };
    let backward = move |a: Option<&Tensor>, h: &Tensor, wb: &Tensor, dy: &Tensor| {
        let dy = zero_padded(dy, 1, pad)?;
        let dz = pre_activation_grad(mask.as_ref(), &dy)?;
        let (wa, wh, _) = parts(wb)?;
        let (wa, wh) = (zero_padded(&wa, 0, pad)?, zero_padded(&wh, 0, pad)?);
        let db = unpadded(column_sum(&dz)?, 0, out_dim)?.reshape((out_dim, 1))?;
        // The neighbour product's gradient and input: `dz` and the aggregation, or (an
        // aggregated product) `Âᵀ dz` and `h`.
        let (dl, input) = match (&product_agg, a.or(held.as_ref())) {
            (Some(f), _) => (f.backward(&dz).map_err(msg)?, h.detach()),
            (None, Some(a)) => (dz.clone(), a.detach()),
            (None, None) => unreachable!("every neighbour term sets one"),
        };
        // The root product's gradient on every row of `h` (zero on the rows not selected).
        let dr = match &sel {
            Some(s) => s.scatter(&dz).map_err(msg)?,
            None => dz.clone(),
        };
        let dwb = if wb.track_op() {
            Some(Tensor::cat(
                &[
                    &unpadded(weight_grad(&dl, &input)?, 0, out_dim)?,
                    &unpadded(weight_grad(&dr, &h.detach())?, 0, out_dim)?,
                    &db,
                ],
                1,
            )?)
        } else {
            None
        };
        let da = a
            .filter(|a| a.track_op())
            .map(|_| dz.matmul(&wa))
            .transpose()?;
        let dh = if !need_dh {
            None
        } else {
            Some(match &product_agg {
                // Both terms' gradients of `h` as one product over their concatenated widths,
                // `[dl | dr] · [w_a; w_h]`: two products and their sum wrote three `[N, in]`
                // tensors and read two (the add alone took 126 us of a bf16 GraphSAGE 2x128
                // epoch on an H200; `[dl | dr]` is `[N, 2 out]`).
                Some(_) => Tensor::cat(&[&dl, &dr], 1)?.matmul(&Tensor::cat(&[&wa, &wh], 0)?)?,
                None => dr.matmul(&wh)?,
            })
        };
        Ok::<_, candle_core::Error>((da, dh, dwb))
    };
    Ok(PairParts {
        out,
        tracked,
        wb,
        backward: Box::new(backward),
    })
}

/// The gradients a lean GraphSAGE layer's backward gives: of the tracked aggregation, of `h`
/// and of `[w_a | w_h | b]`.
type PairGrads = candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)>;

/// A lean GraphSAGE layer's backward: `(a, h, wb, dy) -> (da, dh, dwb)`.
type PairBackward = dyn Fn(Option<&Tensor>, &Tensor, &Tensor, &Tensor) -> PairGrads + Send + Sync;

/// A lean GraphSAGE layer computed but not attached ([`pair_parts`]): its output (untracked),
/// its tracked aggregation input if any, its parameters as one tracked tensor, and its
/// backward `(a, h, wb, dy) -> (da, dh, dwb)`.
struct PairParts {
    out: Tensor,
    tracked: Option<Tensor>,
    wb: Tensor,
    backward: Box<PairBackward>,
}

/// `act(n · w_aᵀ + h · w_hᵀ + b)`: [`pair_parts`] attached as one op over its inputs.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pair(
    g: &ModelGraph,
    neighbour: Neighbour<'_>,
    w_a: &Tensor,
    h: &Tensor,
    rows: Option<&crate::OutputRows>,
    w_h: &Tensor,
    b: &Tensor,
    act: Act<'_>,
) -> Result<Tensor> {
    let p = pair_parts(g, neighbour, w_a, h, rows, w_h, b, act, h.track_op())?;
    let backward = p.backward;
    Ok(match p.tracked {
        Some(a) => attach_backward(
            p.out,
            &[&a, h, &p.wb],
            Box::new(move |ins, dy| {
                let (da, dh, dwb) = backward(Some(ins[0]), ins[1], ins[2], dy)?;
                Ok(vec![da, dh, dwb])
            }),
        )?,
        None => attach_backward(
            p.out,
            &[h, &p.wb],
            Box::new(move |ins, dy| {
                let (_, dh, dwb) = backward(None, ins[0], ins[1], dy)?;
                Ok(vec![dh, dwb])
            }),
        )?,
    })
}

/// A hidden GraphSAGE layer over a constant input `x` and its cached aggregation `a`
/// (`relu`, dropout `drop`) and the output layer after it (multiplying first, its neighbour
/// term aggregated by `f`, the output's `rows`), as one op over the two layers' `[w_a | w_h | b]`: the hidden layer's
/// output `h` is kept inside, not handed to candle, which accumulated its gradient into a
/// zero-filled `[N, hidden]` tensor (126 us of a bf16 GraphSAGE 2x128 epoch on an H200).
/// The same products, epilogues and aggregations as the two ops ([`pair`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn pair_hidden_and_output(
    g: &ModelGraph,
    g_out: &ModelGraph,
    a: &Tensor,
    x: &Tensor,
    (w_a1, w_h1, b1): (&Tensor, &Tensor, &Tensor),
    drop: Option<(&mut DropoutRng, f32)>,
    f: FusedAggregation,
    rows: Option<&crate::OutputRows>,
    (w_a2, w_h2, b2): (&Tensor, &Tensor, &Tensor),
    loss: Option<LossHead<'_>>,
) -> Result<Tensor> {
    let hidden = pair_parts(
        g,
        Neighbour::Constant(a),
        w_a1,
        x,
        None,
        w_h1,
        b1,
        Act::Relu(drop),
        false,
    )?;
    let h = hidden.out;
    let output = pair_parts(
        g_out,
        Neighbour::Product(f),
        w_a2,
        &h,
        rows,
        w_h2,
        b2,
        Act::Bias,
        true,
    )?;
    let (bw1, bw2, x) = (hidden.backward, output.backward, x.detach());
    attach_output(
        output.out,
        &[&hidden.wb, &output.wb],
        Box::new(move |ins, dy| {
            let (_, dh, dwb2) = bw2(None, &h, ins[1], dy)?;
            let dh = dh.ok_or_else(|| candle_core::Error::Msg("no gradient of h".into()))?;
            let (_, _, dwb1) = bw1(None, &x, ins[0], &dh)?;
            Ok(vec![dwb1, dwb2])
        }),
        loss,
    )
}

/// A hidden GCN layer whose product comes last and the output layer after it, as one op:
/// `Â_o (dropout(relu(a · w_1ᵀ + b_1)) · w_2ᵀ) + b_2` over `(w_1, b_1, [w_2 | b_2])`, with `a`
/// a constant (the cached aggregation of the input, or of an input that needs no gradient:
/// held, not an input) and `f` the output layer's scaled GCN sum
/// ([`FusedAggregation::is_scaled_for`]). Keeps `a`, the activation `h` and its mask.
///
/// Composed as two ops, `h` is the first one's output and the second one's input, and candle
/// 0.11 accumulates its gradient into a zero-filled `[N, hidden]` tensor (a fill and an add:
/// 127.5 us of a 3.35 ms GCN 2x128 bf16 epoch on an H200, `bench/records/headline/
/// h200-2026-11-29-3/gated-step-h200/ncu`). Here `dh = dz_2 · w_2` goes straight to the
/// hidden layer's mask. Both halves are [`linear_parts`] (the hidden layer's products and
/// epilogue are those of [`gnn_kernels::LinearProduct::bias_relu_dropout`], with the same
/// mask seed); the composed accumulation added `dh` to zeros, which is exact, so values and
/// gradients are the same.
#[allow(clippy::too_many_arguments)]
pub(crate) fn hidden_and_output(
    g: &ModelGraph,
    g_out: &ModelGraph,
    f: FusedAggregation,
    a: &Tensor,
    w1: &Tensor,
    b1: &Tensor,
    dropout: Option<(&mut DropoutRng, f32)>,
    w2: &Tensor,
    b2: &Tensor,
    loss: Option<LossHead<'_>>,
) -> Result<Tensor> {
    let out_dim = w2.dim(0)?;
    // The output layer's parameters as one tracked tensor (their gradients joined the same
    // way), as [`pair`] does: an op takes three inputs at most.
    let wb2 = Tensor::cat(&[w2, &b2.reshape((out_dim, 1))?], 1)?;
    let hidden = linear_parts(g, a, w1, b1, Act::Relu(dropout), Agg::None)?;
    let output = linear_parts(g_out, &hidden.out, w2, b2, Act::Bias, Agg::Product(f))?;
    let (bw1, bw2) = (hidden.backward, output.backward);
    attach_output(
        output.out,
        &[w1, b1, &wb2],
        Box::new(move |ins, dy| {
            let need2 = ins[2].track_op();
            let [dh, dw2, db2] = bw2(dy, [true, need2, need2])?;
            let dwb2 = match (dw2, db2) {
                (Some(dw2), Some(db2)) => {
                    Some(Tensor::cat(&[&dw2, &db2.reshape((out_dim, 1))?], 1)?)
                }
                _ => None,
            };
            let dh = dh.ok_or_else(|| candle_core::Error::Msg("no gradient of h".into()))?;
            let [_, dw1, db1] = bw1(&dh, [false, ins[0].track_op(), ins[1].track_op()])?;
            Ok(vec![dw1, db1, dwb2])
        }),
        loss,
    )
}
