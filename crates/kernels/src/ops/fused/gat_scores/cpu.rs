//! CPU GAT node scores and their gradients, in f64 (rayon over rows).

use rayon::prelude::*;

/// `[s_src; s_dst]` flat, `[2, n, h]`: `s[side][r][k] = sum_f xs[r][k f_ + f] att[side][k f_ + f]`
/// (`att` is `[a_src; a_dst]`, `2 h f` values).
pub(super) fn forward(xs: &[f64], att: &[f64], h: usize, f: usize) -> Vec<f64> {
    let hf = h * f;
    let n = xs.len().checked_div(hf).unwrap_or(0);
    let mut s = vec![0.0; 2 * n * h];
    let (src, dst) = s.split_at_mut(n * h);
    src.par_chunks_mut(h.max(1))
        .zip(dst.par_chunks_mut(h.max(1)))
        .zip(xs.par_chunks(hf.max(1)))
        .for_each(|((a, d), x)| {
            for k in 0..h {
                let xk = &x[k * f..(k + 1) * f];
                a[k] = dot(xk, &att[k * f..(k + 1) * f]);
                d[k] = dot(xk, &att[hf + k * f..hf + (k + 1) * f]);
            }
        });
    s
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `dxs [n, h f]` from the scores' gradient `ds [2, n, h]`:
/// `dxs[r][c] = ds[0][r][c / f] a_src[c] + ds[1][r][c / f] a_dst[c]`.
pub(super) fn dx(ds: &[f64], att: &[f64], h: usize, f: usize) -> Vec<f64> {
    let hf = h * f;
    let n = ds.len().checked_div(2 * h).unwrap_or(0);
    let mut out = vec![0.0; n * hf];
    out.par_chunks_mut(hf.max(1))
        .enumerate()
        .for_each(|(r, row)| {
            for (c, o) in row.iter_mut().enumerate() {
                let j = r * h + c / f;
                *o = ds[j] * att[c] + ds[n * h + j] * att[hf + c];
            }
        });
    out
}

/// `[da_src; da_dst]` (`2 h f`): `da_side[c] = sum_r ds[side][r][c / f] xs[r][c]`.
pub(super) fn datt(xs: &[f64], ds: &[f64], h: usize, f: usize) -> Vec<f64> {
    let hf = h * f;
    let n = xs.len().checked_div(hf).unwrap_or(0);
    (0..2 * hf)
        .into_par_iter()
        .map(|i| {
            let (side, c) = (i / hf.max(1), i % hf.max(1));
            (0..n)
                .map(|r| ds[side * n * h + r * h + c / f] * xs[r * hf + c])
                .sum()
        })
        .collect()
}
