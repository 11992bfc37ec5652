//! # gnn-kernels
//!
//! Sparse GNN operators as candle custom ops. Each operator has a CPU implementation
//! (rayon-parallel, f32 and f64), a backward pass, and a naive reference the tests compare
//! against. Graph structure lives in a [`DeviceGraph`], uploaded once; only features and
//! edge values travel as tensors.
//!
//! | function | computes |
//! |---|---|
//! | [`spmm`] | `out[i] = reduce_{j in N(i)} x[j]`, reduce = sum / mean / max / min |
//! | [`spmm_weighted`] | the same with `a_ij * x[j]`, `a` an edge-value tensor |
//! | [`spmm_transposed`] | `Aᵀ dy`: a sum / mean `spmm`'s input gradient, for ops that differentiate through their aggregation themselves |
//! | [`spmm_then`], [`spmm_transposed_then`] | a sum / mean (or its transpose) and its row [`Epilogue`] (factors, residual, bias, width) in one untracked call: half precision rounded once from the fp32 accumulation |
//! | [`matmul_nt`] | `x wᵀ` computing only the gradients that are needed |
//! | [`sddmm`] | `e[p] = <a[i], b[j]>` for every edge `p = (i, j)` (HP-SDDMM on the GPU; [`sddmm_scaled`] times an edge value) |
//! | [`edge_softmax`] | softmax of edge scores within each row (attention) |
//! | [`gat_attention`] | GAT's `softmax(LeakyReLU(s_dst[i] + s_src[j]))` per row, fused |
//! | [`layer_norm`] | LayerNorm of each row, one pass each way (fp32 statistics) |
//! | [`spmm_sampled`] | edge-sampled `spmm` estimate for inference (ES-SpMM / AES-SpMM) |
//! | [`maxk`] | top-k of each row as CBSR (MaxK-GNN), gradient to the kept entries |
//! | [`spgemm`] | `A · dense(x)` for CBSR `x` (backward: [`sspmm`], the sampled `Aᵀ · dOut`); [`spgemm_bias`] fuses a bias, [`spgemm_bias_residual`] a bias and a residual |
//! | [`dequantize`] | f32 features from INT8 codes with per-feature scales |
//! | [`dropout`] | inverted dropout with a stateless, device-independent mask |
//! | [`relu_dropout`], [`bias_relu_dropout`] | `dropout(relu(x [+ b]))` in one pass each way (a hidden layer's epilogue) |
//! | [`bias_add`] | `x + b`, the bias gradient as one GEMM row (a layer's bias where no activation follows) |
//! | [`bias_elu_dropout`] | `dropout(elu(x + b))` in one pass each way (a GAT hidden layer's epilogue) |
//! | [`LinearProduct::bias_relu_dropout`] | `dropout(relu(x wᵀ + b))`, the product a temporary (a hidden layer whose GEMM comes last) |
//! | [`LinearProduct::maxk`] + [`MaxkProduct::aggregate`] | `Â · dropout(maxk(x wᵀ)) + b [+ x]`, one op from `x` to the output (a MaxK-GNN hidden layer): one gradient for `x`, no product kept |
//! | [`Aggregate`] + [`LinearProduct::of_aggregate`] | `dropout(relu((Â h) wᵀ + b)) [+ h]`, one op from `h` to the output (a GCN hidden layer that aggregates first): one gradient for `h`, none kept for `Â h` |
//!
//! On a GPU, which kernel an op runs is the [`KernelPolicy`] of the graph it runs on
//! ([`DeviceGraph::with_policy`]; the default is the measured dispatcher), and the graph
//! records the kernels that ran ([`DeviceGraph::kernels_used`]).
//!
//! The `cuda` feature enables candle's CUDA backend; GPU kernels plug into the same ops.
#![deny(missing_docs)]

#[cfg(feature = "cuda")]
pub(crate) mod cuda;
pub mod device_graph;
pub mod error;
pub mod ops;
pub mod partition;
#[cfg(all(feature = "cuda", feature = "verify"))]
pub mod peer;
pub mod policy;
pub mod schedule;
#[cfg(feature = "verify")]
pub mod verify;

pub use device_graph::{setup_time, DeviceGraph};
pub use policy::{ColumnBlock, KernelPolicy, KernelsUsed, SddmmKernel, SpmmKernel};

pub use error::{Error, Result};
pub use ops::adam::{adam_step, sums_f32, AdamStep};
pub use ops::cast_pad::cast_pad;
pub use ops::column_sum::column_sum;
pub use ops::dropout::dropout;
pub use ops::edge_softmax::edge_softmax;
pub use ops::fused::attach::{attach_backward, AttachedBackward, AttachedGrads};
pub use ops::fused::bias_add::{bias_add, bias_add_residual};
pub use ops::fused::elu_dropout::bias_elu_dropout;
pub use ops::fused::gat_aggregate::{gat_aggregate, gat_aggregate_supports, gat_score_pair};
pub use ops::fused::gat_attention::gat_attention;
pub use ops::fused::gat_scores::gat_scores;
pub use ops::fused::linear::{
    add_bias_relu_dropout_untracked, bias_relu_dropout_untracked, Aggregate, EpilogueMask,
    LinearProduct,
};
pub use ops::fused::relu_dropout::{bias_relu_dropout, relu_dropout};
pub use ops::fused::xent::{masked_cross_entropy, masked_cross_entropy_grad};
pub use ops::layer_norm::layer_norm;
pub use ops::matmul::{matmul_nt, weight_grad};
pub use ops::maxk::{maxk, spgemm, spgemm_bias, spgemm_bias_residual, sspmm, Cbsr, MaxkProduct};
pub use ops::quant::{dequantize, QuantizedFeatures};
pub use ops::sampled::{spmm_sampled, Sampling};
pub use ops::scale_rows::{rescale_rows, scale_rows};
pub use ops::sddmm::{sddmm, sddmm_scaled};
pub use ops::spmm::{
    spmm, spmm_then, spmm_transposed, spmm_transposed_then, spmm_weighted, Epilogue, Reduce,
};
