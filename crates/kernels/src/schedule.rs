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
        // Bucket items by length (1..=chunk), then emit buckets from the longest.
        let mut count = vec![0usize; chunk + 1];
        for w in indptr.windows(2) {
            let deg = (w[1] - w[0]) as usize;
            count[chunk] += deg / chunk;
            count[deg % chunk] += 1;
        }
        count[0] = 0;
        let mut offset = vec![0usize; chunk + 1];
        let mut acc = 0;
        for len in (1..=chunk).rev() {
            offset[len] = acc;
            acc += count[len];
        }
        let mut items = vec![0u32; 2 * acc];
        for (row, w) in indptr.windows(2).enumerate() {
            let (start, end) = (w[0], w[1]);
            let mut first = start;
            while first < end {
                let len = ((end - first) as usize).min(chunk);
                let at = &mut offset[len];
                items[2 * *at] = row as u32;
                items[2 * *at + 1] = first;
                *at += 1;
                first += len as u32;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::RowSchedule;

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
    fn empty_graph_and_chunk_one() {
        assert!(RowSchedule::build(&[0, 0, 0], 8).is_empty());
        assert!(RowSchedule::build(&[0], 8).is_empty());
        let s = RowSchedule::build(&[0, 2, 3], 1);
        assert_eq!(s.items, vec![0, 0, 0, 1, 1, 2]);
    }
}
