//! CPU MaxK, CBSR gather/scatter, SpGEMM and SSpMM (rayon over rows; no atomics: the SSpMM
//! walks the transpose).

use crate::ops::spmm::cpu::par_rows;
use candle_core::WithDType;
use gnn_graph::Csr;
use rayon::prelude::*;

/// A CBSR column index type (`u8` for widths up to 256, `i16` up to 1024).
pub trait CbsrIndex: WithDType + Copy + Send + Sync {
    /// As a column number.
    fn col(self) -> usize;
    /// From a column number (below the width, which fits the type).
    fn from_col(c: usize) -> Self;
}

impl CbsrIndex for u8 {
    fn col(self) -> usize {
        self as usize
    }
    fn from_col(c: usize) -> Self {
        c as u8
    }
}

impl CbsrIndex for i16 {
    fn col(self) -> usize {
        self as u16 as usize
    }
    fn from_col(c: usize) -> Self {
        c as u16 as i16
    }
}

/// Per row of `h` (`[n, d]`), the columns of its `k` largest entries (IEEE total order, ties to
/// the lower column), ascending.
pub fn select<T: WithDType, I: CbsrIndex>(h: &[T], d: usize, k: usize) -> Vec<I> {
    let n = h.len().checked_div(d).unwrap_or(0);
    let mut out = vec![I::from_col(0); n * k];
    if k == 0 {
        return out;
    }
    out.par_chunks_mut(k).enumerate().for_each(|(i, o)| {
        let row = &h[i * d..(i + 1) * d];
        let mut cols: Vec<usize> = (0..d).collect();
        let cmp =
            |a: &usize, b: &usize| row[*b].to_f64().total_cmp(&row[*a].to_f64()).then(a.cmp(b));
        if k < d {
            cols.select_nth_unstable_by(k - 1, cmp);
        }
        let mut top = cols[..k].to_vec();
        top.sort_unstable();
        for (s, c) in o.iter_mut().zip(top) {
            *s = I::from_col(c);
        }
    });
    out
}

/// `data[i, s] = h[i, idx[i, s]]`.
pub fn gather<T: WithDType, I: CbsrIndex>(h: &[T], idx: &[I], d: usize, k: usize) -> Vec<T> {
    let mut out = vec![T::zero(); idx.len()];
    if k == 0 {
        return out;
    }
    out.par_chunks_mut(k)
        .zip(idx.par_chunks(k))
        .enumerate()
        .for_each(|(i, (o, ix))| {
            for (v, c) in o.iter_mut().zip(ix) {
                *v = h[i * d + c.col()];
            }
        });
    out
}

/// Dense `[n, d]` with `data[i, s]` at `(i, idx[i, s])`, zeros elsewhere.
pub fn scatter<T: WithDType, I: CbsrIndex>(data: &[T], idx: &[I], d: usize, k: usize) -> Vec<T> {
    let n = idx.len().checked_div(k).unwrap_or(0);
    let mut out = vec![T::zero(); n * d];
    if k == 0 || d == 0 {
        return out;
    }
    out.par_chunks_mut(d).enumerate().for_each(|(i, o)| {
        for s in 0..k {
            o[idx[i * k + s].col()] = data[i * k + s];
        }
    });
    out
}

/// `out[i, :] = scale_i * sum_{p in row i} a_p * dense(x)[col_p, :]`, `x` in CBSR.
#[allow(clippy::too_many_arguments)]
pub fn spgemm<T: WithDType, I: CbsrIndex>(
    csr: &Csr,
    data: &[T],
    idx: &[I],
    k: usize,
    d: usize,
    vals: Option<&[T]>,
    mean: bool,
) -> Vec<T> {
    let cols = csr.indices();
    par_rows(csr.n_rows(), d, |i, o| {
        let r = csr.row_range(i);
        let len = r.len();
        for p in r {
            let j = cols[p] as usize;
            let a = vals.map_or(T::one(), |v| v[p]);
            for s in 0..k {
                o[idx[j * k + s].col()] += a * data[j * k + s];
            }
        }
        if mean && len > 0 {
            let inv = T::from_f64(1.0 / len as f64);
            o.iter_mut().for_each(|v| *v *= inv);
        }
    })
}

/// `dx[j, s] = sum_{p = (i, j)} a_p * scale_i * dout[i, idx[j, s]]`: the gradient of
/// [`spgemm`] with respect to the CBSR data, over the transpose `t` (entry `q` of `t` is entry
/// `perm[q]` of the forward graph `fwd`).
#[allow(clippy::too_many_arguments)]
pub fn sspmm<T: WithDType, I: CbsrIndex>(
    fwd: &Csr,
    t: &Csr,
    perm: &[u32],
    dout: &[T],
    idx: &[I],
    k: usize,
    d: usize,
    vals: Option<&[T]>,
    mean: bool,
) -> Vec<T> {
    let rows = t.indices();
    par_rows(t.n_rows(), k, |j, o| {
        for q in t.row_range(j) {
            let i = rows[q] as usize;
            let p = perm[q] as usize;
            let mut a = vals.map_or(T::one(), |v| v[p]);
            if mean {
                a *= T::from_f64(1.0 / fwd.row_len(i) as f64);
            }
            let g = &dout[i * d..(i + 1) * d];
            for s in 0..k {
                o[s] += a * g[idx[j * k + s].col()];
            }
        }
    })
}
