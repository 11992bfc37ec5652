//! Edge lists (COO) and their conversion to CSR: de-duplication, symmetrisation, self loops.

use crate::csr::{split_rows_mut, Csr};
use crate::error::{Error, Result};
use rayon::prelude::*;

/// What to do with self loops `(i, i)` when building a CSR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SelfLoops {
    /// Keep the ones present, add none.
    #[default]
    Keep,
    /// Drop every self loop.
    Remove,
    /// Ensure exactly one self loop per node (GCN's `A + I`).
    Add,
}

/// How an edge list becomes a CSR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildOptions {
    /// Add the reverse of every edge.
    pub symmetrize: bool,
    /// Drop repeated `(target, source)` pairs.
    pub dedup: bool,
    /// Self-loop policy.
    pub self_loops: SelfLoops,
}

impl Default for BuildOptions {
    /// Sorted, de-duplicated, as given (no symmetrisation, self loops kept).
    fn default() -> Self {
        Self {
            symmetrize: false,
            dedup: true,
            self_loops: SelfLoops::Keep,
        }
    }
}

impl BuildOptions {
    /// Undirected simple graph: symmetrised, de-duplicated, no self loops (Planetoid, OGB
    /// as usually trained full-batch).
    pub fn undirected() -> Self {
        Self {
            symmetrize: true,
            dedup: true,
            self_loops: SelfLoops::Remove,
        }
    }

    /// [`Self::undirected`] with a self loop on every node: the pattern of GCN's `A + I`.
    pub fn undirected_self_loops() -> Self {
        Self {
            self_loops: SelfLoops::Add,
            ..Self::undirected()
        }
    }
}

/// A directed edge list over `n_nodes` nodes: edge `k` goes `src[k] -> dst[k]`.
///
/// Invariant (private fields, checked by [`Coo::new`]): `src` and `dst` have one entry per edge
/// and every endpoint is `< n_nodes < u32::MAX`. [`Coo::to_csr`] relies on it to build a
/// [`Csr`] without re-checking, so the fields cannot be public.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Coo {
    n_nodes: usize,
    src: Vec<u32>,
    dst: Vec<u32>,
}

impl Coo {
    /// Builds an edge list, checking lengths and node ranges.
    pub fn new(n_nodes: usize, src: Vec<u32>, dst: Vec<u32>) -> Result<Self> {
        if src.len() != dst.len() {
            return Err(Error::InvalidStructure(format!(
                "edge list has {} sources but {} targets",
                src.len(),
                dst.len()
            )));
        }
        if n_nodes >= u32::MAX as usize {
            return Err(Error::InvalidStructure(format!(
                "{n_nodes} nodes exceed the 32-bit index range"
            )));
        }
        let bad = src
            .par_iter()
            .chain(dst.par_iter())
            .find_any(|&&v| v as usize >= n_nodes);
        if let Some(&v) = bad {
            return Err(Error::InvalidStructure(format!(
                "edge endpoint {v} is out of range (n_nodes = {n_nodes})"
            )));
        }
        Ok(Self { n_nodes, src, dst })
    }

    /// Number of nodes.
    pub fn n_nodes(&self) -> usize {
        self.n_nodes
    }

    /// Source node of each edge.
    pub fn src(&self) -> &[u32] {
        &self.src
    }

    /// Target node of each edge.
    pub fn dst(&self) -> &[u32] {
        &self.dst
    }

    /// The same edges reversed (`dst -> src`); the invariant is unchanged.
    pub fn reversed(self) -> Coo {
        Coo {
            n_nodes: self.n_nodes,
            src: self.dst,
            dst: self.src,
        }
    }

    /// Consumes the list, returning `(n_nodes, src, dst)`.
    pub fn into_parts(self) -> (usize, Vec<u32>, Vec<u32>) {
        (self.n_nodes, self.src, self.dst)
    }

    /// Number of edges.
    pub fn len(&self) -> usize {
        self.src.len()
    }

