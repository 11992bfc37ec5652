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
        const CHUNK: usize = 1 << 14;
        let mask = match x.device() {
            Device::Cpu if !x.track_op() && x.dtype() == candle_core::DType::F32 => {
                // Input features need no gradient: write the result directly, drawing only for
                // non-zeros (zeros stay zero under any mask), as sparse dropout does.
                let base: u64 = self.rng.random();
                let mut v = x.flatten_all()?.to_vec1::<f32>()?;
                v.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| {
                    let mut r = chunk_rng(base, c);
                    for e in out.iter_mut().filter(|e| **e != 0.0) {
                        *e = if r.random::<f32>() >= p {
                            *e * scale
                        } else {
                            0.0
                        };
                    }
                });
                return Ok(Tensor::from_vec(v, x.shape(), x.device())?);
            }
            Device::Cpu => {
                let n = x.elem_count();
                let base: u64 = self.rng.random();
                let mut m = vec![0f32; n];
                m.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| {
                    let mut r = chunk_rng(base, c);
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

fn chunk_rng(base: u64, chunk: usize) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(base ^ (chunk as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}
