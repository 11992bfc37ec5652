//! The inference engine: a trained model bound to its graph on a device, with a choice of
//! aggregation kernel (exact, or ES-SpMM / AES-SpMM edge sampling), for embedding in other
//! Rust programs.
//!
//! ```no_run
//! # fn main() -> gnn_train::Result<()> {
//! use candle_core::Device;
//! use gnn_train::{Engine, HostFeatures};
//! let ds = gnn_graph::load_planetoid("data/cora/raw", "cora")?;
//! let mut engine = Engine::load("weights/gcn-cora", &ds.graph, &Device::Cpu)?;
//! engine.set_aggregation("aes:32".parse()?)?;
//! let (x, _) = HostFeatures::from_dataset(&ds, true)?.quantize()?.upload(engine.device())?;
//! let classes: Vec<u32> = engine.classify(&x)?;
//! # Ok(()) }
//! ```

use crate::error::{Error, Result};
use candle_core::{Device, Tensor};
use gnn_graph::Csr;
use gnn_models::{Aggregation, ConvKind, Forward, Gnn, ModelGraph, PhaseTimes};
use std::path::Path;
use std::time::{Duration, Instant};

/// A model and its graph operands on one device.
pub struct Engine {
    model: Gnn,
    graph: ModelGraph,
    device: Device,
}

/// One timed forward pass.
#[derive(Debug, Clone)]
pub struct Inference {
    /// Logits `[N, classes]`.
    pub logits: Tensor,
    /// Per-phase device time (aggregation, GEMM, element-wise), from CUDA events on a GPU.
    pub phases: PhaseTimes,
    /// Wall time of the whole forward pass, synchronised.
    pub total: Duration,
}

impl Engine {
    /// Binds `model` to `graph` (rows = targets; the per-model structure and normalisation
    /// are derived as in training) on `device`, with exact aggregation.
    pub fn new(model: Gnn, graph: &Csr, device: &Device) -> Result<Self> {
        let graph = ModelGraph::new(graph, model.config().kind, device)?;
        Ok(Self {
            model,
            graph,
            device: device.clone(),
        })
    }

    /// Binds `model` to graph operands already on `device` (those a training run used), with
    /// the aggregation they carry.
    pub fn from_parts(model: Gnn, graph: ModelGraph, device: &Device) -> Self {
        Self {
            model,
            graph,
            device: device.clone(),
        }
    }

    /// Binds the engine to another graph (rows = targets), keeping the model, the kernel
    /// policy and the aggregation: serving a model on a graph it was not trained on. On an
    /// error the engine is unchanged.
    pub fn rebind(&mut self, graph: &Csr) -> Result<()> {
        let mut g = ModelGraph::new(graph, self.model.config().kind, &self.device)?
            .with_policy(*self.graph.policy());
        g.aggregation = self.graph.aggregation;
        self.graph = g;
        Ok(())
    }

    /// Loads a checkpoint written by [`Gnn::save`] (`weights` = stem or `.safetensors`) and
    /// binds it to `graph`.
    pub fn load(weights: impl AsRef<Path>, graph: &Csr, device: &Device) -> Result<Self> {
        Self::new(Gnn::load(weights, device)?, graph, device)
    }

    /// The same engine with its graph under the kernel `policy` (which GPU kernel each
    /// sparse op runs; [`gnn_kernels::KernelPolicy`]).
    pub fn with_policy(self, policy: gnn_kernels::KernelPolicy) -> Self {
        Self {
            graph: self.graph.with_policy(policy),
            ..self
        }
    }

    /// The kernels the engine's sparse ops have run so far.
    pub fn kernels_used(&self) -> gnn_kernels::KernelsUsed {
        self.graph.kernels_used()
    }

    /// Chooses the aggregation kernel; sampled kernels are refused for GraphSAGE-pool (max
    /// has no sampled estimator) and for invalid widths.
    pub fn set_aggregation(&mut self, aggregation: Aggregation) -> Result<()> {
        if let Aggregation::Sampled(s) = aggregation {
            s.validate()?;
            if self.model.config().kind == ConvKind::SagePool {
                return Err(Error::Invalid(format!(
                    "{aggregation} aggregation: GraphSAGE-pool aggregates with max, which has \
                     no sampled estimator"
                )));
            }
        }
        self.graph.aggregation = aggregation;
        Ok(())
    }

    /// The aggregation in use.
    pub fn aggregation(&self) -> Aggregation {
        self.graph.aggregation
    }

    /// The model.
    pub fn model(&self) -> &Gnn {
        &self.model
    }

    /// The graph operands.
    pub fn graph(&self) -> &ModelGraph {
        &self.graph
    }

