//! Edge lists (COO) and their conversion to CSR: de-duplication, symmetrisation, self loops.

use crate::csr::{Csr, Offset, OffsetWidth, RowPtr};
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

    /// Builds the CSR (row = target, column = source) with sorted rows, in parallel (a
    /// bucket sort by rows, 12 to 16 bytes per entry besides the edge list); the result does
    /// not depend on the number of threads.
    pub fn to_csr(&self, opts: BuildOptions) -> Result<Csr> {
        build_csr(self.n_nodes, &self.src, &self.dst, opts)
    }
}

/// Edges per task of [`build_csr`]'s first two passes.
const EDGE_CHUNK: usize = 1 << 20;
/// Rows per task of [`Csr::rebuild`]'s row-by-row path.
const ROW_BLOCK: usize = 1 << 12;
/// [`build_csr`] groups rows into at most `2^BUCKET_BITS` buckets of consecutive rows.
const BUCKET_BITS: u32 = 10;

/// Builds the `n x n` CSR of the edges `src[k] -> dst[k]` (row = target, column = source)
/// with sorted rows, as [`Coo::to_csr`] documents, checking every endpoint against `n`.
///
/// A parallel bucket sort, deterministic whatever the thread count (every row is sorted at
/// the end, so the order in which its entries arrive does not matter):
/// 1. rows are grouped into at most 1,024 buckets of `2^shift` consecutive rows; each chunk of
///    edges counts its entries per bucket;
/// 2. each chunk scatters `row << 32 | column` keys into its own slice of every bucket;
/// 3. each bucket counts its rows, places columns (and self loops) row by row into its region
///    of the output, sorts and de-duplicates each row and packs the kept entries to the
///    region's front;
/// 4. the kept entries are copied into place (no copy when nothing was dropped) and the row
///    pointers summed.
///
/// Memory besides the input: 12 bytes per entry before de-duplication (8 of them freed
/// before step 4), and 4 more per kept entry when de-duplication dropped any.
pub(crate) fn build_csr(n: usize, src: &[u32], dst: &[u32], opts: BuildOptions) -> Result<Csr> {
    build_csr_in_chunks(n, src, dst, opts, EDGE_CHUNK)
}

