//! Planetoid raw files as the GCN paper's code (tkipf/gcn) and PyG distribute them:
//! `ind.<name>.{x,y,tx,ty,allx,ally,graph}` (Python-2 pickles of scipy CSR matrices, numpy
//! arrays and a `defaultdict(list)`) and `ind.<name>.test.index` (text, one id per line).
//!
//! Assembly follows `gcn/utils.py::load_data`:
//! - nodes `0..allx.rows` take `allx`/`ally`; the k-th row of `tx`/`ty` belongs to node
//!   `test.index[k]`;
//! - when the test ids have gaps (CiteSeer), the missing ids become isolated nodes with zero
//!   features (the reference code's `tx_extended`);
//! - labels are the argmax of the one-hot rows (all-zero rows give 0, as in PyG);
//! - split: train = `0..y.rows`, val = the next 500 ids, test = the sorted test ids;
//! - the graph is symmetrised, de-duplicated and stripped of self loops (Kipf builds an
//!   undirected networkx graph; PyG removes self loops and coalesces).

use super::pickle::{self, Value};
use crate::coo::{BuildOptions, Coo};
use crate::csr::Csr;
use crate::dataset::{Dataset, Features, SparseRows, Split};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Loads `<dir>/ind.<name>.*`. `name` is the file prefix (`cora`, `citeseer`, `pubmed`).
pub fn load_planetoid(dir: impl AsRef<Path>, name: &str) -> Result<Dataset> {
    let dir = dir.as_ref();
    let file = |suffix: &str| dir.join(format!("ind.{name}.{suffix}"));
    let csr_of = |suffix: &str| -> Result<(PathBuf, pickle::CsrMatrix)> {
        let p = file(suffix);
        let v = read_pickle(&p)?;
        let m = pickle::to_csr_matrix(&v).map_err(|e| Error::format(&p, suffix, e))?;
        Ok((p, m))
    };
    let arr_of = |suffix: &str| -> Result<(PathBuf, pickle::NdArray)> {
        let p = file(suffix);
        let v = read_pickle(&p)?;
        let a = pickle::to_ndarray(&v).map_err(|e| Error::format(&p, suffix, e))?;
        if a.shape.len() != 2 {
            return Err(Error::format(
                &p,
                suffix,
                format!("expected a 2-D one-hot label array, shape is {:?}", a.shape),
            ));
        }
        Ok((p, a))
    };

    let (px, x) = csr_of("x")?;
    let (_, tx) = csr_of("tx")?;
    let (pallx, allx) = csr_of("allx")?;
    let (py, y) = arr_of("y")?;
    let (pty, ty) = arr_of("ty")?;
    let (pally, ally) = arr_of("ally")?;
    let ptest = file("test.index");
    let test_index = read_index(&ptest)?;
    let pgraph = file("graph");
    let graph = read_pickle(&pgraph)?;

    let dim = allx.shape.1;
    for (p, m, f) in [(&px, &x, "x"), (&pallx, &tx, "tx")] {
        if m.shape.1 != dim {
            return Err(Error::format(
                p,
                f,
                format!("{} feature columns, allx has {dim}", m.shape.1),
            ));
        }
    }
    let classes = ally.shape[1];
    for (p, a, f) in [(&py, &y, "y"), (&pty, &ty, "ty")] {
        if a.shape[1] != classes {
            return Err(Error::format(
                p,
                f,
                format!("{} classes, ally has {classes}", a.shape[1]),
            ));
        }
    }
    if y.shape[0] != x.shape.0 {
        return Err(Error::format(
            &py,
            "y",
            format!("{} rows, x has {}", y.shape[0], x.shape.0),
        ));
    }
    if ally.shape[0] != allx.shape.0 {
        return Err(Error::format(
            &pally,
            "ally",
            format!("{} rows, allx has {}", ally.shape[0], allx.shape.0),
        ));
    }
    if ty.shape[0] != tx.shape.0 || test_index.len() != tx.shape.0 {
        return Err(Error::format(
            &ptest,
            "test.index",
            format!(
                "{} test ids, tx has {} rows and ty {}",
                test_index.len(),
                tx.shape.0,
                ty.shape[0]
            ),
        ));
    }
    let n_all = allx.shape.0;
    let mut sorted = test_index.clone();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::format(
            &ptest,
            "test.index",
            format!("id {} appears twice", w[0]),
        ));
    }
    let n = match (sorted.first(), sorted.last()) {
        (Some(&lo), Some(&hi)) => {
            if lo != n_all {
                return Err(Error::format(
                    &ptest,
                    "test.index",
                    format!("smallest test id is {lo}, expected allx's row count {n_all}"),
                ));
            }
            // Test ids may leave gaps (CiteSeer: 15 missing ids become isolated nodes), but
            // never more gaps than test rows: the node count comes from the largest id, so a
            // stray huge id must not size the graph.
            let span = hi - lo + 1;
            if span > 2 * sorted.len() {
                return Err(Error::format(
                    &ptest,
                    "test.index",
                    format!(
                        "largest test id {hi} leaves {} gaps among {} test ids (at most as many \
                         gaps as test ids are accepted)",
                        span - sorted.len(),
                        sorted.len()
                    ),
                ));
            }
            hi + 1
        }
        _ => n_all,
    };
    if y.shape[0].saturating_add(500) > n_all {
        return Err(Error::format(
            &py,
            "y",
            format!(
                "{} training rows leave no room for 500 validation nodes among {n_all}",
                y.shape[0]
            ),
        ));
    }

    // Features: per node, the source row.
    enum Src {
        All(usize),
        Test(usize),
        Empty,
    }
    let mut src: Vec<Src> = (0..n)
        .map(|i| if i < n_all { Src::All(i) } else { Src::Empty })
        .collect();
    for (k, &id) in test_index.iter().enumerate() {
        src[id] = Src::Test(k);
    }
    let mut indptr = vec![0u32];
    let mut indices = Vec::new();
    let mut values = Vec::new();
    let mut labels = Vec::with_capacity(n);
    for s in &src {
        let (m, r, lab) = match *s {
            Src::All(i) => (Some(&allx), i, Some((&ally, i))),
            Src::Test(k) => (Some(&tx), k, Some((&ty, k))),
            Src::Empty => (None, 0, None),
        };
        if let Some(m) = m {
            for p in m.indptr[r] as usize..m.indptr[r + 1] as usize {
                indices.push(m.indices[p] as u32);
                values.push(m.data[p] as f32);
            }
        }
        indptr.push(indices.len() as u32);
        labels.push(lab.map_or(0, |(a, i)| argmax(&a.data[i * classes..(i + 1) * classes])));
    }
    let pattern = Csr::new_checked(n, dim, indptr, indices)
        .map_err(|e| Error::format(&pallx, "allx/tx", e.to_string()))?;

    // Graph.
    let adjacency = match &graph {
        Value::Dict(items) => items,
        Value::Object { items, .. } => items,
        _ => {
            return Err(Error::format(
                &pgraph,
                "graph",
                "expected a dict of adjacency lists",
            ))
        }
    };
    let (mut s_ids, mut d_ids) = (Vec::new(), Vec::new());
    for (k, v) in adjacency {
        let u = k
            .as_int()
            .ok_or_else(|| Error::format(&pgraph, "graph", format!("non-integer key {k:?}")))?;
        let Value::List(nbrs) = v else {
            return Err(Error::format(
                &pgraph,
                "graph",
                format!("neighbours of {u} are not a list"),
            ));
        };
        for w in nbrs {
            let w = w.as_int().ok_or_else(|| {
                Error::format(&pgraph, "graph", format!("non-integer neighbour of {u}"))
            })?;
            for id in [u, w] {
                if id < 0 || id as usize >= n {
                    return Err(Error::format(
                        &pgraph,
                        "graph",
                        format!("node id {id} is outside 0..{n}"),
                    ));
                }
            }
            s_ids.push(u as u32);
            d_ids.push(w as u32);
        }
    }
    let graph = Coo::new(n, s_ids, d_ids)
        .and_then(|c| c.to_csr(BuildOptions::undirected()))
        .map_err(|e| Error::format(&pgraph, "graph", e.to_string()))?;

    let n_train = y.shape[0];
    let ds = Dataset {
        name: name.to_string(),
        graph,
        features: Features::Sparse(SparseRows { pattern, values }),
        labels,
        num_classes: classes,
        split: Split {
            train: (0..n_train as u32).collect(),
            val: (n_train as u32..n_train as u32 + 500).collect(),
            test: sorted.iter().map(|&i| i as u32).collect(),
        },
    };
    ds.validate()?;
    Ok(ds)
}

fn argmax(row: &[f64]) -> i32 {
    let mut best = 0usize;
    for (j, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = j;
        }
    }
    best as i32
}

fn read_pickle(path: &Path) -> Result<Value> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    pickle::parse(&bytes).map_err(|e| Error::format(path, "pickle", e))
}

fn read_index(path: &Path) -> Result<Vec<usize>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(k, l)| {
            l.trim().parse::<usize>().map_err(|_| {
                Error::format(
                    path,
                    format!("line {}", k + 1),
                    format!("`{}` is not a node id", l.trim()),
                )
            })
        })
        .collect()
}