    /// The device everything lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    fn check_features(&self, x: &Tensor) -> Result<()> {
        let want = (self.graph.graph.n_cols(), self.model.config().in_dim);
        match x.dims2() {
            Ok(d) if d == want => Ok(()),
            _ => Err(Error::Invalid(format!(
                "features have shape {:?}; the graph and model expect [{}, {}]",
                x.dims(),
                want.0,
                want.1
            ))),
        }
    }

    /// Logits `[N, classes]` of every node.
    pub fn predict(&self, x: &Tensor) -> Result<Tensor> {
        self.check_features(x)?;
        Ok(self.model.forward(&self.graph, x, &mut Forward::eval())?)
    }

    /// The predicted class of every node.
    pub fn classify(&self, x: &Tensor) -> Result<Vec<u32>> {
        Ok(self.predict(x)?.argmax(1)?.to_vec1()?)
    }

    /// [`Engine::predict`] with the per-phase split and the synchronised wall time.
    pub fn run_timed(&self, x: &Tensor) -> Result<Inference> {
        self.check_features(x)?;
        let g = &self.graph;
        let pass = || -> Result<(Tensor, Duration)> {
            self.device.synchronize()?;
            let t0 = Instant::now();
            let logits = self.model.forward(g, x, &mut Forward::eval())?;
            self.device.synchronize()?;
            Ok((logits, t0.elapsed()))
        };
        g.set_phase_timing(true);
        let done = pass();
        g.set_phase_timing(false);
        // Taken whatever the pass did, so that a failed pass leaves nothing behind.
        let phases = g.take_phase_times();
        let (logits, total) = done?;
        Ok(Inference {
            logits,
            phases: phases?,
            total,
        })
    }
}

