//! `Model`: a trained (or loaded) GNN that serves predictions on any `Data` of the right
//! feature width, saved and loaded in the engine's checkpoint format, and exchanged with PyG
//! as a state_dict of NumPy arrays.

use crate::arrays::{as_array, type_error, value_error};
use crate::data::Data;
use crate::device::parse_device;
use crate::errors::{model_err, to_py};
use candle_core::{DType, Device, Tensor};
use gnn_graph::Dataset;
use gnn_models::{Activation, Aggregation, ConvKind, Gnn, ModelGraph, PygLayout};
use gnn_train::{Engine, HostFeatures};
use numpy::ndarray::{Array2, ArrayD, IxDyn};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// A model and the graph operands it last served, on its device.
pub(crate) struct Served {
    /// The model while no graph is bound.
    gnn: Option<Gnn>,
    /// The model bound to a dataset's graph (and which dataset).
    engine: Option<(Engine, Weak<Dataset>)>,
    /// Where it runs.
    device: Device,
}

impl Served {
    /// A model bound to nothing yet.
    pub(crate) fn new(gnn: Gnn, device: Device) -> Self {
        Self {
            gnn: Some(gnn),
            engine: None,
            device,
        }
    }

    /// A model bound to the graph operands it was trained on.
    pub(crate) fn bound(gnn: Gnn, graph: ModelGraph, ds: &Arc<Dataset>, device: Device) -> Self {
        Self {
            gnn: None,
            engine: Some((Engine::from_parts(gnn, graph, &device), Arc::downgrade(ds))),
            device,
        }
    }

    fn gnn(&self) -> &Gnn {
        match (&self.engine, &self.gnn) {
            (Some((e, _)), _) => e.model(),
            (None, Some(g)) => g,
            (None, None) => unreachable!("a served model is either bound or free"),
        }
    }

    /// The engine bound to `ds`'s graph (re-binding when it served another one).
    fn engine_for(&mut self, ds: &Arc<Dataset>) -> gnn_train::Result<&mut Engine> {
        let here = Arc::downgrade(ds);
        match (&mut self.engine, self.gnn.take()) {
            (Some((e, bound)), _) => {
                if !Weak::ptr_eq(bound, &here) {
                    e.rebind(&ds.graph)?;
                    *bound = here;
                }
            }
            (None, Some(gnn)) => {
                match ModelGraph::new(&ds.graph, gnn.config().kind, &self.device) {
                    Ok(g) => {
                        self.engine = Some((Engine::from_parts(gnn, g, &self.device), here));
                    }
                    Err(e) => {
                        self.gnn = Some(gnn);
                        return Err(e.into());
                    }
                }
            }
            (None, None) => unreachable!("a served model is either bound or free"),
        }
        match &mut self.engine {
            Some((e, _)) => Ok(e),
            None => unreachable!("bound above"),
        }
    }
}

/// A trained GNN: ``predict`` / ``logits`` / ``evaluate`` on a ``Data``, ``save`` in the
/// engine's format (what ``load_model``, the ``infer`` example and ``Gnn::load`` read), and
/// ``state_dict`` with PyG's parameter names.
#[pyclass(frozen, module = "gnn")]
pub struct Model {
    served: Mutex<Served>,
    /// How features are prepared for it, when known (trained here, or saved with the record).
    row_normalize: Option<bool>,
    /// What `save` records beside the weights (the training summary, for a trained model).
    info: serde_json::Value,
}

