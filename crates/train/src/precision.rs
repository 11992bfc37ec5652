//! Storage precision of features and activations (`--precision f32|bf16|f16`).
//!
//! Half precision halves the bytes of every gathered feature row, the aggregation's cost on
//! large graphs. What stays fp32, and why:
//! - accumulation inside every sparse kernel (the SpMM widens each half row to fp32 and adds
//!   in fp32; the result is narrowed once at the end);
//! - the master weights and Adam's moments (the forward narrows each parameter, the cast's
//!   backward widens its gradient back), so small updates are not lost to rounding;
//! - LayerNorm statistics, the loss (log-softmax over fp32 logits) and GEMM accumulation
//!   (cuBLAS computes half products in fp32).
//!
//! f16's narrow exponent range needs loss scaling ([`LossScale`]); bf16 keeps f32's range and
//! needs none. The CPU path computes in f32: asking for half precision there is an error.

use crate::error::{Error, Result};
use candle_core::backprop::GradStore;
use candle_core::{DType, Tensor, Var};
use serde::{Deserialize, Serialize};

/// Storage dtype of features and activations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// fp32 everywhere.
    #[default]
    F32,
    /// bfloat16 storage, fp32 accumulation and master weights.
    Bf16,
    /// IEEE half storage, fp32 accumulation and master weights, dynamic loss scaling.
    F16,
}

impl Precision {
    /// The candle dtype of features and activations.
    pub fn dtype(self) -> DType {
        match self {
            Self::F32 => DType::F32,
            Self::Bf16 => DType::BF16,
            Self::F16 => DType::F16,
        }
    }

    /// True for the half-precision storages.
    pub fn is_half(self) -> bool {
        self != Self::F32
    }

    /// Errors when half precision is asked for on the CPU.
    pub fn check_device(self, device: &candle_core::Device) -> Result<()> {
        if self.is_half() && !device.is_cuda() {
            return Err(Error::CudaOnly {
                what: format!("precision {self} (the CPU path computes in f32)"),
            });
        }
        Ok(())
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
            Self::F16 => "f16",
        })
    }
}

impl std::str::FromStr for Precision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "fp32" | "float32" => Ok(Self::F32),
            "bf16" | "bfloat16" => Ok(Self::Bf16),
            "f16" | "fp16" | "half" | "float16" => Ok(Self::F16),
            o => Err(Error::Invalid(format!(
                "unknown precision `{o}` (f32, bf16, f16)"
            ))),
        }
    }
}

/// Dynamic loss scaling for f16 (as `torch.cuda.amp.GradScaler`): the loss is multiplied by
/// `scale` before backward so small gradients survive f16's range, and the gradients are
/// divided by it before the update. A step whose gradients overflow is skipped and the scale
/// halved; after `GROWTH_INTERVAL` clean steps it doubles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LossScale {
    /// The current factor.
    pub scale: f64,
    /// Clean steps since the last change.
    pub clean: u32,
    /// Steps skipped on overflow so far.
    pub skipped: u32,
}

impl LossScale {
    /// Clean steps before the scale doubles.
    pub const GROWTH_INTERVAL: u32 = 200;
    /// Below this the run is not overflowing from scale but from its values: stop.
    pub const MIN_SCALE: f64 = 1.0;

    /// Starting at 2^16, torch's default.
    pub fn new() -> Self {
        Self {
            scale: 65536.0,
            clean: 0,
            skipped: 0,
        }
    }

    /// Records a step: `false` (overflow) halves the scale and counts a skip; returns whether
    /// the scale is still usable.
    pub fn update(&mut self, finite: bool) -> bool {
        if finite {
            self.clean += 1;
            if self.clean >= Self::GROWTH_INTERVAL {
                self.scale *= 2.0;
                self.clean = 0;
            }
        } else {
            self.scale /= 2.0;
            self.clean = 0;
            self.skipped += 1;
        }
        self.scale >= Self::MIN_SCALE
    }

    /// The gradients of `loss` times the scale ([`Self::unscale`] divides them back).
    pub fn backward(&self, loss: &Tensor) -> Result<GradStore> {
        Ok((loss * self.scale)?.backward()?)
    }

