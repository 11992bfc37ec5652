//! Row schedules for the warp-per-row GPU kernels (MaxK-GNN's SpGEMM and SSpMM).
//!
//! Launching one warp per row in row order lets the heavy-tailed degrees of real graphs
//! decide the run time: on the Reddit-shaped graph (rows up to ~22 K edges) a block stays
//! resident until its longest row is done, and Nsight Compute measured 22 % achieved
//! occupancy against 50 % theoretical. A schedule fixes both ends of that:
//! - rows longer than `chunk` edges are cut into edge groups of `chunk` edges, each a work
//!   item of its own whose partial sums are added atomically (the warp-level edge-group
//!   partition of MaxK-GNN's Algorithm 1);
//! - items are ordered by length, longest first (longest-processing-time order), so the long
//!   groups start early and the warps of one block get items of similar length.
//!
//! Empty rows get no item: the kernels' outputs start zeroed.

use rayon::prelude::*;

/// Edge-group length of the schedules the CUDA kernels use: long enough that splitting costs
/// little (one atomic write-back of a `D`-float row per group), short enough that the longest
/// item is a small share of a kernel (the Reddit-shaped graph has rows of ~22 K edges).
pub const CHUNK: usize = 1024;

/// Work items for the warp-per-row kernels: pairs `(row, first edge)`, longest first. An
/// item covers edges `first .. min(first + chunk, indptr[row + 1])`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSchedule {
    /// Interleaved `(row, first edge)` pairs.
    pub items: Vec<u32>,
    /// Edge-group length the schedule was built for.
    pub chunk: usize,
}

impl RowSchedule {
    /// Builds the schedule of a CSR given by its row pointers (a counting sort on item
    /// length, `O(n_rows + nnz / chunk + chunk)`). Items of equal length keep row order.
    pub fn build(indptr: &[u32], chunk: usize) -> Self {
        let chunk = chunk.max(1);
        let n_rows = indptr.len().saturating_sub(1);
        let segments = || (0..n_rows).map(|r| (r, indptr[r], indptr[r + 1]));
        let mut items = vec![0; 2 * groups(segments(), chunk).1];
        fill_longest_first(&mut items, segments, chunk, |r, first, _| [r as u32, first]);
        Self { items, chunk }
    }

    /// Number of work items.
    pub fn len(&self) -> usize {
        self.items.len() / 2
    }

