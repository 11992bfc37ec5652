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

/// `1 / sqrt(d_i)` per row (0 for an empty row), in f64.
fn inv_sqrt_degrees(csr: &Csr) -> Vec<f64> {
    csr.row_degrees()
        .into_par_iter()
        .map(|d| if d == 0 { 0.0 } else { 1.0 / (d as f64).sqrt() })
        .collect()
}

/// The diagonal factor of [`gcn_norm`]: `s_i = 1 / sqrt(d_i)` per row (0 for an empty row),
/// so that `gcn_norm`'s value of entry `(i, j)` is `s_i · s_j` (rounded once from f64 there,
/// here each factor). A kernel can then aggregate unweighted between two row scalings,
/// `D^-1/2 A (D^-1/2 x)`, and read no value per edge.
pub fn gcn_inv_sqrt_degrees(csr: &Csr) -> Vec<f32> {
    inv_sqrt_degrees(csr)
        .into_iter()
        .map(|v| v as f32)
        .collect()
}

/// `1 / sqrt(d_i d_j)` for every entry; the graph must be square. In parallel over blocks of
/// rows.
pub fn gcn_norm(csr: &Csr) -> Vec<f32> {
    let inv_sqrt = inv_sqrt_degrees(csr);
    let mut vals = vec![0f32; csr.nnz()];
    let (blocks, sizes) = crate::csr::row_blocks(csr);
    crate::coo::split_sizes_mut(&mut vals, &sizes)
        .into_par_iter()
        .zip(blocks)
        .for_each(|(out, rows)| {
            let base = csr.row_range(rows.start).start;
            for i in rows {
                let r = csr.row_range(i);
                for (v, &j) in out[r.start - base..r.end - base].iter_mut().zip(csr.row(i)) {
                    *v = (inv_sqrt[i] * inv_sqrt[j as usize]) as f32;
                }
            }
        });
    vals
}

/// `1 / d_i` for every entry of row `i`.
pub fn mean_norm(csr: &Csr) -> Vec<f32> {
    let mut vals = vec![0f32; csr.nnz()];
    let (blocks, sizes) = crate::csr::row_blocks(csr);
    crate::coo::split_sizes_mut(&mut vals, &sizes)
        .into_par_iter()
        .zip(blocks)
        .for_each(|(out, rows)| {
            let base = csr.row_range(rows.start).start;
            for i in rows {
                let r = csr.row_range(i);
                let out = &mut out[r.start - base..r.end - base];
                let inv = 1.0 / out.len() as f32;
                out.iter_mut().for_each(|v| *v = inv);
            }
        });
    vals
}
