//! Graph convolutions, one per file (PyG's parameter names).

pub mod gat;
pub mod gcn;
pub mod gin;
pub(crate) mod lean;
pub mod linear;
pub mod sage;
pub mod transformer;

pub use gat::GatConv;
pub use gcn::GcnConv;
pub use gin::GinConv;
pub use linear::Linear;
pub use sage::SageConv;
pub use transformer::TransformerConv;

use crate::dropout::DropoutRng;
use crate::error::{Error, Result};
use crate::graph::ModelGraph;
use crate::timer::Phase;
use candle_core::Tensor;
use gnn_kernels::{maxk, spmm_weighted, Cbsr, DeviceGraph, Reduce};

/// Parameter `p` in the dtype of the activations `x` (under `--precision bf16/f16` the fp32
/// master weights are narrowed here each forward, and the cast's backward widens their
/// gradients back to fp32; a no-op in f32).
pub(crate) fn like(p: &Tensor, x: &Tensor) -> Result<Tensor> {
    Ok(p.to_dtype(x.dtype())?)
}

/// `t`'s first `len` entries along `dim`, contiguous: a result computed on zero-padded
/// columns or rows narrowed back ([`crate::ModelGraph::with_padded_outputs`]); `t` itself
/// when it has no padding.
pub(crate) fn unpadded(t: Tensor, dim: usize, len: usize) -> candle_core::Result<Tensor> {
    if t.dim(dim)? == len {
        Ok(t)
    } else {
        t.narrow(dim, 0, len)?.contiguous()
    }
}

/// A weight `w [out, in]` for the product `x · wᵀ`, in `x`'s dtype ([`like`]), with zero
/// columns appended when `x` is wider than `in`: the input features padded to an aligned
/// width ([`crate::aligned_width`]). The padding columns then meet zero weights, so the
/// product is the unpadded one, while cuBLAS gets rows whose byte length is a multiple of 16
/// (602 bf16 features are 1,204 bytes: cuBLAS falls back to sm80 kernels at about a third of
/// the aligned ones' bandwidth). The gradient flows back through the padding to the `[out,
/// in]` parameter, so parameters and checkpoints keep the logical width.
/// The cast and the padding are one op ([`gnn_kernels::cast_pad`]) for f32 and half types.
pub(crate) fn weight_like(w: &Tensor, x: &Tensor) -> Result<Tensor> {
    let (rows, cols) = w.dims2()?;
    let width = x.dim(candle_core::D::Minus1)?;
    if width <= cols {
        return like(w, x);
    }
    if windowable(w) && windowable(x) {
        return Ok(gnn_kernels::cast_pad(w, x.dtype(), rows, width)?);
    }
    Ok(like(w, x)?.pad_with_zeros(1, 0, width - cols)?)
}

/// Whether [`gnn_kernels::cast_pad`] takes `t`'s dtype (f32, bf16, f16).
fn windowable(t: &Tensor) -> bool {
    matches!(
        t.dtype(),
        candle_core::DType::F32 | candle_core::DType::BF16 | candle_core::DType::F16
    )
}

/// `t` (`[R, C]` or `[R]`) with `pad` zero rows appended along dimension 0 (or, with `dim`
/// 1, `pad` zero columns of a `[R, C]`), in one pass where the dtype allows
/// ([`gnn_kernels::cast_pad`], which tracks `t`'s gradient), else candle's padding; `t`
/// itself when `pad` is 0.
pub(crate) fn zero_padded(t: &Tensor, dim: usize, pad: usize) -> candle_core::Result<Tensor> {
    if pad == 0 {
        return Ok(t.clone());
    }
    if !windowable(t) {
        return t.pad_with_zeros(dim, 0, pad);
    }
    let d = t.dims();
    let (rows, cols) = match (d, dim) {
        ([r], 0) => (r + pad, 1),
        ([r, c], 0) => (r + pad, *c),
        ([r, c], 1) => (*r, c + pad),
        _ => return t.pad_with_zeros(dim, 0, pad),
    };
    gnn_kernels::cast_pad(t, t.dtype(), rows, cols).map_err(candle_core::Error::wrap)
}

