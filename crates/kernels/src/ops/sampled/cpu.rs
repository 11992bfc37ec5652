//! CPU sampled SpMM: rayon over rows; each row aggregates the positions given by
//! [`Sampling::positions`] and applies the estimator's scale.

use super::Sampling;
use crate::ops::spmm::cpu::{add_row, par_rows};
use candle_core::WithDType;
use gnn_graph::Csr;

/// See the module docs of [`super`].
pub fn spmm_sampled<T: WithDType>(
    csr: &Csr,
    x: &[T],
    k: usize,
    vals: Option<&[T]>,
    mean: bool,
    sampling: &Sampling,
) -> Vec<T> {
    let idx = csr.indices();
    par_rows(csr.n_rows(), k, |i, o| {
        let range = csr.row_range(i);
        let nnz = range.len();
        if nnz == 0 {
            return;
        }
        let picked = sampling.positions(nnz);
        for &rel in &picked {
            let p = range.start + rel;
            add_row(o, &x[idx[p] as usize * k..][..k], vals.map(|v| v[p]));
        }
        let m = picked.len() as f64;
        let scale = T::from_f64(if mean { 1.0 / m } else { nnz as f64 / m });
        o.iter_mut().for_each(|a| *a *= scale);
    })
}
