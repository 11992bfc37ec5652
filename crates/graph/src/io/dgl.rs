//! DGL's Reddit files: `reddit_data.npz` (`feature` f32 `[N, 602]`, `label` int `[N]`,
//! `node_types` int `[N]` with 1/2/3 = train/val/test) and `reddit_graph.npz` (a
//! `scipy.sparse.save_npz` COO matrix: `row`, `col`, `shape`, `format`; CSR is accepted too).
//!
//! Edges go `row -> col` as DGL's `from_scipy` reads them; the graph is kept as stored (it
//! is symmetric and has self loops), rows sorted and de-duplicated.

use super::npz::NpzArchive;
use crate::coo::{BuildOptions, Coo};
use crate::csr::Csr;
use crate::dataset::{Dataset, Features, Split};
use crate::error::{Error, Result};
use std::path::Path;

/// The name of the dataset [`load_dgl_reddit`] loads.
pub const NAME: &str = "reddit";

/// Loads `<dir>/reddit_data.npz` and `<dir>/reddit_graph.npz`.
pub fn load_dgl_reddit(dir: impl AsRef<Path>) -> Result<Dataset> {
    let dir = dir.as_ref();
    let pdata = dir.join("reddit_data.npz");
    let pgraph = dir.join("reddit_graph.npz");
    let mut data = NpzArchive::open(&pdata)?;

    let feat = data.read("feature")?;
    let features = feat.to_dense_matrix(&pdata, "feature")?;
    let (n, dim) = (features.rows, features.cols);
    if let Some(p) = features.data.iter().position(|v| !v.is_finite()) {
        return Err(Error::format(
            &pdata,
            "feature",
            format!(
                "node {} feature {} is {} (features must be finite)",
                p / dim.max(1),
                p % dim.max(1),
                features.data[p]
            ),
        ));
    }
    let ints = |arr: super::npz::NpyArray, field: &str| -> Result<Vec<i64>> {
        if arr.shape != [n] {
            return Err(Error::format(
                &pdata,
                field,
                format!("shape {:?}, expected [{n}] (one per node)", arr.shape),
            ));
        }
        arr.to_i64()
            .map_err(|k| Error::format(&pdata, field, format!("entry {k} is not an integer")))
    };
    let label = ints(data.read("label")?, "label")?;
    let types = ints(data.read("node_types")?, "node_types")?;
    if let Some((i, &l)) = label
        .iter()
        .enumerate()
        .find(|(_, &l)| l < 0 || l > i32::MAX as i64)
    {
        return Err(Error::format(
            &pdata,
            "label",
            format!("node {i} has label {l}"),
        ));
    }
    let num_classes = label.iter().max().map_or(0, |&m| m as usize + 1);
    let mut split = Split::default();
    for (i, &t) in types.iter().enumerate() {
        match t {
            1 => split.train.push(i as u32),
            2 => split.val.push(i as u32),
            3 => split.test.push(i as u32),
            other => {
                return Err(Error::format(
                    &pdata,
                    "node_types",
                    format!("node {i} has type {other}, expected 1, 2 or 3"),
                ))
            }
        }
    }

    let graph = load_scipy_graph(&pgraph, n)?;
    let ds = Dataset {
        name: NAME.into(),
        graph,
        features: Features::Dense(features),
        labels: label.into_iter().map(|l| l as i32).collect(),
        num_classes,
        split,
    };
    ds.validate()?;
    Ok(ds)
}

/// Reads a square `scipy.sparse.save_npz` matrix (COO or CSR) as a graph over `n` nodes with
/// edges `row -> col`.
pub fn load_scipy_graph(path: &Path, n: usize) -> Result<Csr> {
    let mut g = NpzArchive::open(path)?;
    let shape = g
        .read("shape")?
        .to_i64()
        .map_err(|_| Error::format(path, "shape", "not integers"))?;
    if shape.len() != 2 || shape[0] != shape[1] || shape[0] as usize != n {
        return Err(Error::format(
            path,
            "shape",
            format!("{shape:?}, expected [{n}, {n}] to match the node data"),
        ));
    }
    let names = g.names();
    // Integer array `field`; entries must be below `bound` when given (node ids).
    let index = |g: &mut NpzArchive, field: &str, bound: Option<usize>| -> Result<Vec<u32>> {
        g.read(field)?.to_ids(path, field, bound)
    };
    let coo = if names.iter().any(|s| s == "row") {
        let row = index(&mut g, "row", Some(n))?;
        let col = index(&mut g, "col", Some(n))?;
        if row.len() != col.len() {
            return Err(Error::format(
                path,
                "col",
                format!("{} entries, `row` has {}", col.len(), row.len()),
            ));
        }
        Coo::new(n, row, col).map_err(|e| Error::format(path, "row/col", e.to_string()))?
    } else if names.iter().any(|s| s == "indptr") {
        let indptr = g.read("indptr")?.to_offsets(path, "indptr")?;
        let indices = index(&mut g, "indices", Some(n))?;
        let csr = Csr::from_row_ptr(n, n, indptr, indices)
            .map_err(|e| Error::format(path, "indptr/indices", e.to_string()))?;
        // scipy CSR rows are sources here (edges row -> col).
        csr.to_coo().reversed()
    } else {
        return Err(Error::format(
            path,
            "<archive>",
            format!(
                "neither COO (`row`, `col`) nor CSR (`indptr`, `indices`) arrays; found {names:?}"
            ),
        ));
    };
    if names.iter().any(|s| s == "data") {
        let d = g.read("data")?;
        if d.len() != coo.len() {
            return Err(Error::format(
                path,
                "data",
                format!("{} values for {} edges", d.len(), coo.len()),
            ));
        }
    }
    coo.to_csr(BuildOptions::default())
        .map_err(|e| Error::format(path, "row/col", e.to_string()))
}
