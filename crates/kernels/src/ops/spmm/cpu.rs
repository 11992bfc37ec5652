//! CPU kernels of the SpMM family: rayon over output rows, generic over f32/f64.
//!
//! Row `i` of the output reads rows `x[indices[p]]` for `p` in row `i`'s range; each output
//! row is written by one task, so no synchronisation is needed except in the argmax
//! scatter, which splits the feature columns between tasks instead.

use candle_core::WithDType;
use gnn_graph::csr::split_rows_mut;
use gnn_graph::Csr;
use rayon::prelude::*;

/// Sentinel argmax position of an empty row.
pub const NO_EDGE: u32 = u32::MAX;

/// `out[i] = sum_p v_p x[col_p]` (times `1/len_i` when `mean`); `v_p = 1` when unweighted.
pub fn spmm_sum<T: WithDType>(
    csr: &Csr,
    x: &[T],
    k: usize,
    vals: Option<&[T]>,
    mean: bool,
) -> Vec<T> {
    let idx = csr.indices();
    par_rows(csr.n_rows(), k, |i, o| {
        let range = csr.row_range(i);
        let len = range.len();
        for p in range {
            add_row(o, &x[idx[p] as usize * k..][..k], vals.map(|v| v[p]));
        }
        if mean && len > 0 {
            let inv = T::from_f64(1.0 / len as f64);
            o.iter_mut().for_each(|a| *a *= inv);
        }
    })
}

/// `rows` zero rows of width `w`, each filled by `f(row, out_row)` in parallel (rayon over
/// rows; nothing runs when `w == 0`).
pub(crate) fn par_rows<T: WithDType>(
    rows: usize,
    w: usize,
    f: impl Fn(usize, &mut [T]) + Send + Sync,
) -> Vec<T> {
    let mut out = vec![T::zero(); rows * w];
    if w > 0 {
        out.par_chunks_mut(w).enumerate().for_each(|(i, o)| f(i, o));
    }
    out
}

/// `o += w * xr` (`o += xr` when unweighted): one edge's contribution to an output row.
pub(crate) fn add_row<T: WithDType>(o: &mut [T], xr: &[T], w: Option<T>) {
    match w {
        Some(w) => o.iter_mut().zip(xr).for_each(|(a, &b)| *a += w * b),
        None => o.iter_mut().zip(xr).for_each(|(a, &b)| *a += b),
    }
}

/// `out[i,t] = max_p v_p x[col_p, t]` (or min); empty rows give 0. When `arg` is given it
/// receives the winning edge position per output entry ([`NO_EDGE`] for empty rows); ties
/// keep the first position.
pub fn spmm_extreme<T: WithDType>(
    csr: &Csr,
    x: &[T],
    k: usize,
    vals: Option<&[T]>,
    is_max: bool,
    want_arg: bool,
) -> (Vec<T>, Vec<u32>) {
    let n = csr.n_rows();
    let mut out = vec![T::zero(); n * k];
    let mut arg = if want_arg {
        vec![NO_EDGE; n * k]
    } else {
        Vec::new()
    };
    if k == 0 {
        return (out, arg);
    }
    let idx = csr.indices();
    let better = |a: T, b: T| if is_max { a > b } else { a < b };
    let row = |i: usize, o: &mut [T], mut a: Option<&mut [u32]>| {
        let range = csr.row_range(i);
        for (n_seen, p) in range.enumerate() {
            let xr = &x[idx[p] as usize * k..][..k];
            let w = vals.map_or(T::one(), |v| v[p]);
            for t in 0..k {
                let c = w * xr[t];
                if n_seen == 0 || better(c, o[t]) {
                    o[t] = c;
                    if let Some(a) = a.as_deref_mut() {
                        a[t] = p as u32;
                    }
                }
            }
        }
    };
    if want_arg {
        out.par_chunks_mut(k)
            .zip(arg.par_chunks_mut(k))
            .enumerate()
            .for_each(|(i, (o, a))| row(i, o, Some(a)));
    } else {
        out.par_chunks_mut(k)
            .enumerate()
            .for_each(|(i, o)| row(i, o, None));
    }
    (out, arg)
}

