//! GAT layer (Veličković et al., 2018), PyG's `GATConv`.
//!
//! Per head `h` with weights `W_h` (`out / heads` wide when heads are concatenated):
//! `e_ij = LeakyReLU_0.2(a_dst,h · W_h x_i + a_src,h · W_h x_j)` for `j in N(i) ∪ {i}`,
//! `alpha_ij = softmax_j(e_ij)` (edge softmax over row `i`), `x'_i = ||_h sum_j alpha_ij W_h x_j`
//! (or the mean over heads), `+ b`. Attention dropout applies to `alpha` in training.
//!
//! Built from the sparse ops on the head-expanded graph ([`ModelGraph::heads`]): the
//! coefficients come from [`gnn_kernels::gat_attention`] (the `s_dst[i] + s_src[j]` score,
//! LeakyReLU and edge softmax in one op, storing only `alpha`), aggregated by the weighted
//! SpMM.
//!
//! Parameters (PyG names): `lin.weight [heads * F, in]`, `att_src [1, heads, F]`,
//! `att_dst [1, heads, F]`, `bias [heads * F]` (concat) or `[F]` (mean).

use super::{attend, attention_graph, Linear};
use crate::dropout::DropoutRng;
use crate::error::Result;
use crate::graph::ModelGraph;
use crate::params::{Init, ParamStore};
use crate::timer::{Phase, Timer};
use candle_core::{Tensor, D};
use gnn_kernels::gat_attention;

/// GAT's LeakyReLU slope (the paper's and PyG's default).
const NEGATIVE_SLOPE: f64 = 0.2;

/// GAT convolution.
pub struct GatConv {
    lin: Linear,
    att_src: Tensor,
    att_dst: Tensor,
    bias: Tensor,
    heads: usize,
    width: usize,
    concat: bool,
}

impl GatConv {
    /// `heads` heads of width `width` each; `concat` joins them (`heads * width` out),
    /// otherwise they are averaged (`width` out).
    pub fn new(
        in_dim: usize,
        width: usize,
        heads: usize,
        concat: bool,
        store: &ParamStore,
    ) -> Result<Self> {
        Ok(Self {
            lin: Linear::new(in_dim, heads * width, false, &store.pp("lin"))?,
            att_src: store.get("att_src", &[1, heads, width], Init::Glorot)?,
            att_dst: store.get("att_dst", &[1, heads, width], Init::Glorot)?,
            bias: store.get(
                "bias",
                &[if concat { heads * width } else { width }],
                Init::Zeros,
            )?,
            heads,
            width,
            concat,
        })
    }

    /// Applies the layer; `att_drop` is attention dropout (training only).
    pub fn forward(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        att_drop: Option<(&mut DropoutRng, f32)>,
        t: &Timer,
    ) -> Result<Tensor> {
        let (n, h, f) = (x.dim(0)?, self.heads, self.width);
        let gh = attention_graph(g, h, "GAT")?;
        let xw = self.lin.forward_no_bias(x, t)?;
        let alpha = t.time(Phase::Aggregation, || {
            let x3 = xw.reshape((n, h, f))?;
            let s_src = x3
                .broadcast_mul(&self.att_src)?
                .sum(D::Minus1)?
                .reshape(n * h)?;
            let s_dst = x3
                .broadcast_mul(&self.att_dst)?
                .sum(D::Minus1)?
                .reshape(n * h)?;
            Ok(gat_attention(&gh, &s_dst, &s_src, NEGATIVE_SLOPE)?)
        })?;
        let out = attend(&gh, &xw, alpha, (h, f, self.concat), att_drop, t)?;
        t.time(Phase::Elementwise, || Ok(out.broadcast_add(&self.bias)?))
    }
}
