//! Node-classification datasets: graph + features + labels + split.

use crate::csr::{Csr, RowPtr};
use crate::error::{Error, Result};
use rayon::prelude::*;
use serde::Serialize;

/// A dense row-major `rows x cols` f32 matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseMatrix {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// `rows * cols` values, row-major.
    pub data: Vec<f32>,
}

impl DenseMatrix {
    /// Checks `data.len() == rows * cols`.
    pub fn new(rows: usize, cols: usize, data: Vec<f32>) -> Result<Self> {
        if rows.checked_mul(cols) != Some(data.len()) {
            return Err(Error::InvalidStructure(format!(
                "dense matrix {rows}x{cols} needs {} values, got {}",
                rows as u128 * cols as u128,
                data.len()
            )));
        }
        Ok(Self { rows, cols, data })
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }
}

/// Sparse feature rows: a CSR pattern (`nodes x dim`) and its values.
#[derive(Debug, Clone, PartialEq)]
pub struct SparseRows {
    /// Pattern, one row per node, columns are feature ids.
    pub pattern: Csr,
    /// One value per stored entry.
    pub values: Vec<f32>,
}

/// Node features, dense or sparse (bag-of-words datasets stay sparse until used).
#[derive(Debug, Clone, PartialEq)]
pub enum Features {
    /// Dense rows.
    Dense(DenseMatrix),
    /// Sparse rows.
    Sparse(SparseRows),
}

impl Features {
    /// Number of nodes (rows).
    pub fn rows(&self) -> usize {
        match self {
            Features::Dense(d) => d.rows,
            Features::Sparse(s) => s.pattern.n_rows(),
        }
    }
    /// Feature width.
    pub fn cols(&self) -> usize {
        match self {
            Features::Dense(d) => d.cols,
            Features::Sparse(s) => s.pattern.n_cols(),
        }
    }
    /// `(node, feature, value)` of the first NaN or infinite value, in row-major order.
    pub fn first_non_finite(&self) -> Option<(usize, usize, f32)> {
        self.first_non_finite_in(0..self.rows())
    }

    /// [`Self::first_non_finite`] among the rows `rows` (which must exist).
    pub fn first_non_finite_in(&self, rows: std::ops::Range<usize>) -> Option<(usize, usize, f32)> {
        match self {
            Features::Dense(d) => {
                let c = d.cols.max(1);
                let start = rows.start * d.cols;
                let p = start + first_non_finite(&d.data[start..rows.end * d.cols])?;
                Some((p / c, p % c, d.data[p]))
            }
            Features::Sparse(s) => {
                let ptr = s.pattern.indptr();
                let start = ptr.get(rows.start);
                let p = start + first_non_finite(&s.values[start..ptr.get(rows.end)])?;
                let row = s.pattern.indptr().partition_point(|o| o <= p) - 1;
                Some((row, s.pattern.indices()[p] as usize, s.values[p]))
            }
        }
    }

    /// Dense copy (or the dense matrix itself).
    pub fn to_dense(&self) -> DenseMatrix {
        match self {
            Features::Dense(d) => d.clone(),
            Features::Sparse(s) => {
                let cols = s.pattern.n_cols();
                let mut data = vec![0f32; s.pattern.n_rows() * cols];
                data.par_chunks_mut(cols.max(1))
                    .enumerate()
                    .for_each(|(i, out)| {
                        for p in s.pattern.row_range(i) {
                            out[s.pattern.indices()[p] as usize] += s.values[p];
                        }
                    });
                DenseMatrix {
                    rows: s.pattern.n_rows(),
                    cols,
                    data,
                }
            }
        }
    }
    /// Rows `rows` as a dense matrix, each divided by its sum first when `row_normalize` (the
    /// values of [`Self::row_normalize`] then [`Self::to_dense`], sliced, without copying the
    /// other rows): one rank's share of the features in a multi-device run, or all of them.
    pub fn dense_rows(&self, rows: std::ops::Range<usize>, row_normalize: bool) -> DenseMatrix {
        // The row's sum when it divides the row (as `row_normalize` does: zero sums stay).
        let divisor = |vals: &[f32]| -> Option<f32> {
            let s: f32 = vals.iter().sum();
            (row_normalize && s != 0.0).then_some(s)
        };
        let cols = self.cols();
        let mut data = vec![0f32; rows.len() * cols];
        let start = rows.start;
        data.par_chunks_mut(cols.max(1))
            .enumerate()
            .for_each(|(i, out)| match self {
                Features::Dense(d) => {
                    let row = d.row(start + i);
                    let s = divisor(row);
                    out.iter_mut()
                        .zip(row)
                        .for_each(|(o, &v)| *o = s.map_or(v, |s| v / s));
                }
                Features::Sparse(sp) => {
                    let r = sp.pattern.row_range(start + i);
                    let s = divisor(&sp.values[r.clone()]);
                    for p in r {
                        let v = sp.values[p];
                        out[sp.pattern.indices()[p] as usize] += s.map_or(v, |s| v / s);
                    }
                }
            });
        DenseMatrix {
            rows: rows.len(),
            cols,
            data,
        }
    }

