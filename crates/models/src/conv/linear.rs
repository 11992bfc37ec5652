//! A dense layer `y = x W^T + b` with PyG/torch parameter layout (`weight: [out, in]`).

use crate::error::Result;
use crate::params::{Init, ParamStore};
use crate::timer::{Phase, Timer};
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

    /// `x W^T` (GEMM phase) `+ b` (element-wise phase).
    pub fn forward(&self, x: &Tensor, t: &Timer) -> Result<Tensor> {
        let y = t.time(Phase::Gemm, || Ok(matmul_nt(x, &self.weight)?))?;
        match &self.bias {
            Some(b) => t.time(Phase::Elementwise, || Ok(y.broadcast_add(b)?)),
            None => Ok(y),
        }
    }

    /// `x W^T` only.
    pub fn forward_no_bias(&self, x: &Tensor, t: &Timer) -> Result<Tensor> {
        t.time(Phase::Gemm, || Ok(matmul_nt(x, &self.weight)?))
    }
}