/// A hidden layer's epilogue on its unbiased output `y`: `dropout(relu(y + b), p)` with
/// `drop`'s rate and mask stream (training), else `relu(y + b)`, one fused pass
/// ([`gnn_kernels::bias_relu_dropout`]), timed as element-wise work on `g`.
pub(crate) fn bias_relu_dropout(
    g: &ModelGraph,
    y: &Tensor,
    b: &Tensor,
    drop: Option<(&mut DropoutRng, f32)>,
) -> Result<Tensor> {
    let _t = g.phase(Phase::Elementwise);
    match drop {
        Some((rng, p)) => rng.bias_relu_dropout(y, b, p),
        None => Ok(gnn_kernels::bias_relu_dropout(y, b, 0.0, 0)?),
    }
}

/// MaxK of `h` then dropout on the kept values (MaxK-GNN's order), timed as element-wise work
/// on `g`.
pub(crate) fn maxk_dropout(
    g: &ModelGraph,
    h: &Tensor,
    k: usize,
    drop: Option<(&mut DropoutRng, f32)>,
) -> Result<Cbsr> {
    let c = {
        let _t = g.phase(Phase::Elementwise);
        maxk(h, k)?
    };
    match drop {
        Some((rng, p)) if p > 0.0 => {
            let d = {
                let _t = g.phase(Phase::Elementwise);
                rng.dropout(c.data(), p)?
            };
            Ok(c.with_data(d)?)
        }
        _ => Ok(c),
    }
}

/// The head-expanded graph an attention layer (`what`) runs on; sampled aggregation is refused
/// (attention weights are per edge, so there is no estimator to substitute).
pub(crate) fn attention_graph(g: &ModelGraph, heads: usize, what: &str) -> Result<DeviceGraph> {
    exact_only(g, what)?;
    g.heads(heads)
}

/// Refuses sampled aggregation for an attention layer (`what`).
pub(crate) fn exact_only(g: &ModelGraph, what: &str) -> Result<()> {
    if g.aggregation != crate::Aggregation::Exact {
        return Err(Error::Config(format!(
            "{} aggregation has no {what} counterpart (attention weights are per edge); use \
             exact aggregation for this model",
            g.aggregation
        )));
    }
    Ok(())
}

/// The attention layers' second half: dropout on `alpha` (training; the masks of the whole
/// graph's edges, [`ModelGraph::edge_offset`]), the per-head weighted sum of `v` (`[cols,
/// heads * width]`, the rows `gh`'s columns name: [`ModelGraph::exchange`]'s) over the
/// head-expanded graph `gh`, heads joined (`concat`) or averaged; timed on `g`.
pub(crate) fn attend(
    g: &ModelGraph,
    gh: &DeviceGraph,
    v: &Tensor,
    alpha: Tensor,
    (heads, width, concat): (usize, usize, bool),
    att_drop: Option<(&mut DropoutRng, f32)>,
) -> Result<Tensor> {
    let (n, cols) = (gh.n_rows() / heads, v.dim(0)?);
    let alpha = match att_drop {
        Some((rng, p)) if p > 0.0 => {
            let _t = g.phase(Phase::Elementwise);
            // Head-expanded, a row's edges repeat per head: the whole graph's edges before
            // this graph's are `heads` times its edge offset.
            let offset = (g.edge_offset() * heads) as u64;
            rng.dropout_at(&alpha, p, offset)?
        }
        _ => alpha,
    };
    let out = {
        let _t = g.phase(Phase::Aggregation);
        spmm_weighted(gh, &v.reshape((cols * heads, width))?, &alpha, Reduce::Sum)?
    };
    let _t = g.phase(Phase::Elementwise);
    join_heads(&out, n, (heads, width, concat))
}

/// An attention layer's `[n, heads * width]` output with its heads joined (`concat`: as it
/// is) or averaged (`[n, width]`). One head's mean is itself: candle's mean would still run a
/// sum and a scale forward, a scale and four adds backward (about 0.28 ms of a bf16 GAT
/// epoch at 233 K nodes on an H200, bench/records/gat-sparse/h200-2026-11-28-2/
/// scores-epilogue-h200).
pub(crate) fn join_heads(
    out: &Tensor,
    n: usize,
    (heads, width, concat): (usize, usize, bool),
) -> Result<Tensor> {
    Ok(if concat || heads == 1 {
        out.reshape((n, heads * width))?
    } else {
        out.reshape((n, heads, width))?.mean(1)?
    })
}
