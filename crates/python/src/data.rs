//! `Data`: a graph with node features, labels and a split, built from NumPy arrays (validated
//! as the file loaders validate) or loaded from any format the engine reads.

use crate::args::{non_negative, non_negative_opt};
use crate::arrays::{self, value_error};
use crate::errors::to_py;
use gnn_graph::{BuildOptions, Coo, Dataset, Features, SelfLoops, Split};
use gnn_train::run::DataSource;
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2};
use pyo3::exceptions::PyFileNotFoundError;
use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Training nodes per class of the split drawn when none is given (the gnn-benchmark
/// protocol, as the file loaders draw it).
const TRAIN_PER_CLASS: usize = 20;
/// Validation nodes per class of that split.
const VAL_PER_CLASS: usize = 30;

/// A node-classification dataset: graph, node features, labels and a train/val/test split.
///
/// Build one from NumPy arrays:
///
/// - ``x``: features ``(nodes, features)``, float32, float16, float64, or bfloat16 (its bits
///   as uint16, or an ``ml_dtypes.bfloat16`` array); converted to float32.
/// - ``edge_index``: ``(2, E)`` int32/int64, row 0 the source nodes, row 1 the targets (PyG's
///   layout); or ``indptr`` + ``indices``: a CSR adjacency whose row ``i`` lists the nodes that
///   node ``i`` aggregates from. Repeated edges are merged; ``undirected=True`` adds every
///   edge's reverse.
/// - ``y``: integer class ids ``(nodes,)``, ``-1`` for an unlabeled node (optional: without it
///   the data can be served, not trained on).
/// - ``train``, ``val``, ``test``: boolean masks ``(nodes,)`` or arrays of node ids, all three
///   or none (then 20 training and 30 validation nodes per class are drawn from
///   ``split_seed``, the rest is the test set).
///
/// ``row_normalize`` is how training and prediction prepare the features by default (divide
/// each row by its sum, the citation datasets' convention).
///
/// Every bad input raises ``TypeError`` (wrong kind of array) or ``ValueError`` naming the
/// array, the index and the value; the checks are the file loaders'.
#[pyclass(frozen, module = "gnn")]
pub struct Data {
    pub(crate) ds: Arc<Dataset>,
    pub(crate) row_normalize: bool,
}

/// Where the node count comes from, for messages.
const NODES: &str = "one per row of x";

impl Data {
    /// Wraps a loaded dataset.
    pub(crate) fn from_dataset(ds: Dataset, row_normalize: bool) -> Self {
        Self {
            ds: Arc::new(ds),
            row_normalize,
        }
    }
}

/// The split from the three parts, or `None` when none is given; a node twice or an unlabeled
/// node is an error naming the part, the position and the node.
fn split(
    parts: [Option<&Bound<'_, PyAny>>; 3],
    labels: &[i32],
    n: usize,
) -> PyResult<Option<Split>> {
    const NAMES: [&str; 3] = ["train", "val", "test"];
    match parts.iter().filter(|p| p.is_some()).count() {
        0 => return Ok(None),
        3 => {}
        _ => {
            let missing: Vec<&str> = NAMES
                .iter()
                .zip(&parts)
                .filter(|(_, p)| p.is_none())
                .map(|(n, _)| *n)
                .collect();
            return Err(value_error(format!(
                "give train, val and test together, or none of them (a stratified split is \
                 then drawn); missing: {}",
                missing.join(", ")
            )));
        }
    }
    // Which part holds each node (0 = none).
    let mut owner = vec![0u8; n];
    let mut sets: [Vec<u32>; 3] = Default::default();
    for (s, (name, part)) in NAMES.iter().zip(parts).enumerate() {
        let Some(obj) = part else { continue };
        let ids = arrays::split_part(obj, name, n)?;
        for (k, &i) in ids.iter().enumerate() {
            let i = i as usize;
            if owner[i] != 0 {
                let other = NAMES[owner[i] as usize - 1];
                let again = if other == *name { "twice" } else { "also" };
                return Err(value_error(format!(
                    "{name}[{k}] = {i}: node {i} is {again} in {other} (split sets are disjoint \
                     and hold each node once)"
                )));
            }
            if labels[i] < 0 {
                return Err(value_error(format!(
                    "{name}[{k}] = {i}: node {i} has no label (y[{i}] = {})",
                    labels[i]
                )));
            }
            owner[i] = s as u8 + 1;
        }
        sets[s] = ids;
        sets[s].sort_unstable();
    }
    let [train, val, test] = sets;
    Ok(Some(Split { train, val, test }))
}

#[pymethods]
impl Data {
    #[new]
    #[pyo3(signature = (x, edge_index=None, y=None, *, indptr=None, indices=None, train=None,
        val=None, test=None, num_classes=None, undirected=false, row_normalize=false,
        split_seed=0, name="data".to_string()))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        x: &Bound<'_, PyAny>,
        edge_index: Option<&Bound<'_, PyAny>>,
        y: Option<&Bound<'_, PyAny>>,
        indptr: Option<&Bound<'_, PyAny>>,
        indices: Option<&Bound<'_, PyAny>>,
        train: Option<&Bound<'_, PyAny>>,
        val: Option<&Bound<'_, PyAny>>,
        test: Option<&Bound<'_, PyAny>>,
        num_classes: Option<i128>,
        undirected: bool,
        row_normalize: bool,
        split_seed: i128,
        name: String,
    ) -> PyResult<Self> {
        let num_classes: Option<usize> = non_negative_opt("num_classes", num_classes)?;
        let split_seed: u64 = non_negative("split_seed", split_seed)?;
        let features = arrays::features(x)?;
        let n = features.rows;
        if n >= u32::MAX as usize {
            return Err(value_error(format!(
                "x has {n} rows, beyond the engine's 32-bit node ids"
            )));
        }
        let (src, dst) = match (edge_index, indptr, indices) {
            (Some(e), None, None) => arrays::edge_index(e, n, NODES)?,
            (None, Some(p), Some(i)) => arrays::csr_edges(p, i, n, NODES)?,
            (None, None, None) => {
                return Err(value_error(
                    "no graph: give edge_index (2 x E) or indptr and indices (CSR)",
                ))
            }
            (Some(_), _, _) => {
                return Err(value_error("give edge_index or indptr + indices, not both"))
            }
            _ => return Err(value_error("indptr and indices go together")),
        };
        let what = if edge_index.is_some() {
            "edge_index"
        } else {
            "indices"
        };
        let graph = Coo::new(n, src, dst)
            .and_then(|c| {
                c.to_csr(BuildOptions {
                    symmetrize: undirected,
                    dedup: true,
                    self_loops: SelfLoops::Keep,
                })
            })
            .map_err(|e| value_error(format!("{what}: {e}")))?;
        let labels = match y {
            Some(y) => arrays::labels(y, n, NODES)?,
            None => vec![-1; n],
        };
        let top = labels.iter().copied().max().unwrap_or(-1);
        let num_classes = match num_classes {
            Some(c) => {
                if let Some(k) = labels.iter().position(|&l| l as i64 >= c as i64) {
                    return Err(value_error(format!(
                        "y[{k}] = {} is out of range: num_classes = {c}",
                        labels[k]
                    )));
                }
                c
            }
            None => (top + 1) as usize,
        };
        if num_classes > n {
            return Err(value_error(format!(
                "{num_classes} classes for {n} nodes: at most one class per node (the largest \
                 label is {top})"
            )));
        }
        let split = match split([train, val, test], &labels, n)? {
            Some(s) => s,
            None => Split::stratified(&labels, TRAIN_PER_CLASS, VAL_PER_CLASS, split_seed),
        };
        let ds = Dataset {
            name,
            graph,
            features: Features::Dense(features),
            labels,
            num_classes,
            split,
        };
        if let Some((node, feature, v)) = ds.features.first_non_finite() {
            return Err(value_error(format!(
                "x[{node}, {feature}] = {v}: features must be finite"
            )));
        }
        // The loaders' own check, after the array-level ones above (which name the array).
        ds.validate().map_err(|e| value_error(e.to_string()))?;
        Ok(Self::from_dataset(ds, row_normalize))
    }

    /// The dataset's name.
    #[getter]
    fn name(&self) -> &str {
        &self.ds.name
    }

    /// Number of nodes.
    #[getter]
    fn num_nodes(&self) -> usize {
        self.ds.num_nodes()
    }

    /// Number of stored directed edges (after merging repeats).
    #[getter]
    fn num_edges(&self) -> usize {
        self.ds.graph.nnz()
    }

    /// Feature width.
    #[getter]
    fn num_features(&self) -> usize {
        self.ds.features.cols()
    }

    /// Number of classes.
    #[getter]
    fn num_classes(&self) -> usize {
        self.ds.num_classes
    }

    /// Whether training and prediction divide each feature row by its sum by default.
    #[getter]
    fn row_normalize(&self) -> bool {
        self.row_normalize
    }

    /// The graph as a ``(2, E)`` int64 ``edge_index`` (row 0 sources, row 1 targets), rows of
    /// the engine's CSR in order.
    #[getter]
    fn edge_index<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let g = &self.ds.graph;
        let mut v = Vec::with_capacity(2 * g.nnz());
        v.extend(g.indices().iter().map(|&c| c as i64));
        for i in 0..g.n_rows() {
            v.extend(std::iter::repeat_n(i as i64, g.row_len(i)));
        }
        let a = Array2::from_shape_vec((2, g.nnz()), v).map_err(|e| value_error(e.to_string()))?;
        Ok(a.into_pyarray(py))
    }

    /// The CSR adjacency ``(indptr, indices)`` (row = target), int64.
    #[getter]
    fn csr<'py>(&self, py: Python<'py>) -> (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>) {
        let g = &self.ds.graph;
        let wide = |s: &[u32]| s.iter().map(|&v| v as i64).collect::<Vec<_>>();
        (
            PyArray1::from_vec(py, g.indptr().to_u64().iter().map(|&v| v as i64).collect()),
            PyArray1::from_vec(py, wide(g.indices())),
        )
    }

    /// The features as a float32 ``(nodes, features)`` array, as stored (not row-normalised).
    #[getter]
    fn x<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let d = self.ds.features.to_dense();
        let a = Array2::from_shape_vec((d.rows, d.cols), d.data)
            .map_err(|e| value_error(e.to_string()))?;
        Ok(a.into_pyarray(py))
    }

    /// The labels, int64, ``-1`` for unlabeled nodes.
    #[getter]
    fn y<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        PyArray1::from_vec(py, self.ds.labels.iter().map(|&l| l as i64).collect())
    }

    /// Training node ids (sorted), int64.
    #[getter]
    fn train_idx<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        ids(py, &self.ds.split.train)
    }

    /// Validation node ids (sorted), int64.
    #[getter]
    fn val_idx<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        ids(py, &self.ds.split.val)
    }

    /// Test node ids (sorted), int64.
    #[getter]
    fn test_idx<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        ids(py, &self.ds.split.test)
    }

    fn __repr__(&self) -> String {
        format!("Data({})", self.ds.summary())
    }

    fn __len__(&self) -> usize {
        self.ds.num_nodes()
    }
}