    /// Divides the gradients of `vars` in `grads` by the scale.
    pub fn unscale(&self, vars: &[(String, Var)], grads: &mut GradStore) -> Result<()> {
        for (_, v) in vars {
            if let Some(g) = grads.remove(v.as_tensor()) {
                grads.insert(v.as_tensor(), (g / self.scale)?);
            }
        }
        Ok(())
    }

    /// Records a step whose loss is `loss_finite` and whose loss and gradients are all
    /// `finite`, and says whether to skip its update: an overflow of the scaled gradients
    /// under a finite loss halves the scale and skips the step while the scale is usable
    /// (false once it is not: the run must stop); a clean step counts towards growth; a
    /// non-finite loss is no overflow of the scale (false, nothing recorded).
    pub fn skip_step(&mut self, loss_finite: bool, finite: bool) -> bool {
        if finite {
            self.update(true);
            false
        } else if loss_finite {
            self.update(false)
        } else {
            false
        }
    }
}

impl Default for LossScale {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_names_every_precision() {
        for p in [Precision::F32, Precision::Bf16, Precision::F16] {
            assert_eq!(p.to_string().parse::<Precision>().unwrap(), p);
        }
        assert_eq!("BF16".parse::<Precision>().unwrap(), Precision::Bf16);
        let e = "f8".parse::<Precision>().unwrap_err().to_string();
        assert!(e.contains("f8") && e.contains("bf16"), "{e}");
    }

    #[test]
    fn half_precision_is_refused_on_the_cpu() {
        let cpu = candle_core::Device::Cpu;
        assert!(Precision::F32.check_device(&cpu).is_ok());
        let e = Precision::Bf16.check_device(&cpu).unwrap_err().to_string();
        assert_eq!(
            e,
            "precision bf16 (the CPU path computes in f32) runs on a CUDA device only, and this \
             run is on the CPU"
        );
    }

    #[test]
    fn loss_scale_halves_on_overflow_and_grows_after_clean_steps() {
        let mut s = LossScale::new();
        assert!(s.update(false));
        assert_eq!((s.scale, s.skipped), (32768.0, 1));
        for _ in 0..LossScale::GROWTH_INTERVAL {
            assert!(s.update(true));
        }
        assert_eq!(s.scale, 65536.0);
        // Sixteen more overflows reach 1, the seventeenth gives up.
        for _ in 0..16 {
            assert!(s.update(false));
        }
        assert!(!s.update(false));
    }

    #[test]
    fn skip_step_skips_only_overflows_of_a_usable_scale() {
        let mut s = LossScale::new();
        assert!(!s.skip_step(true, true));
        assert_eq!((s.clean, s.skipped), (1, 0));
        // Overflowed gradients, finite loss: skipped, scale halved.
        assert!(s.skip_step(true, false));
        assert_eq!((s.scale, s.clean, s.skipped), (32768.0, 0, 1));
        // A non-finite loss is not the scale's doing: not skipped, nothing recorded.
        assert!(!s.skip_step(false, false));
        assert_eq!((s.scale, s.skipped), (32768.0, 1));
        // At the last usable scale an overflow is no longer skipped.
        s.scale = 1.0;
        assert!(!s.skip_step(true, false));
    }

    #[test]
    fn scaled_backward_and_unscale_give_the_plain_gradients() {
        let dev = candle_core::Device::Cpu;
        let w = Var::new(&[1f32, -2.0, 3.0], &dev).unwrap();
        let loss = (w.as_tensor() * w.as_tensor()).unwrap().sum_all().unwrap();
        let s = LossScale::new();
        let mut grads = s.backward(&loss).unwrap();
        let scaled = grads.get(w.as_tensor()).unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(scaled, [131072.0, -262144.0, 393216.0]);
        let vars = vec![("w".to_string(), w.clone())];
        s.unscale(&vars, &mut grads).unwrap();
        let g = grads.get(w.as_tensor()).unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(g, [2.0, -4.0, 6.0]);
    }
}
