//! Compressed sparse row structure (symbolic: no values).
//!
//! ```text
//!  row i's neighbours are indices[indptr[i] .. indptr[i+1]]
//!
//!  indptr : [0, 2, 2, 5]            (n_rows + 1 entries, non-decreasing)
//!  indices: [3, 7 | | 0, 1, 9]      (nnz entries, each < n_cols)
//! ```
//!
//! For graphs the convention is the one PyG calls `adj_t`: **row = target node, column = source
//! node**, so aggregation reads `out[i] = reduce_{j in row i} x[j]`. Edge values (normalisation
//! weights) live apart from the structure in a `Vec<f32>` aligned with `indices`.
//!
//! Both arrays are `u32`: the kernels use 32-bit offsets, so `nnz` must fit in `u32`.

use crate::error::{Error, Result};
use rayon::prelude::*;
use serde::Serialize;

/// A validated CSR sparsity pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Csr {
    n_rows: usize,
    n_cols: usize,
    indptr: Vec<u32>,
    indices: Vec<u32>,
}

impl Csr {
    /// The `n_keys x keys.len()` grouping of positions by key (a counting sort): row `k`
    /// lists, ascending, the positions `q` with `keys[q] == k`. An error when a key is
    /// `>= n_keys` or the sizes exceed the 32-bit index range.
    pub fn group_by_key(n_keys: usize, keys: &[u32]) -> Result<Self> {
        if let Some(q) = keys.iter().position(|&k| k as usize >= n_keys) {
            return Err(Error::InvalidStructure(format!(
                "key {} at position {q} is outside 0..{n_keys}",
                keys[q]
            )));
        }
        let mut indptr = vec![0u32; n_keys + 1];
        for &k in keys {
            indptr[k as usize + 1] += 1;
        }
        for k in 0..n_keys {
            indptr[k + 1] += indptr[k];
        }
        let mut fill = indptr.clone();
        let mut indices = vec![0u32; keys.len()];
        for (q, &k) in keys.iter().enumerate() {
            indices[fill[k as usize] as usize] = q as u32;
            fill[k as usize] += 1;
        }
        Self::new_checked(n_keys, keys.len(), indptr, indices)
    }

    /// Builds a CSR after checking every invariant: `indptr.len() == n_rows + 1`,
    /// `indptr[0] == 0`, non-decreasing, `indptr[n_rows] == indices.len()`, every index
    /// `< n_cols`, and `n_rows, n_cols, nnz` within `u32`.
    pub fn new_checked(
        n_rows: usize,
        n_cols: usize,
        indptr: Vec<u32>,
        indices: Vec<u32>,
    ) -> Result<Self> {
        if n_rows >= u32::MAX as usize || n_cols >= u32::MAX as usize {
            return Err(Error::InvalidStructure(format!(
                "shape {n_rows}x{n_cols} exceeds the 32-bit index range"
            )));
        }
        if indptr.len() != n_rows + 1 {
            return Err(Error::InvalidStructure(format!(
                "indptr has {} entries, expected n_rows + 1 = {}",
                indptr.len(),
                n_rows + 1
            )));
        }
        if indptr[0] != 0 {
            return Err(Error::InvalidStructure(format!(
                "indptr[0] = {}, expected 0",
                indptr[0]
            )));
        }
        if let Some(i) = indptr.windows(2).position(|w| w[1] < w[0]) {
            return Err(Error::InvalidStructure(format!(
                "indptr decreases at row {i}: {} > {}",
                indptr[i],
                indptr[i + 1]
            )));
        }
        if indptr[n_rows] as usize != indices.len() {
            return Err(Error::InvalidStructure(format!(
                "indptr[n_rows] = {} but there are {} indices",
                indptr[n_rows],
                indices.len()
            )));
        }
        if let Some(p) = indices.par_iter().position_any(|&c| c as usize >= n_cols) {
            return Err(Error::InvalidStructure(format!(
                "column index {} at position {p} is out of range (n_cols = {n_cols})",
                indices[p]
            )));
        }
        Ok(Self {
            n_rows,
            n_cols,
            indptr,
            indices,
        })
    }