fn ids<'py>(py: Python<'py>, v: &[u32]) -> Bound<'py, PyArray1<i64>> {
    PyArray1::from_vec(py, v.iter().map(|&i| i as i64).collect())
}

/// The Planetoid prefix of the only `ind.<name>.graph` file in `dir`, if exactly one.
fn planetoid_name(dir: &Path) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let f = e.file_name().to_string_lossy().into_owned();
            f.strip_prefix("ind.")?
                .strip_suffix(".graph")
                .map(str::to_string)
        })
        .collect();
    (names.len() == 1).then(|| names.remove(0))
}

/// Loads a dataset from files in any format the engine reads (the loaders of ``train_cora``
/// and ``train_reddit``'s ``--data-dir``): a Planetoid raw folder (``ind.<name>.*``; ``name``
/// is the prefix, found when the folder holds one), DGL's Reddit (``reddit_data.npz`` +
/// ``reddit_graph.npz``), an OGB node-property raw folder, a gnn-benchmark ``.npz`` (PyG's
/// CitationFull / Amazon / Coauthor), or an edge-list folder (``edges.txt`` + ``features.npy``
/// + ``labels.npy`` [+ ``train.npy``, ``val.npy``, ``test.npy``]). ``split_seed`` draws the
/// split of formats that carry none. The data's ``row_normalize`` follows the engine's
/// convention for the format (on for the citation formats, off for Reddit's).
#[pyfunction]
#[pyo3(signature = (path, name=None, split_seed=0))]
pub fn load(
    py: Python<'_>,
    path: PathBuf,
    name: Option<String>,
    split_seed: i128,
) -> PyResult<Data> {
    let split_seed: u64 = non_negative("split_seed", split_seed)?;
    if !path.exists() {
        return Err(PyFileNotFoundError::new_err(format!(
            "{}: no such file or folder",
            path.display()
        )));
    }
    let name = name
        .or_else(|| planetoid_name(&path))
        .unwrap_or_else(|| "data".to_string());
    let src = DataSource::Files {
        path,
        name,
        split_seed,
    };
    let loaded = py
        .detach(|| gnn_train::run::load(&src, true))
        .map_err(to_py)?;
    Ok(Data::from_dataset(loaded.dataset, !loaded.raw_features))
}

/// Generates the seeded Reddit-shaped graph (the engine's synthetic stand-in for Reddit:
/// 232,965 nodes at ``scale=1``, heavy-tailed degrees, 602 features, 41 classes with
/// learnable structure), as ``train_reddit`` does without ``--data-dir``.
#[pyfunction]
#[pyo3(signature = (scale=0.05, seed=0))]
pub fn reddit_shaped(py: Python<'_>, scale: f64, seed: i128) -> PyResult<Data> {
    let seed: u64 = non_negative("seed", seed)?;
    if !(scale > 0.0 && scale.is_finite()) {
        return Err(value_error(format!("scale = {scale}: it must be > 0")));
    }
    let src = DataSource::reddit_shaped(Some(scale), seed);
    let loaded = py
        .detach(|| gnn_train::run::load(&src, true))
        .map_err(to_py)?;
    Ok(Data::from_dataset(loaded.dataset, !loaded.raw_features))
}
