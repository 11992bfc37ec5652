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

/// How the learning rate moves over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LrSchedule {
    /// The same rate every epoch.
    #[default]
    Constant,
    /// Cosine annealing from the rate to 0 over the run's epochs (torch's
    /// `CosineAnnealingLR` with `T_max = epochs`, stepped per epoch): epoch `e` (1-based)
    /// uses `lr * (1 + cos(pi * (e - 1) / epochs)) / 2`. A resumed run that raises `--epochs`
    /// follows the new run's curve from the epoch it resumes at.
    Cosine,
}

impl LrSchedule {
    /// The rate of epoch `epoch` (1-based) of `epochs` under base rate `lr`.
    pub fn rate(self, lr: f64, epoch: usize, epochs: usize) -> f64 {
        match self {
            Self::Constant => lr,
            Self::Cosine => {
                let t = (epoch.saturating_sub(1)) as f64 / epochs.max(1) as f64;
                lr * 0.5 * (1.0 + (std::f64::consts::PI * t).cos())
            }
        }
    }
}

impl std::str::FromStr for LrSchedule {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "constant" => Ok(Self::Constant),
            "cosine" => Ok(Self::Cosine),
            o => Err(crate::Error::Invalid(format!(
                "unknown learning-rate schedule `{o}` (constant, cosine)"
            ))),
        }
    }
}

struct Slot {
    var: Var,
    /// First and second moments, `[2, numel]` (m, then v): the fused step's layout.
    mv: Tensor,
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
                let t = var.as_tensor();
                let mv = Tensor::zeros((2, t.elem_count()), t.dtype(), t.device())?;
                Ok(Slot { mv, var, decay })
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

    /// Sets the learning rate of the following steps (a schedule's per-epoch rate).
    pub fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    /// Steps taken so far (the bias-correction counter).
    pub fn steps(&self) -> i32 {
        self.step
    }

