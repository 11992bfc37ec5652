//! CPU reference of the fused masked cross-entropy (rayon over rows; f64 arithmetic).

use candle_core::WithDType;
use rayon::prelude::*;

/// logsumexp of one row.
fn lse<T: WithDType>(r: &[T]) -> f64 {
    let m = r.iter().fold(f64::NEG_INFINITY, |m, v| m.max(v.to_f64()));
    m + r.iter().map(|v| (v.to_f64() - m).exp()).sum::<f64>().ln()
}

/// `w_i (logsumexp(x_i) - x_i[y_i])` per row (0 where `w_i = 0`, NaN for a label `>= c`).
pub(crate) fn row_losses<T: WithDType>(x: &[T], y: &[u32], w: &[f32], c: usize) -> Vec<f32> {
    (0..w.len())
        .into_par_iter()
        .map(|i| {
            if w[i] == 0.0 {
                return 0.0;
            }
            let r = &x[i * c..(i + 1) * c];
            match r.get(y[i] as usize) {
                Some(v) => (w[i] as f64 * (lse(r) - v.to_f64())) as f32,
                None => f32::NAN,
            }
        })
        .collect()
}

/// `w_i (softmax(x_i) - onehot(y_i))` per row, in `T`.
pub(crate) fn grad<T: WithDType>(x: &[T], y: &[u32], w: &[f32], c: usize) -> Vec<T> {
    let mut out = vec![T::zero(); x.len()];
    out.par_chunks_mut(c.max(1))
        .zip(x.par_chunks(c.max(1)))
        .enumerate()
        .for_each(|(i, (o, r))| {
            if c == 0 || w[i] == 0.0 {
                return;
            }
            let (l, wi) = (lse(r), w[i] as f64);
            for (j, (o, v)) in o.iter_mut().zip(r).enumerate() {
                let hot = if j == y[i] as usize { 1.0 } else { 0.0 };
                *o = T::from_f64(wi * ((v.to_f64() - l).exp() - hot));
            }
        });
    out
}
