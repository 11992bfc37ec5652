//! Seeded parameter creation. candle's CPU device cannot be seeded, so initial values are
//! drawn on the host from a stream derived from `(seed, parameter name)` and stored as
//! `Var`s in a candle-nn `VarMap` (which saves and loads safetensors).

use crate::error::Result;
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::VarMap;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// How a parameter starts.
#[derive(Debug, Clone, Copy)]
pub enum Init {
    /// Glorot/Xavier uniform: `U(-a, a)`, `a = sqrt(6 / (in + out))`, with `in` the last
    /// dimension and `out` the one before it (PyG's `glorot`: `[out, in]` weights, and
    /// `[1, heads, channels]` attention vectors get `in = channels`, `out = heads`).
    Glorot,
    /// torch's `nn.Linear` default, which PyG's `Linear` also uses when no initialiser is
    /// named (`kaiming_uniform(a = sqrt(5))` for the weight, `uniform` for the bias):
    /// `U(-b, b)` with `b = 1 / sqrt(fan_in)`; pass the layer's input width for weight and
    /// bias alike.
    TorchLinear {
        /// The layer's input width.
        fan_in: usize,
    },
    /// All zeros.
    Zeros,
    /// All ones.
    Ones,
}

/// Creates named, seeded parameters in a `VarMap`.
#[derive(Clone)]
pub struct ParamStore {
    varmap: VarMap,
    device: Device,
    seed: u64,
    prefix: String,
}

impl ParamStore {
    /// A store over `varmap` on `device`, f32 parameters.
    pub fn new(varmap: VarMap, device: &Device, seed: u64) -> Self {
        Self {
            varmap,
            device: device.clone(),
            seed,
            prefix: String::new(),
        }
    }

    /// A view that prefixes names with `p.` (like candle-nn's `VarBuilder::pp`).
    pub fn pp(&self, p: impl std::fmt::Display) -> Self {
        let prefix = if self.prefix.is_empty() {
            p.to_string()
        } else {
            format!("{}.{p}", self.prefix)
        };
        Self {
            prefix,
            ..self.clone()
        }
    }

    /// The underlying map (all trainable variables).
    pub fn varmap(&self) -> &VarMap {
        &self.varmap
    }

    /// Returns parameter `name` (under the prefix), creating it with `init` when absent.
    pub fn get(&self, name: &str, shape: &[usize], init: Init) -> Result<Tensor> {
        let full = if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        };
        let mut data = self.varmap.data().lock().expect("VarMap lock poisoned");
        if let Some(v) = data.get(&full) {
            if v.dims() != shape {
                return Err(crate::Error::Config(format!(
                    "parameter {full} exists with shape {:?}, wanted {shape:?}",
                    v.dims()
                )));
            }
            return Ok(v.as_tensor().clone());
        }
        let n: usize = shape.iter().product();
        let values: Vec<f32> = match init {
            Init::Zeros => vec![0.0; n],
            Init::Ones => vec![1.0; n],
            Init::Glorot => {
                let (fan_out, fan_in) = match shape {
                    [.., o, i] => (*o, *i),
                    [o] => (*o, 1),
                    [] => (1, 1),
                };
                let a = (6.0 / (fan_in + fan_out) as f64).sqrt() as f32;
                self.uniform(&full, n, a)
            }
            Init::TorchLinear { fan_in } => {
                let b = (1.0 / fan_in.max(1) as f64).sqrt() as f32;
                self.uniform(&full, n, b)
            }
        };
        let t = Tensor::from_vec(values, shape, &self.device)?.to_dtype(DType::F32)?;
        let var = Var::from_tensor(&t)?;
        let out = var.as_tensor().clone();
        data.insert(full, var);
        Ok(out)
    }
}

impl ParamStore {
    /// `n` values from `U(-a, a)`, seeded by the store's seed and the parameter's full name.
    fn uniform(&self, full: &str, n: usize, a: f32) -> Vec<f32> {
        let mut r = Xoshiro256PlusPlus::seed_from_u64(self.seed ^ fnv1a(full));
        (0..n).map(|_| r.random_range(-a..a)).collect()
    }
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest absolute value of a freshly drawn parameter.
    fn max_abs(store: &ParamStore, name: &str, shape: &[usize], init: Init) -> f32 {
        let t = store.get(name, shape, init).unwrap();
        t.abs().and_then(|a| a.max_all()?.to_scalar()).unwrap()
    }

    #[test]
    fn initialisers_use_pyg_bounds() {
        let s = ParamStore::new(VarMap::new(), &Device::Cpu, 7);
        // PyG's glorot on an attention vector [1, heads, channels]: fans = heads, channels.
        let att = max_abs(&s, "att", &[1, 8, 8], Init::Glorot);
        let bound = (6.0f32 / 16.0).sqrt();
        assert!(att <= bound && att > 0.9 * bound, "{att} vs {bound}");
        let w = max_abs(&s, "w", &[64, 602], Init::Glorot);
        let bound = (6.0f32 / 666.0).sqrt();
        assert!(w <= bound && w > 0.9 * bound, "{w} vs {bound}");
        // torch's Linear default: 1 / sqrt(fan_in) for weight and bias alike.
        let init = Init::TorchLinear { fan_in: 602 };
        let bound = 1.0 / 602f32.sqrt();
        for (name, shape) in [("lw", &[64, 602][..]), ("lb", &[64][..])] {
            let m = max_abs(&s, name, shape, init);
            assert!(m <= bound && m > 0.8 * bound, "{name}: {m} vs {bound}");
        }
    }
}