    /// The first and second moments of each parameter, in the order given to [`Adam::new`].
    pub fn moments(&self) -> Vec<(Tensor, Tensor)> {
        self.slots
            .iter()
            .map(|s| {
                let dims = s.var.as_tensor().dims();
                Ok((s.mv.get(0)?.reshape(dims)?, s.mv.get(1)?.reshape(dims)?))
            })
            .collect::<candle_core::Result<Vec<_>>>()
            .expect("moments are [2, numel] of their parameter")
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
            s.mv = Tensor::stack(&[m.flatten_all()?, v.flatten_all()?], 0)?
                .to_device(want.device())?
                .contiguous()?;
        }
        self.step = steps;
        Ok(())
    }

    /// One update from `grads`; parameters without a gradient are left alone. Each parameter
    /// takes the fused two-pass step of [`gnn_kernels::adam_step`] (moments, then parameter,
    /// in place) rather than a dozen element-wise tensor ops. With a `gate` (an f32 vector on
    /// the parameters' device) the update changes nothing unless every gate value is finite;
    /// the counter still advances, so a caller that learns afterwards the gate was closed
    /// calls [`Adam::unstep`].
    pub fn step(&mut self, grads: &GradStore, gate: Option<&Tensor>) -> Result<()> {
        self.step += 1;
        let bc1 = 1.0 - self.beta1.powi(self.step);
        let bc2 = 1.0 - self.beta2.powi(self.step);
        for s in &self.slots {
            let Some(g) = grads.get(s.var.as_tensor()) else {
                continue;
            };
            let wd = if s.decay { self.weight_decay } else { 0.0 };
            let (l2, keep) = match self.kind {
                OptimizerKind::Adam => (wd, 1.0),
                OptimizerKind::AdamW => (0.0, 1.0 - self.lr * wd),
            };
            let step = gnn_kernels::AdamStep {
                lr: self.lr,
                beta1: self.beta1,
                beta2: self.beta2,
                eps: self.eps,
                bc1,
                bc2,
                l2,
                keep,
            };
            gnn_kernels::adam_step(s.var.as_tensor(), &s.mv, g, &step, gate)?;
        }
        Ok(())
    }

    /// Takes back the counter of the last [`Adam::step`], whose gate was closed (it changed
    /// no parameter or moment).
    pub fn unstep(&mut self) {
        self.step = (self.step - 1).max(0);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cosine_schedule_anneals_from_the_rate_to_zero() {
        let r = |e| LrSchedule::Cosine.rate(0.01, e, 40);
        assert_eq!(r(1), 0.01);
        assert!((r(21) - 0.005).abs() < 1e-12, "{}", r(21));
        assert!(r(40) > 0.0 && r(40) < 0.01 * 0.01);
        assert!((1..40).all(|e| r(e + 1) < r(e)));
        assert_eq!(LrSchedule::Constant.rate(0.01, 39, 40), 0.01);
        assert_eq!("Cosine".parse::<LrSchedule>().unwrap(), LrSchedule::Cosine);
        let e = "step".parse::<LrSchedule>().unwrap_err().to_string();
        assert!(e.contains("`step`") && e.contains("cosine"), "{e}");
    }

    use super::*;
    use candle_core::{DType, Device};

    /// The composed update the fused step replaced, as the reference.
    #[allow(clippy::too_many_arguments)]
    fn composed(
        kind: OptimizerKind,
        theta: &Tensor,
        m: &Tensor,
        v: &Tensor,
        g: &Tensor,
        (lr, wd, t): (f64, f64, i32),
    ) -> (Tensor, Tensor, Tensor) {
        let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8);
        let (bc1, bc2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
        let g = if kind == OptimizerKind::Adam {
            (g + (theta * wd).unwrap()).unwrap()
        } else {
            g.clone()
        };
        let m = ((m * b1).unwrap() + (&g * (1.0 - b1)).unwrap()).unwrap();
        let v = ((v * b2).unwrap() + (g.sqr().unwrap() * (1.0 - b2)).unwrap()).unwrap();
        let u =
            ((&m / bc1).unwrap() / ((&v / bc2).unwrap().sqrt().unwrap() + eps).unwrap()).unwrap();
        let base = if kind == OptimizerKind::AdamW {
            (theta * (1.0 - lr * wd)).unwrap()
        } else {
            theta.clone()
        };
        ((base - (u * lr).unwrap()).unwrap(), m, v)
    }

    #[test]
    fn fused_step_matches_the_composed_update_for_adam_and_adamw() {
        let dev = Device::Cpu;
        for kind in [OptimizerKind::Adam, OptimizerKind::AdamW] {
            for dims in [vec![1usize], vec![7, 33], vec![128, 602]] {
                let theta0 = Tensor::randn(0f64, 1.0, dims.as_slice(), &dev).unwrap();
                let var = Var::from_tensor(&theta0).unwrap();
                let mut opt = Adam::new(kind, vec![(var.clone(), true)], 0.01, 5e-4).unwrap();
                let (mut th, mut m, mut v) = (
                    theta0.clone(),
                    theta0.zeros_like().unwrap(),
                    theta0.zeros_like().unwrap(),
                );
                for t in 1..=3 {
                    let g = Tensor::randn(0f64, 1.0, dims.as_slice(), &dev).unwrap();
                    let loss = (var.as_tensor() * &g).unwrap().sum_all().unwrap();
                    opt.step(&loss.backward().unwrap(), None).unwrap();
                    (th, m, v) = composed(kind, &th, &m, &v, &g, (0.01, 5e-4, t));
                }
                let diff = |a: &Tensor, b: &Tensor| -> f64 {
                    let d = || (a - b)?.abs()?.max_all()?.to_scalar::<f64>();
                    d().unwrap()
                };
                assert!(diff(var.as_tensor(), &th) < 1e-12, "{kind:?} {dims:?}");
                let (mm, vv) = opt.moments().remove(0);
                assert!(diff(&mm, &m) < 1e-12 && diff(&vv, &v) < 1e-12);
                assert_eq!(mm.dtype(), DType::F64);
            }
        }
    }

    #[test]
    fn a_closed_gate_leaves_parameters_and_moments_alone() {
        let dev = Device::Cpu;
        let theta0 = Tensor::randn(0f32, 1.0, (7, 33), &dev).unwrap();
        let var = Var::from_tensor(&theta0).unwrap();
        let mut opt =
            Adam::new(OptimizerKind::Adam, vec![(var.clone(), true)], 0.01, 5e-4).unwrap();
        let g = Tensor::randn(0f32, 1.0, (7, 33), &dev).unwrap();
        let step = |opt: &mut Adam, gate: &[f32]| {
            let loss = (var.as_tensor() * &g).unwrap().sum_all().unwrap();
            let gate = Tensor::new(gate, &dev).unwrap();
            opt.step(&loss.backward().unwrap(), Some(&gate)).unwrap();
        };
        let values = |opt: &Adam| {
            let (m, v) = opt.moments().remove(0);
            [var.as_tensor().clone(), m, v]
                .map(|t| t.flatten_all().unwrap().to_vec1::<f32>().unwrap())
        };
        step(&mut opt, &[1.0, 2.0]);
        let open = values(&opt);
        assert_ne!(
            open[0],
            theta0.flatten_all().unwrap().to_vec1::<f32>().unwrap()
        );
        for closed in [[0.5, f32::NAN], [f32::NEG_INFINITY, 1.0]] {
            step(&mut opt, &closed);
            assert_eq!(opt.steps(), 2);
            opt.unstep();
            assert_eq!(values(&opt), open, "gate {closed:?}");
        }
        assert_eq!(opt.steps(), 1);
    }
}