impl Model {
    pub(crate) fn new(
        served: Served,
        row_normalize: Option<bool>,
        info: serde_json::Value,
    ) -> Self {
        Self {
            served: Mutex::new(served),
            row_normalize,
            info,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Served> {
        // A panic while serving left nothing half-written that matters: the model's weights
        // are only read here.
        self.served.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Logits `[N, C]` of every node of `data`, row-major, with the GIL released.
    fn run(
        &self,
        py: Python<'_>,
        data: &Data,
        aggregation: &str,
        int8: bool,
        row_normalize: Option<bool>,
    ) -> PyResult<(Vec<f32>, usize, usize)> {
        let agg: Aggregation = aggregation.parse().map_err(model_err)?;
        let rn = row_normalize
            .or(self.row_normalize)
            .unwrap_or(data.row_normalize);
        let ds = data.ds.clone();
        py.detach(|| -> gnn_train::Result<_> {
            let mut served = self.lock();
            let engine = served.engine_for(&ds)?;
            engine.set_aggregation(agg)?;
            let host = HostFeatures::from_dataset(&ds, rn)?;
            let host = if int8 { host.quantize()? } else { host };
            let (x, _) = host.upload(engine.device())?;
            let logits = engine.predict(&x)?.to_dtype(DType::F32)?;
            let (n, c) = logits.dims2()?;
            let v = logits.flatten_all()?.to_vec1::<f32>()?;
            Ok((v, n, c))
        })
        .map_err(to_py)
    }
}

/// Predicted class per node, from row-major logits of `c` columns.
fn argmax_rows(v: &[f32], c: usize) -> Vec<i64> {
    v.chunks(c.max(1))
        .map(|row| {
            let mut best = 0;
            for (j, &x) in row.iter().enumerate() {
                if x > row[best] {
                    best = j;
                }
            }
            best as i64
        })
        .collect()
}

#[pymethods]
impl Model {
    /// The predicted class of every node of ``data`` (int64, ``(nodes,)``).
    ///
    /// ``aggregation``: ``"exact"`` (default), or an edge-sampled estimate for fast inference
    /// on large graphs: ``"fastrand:S"`` / ``"bucket:S"`` (ES-SpMM, at most ``S`` neighbours
    /// per node) or ``"aes:W"`` (AES-SpMM). ``int8=True`` quantises the features to 8 bits per
    /// value (per-feature min/max) before they go to the device. ``row_normalize`` overrides
    /// how the features are prepared (default: as in training, else the data's own setting).
    #[pyo3(signature = (data, *, aggregation="exact", int8=false, row_normalize=None))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        data: &Data,
        aggregation: &str,
        int8: bool,
        row_normalize: Option<bool>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let (v, _, c) = self.run(py, data, aggregation, int8, row_normalize)?;
        Ok(PyArray1::from_vec(py, argmax_rows(&v, c)))
    }

    /// The logits of every node of ``data`` (float32, ``(nodes, classes)``); the options are
    /// ``predict``'s.
    #[pyo3(signature = (data, *, aggregation="exact", int8=false, row_normalize=None))]
    fn logits<'py>(
        &self,
        py: Python<'py>,
        data: &Data,
        aggregation: &str,
        int8: bool,
        row_normalize: Option<bool>,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let (v, n, c) = self.run(py, data, aggregation, int8, row_normalize)?;
        let a = Array2::from_shape_vec((n, c), v).map_err(|e| value_error(e.to_string()))?;
        Ok(a.into_pyarray(py))
    }

    /// Accuracy on the train, val and test nodes of ``data``: ``{"train": .., "val": ..,
    /// "test": ..}`` (fractions; 0 for an empty set). The options are ``predict``'s.
    #[pyo3(signature = (data, *, aggregation="exact", int8=false, row_normalize=None))]
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        data: &Data,
        aggregation: &str,
        int8: bool,
        row_normalize: Option<bool>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (v, _, c) = self.run(py, data, aggregation, int8, row_normalize)?;
        let pred = argmax_rows(&v, c);
        let ds = &data.ds;
        let acc = |ids: &[u32]| {
            if ids.is_empty() {
                return 0.0;
            }
            let hit = ids
                .iter()
                .filter(|&&i| pred[i as usize] == ds.labels[i as usize] as i64)
                .count();
            hit as f64 / ids.len() as f64
        };
        let d = PyDict::new(py);
        d.set_item("train", acc(&ds.split.train))?;
        d.set_item("val", acc(&ds.split.val))?;
        d.set_item("test", acc(&ds.split.test))?;
        Ok(d)
    }

