//! Naive references, written for clarity rather than speed: a dense adjacency matrix built
//! from the CSR, then textbook loops in f64. Tests compare every implementation with these.

use super::Reduce;
use gnn_graph::Csr;

/// Dense `n_rows x n_cols` adjacency with summed values (duplicates add up), and a mask of
/// present entries.
pub fn dense_adjacency(csr: &Csr, vals: Option<&[f64]>) -> (Vec<f64>, Vec<bool>) {
    let (n, m) = (csr.n_rows(), csr.n_cols());
    let mut a = vec![0f64; n * m];
    let mut mask = vec![false; n * m];
    for i in 0..n {
        for p in csr.row_range(i) {
            let j = csr.indices()[p] as usize;
            a[i * m + j] += vals.map_or(1.0, |v| v[p]);
            mask[i * m + j] = true;
        }
    }
    (a, mask)
}

/// Reference SpMM in f64. Sum/mean use the dense product `A x` (mean divides by the row
/// length); max/min scan each row's entries. Empty rows give 0.
pub fn spmm_reference(
    csr: &Csr,
    x: &[f64],
    k: usize,
    vals: Option<&[f64]>,
    reduce: Reduce,
) -> Vec<f64> {
    let (n, m) = (csr.n_rows(), csr.n_cols());
    let mut out = vec![0f64; n * k];
    match reduce {
        Reduce::Sum | Reduce::Mean => {
            let (a, _) = dense_adjacency(csr, vals);
            for i in 0..n {
                for j in 0..m {
                    for t in 0..k {
                        out[i * k + t] += a[i * m + j] * x[j * k + t];
                    }
                }
                let len = csr.row_len(i);
                if reduce == Reduce::Mean && len > 0 {
                    for t in 0..k {
                        out[i * k + t] /= len as f64;
                    }
                }
            }
        }
        Reduce::Max | Reduce::Min => {
            for i in 0..n {
                for t in 0..k {
                    let cands = csr
                        .row_range(i)
                        .map(|p| vals.map_or(1.0, |v| v[p]) * x[csr.indices()[p] as usize * k + t]);
                    out[i * k + t] = if reduce == Reduce::Max {
                        cands.fold(None, |acc: Option<f64>, c| {
                            Some(acc.map_or(c, |a| a.max(c)))
                        })
                    } else {
                        cands.fold(None, |acc: Option<f64>, c| {
                            Some(acc.map_or(c, |a| a.min(c)))
                        })
                    }
                    .unwrap_or(0.0);
                }
            }
        }
    }
    out
}