/// `out[i,t] = v_p x[col_p, t]` with `p = arg[i,t]` (0 where `p` is [`NO_EDGE`]).
pub fn gather_arg<T: WithDType>(
    csr: &Csr,
    x: &[T],
    k: usize,
    arg: &[u32],
    vals: Option<&[T]>,
) -> Vec<T> {
    let idx = csr.indices();
    arg.par_iter()
        .enumerate()
        .map(|(e, &p)| {
            if p == NO_EDGE {
                return T::zero();
            }
            let w = vals.map_or(T::one(), |v| v[p as usize]);
            w * x[idx[p as usize] as usize * k + e % k]
        })
        .collect()
}

struct SyncPtr<T>(*mut T);
// SAFETY: used only to write disjoint column blocks from different tasks (see scatter_arg).
unsafe impl<T> Send for SyncPtr<T> {}
unsafe impl<T> Sync for SyncPtr<T> {}

/// Backward of [`gather_arg`] w.r.t. `x`: `dx[col_p, t] += v_p dy[i, t]` for `p = arg[i,t]`.
/// Output has `csr.n_cols()` rows (the sources). `arg` and `dy` are `[n_rows, k]`; an `arg`
/// entry other than [`NO_EDGE`] must be an edge position (`< nnz`), which is bounds-checked.
pub fn scatter_arg<T: WithDType>(
    csr: &Csr,
    dy: &[T],
    k: usize,
    arg: &[u32],
    vals: Option<&[T]>,
) -> Vec<T> {
    let n_src = csr.n_cols();
    let mut dx = vec![T::zero(); n_src * k];
    if k == 0 {
        return dx;
    }
    let idx = csr.indices();
    const BLOCK: usize = 8;
    let ptr = SyncPtr(dx.as_mut_ptr());
    let ptr = &ptr;
    (0..k.div_ceil(BLOCK)).into_par_iter().for_each(|b| {
        let cols = b * BLOCK..((b + 1) * BLOCK).min(k);
        for i in 0..csr.n_rows() {
            for t in cols.clone() {
                let p = arg[i * k + t];
                if p == NO_EDGE {
                    continue;
                }
                let w = vals.map_or(T::one(), |v| v[p as usize]);
                let dst = idx[p as usize] as usize * k + t;
                // SAFETY: in bounds: `idx[p]` is a bounds-checked read of a validated `Csr`, so
                // `idx[p] < n_cols = n_src` and, with `t < k`, `dst < n_src * k = dx.len()`.
                // No data race: `dst % k == t` lies in this task's column block, and blocks
                // are disjoint; `dx` outlives the scope (the tasks end before it is returned).
                unsafe { *ptr.0.add(dst) += w * dy[i * k + t] };
            }
        }
    });
    dx
}

/// Backward of weighted [`gather_arg`] w.r.t. the edge values:
/// `dv[p] = sum_{t : arg[i,t] = p} dy[i,t] x[col_p, t]`.
pub fn edge_grad_arg<T: WithDType>(csr: &Csr, dy: &[T], x: &[T], k: usize, arg: &[u32]) -> Vec<T> {
    let mut dv = vec![T::zero(); csr.nnz()];
    let idx = csr.indices();
    let indptr = csr.indptr();
    split_rows_mut(&mut dv, indptr)
        .into_par_iter()
        .enumerate()
        .for_each(|(i, out)| {
            let base = indptr.get(i);
            for t in 0..k {
                let p = arg[i * k + t];
                if p != NO_EDGE {
                    let p = p as usize;
                    out[p - base] += dy[i * k + t] * x[idx[p] as usize * k + t];
                }
            }
        });
    dv
}
