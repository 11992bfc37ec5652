//! CPU dropout: the same hash as `cuda/dropout.cu`, rayon over chunks.

use candle_core::WithDType;
use rayon::prelude::*;

fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Whether element `i` of the call with `seed` is kept at keep threshold `t`.
pub(crate) fn keep(seed: u64, i: u64, t: u64) -> bool {
    mix64(seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15))) >> 40 >= t
}

/// `x` with dropped elements zeroed and kept ones scaled by `1 / (1 - p)`.
pub(crate) fn dropout<T: WithDType>(x: &[T], p: f32, seed: u64) -> Vec<T> {
    masked(x, p, seed, |_, v| Some(v))
}

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

/// `v / (1 - p)` where element `i` is kept and `value(i, x_i)` gives `Some(v)`, else 0.
fn masked<T: WithDType>(
    x: &[T],
    p: f32,
    seed: u64,
    value: impl Fn(usize, T) -> Option<T> + Sync,
) -> Vec<T> {
    let t = super::threshold(p);
    let scale = T::from_f64(1.0 / (1.0 - p as f64));
    const CHUNK: usize = 1 << 14;
    let mut out = vec![T::zero(); x.len()];
    out.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .enumerate()
        .for_each(|(c, (o, x))| {
            let base = c * CHUNK;
            for (k, (o, &v)) in o.iter_mut().zip(x).enumerate() {
                if let Some(v) = value(base + k, v) {
                    if keep(seed, (base + k) as u64, t) {
                        *o = v * scale;
                    }
                }
            }
        });
    out
}

/// `y > 0 ? dy / (1 - p) : 0`.
pub(crate) fn relu_dropout_bwd<T: WithDType>(y: &[T], dy: &[T], p: f32) -> Vec<T> {
    let scale = T::from_f64(1.0 / (1.0 - p as f64));
    y.par_iter()
        .zip(dy.par_iter())
        .map(|(&y, &d)| if y > T::zero() { d * scale } else { T::zero() })
        .collect()
}

/// [`bias_relu_dropout`] plus the residual `r` when given (`out = y + r`), and the mask as
/// bits: bit `i % 32` of word `i / 32` is set iff element `i` passed (kept and `v > 0`).
pub(crate) fn bias_relu_dropout_bits<T: WithDType>(
    x: &[T],
    b: &[T],
    r: Option<&[T]>,
    p: f32,
    seed: u64,
) -> (Vec<T>, Vec<u32>) {
    const CHUNK: usize = 1 << 14; // a multiple of 32: every chunk owns whole words
    let d = b.len().max(1);
    let t = super::threshold(p);
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
                let v = x[i] + b[i % d];
                let on = v > T::zero() && keep(seed, i as u64, t);
                let y = if on { v * scale } else { T::zero() };
                *o = match r {
                    Some(r) => y + r[i],
                    None => y,
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