    /// Builds a CSR without checks. The caller guarantees the invariants of
    /// [`Csr::new_checked`]; kernels index with these arrays, so a broken invariant is a
    /// memory-safety bug on the GPU, hence `unsafe`.
    ///
    /// # Safety
    /// The invariants listed in [`Csr::new_checked`] must hold.
    pub unsafe fn new_unchecked(
        n_rows: usize,
        n_cols: usize,
        indptr: Vec<u32>,
        indices: Vec<u32>,
    ) -> Self {
        debug_assert_eq!(indptr.len(), n_rows + 1);
        Self {
            n_rows,
            n_cols,
            indptr,
            indices,
        }
    }

    /// An `n_rows x n_cols` pattern with no non-zeros (the shape must fit in `u32`, as for
    /// [`Csr::new_checked`]).
    pub fn empty(n_rows: usize, n_cols: usize) -> Result<Self> {
        Self::new_checked(
            n_rows,
            n_cols,
            vec![0; n_rows.min(u32::MAX as usize) + 1],
            Vec::new(),
        )
    }

    /// Number of rows (target nodes).
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }
    /// Number of columns (source nodes).
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }
    /// Number of stored entries (directed edges).
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }
    /// Row pointers, `n_rows + 1` entries.
    pub fn indptr(&self) -> &[u32] {
        &self.indptr
    }
    /// Column indices, `nnz` entries.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }
    /// Column indices of row `i`.
    pub fn row(&self, i: usize) -> &[u32] {
        &self.indices[self.indptr[i] as usize..self.indptr[i + 1] as usize]
    }
    /// Position range of row `i` in `indices` (and in any aligned value array).
    pub fn row_range(&self, i: usize) -> std::ops::Range<usize> {
        self.indptr[i] as usize..self.indptr[i + 1] as usize
    }
    /// Number of entries of row `i`.
    pub fn row_len(&self, i: usize) -> usize {
        (self.indptr[i + 1] - self.indptr[i]) as usize
    }
    /// Per-row entry counts (in-degrees of targets).
    pub fn row_degrees(&self) -> Vec<u32> {
        self.indptr.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// `1 / row length` per row (0 for an empty row): the scale of a mean aggregation.
    pub fn inverse_row_degrees(&self) -> Vec<f32> {
        self.indptr
            .windows(2)
            .map(|w| match w[1] - w[0] {
                0 => 0.0,
                d => 1.0 / d as f32,
            })
            .collect()
    }
    /// Consumes the CSR, returning `(indptr, indices)`.
    pub fn into_parts(self) -> (Vec<u32>, Vec<u32>) {
        (self.indptr, self.indices)
    }

    /// True when every row's column indices are strictly increasing (sorted, no duplicates).
    pub fn is_sorted_unique(&self) -> bool {
        (0..self.n_rows)
            .into_par_iter()
            .all(|i| self.row(i).windows(2).all(|w| w[0] < w[1]))
    }

    /// True when the pattern is square and `(i, j)` present implies `(j, i)` present.
    pub fn is_symmetric(&self) -> bool {
        if self.n_rows != self.n_cols {
            return false;
        }
        if self.is_sorted_unique() {
            // No copies: every (i, j) looks up (j, i) in row j (sorted). Unique entries make
            // presence both ways the same as equal multisets.
            return (0..self.n_rows).into_par_iter().all(|i| {
                self.row(i)
                    .iter()
                    .all(|&j| self.row(j as usize).binary_search(&(i as u32)).is_ok())
            });
        }
        let (t, _) = self.transpose();
        let mut a = self.clone();
        a.sort_rows();
        let mut b = t;
        b.sort_rows();
        a == b
    }

    /// Number of diagonal entries `(i, i)`.
    pub fn self_loop_count(&self) -> usize {
        (0..self.n_rows.min(self.n_cols))
            .into_par_iter()
            .map(|i| self.row(i).iter().filter(|&&c| c as usize == i).count())
            .sum()
    }

    /// Sorts the column indices of each row in place (duplicates kept).
    pub fn sort_rows(&mut self) {
        let indptr = &self.indptr;
        split_rows_mut(&mut self.indices, indptr)
            .into_par_iter()
            .for_each(|r| r.sort_unstable());
    }

    /// The head-expanded graph of multi-head attention: row `i * heads + h` holds the edges of
    /// row `i` with columns `j * heads + h`, so features laid out `[nodes, heads, F]` (that is
    /// `[nodes * heads, F]`) are aggregated, scored and softmax-normalised per head by the
    /// single-head operators. Edge `p` of row `i` becomes edge `heads * indptr[i] + h *
    /// deg(i) + (p - indptr[i])`. Fails when the expanded sizes do not fit `u32`.
    pub fn expand_heads(&self, heads: usize) -> Result<Csr> {
        let too_big = || {
            Error::InvalidArgument(format!(
                "{heads} heads of a graph with {} rows and {} edges exceed u32 indices",
                self.n_rows,
                self.nnz()
            ))
        };
        if heads == 0 {
            return Err(Error::InvalidArgument("heads must be at least 1".into()));
        }
        let n_rows = self.n_rows.checked_mul(heads).ok_or_else(too_big)?;
        let n_cols = self.n_cols.checked_mul(heads).ok_or_else(too_big)?;
        let nnz = self.nnz().checked_mul(heads).ok_or_else(too_big)?;
        if n_rows.max(n_cols).max(nnz) > u32::MAX as usize {
            return Err(too_big());
        }
        let mut indptr = Vec::with_capacity(n_rows + 1);
        let mut indices = Vec::with_capacity(nnz);
        indptr.push(0u32);
        for i in 0..self.n_rows {
            let row = &self.indices[self.row_range(i)];
            for h in 0..heads as u32 {
                indices.extend(row.iter().map(|&j| j * heads as u32 + h));
                indptr.push(indices.len() as u32);
            }
        }
        Csr::new_checked(n_rows, n_cols, indptr, indices)
    }

    /// The matrix cut into column blocks: block `b` holds, for every row, the entries whose
    /// column lies in `bounds[b]..bounds[b + 1]`, columns shifted to start at 0 (an
    /// `n_rows x (bounds[b + 1] - bounds[b])` CSR), in their order within the row, with their
    /// `values` when given (aligned with `self`'s entries). `bounds` must start at 0, end at
    /// `n_cols` and not decrease. The blocks' products summed are the whole product
    /// (`A x = Σ_b A_b x[bounds[b]..bounds[b + 1]]`), each reading a smaller slice of `x`: a
    /// partitioned aggregation runs its own rows' block before the other ranks' rows arrive.
    pub fn column_blocks(
        &self,
        bounds: &[usize],
        values: Option<&[f32]>,
    ) -> Result<Vec<(Csr, Option<Vec<f32>>)>> {
        if bounds.len() < 2
            || bounds[0] != 0
            || bounds[bounds.len() - 1] != self.n_cols
            || bounds.windows(2).any(|w| w[0] > w[1])
        {
            return Err(Error::InvalidArgument(format!(
                "column block bounds {bounds:?} of a matrix with {} columns: they must start \
                 at 0, end at the column count and not decrease",
                self.n_cols
            )));
        }
        if let Some(v) = values {
            if v.len() != self.nnz() {
                return Err(Error::InvalidArgument(format!(
                    "{} edge values for {} entries",
                    v.len(),
                    self.nnz()
                )));
            }
        }
        let out = (0..bounds.len() - 1)
            .into_par_iter()
            .map(|b| {
                let (lo, hi) = (bounds[b] as u32, bounds[b + 1] as u32);
                let mut indptr = Vec::with_capacity(self.n_rows + 1);
                indptr.push(0u32);
                let mut indices = Vec::new();
                let mut vals = values.map(|_| Vec::new());
                for r in 0..self.n_rows {
                    for p in self.row_range(r) {
                        let c = self.indices[p];
                        if (lo..hi).contains(&c) {
                            indices.push(c - lo);
                            if let (Some(out), Some(v)) = (vals.as_mut(), values) {
                                out.push(v[p]);
                            }
                        }
                    }
                    indptr.push(indices.len() as u32);
                }
                let csr = Csr {
                    n_rows: self.n_rows,
                    n_cols: (hi - lo) as usize,
                    indptr,
                    indices,
                };
                (csr, vals)
            })
            .collect();
        Ok(out)
    }

    /// The transpose (CSR of `A^T`, i.e. the CSC of `A`) and the permutation `perm` such that
    /// entry `p` of the transpose is entry `perm[p]` of `self`: transposed edge values are
    /// `values[perm[p]]`. Rows of the transpose come out sorted when `self`'s row order is the
    /// natural one (a counting sort, stable in source row).
    ///
    /// Parallel over blocks of transposed rows with about equal non-zeros, one per rayon
    /// thread: each block scans the whole matrix and writes only its own contiguous slice of
    /// the output, so the result is the same as one sequential pass whatever the thread
    /// count. (Sequentially the scattered writes cost ~1 s per 40 M non-zeros, and the GPU
    /// trainer builds this transpose in its first backward.)
    pub fn transpose(&self) -> (Csr, Vec<u32>) {
        let nnz = self.nnz();
        let mut indptr = vec![0u32; self.n_cols + 1];
        for &c in &self.indices {
            indptr[c as usize + 1] += 1;
        }
        for i in 0..self.n_cols {
            indptr[i + 1] += indptr[i];
        }
        let mut indices = vec![0u32; nnz];
        let mut perm = vec![0u32; nnz];
        let threads = if nnz < 1 << 16 {
            1
        } else {
            rayon::current_num_threads().max(1)
        };
        // Column blocks [c0, c1) of about nnz / threads entries each, and their output slices.
        let mut jobs = Vec::with_capacity(threads);
        let (mut out_i, mut out_p) = (&mut indices[..], &mut perm[..]);
        let target = nnz.div_ceil(threads).max(1);
        let mut c0 = 0;
        while c0 < self.n_cols {
            let mut c1 = c0 + 1;
            while c1 < self.n_cols && ((indptr[c1] - indptr[c0]) as usize) < target {
                c1 += 1;
            }
            let len = (indptr[c1] - indptr[c0]) as usize;
            let (bi, ri) = std::mem::take(&mut out_i).split_at_mut(len);
            let (bp, rp) = std::mem::take(&mut out_p).split_at_mut(len);
            (out_i, out_p) = (ri, rp);
            jobs.push((c0, c1, bi, bp));
            c0 = c1;
        }
        jobs.into_par_iter().for_each(|(c0, c1, bi, bp)| {
            let base = indptr[c0];
            let mut next: Vec<u32> = indptr[c0..c1].iter().map(|&v| v - base).collect();
            for r in 0..self.n_rows {
                for p in self.row_range(r) {
                    let c = self.indices[p] as usize;
                    if (c0..c1).contains(&c) {
                        let q = next[c - c0] as usize;
                        next[c - c0] += 1;
                        bi[q] = r as u32;
                        bp[q] = p as u32;
                    }
                }
            }
        });
        let t = Csr {
            n_rows: self.n_cols,
            n_cols: self.n_rows,
            indptr,
            indices,
        };
        (t, perm)
    }

    /// Degree statistics of the rows.
    pub fn degree_stats(&self) -> DegreeStats {
        DegreeStats::from_degrees(&self.row_degrees())
    }

    /// Applies a node permutation to a square pattern: node `old` becomes `new_of_old[old]`.
    /// Rows are re-sorted. Used by reordering and by the synthetic generator's id shuffle.
    pub fn permute(&self, new_of_old: &[u32]) -> Result<Csr> {
        if self.n_rows != self.n_cols || new_of_old.len() != self.n_rows {
            return Err(Error::InvalidArgument(format!(
                "permute needs a square pattern and a permutation of its {} nodes (got {}x{}, {})",
                self.n_rows,
                self.n_rows,
                self.n_cols,
                new_of_old.len()
            )));
        }
        let n = self.n_rows;
        let mut old_of_new = vec![u32::MAX; n];
        for (old, &new) in new_of_old.iter().enumerate() {
            if new as usize >= n || old_of_new[new as usize] != u32::MAX {
                return Err(Error::InvalidArgument(format!(
                    "not a permutation: entry {old} maps to {new}"
                )));
            }
            old_of_new[new as usize] = old as u32;
        }
        let mut indptr = Vec::with_capacity(n + 1);
        indptr.push(0u32);
        for &old in &old_of_new {
            let last = *indptr.last().unwrap_or(&0);
            indptr.push(last + self.row_len(old as usize) as u32);
        }
        let mut indices = vec![0u32; self.nnz()];
        split_rows_mut(&mut indices, &indptr)
            .into_par_iter()
            .enumerate()
            .for_each(|(new, out)| {
                let old = old_of_new[new] as usize;
                for (o, &c) in out.iter_mut().zip(self.row(old)) {
                    *o = new_of_old[c as usize];
                }
                out.sort_unstable();
            });
        Ok(Csr {
            n_rows: n,
            n_cols: n,
            indptr,
            indices,
        })
    }
}

