//! Edge-value normalisations, aligned with a [`Csr`]'s `indices`.
//!
//! | variant | value of entry (i, j) | matrix form |
//! |---|---|---|
//! | `GcnSymmetric` | `1 / sqrt(d_i d_j)` | `D^-1/2 A D^-1/2` (pass `A + I` for GCN) |
//! | `Mean` | `1 / d_i` | `D^-1 A` (row-stochastic) |
//! | `Sum` | `1` | `A` |
//!
//! `d_i` is the row length of `i` (its in-degree in the `adj_t` convention), as PyG's
//! `gcn_norm` computes it on the target index.

use crate::csr::Csr;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// A normalisation scheme for edge values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Normalization {
    /// `D^-1/2 A D^-1/2`.
    GcnSymmetric,
    /// `D^-1 A`.
    Mean,
    /// `A`.
    Sum,
}

impl Normalization {
    /// Edge values of `csr` under this scheme. Zero-degree rows produce no entries, so no
    /// division by zero can reach a value.
    pub fn edge_values(self, csr: &Csr) -> Vec<f32> {
        match self {
            Normalization::GcnSymmetric => gcn_norm(csr),
            Normalization::Mean => mean_norm(csr),
            Normalization::Sum => vec![1.0; csr.nnz()],
        }
    }
}

/// `1 / sqrt(d_i d_j)` for every entry; the graph must be square.
pub fn gcn_norm(csr: &Csr) -> Vec<f32> {
    let inv_sqrt: Vec<f64> = csr
        .row_degrees()
        .iter()
        .map(|&d| if d == 0 { 0.0 } else { 1.0 / (d as f64).sqrt() })
        .collect();
    let mut vals = vec![0f32; csr.nnz()];
    let indptr = csr.indptr();
    crate::csr::split_rows_mut(&mut vals, indptr)
        .into_par_iter()
        .enumerate()
        .for_each(|(i, out)| {
            for (v, &j) in out.iter_mut().zip(csr.row(i)) {
                *v = (inv_sqrt[i] * inv_sqrt[j as usize]) as f32;
            }
        });
    vals
}

/// `1 / d_i` for every entry of row `i`.
pub fn mean_norm(csr: &Csr) -> Vec<f32> {
    let mut vals = vec![0f32; csr.nnz()];
    crate::csr::split_rows_mut(&mut vals, csr.indptr())
        .into_par_iter()
        .for_each(|out| {
            let inv = 1.0 / out.len() as f32;
            out.iter_mut().for_each(|v| *v = inv);
        });
    vals
}
