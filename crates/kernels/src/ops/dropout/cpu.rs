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

/// `v / (1 - p)` where element `i` is kept and `value(i, x_i)` gives `Some(v)`, else 0.
pub(crate) fn masked<T: WithDType>(
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
