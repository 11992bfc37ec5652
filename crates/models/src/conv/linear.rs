//! A dense layer `y = x W^T + b` with PyG/torch parameter layout (`weight: [out, in]`).

use super::{like, weight_like};
use crate::error::Result;
use crate::graph::ModelGraph;
use crate::params::{Init, ParamStore};
use crate::timer::Phase;
use candle_core::Tensor;
use gnn_kernels::matmul_nt;

/// Dense layer.
pub struct Linear {
    /// `[out, in]`.
    pub weight: Tensor,
    /// `[out]`, absent for bias-free layers.
    pub bias: Option<Tensor>,
}

impl Linear {
    /// Glorot weight `weight`, zero `bias` (when `bias`), under `store`.
    pub fn new(in_dim: usize, out_dim: usize, bias: bool, store: &ParamStore) -> Result<Self> {
        Ok(Self {
            weight: store.get("weight", &[out_dim, in_dim], Init::Glorot)?,
            bias: if bias {
                Some(store.get("bias", &[out_dim], Init::Zeros)?)
            } else {
                None
            },
        })
    }

    /// torch's default initialisation (`U(-b, b)`, `b = 1 / sqrt(in_dim)`, for the weight and
    /// the bias), as PyG's `Linear` draws it when the layer names no initialiser
    /// (`TransformerConv`'s projections, `SAGEConv`, torch's `nn.Linear`).
    pub fn torch_default(
        in_dim: usize,
        out_dim: usize,
        bias: bool,
        store: &ParamStore,
    ) -> Result<Self> {
        let init = Init::TorchLinear { fan_in: in_dim };
        Ok(Self {
            weight: store.get("weight", &[out_dim, in_dim], init)?,
            bias: if bias {
                Some(store.get("bias", &[out_dim], init)?)
            } else {
                None
            },
        })
    }

    /// `x W^T` (GEMM phase) `+ b` (element-wise phase), in `x`'s dtype, timed on `g` (the
    /// forward context: a dense layer reads only its clock).
    pub fn forward(&self, g: &ModelGraph, x: &Tensor) -> Result<Tensor> {
        let y = self.forward_no_bias(g, x)?;
        match &self.bias {
            Some(b) => {
                let _t = g.phase(Phase::Elementwise);
                Ok(y.broadcast_add(&like(b, &y)?)?)
            }
            None => Ok(y),
        }
    }

    /// `x W^T` only (`x` may carry zero-padded columns past `in`; the weight is padded to
    /// match, see `gnn_models::aligned_width`).
    pub fn forward_no_bias(&self, g: &ModelGraph, x: &Tensor) -> Result<Tensor> {
        self.forward_no_bias_padded(g, x, 0)
    }

    /// [`Self::forward_no_bias`] with `pad` zero rows appended to the weight: `pad` zero
    /// output columns, for a layer run on aligned columns
    /// ([`crate::ModelGraph::with_padded_outputs`]).
    pub fn forward_no_bias_padded(&self, g: &ModelGraph, x: &Tensor, pad: usize) -> Result<Tensor> {
        let _t = g.phase(Phase::Gemm);
        let w = weight_like(&self.weight, x)?.pad_with_zeros(0, 0, pad)?;
        Ok(matmul_nt(x, &w)?)
    }
}
