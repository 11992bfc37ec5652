//! GAT layer (Veličković et al., 2018), PyG's `GATConv`.
//!
//! Per head `h` with weights `W_h` (`out / heads` wide when heads are concatenated):
//! `e_ij = LeakyReLU_0.2(a_dst,h · W_h x_i + a_src,h · W_h x_j)` for `j in N(i) ∪ {i}`,
//! `alpha_ij = softmax_j(e_ij)` (edge softmax over row `i`), `x'_i = ||_h sum_j alpha_ij W_h x_j`
//! (or the mean over heads), `+ b`. Attention dropout applies to `alpha` in training.
//!
//! Where the fused kernels take the shape ([`gnn_kernels::gat_aggregate_supports`]: 1, 2, 4 or
//! 8 heads, at most 256 columns) the whole aggregation is one op on the graph itself,
//! [`gnn_kernels::gat_aggregate`]: alpha is recomputed where it is read, never stored, and the
//! attention dropout mask is drawn inside (element `p * heads + h` for edge `p`, head `h`).
//! Other shapes run on the head-expanded graph ([`ModelGraph::heads`]): the coefficients from
//! [`gnn_kernels::gat_attention`] (score, LeakyReLU and edge softmax in one op, storing only
//! `alpha`), dropout, the weighted SpMM. On a partitioned graph the layer exchanges `W x` into
//! the halo first ([`ModelGraph::exchange`]) and takes the source scores of the halo rows from
//! it.
//!
//! Parameters (PyG names): `lin.weight [heads * F, in]`, `att_src [1, heads, F]`,
//! `att_dst [1, heads, F]`, `bias [heads * F]` (concat) or `[F]` (mean).

use super::{attend, attention_graph, exact_only, join_heads, like, unpadded, Linear};
use crate::dropout::DropoutRng;
use crate::error::Result;
use crate::graph::ModelGraph;
use crate::params::{Init, ParamStore};
use crate::timer::Phase;
use candle_core::Tensor;
use gnn_kernels::{gat_aggregate, gat_aggregate_supports, gat_attention, gat_scores};

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
    ) -> Result<Tensor> {
        // An output layer's one head (the classes) on a graph that pads outputs, its width not
        // a multiple of a 16-byte vector of x's type: the layer runs on aligned columns (zero
        // weight rows, attention entries and bias), and the result is narrowed back
        // ([`ModelGraph::with_padded_outputs`]). The fused kernels then take their aligned,
        // vector-load variants.
        let aligned = crate::aligned_width(self.width);
        let vector = (16 / x.dtype().size_in_bytes()).max(1);
        let pad = if self.heads == 1
            && !self.concat
            && g.pads_outputs()
            && !self.width.is_multiple_of(vector)
            && gat_aggregate_supports(1, aligned)
        {
            aligned - self.width
        } else {
            0
        };
        let (out, bias) = self.forward_padded(g, x, att_drop, pad)?;
        let _t = g.phase(Phase::Elementwise);
        let y = gnn_kernels::bias_add(&out, &bias)?;
        // The heads' joined width less the padding (one head when padded).
        let cols = y.dim(1)? - pad;
        Ok(unpadded(y, 1, cols)?)
    }

    /// The layer without its bias, and the bias in the output's dtype: for a hidden layer's
    /// fused bias, ELU and dropout ([`gnn_kernels::bias_elu_dropout`]).
    pub fn forward_unbiased(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        att_drop: Option<(&mut DropoutRng, f32)>,
    ) -> Result<(Tensor, Tensor)> {
        self.forward_padded(g, x, att_drop, 0)
    }

    /// [`Self::forward_unbiased`] with each head `pad` columns wider: zero weight rows,
    /// attention entries and bias (one head only; `pad = 0`: the layer itself).
    fn forward_padded(
        &self,
        g: &ModelGraph,
        x: &Tensor,
        att_drop: Option<(&mut DropoutRng, f32)>,
        pad: usize,
    ) -> Result<(Tensor, Tensor)> {
        let (n, h, f) = (x.dim(0)?, self.heads, self.width + pad);
        exact_only(g, "GAT")?;
        let xw = self.lin.forward_no_bias_padded(g, x, pad)?;
        let att_src = self.att_src.pad_with_zeros(2, 0, pad)?;
        let att_dst = self.att_dst.pad_with_zeros(2, 0, pad)?;
        let timed = g.phase(Phase::Aggregation);
        // The rows the graph's columns name: xw itself on one device; on a partitioned graph,
        // with the halo rows from their owners (one exchange; the backward sends their
        // gradients home). Every row's edges are then local, so is its softmax.
        let xs = g.exchange(&[&xw])?.remove(0);
        let own = g.own_columns();
        // Both node scores of every head in one pass over xs ([`gnn_kernels::gat_scores`]),
        // accumulated in f32 under half precision too, and f32 out. A bf16 product keeps 8
        // significant bits of each score, so a score s is off by up to s/256 and its softmax
        // weight by about that fraction; its backward would also round the scores' gradient
        // to bf16 before both attention vectors' sums over every row. With a bf16 GEMM, GAT
        // 2x64 bf16 on one H100 spiked at epoch 7 and ended at loss 1.95 (89.2 %); with f32
        // scores at 1.26 (94.7 %) (bench/records/dist-scaling/h100x4-2026-11-27-3/
        // gat-diagnostics). The attention itself runs in f32. The halo rows' source scores
        // come from their exchanged features (the exchange carries H F columns per row, not
        // H F + H). The result is `[2, cols, H]`: every column's source scores, then its
        // destination scores, of which this graph's rows read the own columns'.
        let scores = gat_scores(&xs, &att_src, &att_dst, h)?;
        let out = if gat_aggregate_supports(h, f) {
            // One op from the scores to the output on the graph itself (alpha recomputed, never
            // stored; the dropout mask drawn inside): edge p, head h is element p H + h of the
            // whole graph's mask, the edges before this graph's `edge_offset` H of them.
            let mask = match att_drop {
                Some((rng, p)) if p > 0.0 => Some((p, rng.seed_at((g.edge_offset() * h) as u64))),
                _ => None,
            };
            let out = gat_aggregate(g.whole()?, &xs, &scores, own.start, h, NEGATIVE_SLOPE, mask)?;
            drop(timed);
            let _t = g.phase(Phase::Elementwise);
            join_heads(&out, n, (h, f, self.concat))?
        } else {
            // Shapes the fused kernels do not take (gat_aggregate_supports): the chain over the
            // head-expanded graph, coefficients from [`gnn_kernels::gat_attention`].
            let gh = attention_graph(g, h, "GAT")?;
            let sd = scores.get(1)?.narrow(0, own.start, n)?.flatten_all()?;
            let ss = scores.get(0)?.flatten_all()?;
            let alpha = gat_attention(&gh, &sd, &ss, NEGATIVE_SLOPE)?;
            drop(timed);
            attend(g, &gh, &xs, alpha, (h, f, self.concat), att_drop)?
        };
        let bias = like(&self.bias, &out)?.pad_with_zeros(0, 0, pad)?;
        Ok((out, bias))
    }
}
