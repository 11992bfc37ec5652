//! The gnn-benchmark `.npz` format (Shchur et al., 2018), which PyG's `CitationFull`,
//! `Amazon` and `Coauthor` datasets download (`cora_ml.npz`, `amazon_electronics_computers.npz`,
//! `ms_academic_cs.npz`, ...):
//! - `adj_data`, `adj_indices`, `adj_indptr`, `adj_shape`: the adjacency as a scipy CSR matrix;
//! - `attr_data`, `attr_indices`, `attr_indptr`, `attr_shape` (sparse) or `attr_matrix`
//!   (dense): node attributes;
//! - `labels`: one class per node.
//!
//! Read as PyG's `read_npz` reads it: self loops removed, the graph made undirected, and
//! attributes binarised (`x[x > 0] = 1`). Other members (`idx_to_node`, `class_names`, ...)
//! are not read. The files carry no split: [`Split::stratified`] draws the paper's 20 / 30 /
//! rest per class from a seed.

use super::npz::{NpyArray, NpzArchive};
use crate::coo::BuildOptions;
use crate::csr::Csr;
use crate::dataset::{Dataset, DenseMatrix, Features, SparseRows, Split};
use crate::error::{Error, Result};
use std::path::Path;

/// Training nodes per class in the gnn-benchmark protocol.
pub const TRAIN_PER_CLASS: usize = 20;
/// Validation nodes per class in the gnn-benchmark protocol.
pub const VAL_PER_CLASS: usize = 30;

/// Loads one gnn-benchmark `.npz` file; the split is [`Split::stratified`] with 20 training
/// and 30 validation nodes per class, drawn from `split_seed`. The dataset is named after the
/// file (`amazon_electronics_computers`).
pub fn load_gnn_benchmark(path: impl AsRef<Path>, split_seed: u64) -> Result<Dataset> {
    let path = path.as_ref();
    let mut z = NpzArchive::open(path)?;
    let names = z.names();
    let has = |n: &str| names.iter().any(|s| s == n);

    let shape = read_shape(&mut z, path, "adj_shape")?;
    let n = shape[0];
    if shape[1] != n {
        return Err(Error::format(
            path,
            "adj_shape",
            format!("{shape:?}: the adjacency must be square"),
        ));
    }
    let adj = read_csr(&mut z, path, "adj", n, n)?;
    // scipy CSR rows are sources; the graph is made undirected anyway (as PyG does).
    let graph = adj
        .to_coo()
        .to_csr(BuildOptions::undirected())
        .map_err(|e| Error::format(path, "adj_indices", e.to_string()))?;

    let features = if has("attr_data") {
        let shape = read_shape(&mut z, path, "attr_shape")?;
        if shape[0] != n {
            return Err(Error::format(
                path,
                "attr_shape",
                format!("{shape:?}: {} attribute rows for {n} nodes", shape[0]),
            ));
        }
        let pattern = read_csr(&mut z, path, "attr", n, shape[1])?;
        let values = binarised(&z.read("attr_data")?, path, "attr_data")?;
        if values.len() != pattern.nnz() {
            return Err(Error::format(
                path,
                "attr_data",
                format!(
                    "{} values for {} stored entries",
                    values.len(),
                    pattern.nnz()
                ),
            ));
        }
        Features::Sparse(SparseRows { pattern, values })
    } else if has("attr_matrix") {
        let a = z.read("attr_matrix")?;
        if a.shape.len() != 2 || a.shape[0] != n {
            return Err(Error::format(
                path,
                "attr_matrix",
                format!("shape {:?}, expected [{n}, features]", a.shape),
            ));
        }
        let cols = a.shape[1];
        Features::Dense(DenseMatrix::new(
            n,
            cols,
            binarised(&a, path, "attr_matrix")?,
        )?)
    } else {
        return Err(Error::format(
            path,
            "attr_data",
            format!(
                "no node attributes: neither `attr_data` (sparse) nor `attr_matrix` (dense); \
                 found {names:?}"
            ),
        ));
    };

    if !has("labels") && has("labels_data") {
        return Err(Error::format(
            path,
            "labels_data",
            "multi-label (sparse) labels are not supported; node classification needs one \
             class per node in `labels`",
        ));
    }
    let labels = read_labels(&z.read("labels")?, path, "labels", n)?;
    let num_classes = labels.iter().max().map_or(0, |&m| m as usize + 1);
    let split = Split::stratified(&labels, TRAIN_PER_CLASS, VAL_PER_CLASS, split_seed);
    let name = super::file_name(path, true, "gnn-benchmark");
    let ds = Dataset {
        name,
        graph,
        features,
        labels,
        num_classes,
        split,
    };
    ds.validate()?;
    Ok(ds)
}

