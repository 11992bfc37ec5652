//! CPU bias + ReLU + dropout writing its mask as bits, and the backward from those bits.

use crate::ops::dropout::{cpu::keep, threshold};
use candle_core::WithDType;
use rayon::prelude::*;

/// [`bias_relu_dropout`] plus the residual `r` when given (`out = y + r`; with `pre`, added
/// to `x` before the bias instead, `x + r` rounded to `T` first), and the mask as bits: bit
/// `i % 32` of word `i / 32` is set iff element `i` passed (kept and `v > 0`).
pub(crate) fn bias_relu_dropout_bits<T: WithDType>(
    x: &[T],
    b: &[T],
    r: Option<&[T]>,
    pre: bool,
    p: f32,
    seed: u64,
) -> (Vec<T>, Vec<u32>) {
    const CHUNK: usize = 1 << 14; // a multiple of 32: every chunk owns whole words
    let d = b.len().max(1);
    let t = threshold(p);
    let scale = T::from_f64(1.0 / (1.0 - p as f64));
    let mut out = vec![T::zero(); x.len()];
    let mut bits = vec![0u32; x.len().div_ceil(32)];
    out.par_chunks_mut(CHUNK)
        .zip(bits.par_chunks_mut(CHUNK / 32))
        .enumerate()
        .for_each(|(c, (o, words))| {
            let base = c * CHUNK;
            for (k, o) in o.iter_mut().enumerate() {
                let i = base + k;
                let xi = match r {
                    Some(r) if pre => x[i] + r[i],
                    _ => x[i],
                };
                let v = xi + b[i % d];
                let on = v > T::zero() && keep(seed, i as u64, t);
                let y = if on { v * scale } else { T::zero() };
                *o = match r {
                    Some(r) if !pre => y + r[i],
                    _ => y,
                };
                words[k / 32] |= (on as u32) << (k % 32);
            }
        });
    (out, bits)
}

/// The backward of [`bias_relu_dropout_bits`]: `bit i ? dy / (1 - p) : 0`.
pub(crate) fn mask_bits_bwd<T: WithDType>(bits: &[u32], dy: &[T], p: f32) -> Vec<T> {
    let scale = T::from_f64(1.0 / (1.0 - p as f64));
    dy.par_iter()
        .enumerate()
        .map(|(i, &d)| {
            if (bits[i / 32] >> (i % 32)) & 1 == 1 {
                d * scale
            } else {
                T::zero()
            }
        })
        .collect()
}