/// [`build_csr`] with `edge_chunk` edges per task (small in tests, to exercise many chunks).
fn build_csr_in_chunks(
    n: usize,
    src: &[u32],
    dst: &[u32],
    opts: BuildOptions,
    edge_chunk: usize,
) -> Result<Csr> {
    if src.len() != dst.len() {
        return Err(Error::InvalidStructure(format!(
            "edge list has {} sources but {} targets",
            src.len(),
            dst.len()
        )));
    }
    if n >= u32::MAX as usize {
        return Err(Error::InvalidStructure(format!(
            "{n} nodes exceed the 32-bit index range"
        )));
    }
    let skip_loops = opts.self_loops != SelfLoops::Keep;
    let add_loops = opts.self_loops == SelfLoops::Add;
    let dedup = opts.dedup || add_loops;
    let sym = opts.symmetrize;
    let shift = (usize::BITS - n.leading_zeros()).saturating_sub(BUCKET_BITS);
    let rows_per_bucket = 1usize << shift;
    let n_buckets = n.div_ceil(rows_per_bucket);
    // Visits the entries `(row, column)` of edge `s -> d`.
    #[inline(always)]
    fn entries(s: u32, d: u32, skip_loops: bool, sym: bool, mut f: impl FnMut(u32, u32)) {
        if skip_loops && s == d {
            return;
        }
        f(d, s);
        if sym && s != d {
            f(s, d);
        }
    }

    // 1. Entries per (chunk, bucket), endpoints checked.
    let counts: Vec<Vec<usize>> = src
        .par_chunks(edge_chunk)
        .zip(dst.par_chunks(edge_chunk))
        .map(|(s, d)| {
            if let Some(&v) = s.iter().chain(d).find(|&&v| v as usize >= n) {
                return Err(Error::InvalidStructure(format!(
                    "edge endpoint {v} is out of range (n_nodes = {n})"
                )));
            }
            let mut c = vec![0usize; n_buckets];
            for (&s, &d) in s.iter().zip(d) {
                entries(s, d, skip_loops, sym, |row, _| {
                    c[row as usize >> shift] += 1
                });
            }
            Ok(c)
        })
        .collect::<Result<_>>()?;
    let bucket_len: Vec<usize> = (0..n_buckets)
        .map(|b| counts.iter().map(|c| c[b]).sum())
        .collect();

    // 2. Scatter: chunk `k` owns slice `k` of every bucket (buckets in order, chunks in order
    // inside each).
    let mut keys = vec![0u64; bucket_len.iter().sum()];
    {
        let mut slices: Vec<Vec<&mut [u64]>> = counts.iter().map(|_| Vec::new()).collect();
        let mut rest = keys.as_mut_slice();
        for b in 0..n_buckets {
            for (k, c) in counts.iter().enumerate() {
                let (head, tail) = rest.split_at_mut(c[b]);
                slices[k].push(head);
                rest = tail;
            }
        }
        slices
            .into_par_iter()
            .zip(src.par_chunks(edge_chunk).zip(dst.par_chunks(edge_chunk)))
            .for_each(|(mut out, (s, d))| {
                let mut fill = vec![0usize; n_buckets];
                for (&s, &d) in s.iter().zip(d) {
                    entries(s, d, skip_loops, sym, |row, col| {
                        let b = row as usize >> shift;
                        out[b][fill[b]] = (row as u64) << 32 | col as u64;
                        fill[b] += 1;
                    });
                }
            });
    }
    drop(counts);

    // 3. Per bucket: place, sort, de-duplicate, pack.
    let rows_of = |b: usize| b * rows_per_bucket..((b + 1) * rows_per_bucket).min(n);
    let region_len: Vec<usize> = (0..n_buckets)
        .map(|b| bucket_len[b] + if add_loops { rows_of(b).len() } else { 0 })
        .collect();
    let mut indices = vec![0u32; region_len.iter().sum()];
    let mut lens = vec![0u32; n];
    let kept: Vec<usize> = {
        let key_parts = split_sizes(&keys, &bucket_len);
        let out_parts = split_sizes_mut(&mut indices, &region_len);
        let len_parts: Vec<&mut [u32]> = lens.chunks_mut(rows_per_bucket).collect();
        key_parts
            .into_par_iter()
            .zip(out_parts)
            .zip(len_parts)
            .enumerate()
            .map(|(b, ((keys, out), lens))| {
                let rows = rows_of(b);
                let mut start = vec![0usize; rows.len() + 1];
                for &k in keys {
                    start[(k >> 32) as usize - rows.start + 1] += 1;
                }
                if add_loops {
                    start.iter_mut().skip(1).for_each(|c| *c += 1);
                }
                for r in 0..rows.len() {
                    start[r + 1] += start[r];
                }
                let mut fill = start.clone();
                for &k in keys {
                    let r = (k >> 32) as usize - rows.start;
                    out[fill[r]] = k as u32;
                    fill[r] += 1;
                }
                if add_loops {
                    for (r, i) in rows.clone().enumerate() {
                        out[fill[r]] = i as u32;
                    }
                }
                let mut w = 0usize;
                for (r, len) in lens.iter_mut().enumerate() {
                    let row = &mut out[start[r]..start[r + 1]];
                    row.sort_unstable();
                    let mut k = row.len();
                    if dedup {
                        k = 0;
                        for q in 0..row.len() {
                            if q == 0 || row[q] != row[k - 1] {
                                row[k] = row[q];
                                k += 1;
                            }
                        }
                    }
                    out.copy_within(start[r]..start[r] + k, w);
                    w += k;
                    *len = u32::try_from(k).map_err(|_| {
                        Error::InvalidStructure(format!(
                            "row {} holds {k} entries, more than a row's 32-bit length counts",
                            rows.start + r
                        ))
                    })?;
                }
                Ok(w)
            })
            .collect::<Result<_>>()?
    };
    drop(keys);

    // 4. Pack the buckets and sum the row pointers, at the narrowest width for the total.
    let total: usize = kept.iter().sum();
    let mut bucket_start = Vec::with_capacity(n_buckets);
    let mut acc = 0usize;
    for &k in &kept {
        bucket_start.push(acc);
        acc += k;
    }
    let indices = if total == indices.len() {
        indices
    } else {
        let mut packed = vec![0u32; total];
        split_sizes_mut(&mut packed, &kept)
            .into_par_iter()
            .zip(split_sizes(&indices, &region_len))
            .for_each(|(dst, src)| dst.copy_from_slice(&src[..dst.len()]));
        packed
    };
    let indptr = match OffsetWidth::for_nnz(total) {
        OffsetWidth::U32 => running_sums::<u32>(&lens, rows_per_bucket, &bucket_start),
        OffsetWidth::U64 => running_sums::<u64>(&lens, rows_per_bucket, &bucket_start),
    };
    // SAFETY: the invariants of `Csr::from_row_ptr` hold by construction:
    // - shape: `n < u32::MAX` was checked above;
    // - `indptr` has `n + 1` entries, starts at 0 and is the running sum of the kept row
    //   lengths (bucket by bucket from each bucket's start, the sum of the kept lengths
    //   before it), so it is non-decreasing and ends at `total == indices.len()`; its width
    //   holds `total`, so no offset wrapped;
    // - every row length is a `u32` (`lens`, checked when stored);
    // - every index is an endpoint, checked `< n` in pass 1, or a self loop `i < n`.
    Ok(unsafe { Csr::new_unchecked(n, n, indptr, indices) })
}

