//! OGB node-property raw folders, as `ogb` downloads them:
//!
//! ```text
//! <root>/raw/edge.csv.gz          "src,dst" per line
//! <root>/raw/node-feat.csv.gz     one comma-separated float row per node
//! <root>/raw/node-label.csv.gz    one label per line ("nan" = unlabeled)
//! <root>/raw/num-node-list.csv.gz optional: the node count
//! <root>/split/<scheme>/{train,valid,test}.csv.gz   one node id per line
//! ```
//!
//! The graph is symmetrised, de-duplicated and stripped of self loops by default (how
//! ogbn-arxiv is trained full-batch in PyG's and OGB's examples).

use crate::coo::{BuildOptions, Coo};
use crate::dataset::{Dataset, DenseMatrix, Features, Split};
use crate::error::{Error, Result};
use flate2::read::GzDecoder;
use rayon::prelude::*;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Loads an OGB node-property dataset from its root folder. `split` names the folder under
/// `split/` (`None`: the only one present). `opts` controls how the edge list becomes a CSR.
pub fn load_ogb_node(
    root: impl AsRef<Path>,
    split: Option<&str>,
    opts: BuildOptions,
) -> Result<Dataset> {
    let root = root.as_ref();
    let raw = root.join("raw");
    let name = super::file_name(root, false, "ogb");

    let pfeat = raw.join("node-feat.csv.gz");
    let rows: Vec<Vec<f32>> = parse_lines(&pfeat, |line| {
        line.split(',')
            .map(|t| {
                t.trim()
                    .parse::<f32>()
                    .map_err(|_| format!("`{t}` is not a number"))
            })
            .collect()
    })?;
    let n_feat_rows = rows.len();
    let dim = rows.first().map_or(0, Vec::len);
    if let Some(k) = rows.iter().position(|r| r.len() != dim) {
        return Err(Error::format(
            &pfeat,
            format!("line {}", k + 1),
            format!("{} values, line 1 has {dim}", rows[k].len()),
        ));
    }
    let pnum = raw.join("num-node-list.csv.gz");
    let n = if pnum.exists() {
        let v: Vec<usize> = parse_lines(&pnum, |l| {
            l.trim()
                .parse::<usize>()
                .map_err(|_| format!("`{l}` is not a count"))
        })?;
        let n = *v
            .first()
            .ok_or_else(|| Error::format(&pnum, "line 1", "empty file"))?;
        if n != n_feat_rows {
            return Err(Error::format(
                &pfeat,
                "rows",
                format!("{n_feat_rows} feature rows, num-node-list says {n} nodes"),
            ));
        }
        n
    } else {
        n_feat_rows
    };
    let features = DenseMatrix::new(n, dim, rows.concat())?;

    let plabel = raw.join("node-label.csv.gz");
    let labels: Vec<i32> = parse_lines(&plabel, |l| {
        let t = l.trim();
        if t.eq_ignore_ascii_case("nan") {
            return Ok(-1);
        }
        let x: f64 = t.parse().map_err(|_| format!("`{t}` is not a label"))?;
        if x < 0.0 || x.fract() != 0.0 || x > i32::MAX as f64 {
            return Err(format!("`{t}` is not a class id"));
        }
        Ok(x as i32)
    })?;
    if labels.len() != n {
        return Err(Error::format(
            &plabel,
            "rows",
            format!("{} labels for {n} nodes", labels.len()),
        ));
    }
    let num_classes = labels
        .iter()
        .copied()
        .max()
        .map_or(0, |m| (m + 1).max(0) as usize);

    let pedge = raw.join("edge.csv.gz");
    let edges: Vec<(u32, u32)> = parse_lines(&pedge, |l| {
        let mut it = l.split(',');
        let mut id = || -> std::result::Result<u32, String> {
            let t = it.next().ok_or("expected `src,dst`")?.trim();
            let v: u64 = t.parse().map_err(|_| format!("`{t}` is not a node id"))?;
            if v as usize >= n {
                return Err(format!("node id {v} is outside 0..{n}"));
            }
            Ok(v as u32)
        };
        Ok((id()?, id()?))
    })?;
    let (src, dst): (Vec<u32>, Vec<u32>) = edges.into_iter().unzip();
    let graph = Coo::new(n, src, dst)
        .and_then(|c| c.to_csr(opts))
        .map_err(|e| Error::format(&pedge, "edges", e.to_string()))?;

    let split_dir = match split {
        Some(s) => root.join("split").join(s),
        None => only_subdir(&root.join("split"))?,
    };
    let ids = |f: &str| -> Result<Vec<u32>> {
        let p = split_dir.join(format!("{f}.csv.gz"));
        parse_lines(&p, |l| {
            let v: usize = l
                .trim()
                .parse()
                .map_err(|_| format!("`{}` is not a node id", l.trim()))?;
            if v >= n {
                return Err(format!("node id {v} is outside 0..{n}"));
            }
            Ok(v as u32)
        })
    };
    let ds = Dataset {
        name,
        graph,
        features: Features::Dense(features),
        labels,
        num_classes,
        split: Split {
            train: ids("train")?,
            val: ids("valid")?,
            test: ids("test")?,
        },
    };
    ds.validate()?;
    Ok(ds)
}

fn only_subdir(dir: &Path) -> Result<PathBuf> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let subdirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    match subdirs.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(Error::format(dir, "split", "no split scheme folder")),
        many => Err(Error::format(
            dir,
            "split",
            format!("{} split schemes; name one of them", many.len()),
        )),
    }
}

/// Decompresses a `.csv.gz` and parses its non-empty lines in parallel (order kept). Errors
/// name the file and the 1-based line.
pub(crate) fn parse_lines<T: Send>(
    path: &Path,
    parse: impl Fn(&str) -> std::result::Result<T, String> + Sync,
) -> Result<Vec<T>> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut text = String::new();
    GzDecoder::new(f)
        .read_to_string(&mut text)
        .map_err(|e| Error::format(path, "<gzip>", format!("cannot decompress: {e}")))?;
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    lines
        .par_iter()
        .map(|&(k, l)| parse(l).map_err(|e| Error::format(path, format!("line {}", k + 1), e)))
        .collect()
}
