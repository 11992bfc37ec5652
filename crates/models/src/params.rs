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
    /// Glorot/Xavier uniform for a `[out, in]` weight: `U(-a, a)`, `a = sqrt(6 / (in + out))`.
    Glorot,
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
                    [o, i] => (*o, *i),
                    [o] => (*o, 1),
                    _ => (n, n),
                };
                let a = (6.0 / (fan_in + fan_out) as f64).sqrt() as f32;
                let mut r = Xoshiro256PlusPlus::seed_from_u64(self.seed ^ fnv1a(&full));
                (0..n).map(|_| r.random_range(-a..a)).collect()
            }
        };
        let t = Tensor::from_vec(values, shape, &self.device)?.to_dtype(DType::F32)?;
        let var = Var::from_tensor(&t)?;
        let out = var.as_tensor().clone();
        data.insert(full, var);
        Ok(out)
    }
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}