/// Row pointers `0, l0, l0 + l1, ...` of the row lengths `lens`, in parallel over blocks of
/// `block` rows, block `b` starting at `starts[b]` (the lengths before it).
pub(crate) fn running_sums<O: Offset>(lens: &[u32], block: usize, starts: &[usize]) -> RowPtr {
    let mut indptr = vec![O::default(); lens.len() + 1];
    indptr[1..]
        .par_chunks_mut(block)
        .zip(lens.par_chunks(block))
        .zip(starts)
        .for_each(|((ptr, lens), &start)| {
            let mut acc = start;
            for (p, &l) in ptr.iter_mut().zip(lens) {
                acc += l as usize;
                *p = O::from_usize(acc);
            }
        });
    O::into_row_ptr(indptr)
}

/// `data` cut into consecutive pieces of the given sizes (which sum to at most its length).
pub(crate) fn split_sizes<'a, T>(mut data: &'a [T], sizes: &[usize]) -> Vec<&'a [T]> {
    sizes
        .iter()
        .map(|&s| {
            let (head, tail) = data.split_at(s);
            data = tail;
            head
        })
        .collect()
}

/// [`split_sizes`] for a mutable slice.
pub(crate) fn split_sizes_mut<'a, T>(mut data: &'a mut [T], sizes: &[usize]) -> Vec<&'a mut [T]> {
    sizes
        .iter()
        .map(|&s| {
            let (head, tail) = std::mem::take(&mut data).split_at_mut(s);
            data = tail;
            head
        })
        .collect()
}

impl Csr {
    /// Rebuilds a square pattern under new options (e.g. add self loops for GCN, remove them
    /// for GraphSAGE). Rows of the result are sorted. Its offsets are at least as wide as
    /// `self`'s: a graph held with 64-bit offsets (one too big for 32, or a small one forced
    /// to 64 to test that path) keeps them in the operands derived from it.
    ///
    /// A pattern whose rows are sorted already (every graph this crate builds or loads from
    /// its binary format) is rebuilt row by row in one parallel pass, without the edge list
    /// and the bucket sort of [`Coo::to_csr`] (20 bytes per entry less, and no sort): the
    /// same result, unless `opts` symmetrises, which needs the edge list.
    pub fn rebuild(&self, opts: BuildOptions) -> Result<Csr> {
        if self.n_rows() != self.n_cols() {
            return Err(Error::InvalidArgument(format!(
                "rebuild needs a square pattern, got {}x{}",
                self.n_rows(),
                self.n_cols()
            )));
        }
        let out = if !opts.symmetrize && self.rows_sorted() {
            self.rebuild_sorted_rows(opts)?
        } else {
            self.to_coo().to_csr(opts)?
        };
        let width = out.offset_width().max(self.offset_width());
        out.with_offset_width(width)
    }

