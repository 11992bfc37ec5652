//! CPU LayerNorm: rayon over rows, statistics and products in f64 whatever the element type.

use candle_core::WithDType;
use rayon::prelude::*;

/// `(mean, rstd)` of one row (biased variance, two passes).
fn stats<T: WithDType>(row: &[T], eps: f64) -> (f64, f64) {
    let d = row.len() as f64;
    let mean = row.iter().map(|v| v.to_f64()).sum::<f64>() / d;
    let var = row.iter().map(|v| (v.to_f64() - mean).powi(2)).sum::<f64>() / d;
    (mean, 1.0 / (var + eps).sqrt())
}

/// `y = (x - mean) rstd w + b` row by row (`x` is `[n, d]` row-major).
pub fn forward<T: WithDType>(x: &[T], w: &[T], b: &[T], d: usize, eps: f64) -> Vec<T> {
    let mut y = vec![T::zero(); x.len()];
    if d == 0 {
        return y;
    }
    y.par_chunks_mut(d)
        .zip(x.par_chunks(d))
        .for_each(|(yr, xr)| {
            let (mean, rstd) = stats(xr, eps);
            for (j, (o, v)) in yr.iter_mut().zip(xr).enumerate() {
                *o = T::from_f64((v.to_f64() - mean) * rstd * w[j].to_f64() + b[j].to_f64());
            }
        });
    y
}

/// `dx = rstd (g - mean(g) - xhat mean(g xhat))` with `g = dy w`, row by row.
pub fn backward_x<T: WithDType>(x: &[T], w: &[T], dy: &[T], d: usize, eps: f64) -> Vec<T> {
    let mut dx = vec![T::zero(); x.len()];
    if d == 0 {
        return dx;
    }
    let df = d as f64;
    dx.par_chunks_mut(d)
        .zip(x.par_chunks(d).zip(dy.par_chunks(d)))
        .for_each(|(o, (xr, gr))| {
            let (mean, rstd) = stats(xr, eps);
            let xhat = |j: usize| (xr[j].to_f64() - mean) * rstd;
            let g = |j: usize| gr[j].to_f64() * w[j].to_f64();
            let mg = (0..d).map(g).sum::<f64>() / df;
            let mgx = (0..d).map(|j| g(j) * xhat(j)).sum::<f64>() / df;
            for (j, v) in o.iter_mut().enumerate() {
                *v = T::from_f64(rstd * (g(j) - mg - xhat(j) * mgx));
            }
        });
    dx
}

/// `[dw; db]` (`2 d` values): `dw_j = sum_i dy_ij xhat_ij`, `db_j = sum_i dy_ij`.
pub fn param_grads<T: WithDType>(x: &[T], dy: &[T], d: usize, eps: f64) -> Vec<T> {
    if d == 0 {
        return Vec::new();
    }
    let sums = x
        .par_chunks(d)
        .zip(dy.par_chunks(d))
        .fold(
            || vec![0f64; 2 * d],
            |mut acc, (xr, gr)| {
                let (mean, rstd) = stats(xr, eps);
                for j in 0..d {
                    let g = gr[j].to_f64();
                    acc[j] += g * (xr[j].to_f64() - mean) * rstd;
                    acc[d + j] += g;
                }
                acc
            },
        )
        .reduce(
            || vec![0f64; 2 * d],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(p, q)| *p += q);
                a
            },
        );
    sums.into_iter().map(T::from_f64).collect()
}