    /// True when there is no work (every row empty).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// The non-empty rows of a CSR given by its row pointers, longest first (rows of equal length
/// in row order): the launch order of kernels that give each row one warp and cannot split it
/// (GAT's fused aggregation, whose per-row softmax is one warp's). A warp per row in row order
/// leaves the longest rows, wherever they fall, running alone at the end of the launch.
pub fn rows_longest_first(indptr: &[u32]) -> Vec<u32> {
    let longest = indptr.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    let s = RowSchedule::build(indptr, longest.max(1) as usize);
    s.items.iter().step_by(2).copied().collect()
}

/// Groups of each length (`count[len]`, `1..=chunk`; `count[0]` unused) the `segments`
/// `(row, first, end)` cut into groups of at most `chunk` edges make, and their total.
fn groups(segments: impl Iterator<Item = (usize, u32, u32)>, chunk: usize) -> (Vec<usize>, usize) {
    let mut count = vec![0usize; chunk + 1];
    for (_, first, end) in segments {
        let len = (end - first) as usize;
        count[chunk] += len / chunk;
        count[len % chunk] += 1;
    }
    count[0] = 0;
    let total = count.iter().sum();
    (count, total)
}

/// Cuts every segment `(row, first, end)` (edges `first..end` of `row`) of `segments` into
/// groups of at most `chunk` edges and writes them to `items` longest first (a counting sort
/// on group length, `O(segments + groups + chunk)`; equal lengths keep the segments' order),
/// each as the `W` words `item(row, first, end)`. `items` holds exactly `W` words per group
/// ([`groups`]).
fn fill_longest_first<const W: usize, I: Iterator<Item = (usize, u32, u32)>>(
    items: &mut [u32],
    segments: impl Fn() -> I,
    chunk: usize,
    item: impl Fn(usize, u32, u32) -> [u32; W],
) {
    // Bucket groups by length (1..=chunk), then emit buckets from the longest.
    let (count, total) = groups(segments(), chunk);
    debug_assert_eq!(items.len(), W * total);
    let mut offset = vec![0usize; chunk + 1];
    let mut acc = 0;
    for len in (1..=chunk).rev() {
        offset[len] = acc;
        acc += count[len];
    }
    for (r, mut first, end) in segments() {
        while first < end {
            let len = ((end - first) as usize).min(chunk);
            let at = W * offset[len];
            items[at..at + W].copy_from_slice(&item(r, first, first + len as u32));
            offset[len] += 1;
            first += len as u32;
        }
    }
}

/// Rows per task of [`ColumnBlockedSchedule::build`]'s pass over the rows.
const ROWS_PER_TASK: usize = 1 << 14;

/// Column-block width of [`ColumnBlockedSchedule`]: 2^18 columns, the slice width the
/// partitioned aggregation measured best (`c6f0242:docs/perf/h100-2026-11-26-column-blocks`: a
/// Reddit-shaped scale-4 SpMM cut into 233 K-column blocks ran 1.51x faster on an H100;
/// graphs of at most one block gained nothing).
pub const COLUMN_BLOCK: usize = 1 << 18;

/// Fewest edges per item, on average, for which a column-blocked schedule is used
/// ([`ColumnBlockedSchedule::worthwhile`]); below it the row schedule runs.
pub const BLOCKED_MIN_EDGES_PER_ITEM: usize = 8;

/// Work items for the warp-per-row kernels that walk the columns in blocks: every item is
/// `(row, first edge, end edge, split)`, the edges of one row whose columns fall in one block
/// of `block` columns, cut into groups of at most `chunk`; all items of block 0 come first
/// (longest first within a block), then block 1, and so on. A kernel walking them in order
/// gathers its rows of `x` from one block at a time, a slice that can stay in L2, where a
/// row-ordered walk reads from all of `x` at once. `split` (0/1) says the row has other items,
/// whose partial sums meet through atomics in the zeroed output; a mean still divides by the
/// whole row's length. Needs rows with sorted columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnBlockedSchedule {
    /// Interleaved `(row, first, end, split)` quadruples.
    pub items: Vec<u32>,
    /// Edge-group length.
    pub chunk: usize,
    /// Columns per block.
    pub block: usize,
}

impl ColumnBlockedSchedule {
    /// Builds the schedule of a CSR (`indptr`, `indices`, rows sorted by column) over
    /// `n_cols` columns in blocks of `block`; `None` when a row is unsorted.
    pub fn build(
        indptr: &[u32],
        indices: &[u32],
        n_cols: usize,
        block: usize,
        chunk: usize,
    ) -> Option<Self> {
        let (block, chunk) = (block.max(1), chunk.max(1));
        let n_rows = indptr.len().saturating_sub(1);
        let blocks = n_cols.div_ceil(block).max(1);
        // Whether each row reaches several blocks (sorted: its first and last columns tell);
        // `None` if a row is unsorted.
        let several: Vec<bool> = indptr
            .par_windows(2)
            .map(|w| {
                let row = &indices[w[0] as usize..w[1] as usize];
                if row.windows(2).any(|p| p[0] > p[1]) {
                    return None;
                }
                Some(match (row.first(), row.last()) {
                    (Some(&a), Some(&z)) => a as usize / block != z as usize / block,
                    _ => false,
                })
            })
            .collect::<Option<_>>()?;
        // Every row's edges cut at the block boundaries, in parallel over tasks of rows: each
        // task lists its rows' segments `(row, first, end)` per block, in row order. (One pass
        // over the edges; walking every row once per block cost `blocks x rows` serial steps,
        // 6 G for a 28 M-row, 106-block share of papers100M.)
        let tasks: Vec<Vec<Vec<[u32; 3]>>> = (0..n_rows.div_ceil(ROWS_PER_TASK))
            .into_par_iter()
            .map(|t| {
                let mut per_block = vec![Vec::new(); blocks];
                for r in t * ROWS_PER_TASK..((t + 1) * ROWS_PER_TASK).min(n_rows) {
                    let start = indptr[r];
                    let row = &indices[start as usize..indptr[r + 1] as usize];
                    let mut first = 0;
                    while first < row.len() {
                        // Columns at or past `n_cols` are in no block (none in a valid CSR).
                        let b = row[first] as usize / block;
                        if b >= blocks {
                            break;
                        }
                        let hi = ((b + 1) * block).min(n_cols) as u32;
                        let stop = first + row[first..].partition_point(|&c| c < hi);
                        if stop == first {
                            break;
                        }
                        per_block[b].push([r as u32, start + first as u32, start + stop as u32]);
                        first = stop;
                    }
                }
                per_block
            })
            .collect();
        // Each block's items longest first, the blocks in order, written in parallel.
        let segments = |b: usize| {
            tasks
                .iter()
                .flat_map(move |t| t[b].iter())
                .map(|s| (s[0] as usize, s[1], s[2]))
        };
        let sizes: Vec<usize> = (0..blocks)
            .into_par_iter()
            .map(|b| 4 * groups(segments(b), chunk).1)
            .collect();
        let mut items = vec![0u32; sizes.iter().sum()];
        let mut parts = Vec::with_capacity(blocks);
        let mut rest = items.as_mut_slice();
        for &len in &sizes {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(len);
            parts.push(head);
            rest = tail;
        }
        parts.into_par_iter().enumerate().for_each(|(b, out)| {
            fill_longest_first(
                out,
                || segments(b),
                chunk,
                |r, first, end| {
                    let split = several[r] || indptr[r + 1] - indptr[r] > chunk as u32;
                    [r as u32, first, end, split as u32]
                },
            );
        });
        Some(Self {
            items,
            chunk,
            block,
        })
    }