    /// Writes ``<path>.safetensors`` (weights, the configuration in the header) and
    /// ``<path>.json`` (configuration and training summary); ``path`` is a stem or ends in
    /// ``.safetensors``. The format of the engine's own checkpoints (``weights/*``). Returns
    /// the ``.safetensors`` path.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<String> {
        let mut info = self.info.clone();
        if let (Some(o), Some(rn)) = (info.as_object_mut(), self.row_normalize) {
            o.insert("row_normalize".into(), rn.into());
        }
        let (st, _) = py
            .detach(|| self.lock().gnn().save(&path, info))
            .map_err(model_err)?;
        Ok(st.display().to_string())
    }

    /// The model's configuration (kind, widths, layers, activation, ...) as a dict.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = serde_json::to_value(self.lock().gnn().config())
            .map_err(|e| value_error(e.to_string()))?;
        crate::json::to_python(py, &v)
    }

    /// Number of scalar parameters.
    #[getter]
    fn num_params(&self) -> usize {
        self.lock().gnn().num_params()
    }

    /// The device it runs on (``"cpu"``, ``"cuda:0"``).
    #[getter]
    fn device(&self) -> String {
        gnn_train::device_name(&self.lock().device)
    }

    /// The feature preparation recorded with the model (``None``: the data's own setting).
    #[getter]
    fn row_normalize(&self) -> Option<bool> {
        self.row_normalize
    }

    /// The parameters as float32 NumPy arrays under PyG's names (``convs.0.lin.weight``,
    /// ``convs.0.bias``, ...): ``load_state_dict(strict=True)`` takes them (after
    /// ``torch.from_numpy``) into the matching PyG model.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let vars = self.lock().gnn().named_vars();
        let d = PyDict::new(py);
        for (name, v) in vars {
            let t = v
                .as_tensor()
                .to_dtype(DType::F32)
                .and_then(|t| t.to_device(&Device::Cpu))
                .and_then(|t| Ok((t.dims().to_vec(), t.flatten_all()?.to_vec1::<f32>()?)));
            let (dims, values) = t.map_err(|e| to_py(e.into()))?;
            let a = ArrayD::from_shape_vec(IxDyn(&dims), values)
                .map_err(|e| value_error(e.to_string()))?;
            d.set_item(name, a.into_pyarray(py))?;
        }
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let s = self.lock();
        let c = s.gnn().config();
        format!(
            "Model({}, {} layers x {} hidden, {} -> {} classes, {}, {} parameters, {})",
            c.kind,
            c.layers,
            c.hidden,
            c.in_dim,
            c.out_dim,
            c.activation,
            s.gnn().num_params(),
            gnn_train::device_name(&s.device)
        )
    }
}