    /// True when there are no edges.
    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    /// Builds the CSR (row = target, column = source) with sorted rows.
    pub fn to_csr(&self, opts: BuildOptions) -> Result<Csr> {
        let n = self.n_nodes;
        let skip_loops = opts.self_loops != SelfLoops::Keep;
        let keep = |s: u32, d: u32| !(skip_loops && s == d);
        // Counting pass (targets are rows).
        let mut counts = vec![0u64; n + 1];
        for (&s, &d) in self.src.iter().zip(&self.dst) {
            if keep(s, d) {
                counts[d as usize + 1] += 1;
                if opts.symmetrize && s != d {
                    counts[s as usize + 1] += 1;
                }
            }
        }
        if opts.self_loops == SelfLoops::Add {
            counts.iter_mut().skip(1).for_each(|c| *c += 1);
        }
        for i in 0..n {
            counts[i + 1] += counts[i];
        }
        let total = counts[n];
        if total >= u32::MAX as u64 {
            return Err(Error::InvalidStructure(format!(
                "{total} entries exceed the 32-bit offset range"
            )));
        }
        let indptr: Vec<u32> = counts.iter().map(|&c| c as u32).collect();
        let mut next: Vec<u32> = indptr.clone();
        let mut indices = vec![0u32; total as usize];
        let mut put = |row: u32, col: u32| {
            let slot = &mut next[row as usize];
            indices[*slot as usize] = col;
            *slot += 1;
        };
        for (&s, &d) in self.src.iter().zip(&self.dst) {
            if keep(s, d) {
                put(d, s);
                if opts.symmetrize && s != d {
                    put(s, d);
                }
            }
        }
        if opts.self_loops == SelfLoops::Add {
            for i in 0..n as u32 {
                put(i, i);
            }
        }
        // Sort each row, then de-duplicate; record the kept length.
        let dedup = opts.dedup || opts.self_loops == SelfLoops::Add;
        let lens: Vec<u32> = split_rows_mut(&mut indices, &indptr)
            .into_par_iter()
            .map(|row| {
                row.sort_unstable();
                if !dedup {
                    return row.len() as u32;
                }
                let mut w = 0usize;
                for r in 0..row.len() {
                    if r == 0 || row[r] != row[w - 1] {
                        row[w] = row[r];
                        w += 1;
                    }
                }
                w as u32
            })
            .collect();
        // Compact.
        let mut out_ptr = Vec::with_capacity(n + 1);
        out_ptr.push(0u32);
        let mut w = 0usize;
        for (i, &len) in lens.iter().enumerate() {
            let start = indptr[i] as usize;
            indices.copy_within(start..start + len as usize, w);
            w += len as usize;
            out_ptr.push(w as u32);
        }
        indices.truncate(w);
        indices.shrink_to_fit();
        // SAFETY: the invariants of `Csr::new_checked` hold by construction:
        // - shape: `n = n_nodes < u32::MAX` (checked by `Coo::new`, the only way to build a
        //   `Coo` from outside this module; `Csr::to_coo` below copies a valid CSR's bounds);
        // - `out_ptr` has `n + 1` entries, starts at 0 and is a running sum of row lengths, so
        //   it is non-decreasing and ends at `w == indices.len()`; `total < u32::MAX` was
        //   checked above, so no offset wrapped;
        // - every index is an endpoint `< n_nodes` (the `Coo` invariant) or a self loop `i < n`.
        Ok(unsafe { Csr::new_unchecked(n, n, out_ptr, indices) })
    }
}

impl Csr {
    /// Rebuilds a square pattern under new options (e.g. add self loops for GCN, remove them
    /// for GraphSAGE). Rows of the result are sorted.
    pub fn rebuild(&self, opts: BuildOptions) -> Result<Csr> {
        if self.n_rows() != self.n_cols() {
            return Err(Error::InvalidArgument(format!(
                "rebuild needs a square pattern, got {}x{}",
                self.n_rows(),
                self.n_cols()
            )));
        }
        self.to_coo().to_csr(opts)
    }

    /// The edge list of this pattern (source = column, target = row).
    pub fn to_coo(&self) -> Coo {
        let mut dst = Vec::with_capacity(self.nnz());
        for i in 0..self.n_rows() {
            dst.extend(std::iter::repeat_n(i as u32, self.row_len(i)));
        }
        Coo {
            n_nodes: self.n_rows().max(self.n_cols()),
            src: self.indices().to_vec(),
            dst,
        }
    }
}
