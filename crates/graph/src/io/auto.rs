//! One door for every on-disk format: [`detect`] looks at what a path holds, [`load_auto`]
//! loads it. What `--data-dir` uses in the examples.
//!
//! | the path holds | format |
//! |---|---|
//! | `graph.gnncsr`, or is a file starting with `GNNCSR` | gnn's binary CSR ([`super::binary`]) |
//! | `ind.<name>.x`, `ind.<name>.graph`, ... | Planetoid (PyG's `Planetoid/<Name>/raw`) |
//! | `reddit_data.npz` + `reddit_graph.npz` | DGL's Reddit |
//! | `raw/edge.csv.gz` | OGB node-property raw folder |
//! | a `.npz` file with `adj_indptr`, or a folder with `<name>.npz` or a single such `.npz` | gnn-benchmark (PyG's CitationFull / Amazon / Coauthor) |
//! | `edges.txt` or `edges.csv` + `features.npy` + `labels.npy` | edge-list folder |

use super::binary::{is_binary_csr, load_binary, FILE_NAME};
use super::edge_list::{edge_file, load_edge_list_dir};
use super::gnn_benchmark::load_gnn_benchmark;
use super::npz::NpzArchive;
use crate::coo::BuildOptions;
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// A dataset format found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// Planetoid raw files `ind.<name>.*` in this folder.
    Planetoid,
    /// DGL's `reddit_data.npz` / `reddit_graph.npz` in this folder.
    DglReddit,
    /// OGB node-property root folder (`raw/`, `split/`).
    Ogb,
    /// This gnn-benchmark `.npz` file.
    GnnBenchmark(PathBuf),
    /// Edge-list folder.
    EdgeList,
    /// This file in gnn's binary CSR format.
    Binary(PathBuf),
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Format::Planetoid => write!(f, "Planetoid"),
            Format::DglReddit => write!(f, "DGL Reddit"),
            Format::Ogb => write!(f, "OGB node-property"),
            Format::GnnBenchmark(p) => write!(f, "gnn-benchmark npz ({})", p.display()),
            Format::EdgeList => write!(f, "edge list"),
            Format::Binary(p) => write!(f, "binary CSR ({})", p.display()),
        }
    }
}

impl Format {
    /// The name the dataset at `path` is loaded under, which its load errors call it:
    /// Planetoid's prefix `name`, `reddit` for DGL's files, the folder's name for OGB and
    /// edge-list folders, the file's stem for gnn-benchmark, the folder's name (or the file's
    /// stem) for the binary format (`name` is not used by the last four).
    pub fn dataset_name(&self, path: &Path, name: &str) -> String {
        match self {
            Format::Planetoid => name.to_string(),
            Format::DglReddit => super::dgl::NAME.to_string(),
            Format::Ogb => super::file_name(path, false, "ogb"),
            Format::GnnBenchmark(file) => super::file_name(file, true, "gnn-benchmark"),
            Format::EdgeList => super::file_name(path, false, "edge-list"),
            Format::Binary(_) => super::file_name(path, !path.is_dir(), "binary"),
        }
    }
}

/// True when `path` is a `.npz` archive holding a gnn-benchmark adjacency.
fn is_gnn_benchmark(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "npz")
        && NpzArchive::open(path).is_ok_and(|z| z.names().iter().any(|n| n == "adj_indptr"))
}

/// Which format `path` holds; `name` is the dataset name (Planetoid's file prefix, the
/// gnn-benchmark file stem). The error lists what was looked for.
pub fn detect(path: &Path, name: &str) -> Result<Format> {
    if path.is_file() {
        if is_binary_csr(path) {
            return Ok(Format::Binary(path.to_path_buf()));
        }
        if is_gnn_benchmark(path) {
            return Ok(Format::GnnBenchmark(path.to_path_buf()));
        }
        return Err(Error::format(
            path,
            "<file>",
            "neither gnn's binary CSR nor a gnn-benchmark .npz (no `adj_indptr` array); pass a \
             folder for the other formats",
        ));
    }
    if !path.is_dir() {
        return Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or folder"),
        ));
    }
    if path.join(FILE_NAME).is_file() {
        return Ok(Format::Binary(path.join(FILE_NAME)));
    }
    if path.join(format!("ind.{name}.graph")).is_file() {
        return Ok(Format::Planetoid);
    }
    if path.join("reddit_data.npz").is_file() && path.join("reddit_graph.npz").is_file() {
        return Ok(Format::DglReddit);
    }
    if path.join("raw").join("edge.csv.gz").is_file() {
        return Ok(Format::Ogb);
    }
    if edge_file(path).is_some() {
        return Ok(Format::EdgeList);
    }
    let named = path.join(format!("{name}.npz"));
    if is_gnn_benchmark(&named) {
        return Ok(Format::GnnBenchmark(named));
    }
    let mut npz: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| Error::io(path, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_gnn_benchmark(p))
        .collect();
    npz.sort();
    match npz.len() {
        1 => Ok(Format::GnnBenchmark(npz.remove(0))),
        0 => Err(Error::format(
            path,
            "<folder>",
            format!(
                "no dataset found: looked for gnn's binary `{FILE_NAME}`, Planetoid \
                 `ind.{name}.graph`, DGL \
                 `reddit_data.npz` + `reddit_graph.npz`, OGB `raw/edge.csv.gz`, an edge list \
                 `edges.txt`/`edges.csv`, and gnn-benchmark `.npz` files"
            ),
        )),
        _ => Err(Error::format(
            path,
            "<folder>",
            format!(
                "{} gnn-benchmark files and none named `{name}.npz`; name one of them or \
                 give its file: {:?}",
                npz.len(),
                npz.iter().filter_map(|p| p.file_name()).collect::<Vec<_>>()
            ),
        )),
    }
}

/// Loads whatever [`detect`] finds at `path`. Formats without a split of their own
/// (gnn-benchmark; edge lists without split files) get [`crate::Split::stratified`] from
/// `split_seed`; Planetoid, OGB and edge lists are read as undirected graphs without self
/// loops, DGL Reddit and the binary format as stored.
pub fn load_auto(path: impl AsRef<Path>, name: &str, split_seed: u64) -> Result<(Dataset, Format)> {
    let path = path.as_ref();
    let format = detect(path, name)?;
    let ds = match &format {
        Format::Planetoid => super::planetoid::load_planetoid(path, name)?,
        Format::DglReddit => super::dgl::load_dgl_reddit(path)?,
        Format::Ogb => super::ogb::load_ogb_node(path, None, BuildOptions::undirected())?,
        Format::GnnBenchmark(file) => load_gnn_benchmark(file, split_seed)?,
        Format::EdgeList => load_edge_list_dir(path, BuildOptions::undirected(), split_seed)?,
        Format::Binary(file) => load_binary(file)?.0,
    };
    Ok((ds, format))
}