/// What a node order does to an edge sampler, measured (`c6f0242:docs/perf/
/// h100-2026-11-24-sampling-reorder`): `Some(warning)` when `aggregation` is known to be biased
/// on ids ordered by `reorder` (or by communities in the file itself, `community_ids`).
/// `reorder` is the order applied ([`crate::run::reorder`]'s answer), not `auto`.
///
/// ES Bucket keeps each row's first edges, i.e. its lowest-id neighbours: after a degree sort
/// those are the hubs, after a community order (Louvain, or a crawl-ordered file) the first
/// communities, and GCN on the Reddit-shaped graph loses 84-87 points at S = 16. AES's runs of
/// consecutive edges sample a few id blocks per row, which after a community order costs
/// 0.8-8 points at every width. ES FastRand's strided picks spread over the whole row: under
/// every order measured it loses at most 4.3 points at S = 16 and 0.4 from S = 64 up.
pub fn sampler_order_warning(
    aggregation: Aggregation,
    reorder: gnn_graph::Reorder,
    community_ids: bool,
) -> Option<String> {
    use gnn_graph::Reorder;
    use gnn_kernels::Sampling;
    let community = community_ids || reorder == Reorder::Louvain;
    let order = if community_ids && reorder == Reorder::None {
        "community-ordered ids".to_string()
    } else {
        format!("the {reorder} reordering")
    };
    match aggregation {
        Aggregation::Sampled(Sampling::EsBucket { .. })
            if community || reorder != Reorder::None =>
        {
            Some(format!(
                "ES Bucket samples each row's lowest ids, which {order} makes a biased sample \
                 (84-87 points lost at S = 16 on the Reddit-shaped graph); use fastrand:S"
            ))
        }
        Aggregation::Sampled(Sampling::Aes { .. }) if community => Some(format!(
            "AES samples runs of consecutive ids, which {order} groups by community (0.8-8 \
             points lost on the Reddit-shaped graph); use fastrand:S"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostFeatures;
    use gnn_kernels::Sampling;

    use crate::test_cora as cora;

    fn weights() -> String {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../weights/gcn-cora").to_string()
    }

    #[test]
    fn wide_samples_reproduce_exact_inference() {
        let ds = cora();
        let dev = Device::Cpu;
        let mut e = Engine::load(weights(), &ds.graph, &dev).unwrap();
        let (x, _) = HostFeatures::from_dataset(&ds, true)
            .unwrap()
            .upload(&dev)
            .unwrap();
        let exact = e.predict(&x).unwrap();
        // Cora's largest degree (with the self loop) is 169: every row is taken whole.
        for a in [
            Sampling::EsBucket { s: 256 },
            Sampling::EsFastRand { s: 256 },
            Sampling::aes(256),
        ] {
            e.set_aggregation(Aggregation::Sampled(a)).unwrap();
            let y = e.predict(&x).unwrap();
            let d = (&y - &exact).unwrap().abs().unwrap().max_all().unwrap();
            assert!(d.to_scalar::<f32>().unwrap() < 1e-5, "{a:?}");
        }
        // Narrow samples change some rows but stay a close estimate.
        e.set_aggregation("bucket:2".parse().unwrap()).unwrap();
        let y = e.predict(&x).unwrap();
        let d = (&y - &exact).unwrap().abs().unwrap().max_all().unwrap();
        assert!(d.to_scalar::<f32>().unwrap() > 1e-3);
        assert_eq!(e.classify(&x).unwrap().len(), 2708);
    }

    #[test]
    fn a_rebound_engine_serves_the_new_graph_and_keeps_its_aggregation() {
        let ds = cora();
        let dev = Device::Cpu;
        let (x, _) = HostFeatures::from_dataset(&ds, true)
            .unwrap()
            .upload(&dev)
            .unwrap();
        let mut e = Engine::load(weights(), &ds.graph, &dev).unwrap();
        e.set_aggregation("fastrand:2".parse().unwrap()).unwrap();
        let sampled = e.predict(&x).unwrap();
        // The same model over a graph without edges: the self loops alone.
        let n = ds.num_nodes();
        let empty = gnn_graph::Csr::empty(n, n).unwrap();
        e.rebind(&empty).unwrap();
        assert_eq!(e.aggregation().to_string(), "fastrand:2");
        let alone = e.predict(&x).unwrap();
        let d = (&alone - &sampled)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap();
        assert!(d.to_scalar::<f32>().unwrap() > 1e-3);
        // A graph of the wrong size is refused and the engine keeps the old one.
        assert!(e.rebind(&gnn_graph::Csr::empty(3, 4).unwrap()).is_err());
        e.rebind(&ds.graph).unwrap();
        let back = e.predict(&x).unwrap();
        assert_eq!(
            back.to_vec2::<f32>().unwrap(),
            sampled.to_vec2::<f32>().unwrap()
        );
        // from_parts keeps the operands it is given.
        let model = Gnn::load(weights(), &dev).unwrap();
        let graph = ModelGraph::new(&ds.graph, model.config().kind, &dev).unwrap();
        let exact = Engine::from_parts(model, graph, &dev).predict(&x).unwrap();
        let reference = Engine::load(weights(), &ds.graph, &dev)
            .unwrap()
            .predict(&x)
            .unwrap();
        assert_eq!(
            exact.to_vec2::<f32>().unwrap(),
            reference.to_vec2::<f32>().unwrap()
        );
    }

    #[test]
    fn engine_refuses_what_it_cannot_do() {
        let ds = cora();
        let dev = Device::Cpu;
        let mut e = Engine::load(weights(), &ds.graph, &dev).unwrap();
        assert!(e.set_aggregation("aes:0".parse().unwrap()).is_err());
        let x = Tensor::zeros((2708, 5), candle_core::DType::F32, &dev).unwrap();
        let err = e.predict(&x).unwrap_err().to_string();
        assert!(err.contains("[2708, 1433]"), "{err}");
        let cfg = gnn_models::ModelConfig::new(ConvKind::SagePool, 4, 8, 3, 2, 0.0);
        let mut p = Engine::new(Gnn::new(cfg, &dev, 0).unwrap(), &ds.graph, &dev).unwrap();
        assert!(p.set_aggregation("aes:32".parse().unwrap()).is_err());
        assert!(p.set_aggregation(Aggregation::Exact).is_ok());
        assert!("median:3".parse::<Aggregation>().is_err());
        assert_eq!(
            "fastrand:64".parse::<Aggregation>().unwrap().to_string(),
            "fastrand:64"
        );
    }

    #[test]
    fn sampler_warnings_follow_the_measured_orders() {
        use gnn_graph::Reorder;
        let agg = |s: &str| s.parse::<Aggregation>().unwrap();
        let warns = |a: &str, r: Reorder, c: bool| sampler_order_warning(agg(a), r, c).is_some();
        // Random ids: every sampler is fine; exact never warns.
        for a in ["exact", "bucket:16", "fastrand:16", "aes:16"] {
            assert!(!warns(a, Reorder::None, false), "{a}");
        }
        // Bucket after any locality order; AES after community orders only.
        for r in [Reorder::Degree, Reorder::Rcm, Reorder::Louvain] {
            assert!(warns("bucket:64", r, false), "{r}");
            assert!(!warns("fastrand:64", r, false), "{r}");
            assert!(!warns("exact", r, false), "{r}");
        }
        assert!(warns("aes:32", Reorder::Louvain, false));
        assert!(!warns("aes:32", Reorder::Rcm, false));
        let w = sampler_order_warning(agg("aes:32"), Reorder::None, true).unwrap();
        assert!(
            w.contains("community-ordered ids") && w.contains("fastrand"),
            "{w}"
        );
    }
}
