//! CPU GAT attention: rayon over rows, each row's edge slice written by one task; f64 inside.

use candle_core::WithDType;
use gnn_graph::csr::split_rows_mut;
use gnn_graph::Csr;
use rayon::prelude::*;

fn leaky(z: f64, slope: f64) -> f64 {
    if z > 0.0 {
        z
    } else {
        z * slope
    }
}

/// `alpha = edge_softmax(LeakyReLU(s_dst[i] + s_src[col]))` per row.
pub fn forward<T: WithDType>(csr: &Csr, s_dst: &[T], s_src: &[T], slope: f64) -> Vec<T> {
    let mut out = vec![T::zero(); csr.nnz()];
    split_rows_mut(&mut out, csr.indptr())
        .into_par_iter()
        .enumerate()
        .for_each(|(i, o)| {
            let sd = s_dst[i].to_f64();
            let e: Vec<f64> = csr
                .row(i)
                .iter()
                .map(|&j| leaky(sd + s_src[j as usize].to_f64(), slope))
                .collect();
            let m = e.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = e.iter().map(|v| (v - m).exp()).sum();
            for (a, v) in o.iter_mut().zip(&e) {
                *a = T::from_f64((v - m).exp() / z);
            }
        });
    out
}

/// `[ds_dst (n_rows); dz (nnz)]` from `alpha` and `dalpha`: the edge gradients of the scores
/// before the softmax and LeakyReLU, and their row sums (the column sums, `ds_src`, are added
/// over the transpose by the caller).
pub fn backward<T: WithDType>(
    csr: &Csr,
    s_dst: &[T],
    s_src: &[T],
    alpha: &[T],
    dalpha: &[T],
    slope: f64,
) -> Vec<T> {
    let n = csr.n_rows();
    let mut out = vec![T::zero(); n + csr.nnz()];
    let (head, dz) = out.split_at_mut(n);
    split_rows_mut(dz, csr.indptr())
        .into_par_iter()
        .zip(head.par_iter_mut())
        .enumerate()
        .for_each(|(i, (o, ds))| {
            let r = csr.row_range(i);
            let (a, d) = (&alpha[r.clone()], &dalpha[r]);
            let t: f64 = a.iter().zip(d).map(|(x, y)| x.to_f64() * y.to_f64()).sum();
            let sd = s_dst[i].to_f64();
            let mut acc = 0.0;
            for (((g, x), y), &j) in o.iter_mut().zip(a).zip(d).zip(csr.row(i)) {
                let z = sd + s_src[j as usize].to_f64();
                let v = x.to_f64() * (y.to_f64() - t) * if z > 0.0 { 1.0 } else { slope };
                *g = T::from_f64(v);
                acc += v;
            }
            *ds = T::from_f64(acc);
        });
    out
}
