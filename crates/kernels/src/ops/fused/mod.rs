//! Fused operators: each computes what a chain of the crate's other ops computes, as one op
//! with its own backward, to save passes over memory or tensors kept for the backward. One
//! module each, CPU / CUDA / backward side by side as for the other ops; each module's docs
//! name the chain it replaces and what the fusion saves.
//!
//! | module | replaces |
//! |---|---|
//! | [`relu_dropout`] | `dropout(relu(x [+ b]))`: a broadcast add, ReLU and dropout |
//! | [`bias_add`] | `x + b` and `x + r + b` (`r` read in place): candle's broadcast adds, whose bias gradient is a one-block-per-column sum |
//! | [`elu_dropout`] | `dropout(elu(x + b))`: a broadcast add, ELU (eleven kernels backward) and dropout |
//! | [`linear`] | `dropout(relu(x wᵀ + b)) [+ x]` and `dropout(relu((Â h) wᵀ + b)) [+ h]`: the product is a temporary |
//! | [`maxk_layer`] | `Â · dropout(maxk(x wᵀ)) + b [+ x]`, a MaxK-GNN hidden layer |
//! | [`gat_attention`] | `edge_softmax(leaky_relu(s_dst[i] + s_src[j]))`, GAT's coefficients |
//! | [`gat_scores`] | `xs.to_dtype(f32) · M` with `M` the block-diagonal `[H F, 2 H]` of both attention vectors, and the copies of its halves: GAT's node scores |
//! | [`gat_aggregate`] | [`gat_attention`], attention dropout and the weighted SpMM, which ran over a graph copied per head: one op on the graph itself, alpha never stored |
//! | [`xent`] | masked `log_softmax` + NLL, the loss and its gradient in one pass |
//! | [`attach`] | any chain computed outside the graph, one op with the caller's backward |
//!
//! The CUDA kernels of the dropout family stay in `cuda/dropout.cu` beside the mask they
//! share; the others have a `.cu` file of their own.

pub mod attach;
pub mod bias_add;
pub mod elu_dropout;
pub mod gat_aggregate;
pub mod gat_attention;
pub mod gat_scores;
pub mod linear;
pub mod maxk_layer;
mod product;
pub mod relu_dropout;
pub mod xent;