    /// Divides each row by its sum (rows summing to zero stay zero): the preprocessing of
    /// Kipf & Welling's GCN and PyG's `NormalizeFeatures`.
    pub fn row_normalize(&mut self) {
        fn norm(row: &mut [f32]) {
            let s: f32 = row.iter().sum();
            if s != 0.0 {
                row.iter_mut().for_each(|v| *v /= s);
            }
        }
        match self {
            Features::Dense(d) => d.data.par_chunks_mut(d.cols.max(1)).for_each(norm),
            Features::Sparse(s) => crate::csr::split_rows_mut(&mut s.values, s.pattern.indptr())
                .into_par_iter()
                .for_each(norm),
        }
    }
}

/// Position of the first NaN or infinite value, searched in parallel by blocks (a branch-free
/// scan of each block; a per-value parallel search costs ~10 ns a value).
fn first_non_finite(values: &[f32]) -> Option<usize> {
    const BLOCK: usize = 1 << 16;
    // All exponent bits set: infinite or NaN.
    let bad = |v: &f32| (v.to_bits() >> 23) & 0xff == 0xff;
    let block = values
        .par_chunks(BLOCK)
        .position_first(|c| c.iter().fold(false, |acc, v| acc | bad(v)))?;
    let start = block * BLOCK;
    values[start..].iter().position(bad).map(|p| start + p)
}

/// Train / validation / test node ids.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Split {
    /// Training nodes.
    pub train: Vec<u32>,
    /// Validation nodes.
    pub val: Vec<u32>,
    /// Test nodes.
    pub test: Vec<u32>,
}

impl Split {
    /// Seeded stratified split, the protocol of the gnn-benchmark paper (Shchur et al., 2018:
    /// 20 training and 30 validation nodes per class, the rest test): per class, the labeled
    /// nodes in a seeded random order give `train` nodes for training, the next `val` for
    /// validation and the rest for testing. A class with fewer than `train + val` nodes gives
    /// what it has, training first. Unlabeled nodes (`-1`) are in no set; ids are sorted.
    pub fn stratified(labels: &[i32], train: usize, val: usize, seed: u64) -> Split {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let classes = labels.iter().copied().max().map_or(0, |m| m.max(-1) + 1) as usize;
        let mut by_class = vec![Vec::new(); classes];
        for (i, &l) in labels.iter().enumerate() {
            if l >= 0 {
                by_class[l as usize].push(i as u32);
            }
        }
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut split = Split::default();
        for nodes in &mut by_class {
            nodes.shuffle(&mut rng);
            let a = train.min(nodes.len());
            let b = (a + val).min(nodes.len());
            split.train.extend_from_slice(&nodes[..a]);
            split.val.extend_from_slice(&nodes[a..b]);
            split.test.extend_from_slice(&nodes[b..]);
        }
        split.train.sort_unstable();
        split.val.sort_unstable();
        split.test.sort_unstable();
        split
    }
}

/// A node-classification dataset. Labels are `-1` for unlabeled nodes (e.g. CiteSeer's
/// padding nodes); every node of the split is labeled.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Name (`cora`, `reddit`, `synthetic-reddit@0.05`, ...).
    pub name: String,
    /// The graph as loaded (no self loops added; models derive what they need).
    pub graph: Csr,
    /// Node features.
    pub features: Features,
    /// One label per node, `-1` = unlabeled.
    pub labels: Vec<i32>,
    /// Number of classes.
    pub num_classes: usize,
    /// The split.
    pub split: Split,
}

