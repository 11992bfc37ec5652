//! Training checkpoints: everything a run needs to continue exactly where it stopped.
//!
//! One safetensors file, `<stem>.safetensors`, holds the tensors and, in its header metadata
//! under `gnn.train_state`, the JSON of the scalar state; `<stem>.json` repeats that JSON for
//! people (it is not read back). Tensors:
//!
//! ```text
//!  param.<name>    the model's parameters            (as named by `Gnn::named_vars`)
//!  adam_m.<name>   Adam's first moment of <name>
//!  adam_v.<name>   Adam's second moment of <name>
//!  best.<name>     the parameters at the best validation epoch so far (when evaluated)
//! ```
//!
//! The scalar state is the epoch reached, the model and training configs, Adam's step count,
//! the dropout stream's position ([`DropoutRng`]: masks are a function of it alone on every
//! device), the best-validation record, and the per-epoch history and timings. The file is
//! written to a temporary name and renamed, so an interrupted save leaves the previous
//! checkpoint intact.

use crate::error::{Error, Result};
use crate::optim::Adam;
pub use crate::trainer::BestSoFar;
use crate::trainer::{EpochLog, TrainConfig};
use candle_core::{Device, Tensor, Var};
use gnn_models::{DropoutRng, Gnn, ModelConfig};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const FORMAT: &str = "gnn-train-state-v1";
const META_KEY: &str = "gnn.train_state";

/// The scalar part of a checkpoint (the header JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateMeta {
    /// Format tag.
    pub format: String,
    /// Epochs completed.
    pub epoch: usize,
    /// The model's configuration.
    pub model: ModelConfig,
    /// The training configuration the run started with.
    pub train: TrainConfig,
    /// Adam's step count.
    pub adam_steps: i32,
    /// The dropout stream's position.
    pub dropout: DropoutRng,
    /// Model selection so far.
    pub best: BestSoFar,
    /// Loss of the last completed epoch.
    pub final_loss: f64,
    /// Every epoch so far.
    pub history: Vec<EpochLog>,
    /// Training-step times counted in the statistics so far, ms.
    pub epoch_ms: Vec<f64>,
    /// Evaluation-forward times so far, ms.
    pub infer_ms: Vec<f64>,
    /// f16's dynamic loss scale at this point (`None` in other precisions and in checkpoints
    /// written before it was saved), so a resumed f16 run continues with it.
    #[serde(default)]
    pub loss_scale: Option<crate::LossScale>,
}

/// A full training state: [`StateMeta`] plus the tensors.
#[derive(Debug, Clone)]
pub struct TrainState {
    /// The scalar state.
    pub meta: StateMeta,
    /// Parameters by name.
    pub params: HashMap<String, Tensor>,
    /// Adam moments `(m, v)` by parameter name.
    pub moments: HashMap<String, (Tensor, Tensor)>,
    /// Best-validation parameters by name (empty before the first evaluation).
    pub best: HashMap<String, Tensor>,
}

/// The two paths of checkpoint `stem` (`.safetensors`, `.json`); a given extension is dropped.
pub fn state_paths(stem: &Path) -> (PathBuf, PathBuf) {
    let stem = match stem.extension().and_then(|e| e.to_str()) {
        Some("safetensors") | Some("json") => stem.with_extension(""),
        _ => stem.to_path_buf(),
    };
    let with = |ext: &str| {
        let mut s = stem.as_os_str().to_os_string();
        s.push(ext);
        PathBuf::from(s)
    };
    (with(".safetensors"), with(".json"))
}

impl TrainState {
    /// Captures the state of a run after `meta.epoch` epochs.
    pub(crate) fn capture(
        meta: StateMeta,
        vars: &[(String, Var)],
        opt: &Adam,
        best: Option<&[Tensor]>,
    ) -> Self {
        let params = vars
            .iter()
            .map(|(k, v)| (k.clone(), v.as_tensor().clone()))
            .collect();
        let moments = vars
            .iter()
            .map(|(k, _)| k.clone())
            .zip(opt.moments())
            .collect();
        let best = best
            .map(|b| {
                vars.iter()
                    .map(|(k, _)| k.clone())
                    .zip(b.iter().cloned())
                    .collect()
            })
            .unwrap_or_default();
        Self {
            meta,
            params,
            moments,
            best,
        }
    }

