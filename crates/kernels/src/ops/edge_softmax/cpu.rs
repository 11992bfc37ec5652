//! CPU edge softmax: rayon over rows, each row's edge slice written by one task.

use candle_core::WithDType;
use gnn_graph::csr::split_rows_mut;
use gnn_graph::Csr;
use rayon::prelude::*;

/// Numerically stable softmax of `s` within each row's edges.
pub fn forward<T: WithDType>(csr: &Csr, s: &[T]) -> Vec<T> {
    let mut out = vec![T::zero(); csr.nnz()];
    split_rows_mut(&mut out, csr.indptr())
        .into_par_iter()
        .enumerate()
        .for_each(|(i, o)| {
            let row = &s[csr.row_range(i)];
            let m = row
                .iter()
                .map(|v| v.to_f64())
                .fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = row.iter().map(|v| (v.to_f64() - m).exp()).sum();
            for (a, v) in o.iter_mut().zip(row) {
                *a = T::from_f64((v.to_f64() - m).exp() / z);
            }
        });
    out
}

/// `ds = alpha ∘ (dalpha - rowsum(alpha ∘ dalpha))`.
pub fn backward<T: WithDType>(csr: &Csr, alpha: &[T], dalpha: &[T]) -> Vec<T> {
    let mut out = vec![T::zero(); csr.nnz()];
    split_rows_mut(&mut out, csr.indptr())
        .into_par_iter()
        .enumerate()
        .for_each(|(i, o)| {
            let r = csr.row_range(i);
            let (a, d) = (&alpha[r.clone()], &dalpha[r]);
            let t: f64 = a.iter().zip(d).map(|(x, y)| x.to_f64() * y.to_f64()).sum();
            for ((g, x), y) in o.iter_mut().zip(a).zip(d) {
                *g = T::from_f64(x.to_f64() * (y.to_f64() - t));
            }
        });
    out
}
