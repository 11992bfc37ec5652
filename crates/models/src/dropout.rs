//! Seeded dropout. On the CPU the mask comes from a host stream (candle's CPU RNG cannot be
//! seeded); on other devices from the device RNG, which callers seed with `Device::set_seed`.

use crate::error::Result;
use candle_core::{Device, Tensor};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

/// A reproducible source of dropout masks.
pub struct DropoutRng {
    rng: Xoshiro256PlusPlus,
}

impl DropoutRng {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// Inverted dropout: zeroes each entry with probability `p`, scales the rest by `1/(1-p)`.
    pub fn dropout(&mut self, x: &Tensor, p: f32) -> Result<Tensor> {
        if p <= 0.0 {
            return Ok(x.clone());
        }
        let scale = 1.0 / (1.0 - p);
        let mask = match x.device() {
            Device::Cpu => {
                let n = x.elem_count();
                let base: u64 = self.rng.random();
                const CHUNK: usize = 1 << 14;
                let mut m = vec![0f32; n];
                m.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| {
                    let mut r = Xoshiro256PlusPlus::seed_from_u64(
                        base ^ (c as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    );
                    out.iter_mut()
                        .for_each(|v| *v = if r.random::<f32>() >= p { scale } else { 0.0 });
                });
                Tensor::from_vec(m, x.shape(), x.device())?
            }
            dev => {
                (Tensor::rand(0f32, 1f32, x.shape(), dev)?
                    .ge(p as f64)?
                    .to_dtype(x.dtype())?
                    * scale as f64)?
            }
        };
        Ok(x.mul(&mask.to_dtype(x.dtype())?)?)
    }
}
