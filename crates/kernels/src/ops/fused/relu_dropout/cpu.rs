//! CPU ReLU + dropout and its backward: the mask of `crate::ops::dropout`, rayon over chunks.

use crate::ops::dropout::cpu::masked;
use candle_core::WithDType;
use rayon::prelude::*;

/// `keep(i) && x > 0 ? x / (1 - p) : 0` (the mask of [`dropout`]; `p = 0`: ReLU).
pub(crate) fn relu_dropout<T: WithDType>(x: &[T], p: f32, seed: u64) -> Vec<T> {
    masked(x, p, seed, |_, v| (v > T::zero()).then_some(v))
}

/// `keep(i) && v > 0 ? v / (1 - p) : 0` with `v = x[i] + b[i % d]` (`b` one row of `d`).
pub(crate) fn bias_relu_dropout<T: WithDType>(x: &[T], b: &[T], p: f32, seed: u64) -> Vec<T> {
    let d = b.len().max(1);
    masked(x, p, seed, |i, v| {
        let v = v + b[i % d];
        (v > T::zero()).then_some(v)
    })
}

/// `y > 0 ? dy / (1 - p) : 0`.
pub(crate) fn relu_dropout_bwd<T: WithDType>(y: &[T], dy: &[T], p: f32) -> Vec<T> {
    let scale = T::from_f64(1.0 / (1.0 - p as f64));
    y.par_iter()
        .zip(dy.par_iter())
        .map(|(&y, &d)| if y > T::zero() { d * scale } else { T::zero() })
        .collect()
}