/// Splits `data` (an array aligned with a CSR's entries, e.g. edge values) into the disjoint
/// mutable row slices given by `indptr`, for row-parallel writes.
pub fn split_rows_mut<'a, T>(mut data: &'a mut [T], indptr: &[u32]) -> Vec<&'a mut [T]> {
    let mut rows = Vec::with_capacity(indptr.len().saturating_sub(1));
    for w in indptr.windows(2) {
        let (head, tail) = data.split_at_mut((w[1] - w[0]) as usize);
        rows.push(head);
        data = tail;
    }
    rows
}

/// Summary of a degree sequence, as printed by loaders and the generator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DegreeStats {
    /// Number of rows.
    pub count: usize,
    /// Rows with no entry.
    pub empty: usize,
    /// Smallest degree.
    pub min: u32,
    /// Largest degree.
    pub max: u32,
    /// Mean degree.
    pub mean: f64,
    /// Median degree.
    pub median: u32,
    /// 99th percentile.
    pub p99: u32,
    /// Standard deviation.
    pub std: f64,
}

impl DegreeStats {
    /// Statistics of an arbitrary degree sequence.
    pub fn from_degrees(deg: &[u32]) -> Self {
        if deg.is_empty() {
            return Self {
                count: 0,
                empty: 0,
                min: 0,
                max: 0,
                mean: 0.0,
                median: 0,
                p99: 0,
                std: 0.0,
            };
        }
        let mut sorted = deg.to_vec();
        sorted.par_sort_unstable();
        let n = deg.len() as f64;
        let mean = deg.iter().map(|&d| d as f64).sum::<f64>() / n;
        let var = deg.iter().map(|&d| (d as f64 - mean).powi(2)).sum::<f64>() / n;
        Self {
            count: deg.len(),
            empty: deg.iter().filter(|&&d| d == 0).count(),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            mean,
            median: sorted[sorted.len() / 2],
            p99: sorted[((sorted.len() - 1) as f64 * 0.99) as usize],
            std: var.sqrt(),
        }
    }
}