/// A 2-entry `*_shape` array.
fn read_shape(z: &mut NpzArchive, path: &Path, field: &str) -> Result<[usize; 2]> {
    let v = z.read(field)?.to_ids(path, field, None)?;
    match v[..] {
        [r, c] => Ok([r as usize, c as usize]),
        _ => Err(Error::format(
            path,
            field,
            format!("{v:?}, expected [rows, cols]"),
        )),
    }
}

/// The CSR pattern stored as `<prefix>_indptr` / `<prefix>_indices` (`<prefix>_data` is
/// checked for its length by the caller when its values matter).
fn read_csr(
    z: &mut NpzArchive,
    path: &Path,
    prefix: &str,
    rows: usize,
    cols: usize,
) -> Result<Csr> {
    let (fp, fi) = (format!("{prefix}_indptr"), format!("{prefix}_indices"));
    let indptr = z.read(&fp)?.to_offsets(path, &fp)?;
    let indices = z.read(&fi)?.to_ids(path, &fi, Some(cols))?;
    Csr::from_row_ptr(rows, cols, indptr, indices)
        .map_err(|e| Error::format(path, format!("{fp}/{fi}"), e.to_string()))
}

/// Attribute values with PyG's binarisation (`x > 0` becomes 1), refusing NaN/Inf.
fn binarised(a: &NpyArray, path: &Path, field: &str) -> Result<Vec<f32>> {
    let mut v = a.to_f32();
    if let Some(k) = v.iter().position(|x| !x.is_finite()) {
        return Err(Error::format(
            path,
            field,
            format!("entry {k} is {} (attributes must be finite)", v[k]),
        ));
    }
    v.iter_mut().filter(|x| **x > 0.0).for_each(|x| *x = 1.0);
    Ok(v)
}

/// One non-negative class per node.
pub(crate) fn read_labels(a: &NpyArray, path: &Path, field: &str, n: usize) -> Result<Vec<i32>> {
    if a.shape != [n] {
        return Err(Error::format(
            path,
            field,
            format!("shape {:?}, expected [{n}] (one class per node)", a.shape),
        ));
    }
    let v = a
        .to_i64()
        .map_err(|k| Error::format(path, field, format!("entry {k} is not an integer")))?;
    // The class count is the largest label + 1; every label must fall in 0..count, and the
    // count must not exceed the nodes (a stray huge label would size a classifier the machine
    // cannot hold).
    let Some(&max) = v.iter().max() else {
        return Ok(Vec::new());
    };
    if max >= n as i64 {
        let i = v.iter().position(|&l| l == max).unwrap_or(0);
        return Err(Error::format(
            path,
            field,
            format!(
                "label {max} at node {i} would make {} classes for {n} nodes (class ids are \
                 0..classes, at most one class per node)",
                max as i128 + 1
            ),
        ));
    }
    if let Some((i, &l)) = v.iter().enumerate().find(|(_, &l)| l < 0) {
        let problem = if max < 0 {
            format!("label {l} at node {i} is negative, as every label (class ids count from 0)")
        } else {
            format!(
                "label {l} at node {i} outside 0..{c} ({c} classes, from the largest label {max})",
                c = max + 1
            )
        };
        return Err(Error::format(path, field, problem));
    }
    // 0 <= l <= max < n <= usize: each fits an i32 when n does.
    v.iter()
        .map(|&l| {
            i32::try_from(l).map_err(|_| {
                Error::format(path, field, format!("label {l} is not a 32-bit class id"))
            })
        })
        .collect()
}