    /// Number of work items.
    pub fn len(&self) -> usize {
        self.items.len() / 4
    }

    /// The row-block segments a schedule of blocks of `block` columns would cut (a lower
    /// bound on its items, which split segments longer than the chunk): one parallel pass
    /// over the edges, nothing allocated, so a caller can refuse a schedule that could not pay
    /// ([`Self::worthwhile`]) before building it (its host build holds 12 bytes per segment).
    pub fn segments(indptr: &[u32], indices: &[u32], block: usize) -> usize {
        let block = block.max(1);
        indptr
            .par_windows(2)
            .map(|w| {
                let row = &indices[w[0] as usize..w[1] as usize];
                let mut count = usize::from(!row.is_empty());
                for p in row.windows(2) {
                    count += usize::from(p[0] as usize / block != p[1] as usize / block);
                }
                count
            })
            .sum()
    }

    /// Whether walking the graph's `nnz` edges through this schedule can pay: items average
    /// at least [`BLOCKED_MIN_EDGES_PER_ITEM`] edges. On a sparse graph spread over many blocks
    /// (papers100M-sized: 111 M columns in 424 blocks, rows of ~30 edges) nearly every edge is
    /// an item of its own: 16 bytes of schedule per edge (11 GB on one of 4 ranks) and a warp
    /// step per edge, for no locality a row's few edges could share. The Reddit-shaped graph at
    /// scale 4, where blocks ran 1.51x faster, has ~245 edges per item.
    pub fn worthwhile(&self, nnz: usize) -> bool {
        self.len().saturating_mul(BLOCKED_MIN_EDGES_PER_ITEM) <= nnz
    }