    /// Whether every row's columns are non-decreasing (repeats allowed).
    fn rows_sorted(&self) -> bool {
        let ptr = self.indptr();
        (0..self.n_rows().div_ceil(ROW_BLOCK))
            .into_par_iter()
            .all(|b| {
                let rows = b * ROW_BLOCK..((b + 1) * ROW_BLOCK).min(self.n_rows());
                rows.into_iter().all(|i| {
                    self.indices()[ptr.range(i)]
                        .windows(2)
                        .all(|w| w[0] <= w[1])
                })
            })
    }

    /// [`Self::rebuild`] of a pattern with sorted rows, without symmetrisation: each row's
    /// entries filtered in order (self loops dropped where `opts` drops or adds them,
    /// repeats where it de-duplicates) and the self loop inserted in place where it adds
    /// one, as [`build_csr`] leaves them after its sort.
    fn rebuild_sorted_rows(&self, opts: BuildOptions) -> Result<Csr> {
        debug_assert!(!opts.symmetrize);
        let n = self.n_rows();
        let skip_loops = opts.self_loops != SelfLoops::Keep;
        let add_loops = opts.self_loops == SelfLoops::Add;
        let dedup = opts.dedup || add_loops;
        // The entries row `i` keeps, in order, through `f`.
        #[inline(always)]
        fn kept(row: &[u32], me: u32, skip: bool, add: bool, dedup: bool, mut f: impl FnMut(u32)) {
            let mut last = None;
            let mut looped = !add;
            for &c in row {
                if !looped && c > me {
                    f(me);
                    looped = true;
                    last = Some(me);
                }
                if (skip && c == me) || (dedup && last == Some(c)) {
                    continue;
                }
                f(c);
                last = Some(c);
            }
            if !looped {
                f(me);
            }
        }
        let (skip, add) = (skip_loops, add_loops);
        let blocks = n.div_ceil(ROW_BLOCK);
        let rows_of = |b: usize| b * ROW_BLOCK..((b + 1) * ROW_BLOCK).min(n);
        // 1. Kept entries per row.
        let mut lens = vec![0u32; n];
        lens.par_chunks_mut(ROW_BLOCK)
            .enumerate()
            .try_for_each(|(b, out)| {
                for (len, i) in out.iter_mut().zip(rows_of(b)) {
                    let mut k = 0usize;
                    kept(self.row(i), i as u32, skip, add, dedup, |_| k += 1);
                    *len = u32::try_from(k).map_err(|_| {
                        Error::InvalidStructure(format!(
                            "row {i} holds {k} entries, more than a row's 32-bit length counts"
                        ))
                    })?;
                }
                Ok::<_, Error>(())
            })?;
        let sizes: Vec<usize> = lens
            .par_chunks(ROW_BLOCK)
            .map(|l| l.iter().map(|&k| k as usize).sum())
            .collect();
        let mut starts = Vec::with_capacity(blocks);
        let mut total = 0usize;
        for &k in &sizes {
            starts.push(total);
            total += k;
        }
        // 2. The entries, block by block into place.
        let mut indices = vec![0u32; total];
        split_sizes_mut(&mut indices, &sizes)
            .into_par_iter()
            .enumerate()
            .for_each(|(b, out)| {
                let mut w = 0usize;
                for i in rows_of(b) {
                    kept(self.row(i), i as u32, skip, add, dedup, |c| {
                        out[w] = c;
                        w += 1;
                    });
                }
            });
        let indptr = match OffsetWidth::for_nnz(total) {
            OffsetWidth::U32 => running_sums::<u32>(&lens, ROW_BLOCK, &starts),
            OffsetWidth::U64 => running_sums::<u64>(&lens, ROW_BLOCK, &starts),
        };
        // SAFETY: the invariants of `Csr::from_row_ptr` hold by construction: the shape is
        // `self`'s (square, checked by `rebuild`, `n < u32::MAX` as for any `Csr`); `indptr`
        // is the running sum of the row lengths written (`n + 1` offsets from 0, ending at
        // `total == indices.len()`, at a width that holds `total`); every length was checked
        // to fit `u32`; every index is one of `self`'s columns or a self loop `i < n`.
        Ok(unsafe { Csr::new_unchecked(n, n, indptr, indices) })
    }