/// One-line summary of a dataset, printed by loaders and examples.
#[derive(Debug, Clone, Serialize)]
pub struct DatasetSummary {
    /// Name.
    pub name: String,
    /// Nodes.
    pub nodes: usize,
    /// Stored directed edges.
    pub edges: usize,
    /// Feature width.
    pub features: usize,
    /// Classes.
    pub classes: usize,
    /// Split sizes.
    pub train: usize,
    /// Validation nodes.
    pub val: usize,
    /// Test nodes.
    pub test: usize,
}

impl std::fmt::Display for DatasetSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} nodes, {} edges, {} features, {} classes, split {}/{}/{}",
            self.name,
            self.nodes,
            self.edges,
            self.features,
            self.classes,
            self.train,
            self.val,
            self.test
        )
    }
}

impl Dataset {
    /// The same dataset with node `old` renamed `new_of_old[old]` (graph, feature rows,
    /// labels and split move together; split lists stay sorted). A GNN's predictions are
    /// permuted the same way, so a model trained on one order serves the other.
    pub fn permute(&self, new_of_old: &[u32]) -> Result<Dataset> {
        let graph = self.graph.permute(new_of_old)?;
        let n = self.num_nodes();
        let mut old_of_new = vec![0u32; n];
        for (old, &new) in new_of_old.iter().enumerate() {
            old_of_new[new as usize] = old as u32;
        }
        let features = match &self.features {
            Features::Dense(d) => {
                let mut data = vec![0f32; d.data.len()];
                data.par_chunks_mut(d.cols.max(1))
                    .zip(&old_of_new)
                    .for_each(|(row, &old)| row.copy_from_slice(d.row(old as usize)));
                Features::Dense(DenseMatrix::new(d.rows, d.cols, data)?)
            }
            Features::Sparse(sp) => {
                let mut indptr = RowPtr::with_capacity(sp.pattern.offset_width(), n + 1);
                indptr.push(0);
                let (mut indices, mut values) = (Vec::new(), Vec::new());
                for &old in &old_of_new {
                    let r = sp.pattern.row_range(old as usize);
                    indices.extend_from_slice(&sp.pattern.indices()[r.clone()]);
                    values.extend_from_slice(&sp.values[r]);
                    indptr.push(indices.len());
                }
                Features::Sparse(SparseRows {
                    pattern: Csr::from_row_ptr(n, sp.pattern.n_cols(), indptr, indices)?,
                    values,
                })
            }
        };
        let labels = old_of_new
            .iter()
            .map(|&old| self.labels[old as usize])
            .collect();
        let map = |ids: &[u32]| {
            let mut v: Vec<u32> = ids.iter().map(|&i| new_of_old[i as usize]).collect();
            v.sort_unstable();
            v
        };
        let ds = Dataset {
            name: self.name.clone(),
            graph,
            features,
            labels,
            num_classes: self.num_classes,
            split: Split {
                train: map(&self.split.train),
                val: map(&self.split.val),
                test: map(&self.split.test),
            },
        };
        ds.validate()?;
        Ok(ds)
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.graph.n_rows()
    }

    /// Checks that all parts agree: square graph, one feature row and label per node, labels
    /// below `num_classes`, split ids in range and labeled, no node in two split sets, and
    /// finite features.
    pub fn validate(&self) -> Result<()> {
        self.validate_rows(0..self.num_nodes())
    }