    /// Writes `<stem>.safetensors` (atomically: temporary file, then rename) and `<stem>.json`.
    pub fn save(&self, stem: impl AsRef<Path>) -> Result<PathBuf> {
        let (st, js) = state_paths(stem.as_ref());
        let bad = |path: &Path, problem: String| Error::File {
            path: path.display().to_string(),
            problem,
        };
        if let Some(dir) = st.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| bad(dir, e.to_string()))?;
        }
        let json = serde_json::to_string(&self.meta).map_err(|e| bad(&st, e.to_string()))?;
        let mut tensors: Vec<(String, Tensor)> = Vec::new();
        for (k, t) in &self.params {
            tensors.push((format!("param.{k}"), t.clone()));
        }
        for (k, (m, v)) in &self.moments {
            tensors.push((format!("adam_m.{k}"), m.clone()));
            tensors.push((format!("adam_v.{k}"), v.clone()));
        }
        for (k, t) in &self.best {
            tensors.push((format!("best.{k}"), t.clone()));
        }
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        let meta = HashMap::from([
            (META_KEY.to_string(), json),
            ("format".to_string(), FORMAT.to_string()),
        ]);
        let mut tmp = st.as_os_str().to_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        safetensors::serialize_to_file(
            tensors.iter().map(|(k, t)| (k.as_str(), t)),
            Some(meta),
            &tmp,
        )
        .map_err(|e| bad(&tmp, e.to_string()))?;
        std::fs::rename(&tmp, &st).map_err(|e| bad(&st, e.to_string()))?;
        let pretty =
            serde_json::to_string_pretty(&self.meta).map_err(|e| bad(&js, e.to_string()))?;
        std::fs::write(&js, pretty + "\n").map_err(|e| bad(&js, e.to_string()))?;
        Ok(st)
    }

    /// Reads a checkpoint written by [`TrainState::save`] onto `device`, checking its format,
    /// that every parameter has both moments, and that best weights (if any) are complete.
    pub fn load(stem: impl AsRef<Path>, device: &Device) -> Result<Self> {
        let (st, _) = state_paths(stem.as_ref());
        let bad = |problem: String| Error::File {
            path: st.display().to_string(),
            problem,
        };
        let bytes = std::fs::read(&st).map_err(|e| bad(e.to_string()))?;
        let md = metadata_of_format(&bytes, FORMAT, " (a training checkpoint)").map_err(bad)?;
        let text = md
            .get(META_KEY)
            .ok_or_else(|| bad(format!("no `{META_KEY}` entry in the header metadata")))?;
        let meta: StateMeta =
            serde_json::from_str(text).map_err(|e| bad(format!("bad `{META_KEY}`: {e}")))?;
        meta.model
            .validate()
            .map_err(|e| bad(format!("bad model config: {e}")))?;
        if meta.history.len() != meta.epoch {
            return Err(bad(format!(
                "history has {} epochs, the state says {} were run",
                meta.history.len(),
                meta.epoch
            )));
        }
        let all = candle_core::safetensors::load_buffer(&bytes, device)
            .map_err(|e| bad(e.to_string()))?;
        let (mut params, mut m, mut v, mut best) = (
            HashMap::new(),
            HashMap::new(),
            HashMap::new(),
            HashMap::new(),
        );
        for (k, t) in all {
            let (kind, name) = k
                .split_once('.')
                .ok_or_else(|| bad(format!("unexpected tensor `{k}`")))?;
            let slot = match kind {
                "param" => &mut params,
                "adam_m" => &mut m,
                "adam_v" => &mut v,
                "best" => &mut best,
                _ => return Err(bad(format!("unexpected tensor `{k}`"))),
            };
            slot.insert(name.to_string(), t);
        }
        let mut moments = HashMap::new();
        for (k, p) in &params {
            let (Some(mk), Some(vk)) = (m.remove(k), v.remove(k)) else {
                return Err(bad(format!("parameter `{k}` has no Adam moments")));
            };
            if mk.dims() != p.dims() || vk.dims() != p.dims() {
                return Err(bad(format!("Adam moments of `{k}` do not match its shape")));
            }
            moments.insert(k.clone(), (mk, vk));
        }
        if let Some(k) = m.keys().chain(v.keys()).next() {
            return Err(bad(format!("Adam moments for unknown parameter `{k}`")));
        }
        if !best.is_empty() && best.len() != params.len() {
            return Err(bad(format!(
                "{} best-validation tensors for {} parameters",
                best.len(),
                params.len()
            )));
        }
        Ok(Self {
            meta,
            params,
            moments,
            best,
        })
    }

    /// Checks that this state belongs to `model` trained with `cfg` (same model config, same
    /// recipe; `epochs`, checkpointing and profiling may differ) and puts the parameters into
    /// `model`. Returns the best-validation weights in `model.named_vars()` order, if any.
    pub(crate) fn apply(
        &self,
        model: &Gnn,
        cfg: &TrainConfig,
        opt: &mut Adam,
    ) -> Result<Option<Vec<Tensor>>> {
        let bad = |problem: String| Error::Invalid(format!("cannot resume: {problem}"));
        if &self.meta.model != model.config() {
            return Err(bad(format!(
                "the checkpoint's model is {:?}, this run's {:?}",
                self.meta.model,
                model.config()
            )));
        }
        if !self.meta.train.same_recipe(cfg) {
            return Err(bad(format!(
                "the checkpoint was trained with {:?}, this run asks for {cfg:?} (only epochs, \
                 checkpointing and profiling may change)",
                self.meta.train
            )));
        }
        if self.meta.epoch > cfg.epochs {
            return Err(bad(format!(
                "the checkpoint is at epoch {}, beyond this run's {} epochs",
                self.meta.epoch, cfg.epochs
            )));
        }
        let vars = model.named_vars();
        if vars.len() != self.params.len() {
            return Err(bad(format!(
                "{} parameters in the checkpoint, {} in the model",
                self.params.len(),
                vars.len()
            )));
        }
        let mut moments = Vec::with_capacity(vars.len());
        for (k, var) in &vars {
            let p = self
                .params
                .get(k)
                .ok_or_else(|| bad(format!("parameter `{k}` missing")))?;
            if p.dims() != var.dims() {
                return Err(bad(format!(
                    "parameter `{k}` is {:?}, the model's {:?}",
                    p.dims(),
                    var.dims()
                )));
            }
            var.set(&p.to_device(var.device())?.to_dtype(var.dtype())?)?;
            moments.push(self.moments[k].clone());
        }
        opt.restore(self.meta.adam_steps, moments)?;
        if self.best.is_empty() {
            return Ok(None);
        }
        let best = vars
            .iter()
            .map(|(k, var)| {
                let t = self
                    .best
                    .get(k)
                    .ok_or_else(|| bad(format!("best-validation `{k}` missing")))?;
                if t.dims() != var.dims() {
                    return Err(bad(format!("best-validation `{k}` has the wrong shape")));
                }
                Ok(t.to_device(var.device())?)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(best))
    }
}

/// The header metadata of the safetensors file `bytes`, whose `format` entry must be `format`;
/// `Err(problem)` otherwise (`what` follows the expected format in the text).
pub(crate) fn metadata_of_format(
    bytes: &[u8],
    format: &str,
    what: &str,
) -> std::result::Result<HashMap<String, String>, String> {
    let (_, header) = safetensors::SafeTensors::read_metadata(bytes)
        .map_err(|e| format!("not a safetensors file: {e}"))?;
    let md = header.metadata().clone().unwrap_or_default();
    if md.get("format").map(String::as_str) != Some(format) {
        return Err(format!(
            "metadata `format` is {:?}, expected `{format}`{what}",
            md.get("format")
        ));
    }
    Ok(md)
}