    /// The edge list of this pattern (source = column, target = row).
    pub fn to_coo(&self) -> Coo {
        const BLOCK: usize = 4096;
        let (n, ptr) = (self.n_rows(), self.indptr());
        let blocks: Vec<std::ops::Range<usize>> = (0..n.div_ceil(BLOCK))
            .map(|b| b * BLOCK..((b + 1) * BLOCK).min(n))
            .collect();
        let sizes: Vec<usize> = blocks
            .iter()
            .map(|r| ptr.get(r.end) - ptr.get(r.start))
            .collect();
        let mut dst = vec![0u32; self.nnz()];
        split_sizes_mut(&mut dst, &sizes)
            .into_par_iter()
            .zip(blocks)
            .for_each(|(out, rows)| {
                let base = ptr.get(rows.start);
                for i in rows {
                    let r = ptr.range(i);
                    out[r.start - base..r.end - base].fill(i as u32);
                }
            });
        Coo {
            n_nodes: n.max(self.n_cols()),
            src: self.indices().to_vec(),
            dst,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The definition: every entry listed, sorted, de-duplicated where asked.
    /// `m` random edges over `n` nodes, a fifth of their ends on the hubs 0..3 (long rows and
    /// repeats).
    fn hub_edges(
        r: &mut rand_xoshiro::Xoshiro256PlusPlus,
        n: usize,
        m: usize,
    ) -> (Vec<u32>, Vec<u32>) {
        let mut hub = || {
            if r.random_bool(0.2) {
                r.random_range(0..n.min(3)) as u32
            } else {
                r.random_range(0..n) as u32
            }
        };
        let src: Vec<u32> = (0..m).map(|_| hub()).collect();
        let dst: Vec<u32> = (0..m).map(|_| hub()).collect();
        (src, dst)
    }

    fn reference(n: usize, src: &[u32], dst: &[u32], o: BuildOptions) -> (Vec<u32>, Vec<u32>) {
        let mut e: Vec<(u32, u32)> = Vec::new();
        for (&s, &d) in src.iter().zip(dst) {
            if o.self_loops != SelfLoops::Keep && s == d {
                continue;
            }
            e.push((d, s));
            if o.symmetrize && s != d {
                e.push((s, d));
            }
        }
        if o.self_loops == SelfLoops::Add {
            e.extend((0..n as u32).map(|i| (i, i)));
        }
        e.sort_unstable();
        if o.dedup || o.self_loops == SelfLoops::Add {
            e.dedup();
        }
        let mut ptr = vec![0u32; n + 1];
        for &(r, _) in &e {
            ptr[r as usize + 1] += 1;
        }
        for i in 0..n {
            ptr[i + 1] += ptr[i];
        }
        (ptr, e.into_iter().map(|(_, c)| c).collect())
    }

    #[test]
    fn parallel_build_equals_the_definition_for_every_option() {
        let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
        // One bucket per row (n < 1024), then rows grouped 4 to a bucket (n = 3000); hubs and
        // repeats so rows are long and de-duplication matters; chunks of 7 edges.
        for n in [1usize, 5, 300, 3000] {
            let (src, dst) = hub_edges(&mut r, n, 8 * n);
            for symmetrize in [false, true] {
                for dedup in [false, true] {
                    for self_loops in [SelfLoops::Keep, SelfLoops::Remove, SelfLoops::Add] {
                        let o = BuildOptions {
                            symmetrize,
                            dedup,
                            self_loops,
                        };
                        let want = reference(n, &src, &dst, o);
                        for chunk in [7, EDGE_CHUNK] {
                            let got = build_csr_in_chunks(n, &src, &dst, o, chunk).unwrap();
                            assert_eq!(
                                (got.indptr().as_u32().unwrap(), got.indices()),
                                (&want.0[..], &want.1[..]),
                                "n {n}, {o:?}, chunk {chunk}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn rebuilding_sorted_rows_equals_the_bucket_sort() {
        let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        for n in [1usize, 2, 7, 300, 5000] {
            let (src, dst) = hub_edges(&mut r, n, 6 * n);
            let coo = Coo::new(n, src, dst).unwrap();
            // Sorted rows with repeats and some self loops; without repeats; with a self loop
            // on every node; and at 64-bit offsets.
            let raw = coo
                .to_csr(BuildOptions {
                    symmetrize: false,
                    dedup: false,
                    self_loops: SelfLoops::Keep,
                })
                .unwrap();
            let inputs = [
                raw.clone(),
                coo.to_csr(BuildOptions::default()).unwrap(),
                coo.to_csr(BuildOptions::undirected_self_loops()).unwrap(),
                raw.with_offset_width(OffsetWidth::U64).unwrap(),
            ];
            for g in &inputs {
                assert!(g.rows_sorted());
                for symmetrize in [false, true] {
                    for dedup in [false, true] {
                        for self_loops in [SelfLoops::Keep, SelfLoops::Remove, SelfLoops::Add] {
                            let o = BuildOptions {
                                symmetrize,
                                dedup,
                                self_loops,
                            };
                            let want = g.to_coo().to_csr(o).unwrap();
                            let got = g.rebuild(o).unwrap();
                            assert_eq!(got, want, "n {n}, {o:?}");
                            let width = want.offset_width().max(g.offset_width());
                            assert_eq!(got.offset_width(), width, "n {n}, {o:?}");
                        }
                    }
                }
            }
        }
        // Unsorted rows take the edge list's path.
        let g = Csr::new_checked(2, 2, vec![0, 2, 3], vec![1, 0, 1]).unwrap();
        assert!(!g.rows_sorted());
        let o = BuildOptions::undirected_self_loops();
        assert_eq!(g.rebuild(o).unwrap(), g.to_coo().to_csr(o).unwrap());
    }

    #[test]
    fn row_pointers_sum_the_same_at_either_width() {
        // Blocks of 3 rows, the starts the lengths before each block.
        let lens = [2u32, 0, 5, 1, 1, 0, 4];
        let starts = [0usize, 7, 9];
        let narrow = running_sums::<u32>(&lens, 3, &starts);
        let wide = running_sums::<u64>(&lens, 3, &starts);
        assert_eq!(narrow.as_u32().unwrap(), &[0, 2, 2, 7, 8, 9, 9, 13]);
        assert_eq!(wide.width(), OffsetWidth::U64);
        assert_eq!(narrow, wide);
    }

    #[test]
    fn the_build_checks_lengths_and_endpoints() {
        let o = BuildOptions::default();
        let e = build_csr(3, &[0, 1], &[1], o).unwrap_err().to_string();
        assert!(e.contains("2 sources but 1 targets"), "{e}");
        let e = build_csr_in_chunks(3, &[0, 1, 2, 0], &[1, 1, 9, 0], o, 2)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("endpoint 9 is out of range (n_nodes = 3)"),
            "{e}"
        );
        let empty = build_csr(0, &[], &[], o).unwrap();
        assert_eq!(
            (empty.n_rows(), empty.nnz(), empty.indptr().as_u32()),
            (0, 0, Some(&[0u32][..]))
        );
    }

    #[test]
    fn to_coo_lists_every_entry_by_row() {
        let g = build_csr(
            5000,
            &[1, 4999, 7, 7],
            &[0, 4999, 4998, 2],
            BuildOptions::undirected(),
        )
        .unwrap();
        let coo = g.to_coo();
        let mut pairs: Vec<(u32, u32)> = coo
            .dst()
            .iter()
            .copied()
            .zip(coo.src().iter().copied())
            .collect();
        pairs.sort_unstable();
        assert_eq!(
            pairs,
            vec![(0, 1), (1, 0), (2, 7), (7, 2), (7, 4998), (4998, 7)]
        );
        assert_eq!(coo.to_csr(BuildOptions::default()).unwrap(), g);
    }
}
