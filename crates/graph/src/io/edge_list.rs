//! A plain folder, for graphs that come as an edge list and numpy arrays:
//! - `edges.txt` or `edges.csv`: one edge `source target` per line, node ids from 0, separated
//!   by whitespace or a comma; blank lines and `#` comments are skipped, and a first line
//!   without numbers (`src,dst`) is taken as a header;
//! - `features.npy`: `[nodes, features]` floats, `f2`, `f4` or `f8` (read as f32; the node
//!   count comes from here);
//! - `labels.npy`: `[nodes]` integer classes;
//! - optional `train.npy`, `val.npy`, `test.npy`: boolean masks of length `nodes` (PyG's
//!   `train_mask`, ...) or arrays of node ids. Without them the split is
//!   [`Split::stratified`] (20 training and 30 validation nodes per class, from a seed).
//!
//! Writing one from PyG: `np.savetxt("edges.txt", data.edge_index.T.numpy(), fmt="%d")`,
//! `np.save("features.npy", data.x.numpy())`, `np.save("labels.npy", data.y.numpy())`,
//! `np.save("train.npy", data.train_mask.numpy())`, ...

use super::gnn_benchmark::{read_labels, TRAIN_PER_CLASS, VAL_PER_CLASS};
use super::npz::{read_npy, NpyData};
use crate::coo::{BuildOptions, Coo};
use crate::dataset::{Dataset, Features, Split};
use crate::error::{Error, Result};
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// The edge file of a folder: `edges.txt`, else `edges.csv`.
pub fn edge_file(dir: &Path) -> Option<PathBuf> {
    ["edges.txt", "edges.csv"]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.is_file())
}

/// Loads an edge-list folder (see the module docs). `build` decides how the edges become the
/// graph ([`BuildOptions::undirected`] for the usual undirected citation/co-purchase graphs);
/// `split_seed` draws the split when the folder has none. The dataset is named after the folder.
pub fn load_edge_list_dir(
    dir: impl AsRef<Path>,
    build: BuildOptions,
    split_seed: u64,
) -> Result<Dataset> {
    let dir = dir.as_ref();
    let fpath = dir.join("features.npy");
    let feat = read_npy(&fpath)?;
    let features = feat.to_dense_matrix(&fpath, "<npy>")?;
    let n = features.rows;

    let lpath = dir.join("labels.npy");
    let labels = read_labels(&read_npy(&lpath)?, &lpath, "<npy>", n)?;
    let num_classes = labels.iter().max().map_or(0, |&m| m as usize + 1);

    let epath = edge_file(dir).ok_or_else(|| {
        Error::io(
            dir.join("edges.txt"),
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no edges.txt or edges.csv in the folder",
            ),
        )
    })?;
    let (src, dst) = read_edges(&epath, n)?;
    let graph = Coo::new(n, src, dst)
        .and_then(|c| c.to_csr(build))
        .map_err(|e| Error::format(&epath, "edges", e.to_string()))?;

    let parts: Vec<_> = ["train", "val", "test"]
        .iter()
        .map(|p| dir.join(format!("{p}.npy")))
        .collect();
    let split = match parts.iter().filter(|p| p.is_file()).count() {
        0 => Split::stratified(&labels, TRAIN_PER_CLASS, VAL_PER_CLASS, split_seed),
        3 => Split {
            train: read_part(&parts[0], n)?,
            val: read_part(&parts[1], n)?,
            test: read_part(&parts[2], n)?,
        },
        _ => {
            let missing = parts.iter().find(|p| !p.is_file()).expect("one is missing");
            return Err(Error::io(
                missing,
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "a split needs all of train.npy, val.npy and test.npy (or none of them)",
                ),
            ));
        }
    };
    let name = super::file_name(dir, false, "edge-list");
    let ds = Dataset {
        name,
        graph,
        features: Features::Dense(features),
        labels,
        num_classes,
        split,
    };
    ds.validate()?;
    Ok(ds)
}

/// Reads `source target` lines; ids must be below `n`.
fn read_edges(path: &Path, n: usize) -> Result<(Vec<u32>, Vec<u32>)> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    let mut first = true;
    for (k, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|e| Error::io(path, e))?;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let is_header = first && !t.chars().any(|c| c.is_ascii_digit());
        first = false;
        if is_header {
            continue;
        }
        let field = || format!("line {}", k + 1);
        let mut it = t
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty());
        let mut id = |what: &str| -> Result<u32> {
            let s = it
                .next()
                .ok_or_else(|| Error::format(path, field(), format!("`{t}` has no {what} id")))?;
            s.parse::<u64>()
                .ok()
                .filter(|&v| v < n as u64)
                .map(|v| v as u32)
                .ok_or_else(|| {
                    Error::format(
                        path,
                        field(),
                        format!(
                            "{what} `{s}` is not a node id in 0..{n} (features.npy has {n} rows)"
                        ),
                    )
                })
        };
        let (s, d) = (id("source")?, id("target")?);
        if let Some(extra) = it.next() {
            return Err(Error::format(
                path,
                field(),
                format!("`{t}`: unexpected third column `{extra}` (edge weights are not read)"),
            ));
        }
        src.push(s);
        dst.push(d);
    }
    Ok((src, dst))
}

/// A split part: a boolean mask of length `n` or node ids below `n`.
fn read_part(path: &Path, n: usize) -> Result<Vec<u32>> {
    let a = read_npy(path)?;
    if let NpyData::Bool(mask) = &a.data {
        if a.shape != [n] {
            return Err(Error::format(
                path,
                "<npy>",
                format!("mask of shape {:?}, expected [{n}]", a.shape),
            ));
        }
        return Ok((0..n as u32).filter(|&i| mask[i as usize]).collect());
    }
    if a.shape.len() != 1 {
        return Err(Error::format(
            path,
            "<npy>",
            format!(
                "shape {:?}, expected a mask [{n}] or a list of node ids",
                a.shape
            ),
        ));
    }
    a.to_ids(path, "<npy>", Some(n))
}
