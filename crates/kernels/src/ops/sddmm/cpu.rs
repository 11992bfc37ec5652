//! CPU SDDMM: rayon over rows, each row's edge slice written by one task.

use candle_core::WithDType;
use gnn_graph::csr::split_rows_mut;
use gnn_graph::Csr;
use rayon::prelude::*;

/// `e[p] = <a[i], b[col_p]>` for `p` in row `i`, times `vals[p]` when given.
pub fn sddmm<T: WithDType>(csr: &Csr, a: &[T], b: &[T], k: usize, vals: Option<&[T]>) -> Vec<T> {
    let mut e = vec![T::zero(); csr.nnz()];
    let idx = csr.indices();
    split_rows_mut(&mut e, csr.indptr())
        .into_par_iter()
        .enumerate()
        .for_each(|(i, out)| {
            let ar = &a[i * k..(i + 1) * k];
            for (o, p) in out.iter_mut().zip(csr.row_range(i)) {
                let br = &b[idx[p] as usize * k..][..k];
                let dot = ar.iter().zip(br).fold(T::zero(), |s, (&x, &y)| s + x * y);
                *o = vals.map_or(dot, |v| dot * v[p]);
            }
        });
    e
}
