//! Graph transformer layer (Shi et al., 2021), PyG's `TransformerConv` (no edge features,
//! `beta = False`, root weight on).
//!
//! Per head `h` of width `C`: `q_i = W_q,h x_i`, `k_j = W_k,h x_j`, `v_j = W_v,h x_j`,
//! `alpha_ij = softmax_{j in N(i)}(q_i · k_j / sqrt(C))`, `x'_i = ||_h sum_j alpha_ij v_j`
//! (or the mean over heads) `+ W_skip x_i`. Attention dropout applies to `alpha` in training.
//!
//! The dot-product scores are one HP-SDDMM on the head-expanded graph
//! ([`ModelGraph::heads`]), normalised by [`gnn_kernels::edge_softmax`], aggregated by the
//! weighted SpMM; on a partitioned graph the keys and values are exchanged into the halo
//! first ([`ModelGraph::exchange`]). The graph is used as given, as PyG does: self loops are
//! neither added nor removed (a node's own term in the softmax is its self loop, if the file
//! holds one), and a node without in-edges keeps its skip.
//!
//! Parameters (PyG names, all with biases): `lin_query`, `lin_key`, `lin_value`
//! (`[heads * C, in]`) and `lin_skip` (`[heads * C, in]` concatenated, `[C, in]` averaged),
//! initialised as PyG's `Linear` is by default (`U(-1/sqrt(in), 1/sqrt(in))`, biases too).
//! The scale matters: Glorot's is ~2x wider at 602 inputs, so the initial scores are ~4x
//! larger and each softmax peaks on a few neighbours; on a low-homophily graph, where only
//! the neighbourhood mean carries the class, the model then learns far less (see
//! c6f0242:docs/perf/h100-2026-11-24-attention-pyg).

use super::{attend, attention_graph, Linear};
use crate::dropout::DropoutRng;
use crate::error::Result;
use crate::graph::ModelGraph;
use crate::params::ParamStore;
use crate::timer::Phase;
use candle_core::Tensor;
use gnn_kernels::{edge_softmax, sddmm};

/// Graph transformer convolution.
pub struct TransformerConv {
    query: Linear,
    key: Linear,
    value: Linear,
    skip: Linear,
    heads: usize,
    width: usize,
    concat: bool,
}

impl TransformerConv {
    /// `heads` heads of width `width`; `concat` joins them, otherwise they are averaged.
    pub fn new(
        in_dim: usize,
        width: usize,
        heads: usize,
        concat: bool,
        store: &ParamStore,
    ) -> Result<Self> {
        let hw = heads * width;
        Ok(Self {
            query: Linear::torch_default(in_dim, hw, true, &store.pp("lin_query"))?,
            key: Linear::torch_default(in_dim, hw, true, &store.pp("lin_key"))?,
            value: Linear::torch_default(in_dim, hw, true, &store.pp("lin_value"))?,
            skip: Linear::torch_default(
                in_dim,
                if concat { hw } else { width },
                true,
                &store.pp("lin_skip"),
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
        let (n, h, c) = (x.dim(0)?, self.heads, self.width);
        let gh = attention_graph(g, h, "transformer")?;
        let q = (self.query.forward(g, x)? / (c as f64).sqrt())?;
        let k = self.key.forward(g, x)?;
        let v = self.value.forward(g, x)?;
        let (v, alpha) = {
            let _t = g.phase(Phase::Aggregation);
            // Keys and values of the rows the graph's columns name: themselves on one device;
            // on a partitioned graph, with the halo rows (one exchange for both, whose
            // backward sends their gradients home). Every row's edges are then local, so is
            // its softmax.
            let kv = g.exchange(&[&k, &v])?;
            let cols = kv[0].dim(0)?;
            let s = sddmm(&gh, &q.reshape((n * h, c))?, &kv[0].reshape((cols * h, c))?)?;
            (kv[1].clone(), edge_softmax(&gh, &s)?)
        };
        let out = attend(g, &gh, &v, alpha, (h, c, self.concat), att_drop)?;
        let skip = self.skip.forward(g, x)?;
        let _t = g.phase(Phase::Elementwise);
        Ok((out + skip)?)
    }
}
