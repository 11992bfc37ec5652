//! CPU bias + ELU + dropout and its backward: the mask of `crate::ops::dropout`, rayon over
//! chunks.

use crate::ops::dropout::cpu::{keep, masked};
use candle_core::WithDType;
use rayon::prelude::*;

/// `elu(v) = v > 0 ? v : exp(v) - 1` (alpha 1), through f64's `exp_m1`.
fn elu<T: WithDType>(v: T) -> T {
    if v > T::zero() {
        v
    } else {
        T::from_f64(v.to_f64().exp_m1())
    }
}

/// `keep(i) ? elu(v) / (1 - p) : 0` with `v = x[i] + b[i % d]` (`b` one row of `d`).
pub(crate) fn bias_elu_dropout<T: WithDType>(x: &[T], b: &[T], p: f32, seed: u64) -> Vec<T> {
    let d = b.len().max(1);
    masked(x, p, seed, |i, v| Some(elu(v + b[i % d])))
}

/// `keep(i) ? (y > 0 ? dy * s : dy * (y + s)) : 0` with `s = 1 / (1 - p)`: ELU's derivative
/// from its (scaled) output, the mask recomputed.
pub(crate) fn bias_elu_dropout_bwd<T: WithDType>(y: &[T], dy: &[T], p: f32, seed: u64) -> Vec<T> {
    let t = crate::ops::dropout::threshold(p);
    let s = T::from_f64(1.0 / (1.0 - p as f64));
    y.par_iter()
        .zip(dy.par_iter())
        .enumerate()
        .map(|(i, (&y, &g))| {
            if !keep(seed, i as u64, t) {
                T::zero()
            } else if y > T::zero() {
                g * s
            } else {
                g * (y + s)
            }
        })
        .collect()
}