/// The feature preparation recorded in `<stem>.json` by `Model.save`, if any.
fn recorded_row_normalize(path: &Path) -> Option<bool> {
    let s = path.to_string_lossy();
    let stem = s.strip_suffix(".safetensors").unwrap_or(&s);
    let text = std::fs::read_to_string(format!("{stem}.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("info")?.get("row_normalize")?.as_bool()
}

/// Loads a model saved by ``Model.save`` or by the engine's examples (``weights/gcn-cora``):
/// ``path`` is the stem or the ``.safetensors`` file. ``device``: ``"cpu"``, ``"cuda"``,
/// ``"cuda:N"`` or ``"auto"``.
#[pyfunction]
#[pyo3(signature = (path, device="cpu"))]
pub fn load_model(py: Python<'_>, path: PathBuf, device: &str) -> PyResult<Model> {
    let dev = parse_device(device)?;
    let gnn = py.detach(|| Gnn::load(&path, &dev)).map_err(model_err)?;
    let info = serde_json::json!({"loaded_from": path.display().to_string()});
    Ok(Model::new(
        Served::new(gnn, dev),
        recorded_row_normalize(&path),
        info,
    ))
}

/// A model from a PyG ``state_dict`` given as NumPy arrays (``{k: v.numpy() for k, v in
/// model.state_dict().items()}``): a stack of PyG convolutions in a ``convs`` ModuleList of
/// ``model`` = ``"gcn"`` (GCNConv), ``"sage"`` (SAGEConv), ``"gin"`` (GINConv with an MLP
/// ``Linear, ReLU, Linear``), ``"gat"`` (GATConv) or ``"transformer"`` (TransformerConv, give
/// ``heads``). Widths and depth come from the shapes; a tensor the model does not use is an
/// error naming it. ``activation``: ``"relu"`` or ``"elu"`` between layers (default ELU for
/// GAT, else ReLU). Serves predictions (dropout 0).
#[pyfunction]
#[pyo3(signature = (state_dict, model, *, heads=None, activation=None, device="cpu"))]
pub fn from_pyg_state_dict(
    py: Python<'_>,
    state_dict: &Bound<'_, PyDict>,
    model: &str,
    heads: Option<i128>,
    activation: Option<&str>,
    device: &str,
) -> PyResult<Model> {
    let heads: Option<usize> = crate::args::non_negative_opt("heads", heads)?;
    let kind: ConvKind = model.parse().map_err(model_err)?;
    let activation = activation.map(parse_activation).transpose()?;
    let dev = parse_device(device)?;
    let mut tensors = std::collections::HashMap::new();
    for (k, v) in state_dict.iter() {
        let name: String = k
            .extract()
            .map_err(|_| type_error("state_dict keys must be parameter names (str)"))?;
        let label = format!("state_dict[{name:?}]");
        let a = as_array(&v, &label)?;
        let a = if a.dtype().is_equiv_to(&numpy::dtype::<f32>(py)) {
            a
        } else if a.dtype().kind() == b'f' {
            a.call_method1("astype", ("float32",))?
                .cast_into::<numpy::PyUntypedArray>()
                .map_err(|_| type_error(format!("{label}: not an array")))?
        } else {
            return Err(type_error(format!(
                "{label} has dtype {}; parameters must be floating point",
                a.dtype()
            )));
        };
        let r = a.cast::<PyArrayDyn<f32>>()?.readonly();
        let view = r.as_array();
        let dims = view.shape().to_vec();
        let values: Vec<f32> = view.iter().copied().collect();
        let t = Tensor::from_vec(values, dims, &Device::Cpu).map_err(|e| to_py(e.into()))?;
        tensors.insert(name, t);
    }
    // The engine reads PyG weights from a safetensors file: write one, read it, remove it.
    let file = std::env::temp_dir().join(format!(
        "gnn-pyg-{}-{:?}.safetensors",
        std::process::id(),
        std::thread::current().id()
    ));
    let layout = PygLayout { heads, activation };
    let gnn = py.detach(|| -> gnn_train::Result<Gnn> {
        candle_core::safetensors::save(&tensors, &file)?;
        let g = Gnn::load_pyg_with(&file, kind, layout, &dev);
        let _ = std::fs::remove_file(&file);
        Ok(g?)
    });
    let gnn = gnn.map_err(|e| {
        // The temporary file's name means nothing to the caller: say `state_dict` instead.
        let msg = e
            .to_string()
            .replace(&file.display().to_string(), "state_dict");
        match e {
            gnn_train::Error::Model(gnn_models::Error::Checkpoint { .. }) => value_error(msg),
            other => to_py(other),
        }
    })?;
    let info = serde_json::json!({"loaded_from": "pyg state_dict"});
    Ok(Model::new(Served::new(gnn, dev), None, info))
}

/// `relu` or `elu`.
pub(crate) fn parse_activation(s: &str) -> PyResult<Activation> {
    match s.to_ascii_lowercase().as_str() {
        "relu" => Ok(Activation::Relu),
        "elu" => Ok(Activation::Elu),
        other => Err(value_error(format!(
            "activation {other:?}: expected \"relu\" or \"elu\" (MaxK: use maxk=K)"
        ))),
    }
}