    /// True when there is no work (every row empty).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    /// Every non-empty row once, longest first, ties in row order; no rows, or only empty
    /// ones, give an empty order.
    #[test]
    fn rows_longest_first_orders_every_nonempty_row_once() {
        use super::rows_longest_first;
        // Degrees 3, 0, 5, 1, 5, 0, 3.
        let indptr = [0u32, 3, 3, 8, 9, 14, 14, 17];
        assert_eq!(rows_longest_first(&indptr), vec![2, 4, 0, 6, 3]);
        assert!(rows_longest_first(&[0]).is_empty());
        assert!(rows_longest_first(&[]).is_empty());
        assert!(rows_longest_first(&[0, 0, 0]).is_empty());
        // One long row among many short ones comes first.
        let mut indptr = vec![0u32];
        for r in 0..1000u32 {
            let d = if r == 777 { 5000 } else { 1 + r % 7 };
            indptr.push(indptr[indptr.len() - 1] + d);
        }
        let order = rows_longest_first(&indptr);
        assert_eq!(order.len(), 1000);
        assert_eq!(order[0], 777);
        let deg = |r: u32| indptr[r as usize + 1] - indptr[r as usize];
        assert!(order
            .windows(2)
            .all(|w| deg(w[0]) > deg(w[1]) || (deg(w[0]) == deg(w[1]) && w[0] < w[1])));
        let mut seen = order.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..1000).collect::<Vec<u32>>());
    }

    /// Long rows over a few blocks keep the schedule; short rows over many blocks (an item per
    /// edge or so) refuse it.
    #[test]
    fn blocked_schedules_pay_only_with_several_edges_per_item() {
        use super::*;
        // 64 rows of 256 edges over 1,024 columns in 4 blocks: 4 items a row.
        let (rows, cols) = (64usize, 1024usize);
        let dense: Vec<u32> = (0..rows).flat_map(|_| (0..256u32).map(|j| j * 4)).collect();
        let indptr: Vec<u32> = (0..=rows as u32).map(|i| i * 256).collect();
        let s = ColumnBlockedSchedule::build(&indptr, &dense, cols, 256, CHUNK).unwrap();
        assert_eq!(s.len(), rows * 4);
        assert_eq!(
            ColumnBlockedSchedule::segments(&indptr, &dense, 256),
            rows * 4
        );
        assert!(s.worthwhile(dense.len()));
        // 4,096 rows of 4 edges spread over 64 blocks: an item per edge.
        let (rows, cols) = (4096usize, 1 << 14);
        let sparse: Vec<u32> = (0..rows)
            .flat_map(|i| (0..4u32).map(move |j| (i as u32 * 7 + j * 4099) % cols as u32))
            .collect::<Vec<_>>()
            .chunks(4)
            .flat_map(|c| {
                let mut c = c.to_vec();
                c.sort_unstable();
                c
            })
            .collect();
        let indptr: Vec<u32> = (0..=rows as u32).map(|i| i * 4).collect();
        let s = ColumnBlockedSchedule::build(&indptr, &sparse, cols, 256, CHUNK).unwrap();
        assert!(s.len() > sparse.len() / 2, "{}", s.len());
        assert!(!s.worthwhile(sparse.len()));
        // Short rows: no segment is split, so the pre-count is the item count.
        assert_eq!(
            ColumnBlockedSchedule::segments(&indptr, &sparse, 256),
            s.len()
        );
    }

    use super::{ColumnBlockedSchedule, RowSchedule};
    use rayon::prelude::*;

    fn covered(indptr: &[u32], s: &RowSchedule) -> Vec<(u32, u32, u32)> {
        s.items
            .chunks(2)
            .map(|p| {
                let (row, first) = (p[0], p[1]);
                let end = indptr[row as usize + 1].min(first + s.chunk as u32);
                (row, first, end)
            })
            .collect()
    }

    #[test]
    fn covers_every_edge_once_longest_first() {
        // rows of degree 0, 3, 10, 1, 0, 7, 4
        let indptr = [0u32, 0, 3, 13, 14, 14, 21, 25];
        let s = RowSchedule::build(&indptr, 4);
        let items = covered(&indptr, &s);
        let lens: Vec<u32> = items.iter().map(|&(_, a, b)| b - a).collect();
        assert!(lens.windows(2).all(|w| w[0] >= w[1]), "{lens:?}");
        assert!(lens.iter().all(|&l| (1..=4).contains(&l)));
        let mut edges: Vec<u32> = items.iter().flat_map(|&(_, a, b)| a..b).collect();
        edges.sort_unstable();
        assert_eq!(edges, (0..25).collect::<Vec<_>>());
        for &(row, a, b) in &items {
            assert!(indptr[row as usize] <= a && b <= indptr[row as usize + 1]);
        }
        // 3; 10 = 4 + 4 + 2; 1; 7 = 4 + 3; 4: 8 items, none for the empty rows.
        assert_eq!(s.len(), 8);
        assert_eq!(items[0], (2, 3, 7));
        assert_eq!(items[3].0, 6);
    }

    #[test]
    fn column_blocks_cover_every_edge_once_block_by_block() {
        // 3 rows over 10 columns, blocks of 4 (0..4, 4..8, 8..10), chunk 2.
        let indptr = [0u32, 5, 5, 9];
        let indices = [0u32, 1, 4, 5, 9, 2, 3, 8, 9];
        let s = ColumnBlockedSchedule::build(&indptr, &indices, 10, 4, 2).unwrap();
        let items: Vec<[u32; 4]> = s
            .items
            .chunks(4)
            .map(|q| [q[0], q[1], q[2], q[3]])
            .collect();
        let block_of = |it: &[u32; 4]| indices[it[1] as usize] as usize / 4;
        let mut edges = Vec::new();
        let mut last_block = 0;
        for it in &items {
            let [row, a, e, split] = *it;
            assert!(a < e && e - a <= 2, "{it:?}");
            assert!(indptr[row as usize] <= a && e <= indptr[row as usize + 1]);
            // One block per item, blocks in order.
            let b = block_of(it);
            assert!(
                (a..e).all(|p| indices[p as usize] as usize / 4 == b),
                "{it:?}"
            );
            assert!(b >= last_block);
            last_block = b;
            // Both non-empty rows reach two or more blocks: every item is split.
            assert_eq!(split, 1);
            edges.extend(a..e);
        }
        edges.sort_unstable();
        assert_eq!(edges, (0..9).collect::<Vec<_>>());
        // Row 0: {0,1} in block 0, {4,5} in block 1, {9} in block 2; row 2: {2,3}, {8,9}.
        assert_eq!(s.len(), 5);
        assert_eq!(items[0][..3], [0, 0, 2]);
        // A row within one block and one chunk is not split; an unsorted row is refused.
        let one = ColumnBlockedSchedule::build(&[0, 2], &[1, 3], 10, 4, 2).unwrap();
        assert_eq!(one.items, vec![0, 0, 2, 0]);
        assert!(ColumnBlockedSchedule::build(&[0, 2], &[3, 1], 10, 4, 2).is_none());
        assert!(ColumnBlockedSchedule::build(&[0, 0], &[], 10, 4, 2)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn column_blocks_of_random_graphs_cover_every_edge_once() {
        use rand::{Rng, SeedableRng};
        let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        for case in 0..40 {
            let (rows, cols) = (r.random_range(1..60usize), r.random_range(1..300usize));
            let (block, chunk) = (r.random_range(1..80usize), r.random_range(1..12usize));
            let mut indptr = vec![0u32];
            let mut indices = Vec::new();
            for i in 0..rows {
                // Empty rows, and one long row.
                let len = if i % 7 == 3 {
                    0
                } else if i == 1 {
                    200
                } else {
                    r.random_range(0..30)
                };
                let mut row: Vec<u32> = (0..len).map(|_| r.random_range(0..cols as u32)).collect();
                row.sort_unstable();
                indices.extend(row);
                indptr.push(indices.len() as u32);
            }
            let s = ColumnBlockedSchedule::build(&indptr, &indices, cols, block, chunk).unwrap();
            let blk = |p: u32| indices[p as usize] as usize / block;
            let mut seen = vec![0u32; indices.len()];
            let mut prev: Option<(usize, u32)> = None;
            for q in s.items.chunks(4) {
                let (row, a, e, split) = (q[0] as usize, q[1], q[2], q[3]);
                assert!(a < e && (e - a) as usize <= chunk, "case {case}: {q:?}");
                assert!(
                    indptr[row] <= a && e <= indptr[row + 1],
                    "case {case}: {q:?}"
                );
                let b = blk(a);
                assert!(
                    (a..e).all(|p| blk(p) == b),
                    "case {case}: {q:?} spans blocks"
                );
                // Blocks in order; longest first within a block.
                if let Some((pb, plen)) = prev {
                    assert!(pb < b || (pb == b && plen >= e - a), "case {case}: order");
                }
                prev = Some((b, e - a));
                let row_blocks: std::collections::BTreeSet<usize> =
                    (indptr[row]..indptr[row + 1]).map(blk).collect();
                let alone = row_blocks.len() == 1 && indptr[row + 1] - indptr[row] <= chunk as u32;
                assert_eq!(split == 0, alone, "case {case}: {q:?}");
                (a..e).for_each(|p| seen[p as usize] += 1);
            }
            assert!(seen.iter().all(|&n| n == 1), "case {case}: every edge once");
        }
    }

    // The schedule of 4a97f1e (every row walked once per block), the reference of the
    // one-pass build.

    /// Cuts the edge range `range(r)` of every row `r` in `0..n_rows` into groups of at most
    /// `chunk` edges and appends them to `items` longest first (a counting sort on group length,
    /// `O(n_rows + groups + chunk)`; equal lengths keep row order), each as the words
    /// `item(row, first, end)`.
    fn old_push_longest_first<const W: usize>(
        items: &mut Vec<u32>,
        n_rows: usize,
        range: impl Fn(usize) -> (u32, u32),
        chunk: usize,
        item: impl Fn(usize, u32, u32) -> [u32; W],
    ) {
        // Bucket groups by length (1..=chunk), then emit buckets from the longest.
        let mut count = vec![0usize; chunk + 1];
        for r in 0..n_rows {
            let (first, end) = range(r);
            let len = (end - first) as usize;
            count[chunk] += len / chunk;
            count[len % chunk] += 1;
        }
        count[0] = 0;
        let mut offset = vec![0usize; chunk + 1];
        let mut acc = 0;
        for len in (1..=chunk).rev() {
            offset[len] = acc;
            acc += count[len];
        }
        let base = items.len();
        items.resize(base + W * acc, 0);
        for r in 0..n_rows {
            let (mut first, end) = range(r);
            while first < end {
                let len = ((end - first) as usize).min(chunk);
                let at = base + W * offset[len];
                items[at..at + W].copy_from_slice(&item(r, first, first + len as u32));
                offset[len] += 1;
                first += len as u32;
            }
        }
    }

    fn old_build(
        indptr: &[u32],
        indices: &[u32],
        n_cols: usize,
        block: usize,
        chunk: usize,
    ) -> Option<ColumnBlockedSchedule> {
        let (block, chunk) = (block.max(1), chunk.max(1));
        let n_rows = indptr.len().saturating_sub(1);
        let blocks = n_cols.div_ceil(block).max(1);
        // Per row, where each block's edges start: a cursor walked block by block.
        let mut cursor: Vec<u32> = indptr[..n_rows].to_vec();
        // Whether each row reaches several blocks (sorted: its first and last columns tell);
        // `None` if a row is unsorted.
        let several: Vec<bool> = indptr
            .par_windows(2)
            .map(|w| {
                let row = &indices[w[0] as usize..w[1] as usize];
                if row.windows(2).any(|p| p[0] > p[1]) {
                    return None;
                }
                Some(match (row.first(), row.last()) {
                    (Some(&a), Some(&z)) => a as usize / block != z as usize / block,
                    _ => false,
                })
            })
            .collect::<Option<_>>()?;
        let mut items = Vec::new();
        for b in 0..blocks {
            let hi = ((b + 1) * block).min(n_cols) as u32;
            // Where each row's edges of this block end (rows in parallel).
            let stop: Vec<u32> = cursor
                .par_iter()
                .zip(indptr[1..].par_iter())
                .map(|(&first, &end)| {
                    let row = &indices[first as usize..end as usize];
                    first + row.partition_point(|&c| c < hi) as u32
                })
                .collect();
            // Longest first within the block.
            old_push_longest_first(
                &mut items,
                n_rows,
                |r| (cursor[r], stop[r]),
                chunk,
                |r, first, end| {
                    let split = several[r] || indptr[r + 1] - indptr[r] > chunk as u32;
                    [r as u32, first, end, split as u32]
                },
            );
            cursor = stop;
        }
        Some(ColumnBlockedSchedule {
            items,
            chunk,
            block,
        })
    }

    #[test]
    fn the_one_pass_build_is_the_block_by_block_one() {
        use rand::{Rng, SeedableRng};
        let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(17);
        for case in 0..60 {
            let rows = r.random_range(1..40_000usize >> (case % 4 * 3));
            let cols = r.random_range(1..5_000usize);
            let (block, chunk) = (r.random_range(1..600usize), r.random_range(1..40usize));
            let mut indptr = vec![0u32];
            let mut indices = Vec::new();
            for i in 0..rows {
                let len = match i % 11 {
                    3 => 0,
                    5 => r.random_range(0..3 * chunk),
                    _ => r.random_range(0..12),
                };
                let mut row: Vec<u32> = (0..len).map(|_| r.random_range(0..cols as u32)).collect();
                row.sort_unstable();
                indices.extend(row);
                indptr.push(indices.len() as u32);
            }
            let got = ColumnBlockedSchedule::build(&indptr, &indices, cols, block, chunk);
            let want = old_build(&indptr, &indices, cols, block, chunk);
            assert_eq!(
                got, want,
                "case {case}: {rows} rows, {cols} columns, block {block}"
            );
            let rows_got = RowSchedule::build(&indptr, chunk);
            let mut items = Vec::new();
            old_push_longest_first(
                &mut items,
                rows,
                |r| (indptr[r], indptr[r + 1]),
                chunk,
                |r, first, _| [r as u32, first],
            );
            assert_eq!(rows_got.items, items, "case {case}: row schedule");
        }
    }

    #[test]
    fn empty_graph_and_chunk_one() {
        assert!(RowSchedule::build(&[0, 0, 0], 8).is_empty());
        assert!(RowSchedule::build(&[0], 8).is_empty());
        let s = RowSchedule::build(&[0, 2, 3], 1);
        assert_eq!(s.items, vec![0, 0, 0, 1, 1, 2]);
    }
}