    /// [`Self::validate`] with the features checked for finite values only in the rows
    /// `rows` (the other checks are over everything): what one rank of a partitioned run
    /// uploads, without reading every other rank's features too. An error when `rows` lies
    /// outside the nodes.
    pub fn validate_rows(&self, rows: std::ops::Range<usize>) -> Result<()> {
        let bad = |problem: String| Error::InvalidDataset {
            name: self.name.clone(),
            problem,
        };
        let n = self.graph.n_rows();
        if self.graph.n_cols() != n {
            return Err(bad(format!(
                "graph is {}x{}, not square",
                n,
                self.graph.n_cols()
            )));
        }
        if self.features.rows() != n {
            return Err(bad(format!(
                "{} feature rows for {n} nodes",
                self.features.rows()
            )));
        }
        if self.labels.len() != n {
            return Err(bad(format!("{} labels for {n} nodes", self.labels.len())));
        }
        if self.num_classes > n.max(1) {
            // Bounds the model's output layer by the data: a stray huge label would otherwise
            // size a classifier the machine cannot hold.
            return Err(bad(format!(
                "{} classes for {n} nodes: at most one class per node (the largest label is {})",
                self.num_classes,
                self.labels.iter().max().copied().unwrap_or(-1)
            )));
        }
        let stored = match &self.features {
            Features::Dense(d) => (d.rows.checked_mul(d.cols), d.data.len()),
            Features::Sparse(s) => (Some(s.pattern.nnz()), s.values.len()),
        };
        if stored.0 != Some(stored.1) {
            return Err(bad(format!(
                "{} feature values for a {}x{} feature matrix",
                stored.1,
                self.features.rows(),
                self.features.cols()
            )));
        }
        if rows.start > rows.end || rows.end > n {
            return Err(bad(format!("rows {rows:?} outside the {n} nodes")));
        }
        if let Some((node, feature, v)) = self.features.first_non_finite_in(rows) {
            return Err(bad(format!(
                "feature {feature} of node {node} is {v} (features must be finite)"
            )));
        }
        if let Some((i, &l)) = self
            .labels
            .iter()
            .enumerate()
            .find(|(_, &l)| l < -1 || l >= self.num_classes as i32)
        {
            return Err(bad(format!(
                "label {l} at node {i} outside 0..{c} ({c} classes; -1 marks an unlabeled node)",
                c = self.num_classes
            )));
        }
        let mut seen = vec![0u8; n];
        for (set, ids) in [
            ("train", &self.split.train),
            ("val", &self.split.val),
            ("test", &self.split.test),
        ] {
            for &i in ids.iter() {
                let i = i as usize;
                if i >= n {
                    return Err(bad(format!("{set} node {i} is out of range ({n} nodes)")));
                }
                if self.labels[i] < 0 {
                    return Err(bad(format!("{set} node {i} has no label")));
                }
                if seen[i] != 0 {
                    return Err(bad(format!("node {i} appears twice in the split")));
                }
                seen[i] = 1;
            }
        }
        Ok(())
    }

    /// Summary for printing.
    pub fn summary(&self) -> DatasetSummary {
        DatasetSummary {
            name: self.name.clone(),
            nodes: self.num_nodes(),
            edges: self.graph.nnz(),
            features: self.features.cols(),
            classes: self.num_classes,
            train: self.split.train.len(),
            val: self.split.val.len(),
            test: self.split.test.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The old path: normalise a copy of every row, densify all, slice.
    fn reference(f: &Features, rows: std::ops::Range<usize>, normalize: bool) -> Vec<f32> {
        let mut f = f.clone();
        if normalize {
            f.row_normalize();
        }
        let d = f.to_dense();
        d.data[rows.start * d.cols..rows.end * d.cols].to_vec()
    }

    #[test]
    fn dense_rows_equal_normalise_densify_slice() {
        // Row 2 sums to zero (stays as is); the sparse pattern repeats a column in row 0.
        let dense = Features::Dense(
            DenseMatrix::new(
                4,
                3,
                vec![1., 2., 3., 0.5, 0., 0.25, 1., -1., 0., 3., 3., 3.],
            )
            .unwrap(),
        );
        let pattern = Csr::new_checked(4, 3, vec![0, 3, 4, 6, 6], vec![2, 0, 2, 1, 0, 1]).unwrap();
        let sparse = Features::Sparse(SparseRows {
            pattern,
            values: vec![0.3, 0.7, 0.1, 2.0, 1.5, -1.5],
        });
        for f in [&dense, &sparse] {
            for normalize in [false, true] {
                for rows in [0..4, 1..3, 2..2, 3..4] {
                    let got = f.dense_rows(rows.clone(), normalize);
                    assert_eq!((got.rows, got.cols), (rows.len(), 3));
                    assert_eq!(got.data, reference(f, rows, normalize));
                }
            }
        }
    }
}
