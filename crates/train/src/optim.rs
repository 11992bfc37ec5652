//! Adam with coupled L2 weight decay (the GCN paper's and `torch.optim.Adam`'s
//! `weight_decay`) and AdamW with decoupled decay (Loshchilov & Hutter).
//!
//! candle-nn's `AdamW` only has the decoupled form, which is not the GCN recipe, hence this
//! small implementation over candle `Var`s.

use crate::error::Result;
use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};
use serde::{Deserialize, Serialize};

/// Which update rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptimizerKind {
    /// Adam, weight decay added to the gradient (`g += wd * θ`).
    Adam,
    /// AdamW, weight decay applied to the parameter (`θ *= 1 - lr * wd`).
    AdamW,
}

impl std::str::FromStr for OptimizerKind {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "adam" => Ok(Self::Adam),
            "adamw" => Ok(Self::AdamW),
            o => Err(crate::Error::Invalid(format!(
                "unknown optimizer `{o}` (adam, adamw)"
            ))),
        }
    }
}

struct Slot {
    var: Var,
    m: Tensor,
    v: Tensor,
    decay: bool,
}

/// Adam / AdamW state.
pub struct Adam {
    kind: OptimizerKind,
    slots: Vec<Slot>,
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
    step: i32,
}

impl Adam {
    /// `params`: `(var, decay)` pairs; `decay` says whether weight decay applies to it.
    pub fn new(
        kind: OptimizerKind,
        params: Vec<(Var, bool)>,
        lr: f64,
        weight_decay: f64,
    ) -> Result<Self> {
        let slots = params
            .into_iter()
            .map(|(var, decay)| {
                let z = var.as_tensor().zeros_like()?;
                Ok(Slot {
                    m: z.clone(),
                    v: z,
                    var,
                    decay,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            kind,
            slots,
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay,
            step: 0,
        })
    }

    /// Steps taken so far (the bias-correction counter).
    pub fn steps(&self) -> i32 {
        self.step
    }

    /// The first and second moments of each parameter, in the order given to [`Adam::new`].
    pub fn moments(&self) -> Vec<(Tensor, Tensor)> {
        self.slots
            .iter()
            .map(|s| (s.m.clone(), s.v.clone()))
            .collect()
    }

    /// Restores `steps` and the moments saved by [`Adam::moments`] (same order and shapes).
    pub fn restore(&mut self, steps: i32, moments: Vec<(Tensor, Tensor)>) -> Result<()> {
        if moments.len() != self.slots.len() || steps < 0 {
            return Err(crate::Error::Invalid(format!(
                "optimiser state has {} moment pairs and step {steps}, the model {} parameters",
                moments.len(),
                self.slots.len()
            )));
        }
        for (i, (s, (m, v))) in self.slots.iter_mut().zip(moments).enumerate() {
            let want = s.var.as_tensor();
            for t in [&m, &v] {
                if t.dims() != want.dims() || t.dtype() != want.dtype() {
                    return Err(crate::Error::Invalid(format!(
                        "optimiser moment {i} is {:?} {:?}, the parameter {:?} {:?}",
                        t.dims(),
                        t.dtype(),
                        want.dims(),
                        want.dtype()
                    )));
                }
            }
            s.m = m.to_device(want.device())?;
            s.v = v.to_device(want.device())?;
        }
        self.step = steps;
        Ok(())
    }

    /// One update from `grads`; parameters without a gradient are left alone.
    pub fn step(&mut self, grads: &GradStore) -> Result<()> {
        self.step += 1;
        let bc1 = 1.0 - self.beta1.powi(self.step);
        let bc2 = 1.0 - self.beta2.powi(self.step);
        for s in &mut self.slots {
            let Some(g) = grads.get(s.var.as_tensor()) else {
                continue;
            };
            let theta = s.var.as_tensor();
            let wd = if s.decay { self.weight_decay } else { 0.0 };
            let g = if wd > 0.0 && self.kind == OptimizerKind::Adam {
                (g + (theta * wd)?)?
            } else {
                g.clone()
            };
            s.m = ((&s.m * self.beta1)? + (&g * (1.0 - self.beta1))?)?;
            s.v = ((&s.v * self.beta2)? + (g.sqr()? * (1.0 - self.beta2))?)?;
            let update = ((&s.m / bc1)? / ((&s.v / bc2)?.sqrt()? + self.eps)?)?;
            let base = if wd > 0.0 && self.kind == OptimizerKind::AdamW {
                (theta * (1.0 - self.lr * wd))?
            } else {
                theta.clone()
            };
            s.var.set(&(base - (update * self.lr)?)?)?;
        }
        Ok(())
    }
}