impl std::fmt::Display for DegreeStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "degree min {} / median {} / mean {:.1} / p99 {} / max {} (std {:.1}, {} empty rows)",
            self.min, self.median, self.mean, self.p99, self.max, self.std, self.empty
        )
    }
}

#[cfg(test)]
mod transpose_tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A rectangular matrix with empty rows and columns, a hub column and a hub row.
    fn awkward(rows: usize, cols: usize, nnz: usize, seed: u64) -> Csr {
        let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut per_row: Vec<Vec<u32>> = vec![Vec::new(); rows];
        for _ in 0..nnz {
            let i = r.random_range(0..rows / 2) * 2; // odd rows stay empty
            let j = if r.random_bool(0.2) {
                7 // a hub column
            } else {
                r.random_range(0..cols / 3) * 3 // two of three columns stay empty
            };
            per_row[i].push(j as u32);
        }
        per_row[0].extend((0..cols as u32).step_by(3)); // a hub row
        let mut indptr = vec![0u32];
        let mut indices = Vec::new();
        for mut row in per_row {
            row.sort_unstable();
            row.dedup();
            indices.extend(row);
            indptr.push(indices.len() as u32);
        }
        Csr::new_checked(rows, cols, indptr, indices).unwrap()
    }

    #[test]
    fn column_blocks_split_each_row_by_column_range() {
        let a = awkward(300, 500, 6_000, 5);
        let vals: Vec<f32> = (0..a.nnz()).map(|p| p as f32).collect();
        // Uneven blocks, an empty one, and one that holds the hub column 7 alone.
        let bounds = [0, 7, 8, 8, 250, 500];
        let blocks = a.column_blocks(&bounds, Some(&vals)).unwrap();
        assert_eq!(blocks.len(), 5);
        assert_eq!(blocks.iter().map(|(b, _)| b.nnz()).sum::<usize>(), a.nnz());
        assert_eq!(blocks[2].0.nnz(), 0);
        for r in 0..a.n_rows() {
            // Concatenating row r of every block, columns shifted back, gives row r.
            let mut got = Vec::new();
            for ((b, v), lo) in blocks.iter().zip(bounds) {
                assert_eq!((b.n_rows(), b.indptr().len()), (a.n_rows(), a.n_rows() + 1));
                let v = v.as_ref().unwrap();
                got.extend(b.row_range(r).map(|q| (b.indices()[q] + lo as u32, v[q])));
            }
            let want: Vec<_> = a.row_range(r).map(|p| (a.indices()[p], vals[p])).collect();
            assert_eq!(got, want, "row {r}");
        }
        for (b, w) in blocks.iter().zip(bounds.windows(2)) {
            assert_eq!(b.0.n_cols(), w[1] - w[0]);
            assert!(b.0.indices().iter().all(|&c| (c as usize) < b.0.n_cols()));
        }
        // One block is the matrix itself; no values, no values out.
        let whole = a.column_blocks(&[0, 500], None).unwrap();
        assert!(whole[0].0 == a && whole[0].1.is_none());
        for bad in [&[0, 400][..], &[1, 500], &[0, 300, 200, 500], &[0]] {
            let e = a.column_blocks(bad, None).unwrap_err().to_string();
            assert!(e.contains("500 columns"), "{bad:?}: {e}");
        }
        let e = a.column_blocks(&[0, 500], Some(&vals[1..])).unwrap_err();
        assert!(e.to_string().contains("edge values"), "{e}");
    }

    #[test]
    fn parallel_transpose_is_the_sequential_one_at_any_thread_count() {
        let a = awkward(3_000, 5_000, 200_000, 3);
        assert!(a.nnz() >= 1 << 16, "large enough to split: {}", a.nnz());
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| a.transpose())
        };
        let (t1, p1) = run(1);
        // The sequential reference: entries of column j in source-row order.
        for j in 0..t1.n_rows() {
            let want: Vec<(u32, u32)> = (0..a.n_rows())
                .flat_map(|i| a.row_range(i).map(move |p| (i, p)))
                .filter(|&(_, p)| a.indices()[p] as usize == j)
                .map(|(i, p)| (i as u32, p as u32))
                .take(t1.row_len(j) + 1)
                .collect();
            let got: Vec<(u32, u32)> = t1.row_range(j).map(|q| (t1.indices()[q], p1[q])).collect();
            assert_eq!(got, want, "column {j}");
            if j > 40 {
                break; // the rest is covered by the thread-count comparison below
            }
        }
        for threads in [2, 3, 8, 64] {
            let (t, p) = run(threads);
            assert!(t == t1 && p == p1, "{threads} threads differ");
        }
        let (back, _) = t1.transpose();
        assert_eq!(back, a);
    }
}
