//! CPU side of the fused Adam step (rayon over elements).

use super::AdamStep;
use rayon::prelude::*;

/// A float type the update runs in.
pub(crate) trait Float:
    Copy
    + Send
    + Sync
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    fn of(v: f64) -> Self;
    fn sqrt(self) -> Self;
}
impl Float for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
}
impl Float for f64 {
    fn of(v: f64) -> Self {
        v
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
}

/// `mv = [m; v]` updated from `g` (and `theta` for the coupled decay).
pub(crate) fn moments<T: Float>(mv: &mut [T], g: &[T], theta: &[T], s: &AdamStep) {
    let (b1, b2, l2) = (T::of(s.beta1), T::of(s.beta2), T::of(s.l2));
    let (one_b1, one_b2) = (T::of(1.0) - b1, T::of(1.0) - b2);
    let (m, v) = mv.split_at_mut(g.len());
    m.par_iter_mut()
        .zip(v.par_iter_mut())
        .zip(g.par_iter().zip(theta.par_iter()))
        .for_each(|((m, v), (&g, &t))| {
            let gi = g + l2 * t;
            *m = b1 * *m + one_b1 * gi;
            *v = b2 * *v + one_b2 * gi * gi;
        });
}

/// `theta = keep theta - lr (m / bc1) / (sqrt(v / bc2) + eps)`.
pub(crate) fn apply<T: Float>(theta: &mut [T], mv: &[T], s: &AdamStep) {
    let n = theta.len();
    let (lr, bc1, bc2, eps, keep) = (
        T::of(s.lr),
        T::of(s.bc1),
        T::of(s.bc2),
        T::of(s.eps),
        T::of(s.keep),
    );
    let (m, v) = mv[..2 * n].split_at(n);
    theta
        .par_iter_mut()
        .zip(m.par_iter().zip(v.par_iter()))
        .for_each(|(t, (&m, &v))| {
            *t = *t * keep - lr * ((m / bc1) / ((v / bc2).sqrt() + eps));
        });
}
