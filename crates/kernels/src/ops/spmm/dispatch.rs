//! The sum/mean SpMM dispatcher on CUDA: GE-SpMM's row-scheduled kernel or HP-SpMM's
//! nnz-balanced one, per (graph, K), by a rule read off the measured graph sweep
//! (`docs/perf/`, `bench_graphs`). Plain arithmetic over the graph's degree statistics
//! ([`gnn_graph::csr::DegreeStats`], cached per [`crate::DeviceGraph`]), tested without a GPU.

use gnn_graph::csr::DegreeStats;

/// Widest K at which HP-SpMM wins on every graph of the sweep but the smallest ones.
pub const HP_ALWAYS_K: usize = 16;
/// Below [`HP_ALWAYS_K`] (K = 1..8, the per-head widths of attention layers), HP-SpMM wins only
/// on graphs of at most this many non-zeros: its lane groups then hold a few columns each and
/// flush shared rows atomically per group, which large dense graphs pay for.
pub const HP_NARROW_NNZ: usize = 30_000_000;
/// Mean row length at or below which HP-SpMM wins at every width (sparse graphs).
pub const HP_SPARSE_MEAN_DEGREE: f64 = 32.0;
/// Non-zeros at or below which HP-SpMM wins up to [`HP_SMALL_MAX_K`] (the small-graph tail).
pub const HP_SMALL_NNZ: usize = 400_000;
/// Widest K of the small-graph rule.
pub const HP_SMALL_MAX_K: usize = 128;

/// Whether HP-SpMM should run a sum/mean SpMM of width `k` over a graph of `nnz` stored
/// edges whose row degrees are summarised by `stats`.
///
/// The rule read off the H100 graph sweeps (`docs/perf/h100-2026-11-24-hp-spmm`: 21 graphs x
/// K = 16..256, and K = 1..32 on plain and 8-head-expanded graphs, both kernels timed on every
/// pair):
/// - K = 16: HP-SpMM wins almost everywhere (1.1-1.8x; its lane groups keep every lane busy
///   on narrow rows).
/// - K = 1..8: HP-SpMM wins on graphs up to 10.2 M non-zeros (1.1-1.9x) but loses on the
///   large dense ones (81.8 M and 114.5 M non-zeros, mean row 220-490: 0.3x at K = 1, 0.6x at
///   K = 4, 0.9x at K = 8), so it runs only up to [`HP_NARROW_NNZ`], a boundary between those
///   measured sizes. (The first rule, HP for every K <= 16, slowed GAT training on a 23 M-edge
///   graph from 65 to 79 ms per epoch through its K = 1 and K = 8 aggregations on the
///   188 M-edge head-expanded graph.)
/// - Sparse graphs (mean row <= 32): HP wins at every K (1.0-3.5x).
/// - Small graphs (<= 400 K non-zeros, K <= 128): HP wins 1.2-1.6x, the tail effect of one
///   warp per row.
/// - Otherwise GE-SpMM's row schedule wins on large dense graphs from K = 32 up (HP 0.56-0.97x
///   at K >= 64 on the Reddit-shaped graph, where its atomic flushes of partial rows and
///   re-read rows cost more than the balance buys).
///
/// Over the K = 16..256 sweep this rule is 2.0 % slower than always picking the faster
/// kernel; GE-SpMM alone is 13.9 %.
pub fn prefer_hp(stats: &DegreeStats, nnz: usize, k: usize) -> bool {
    let sparse = stats.count > 0 && stats.mean <= HP_SPARSE_MEAN_DEGREE;
    sparse
        || (k < HP_ALWAYS_K && nnz <= HP_NARROW_NNZ)
        || k == HP_ALWAYS_K
        || (nnz <= HP_SMALL_NNZ && k <= HP_SMALL_MAX_K)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_matches_the_sweep_regions() {
        // Degree sequences of `rows` rows averaging `nnz / rows` (the rule reads the count
        // and the mean).
        let g = |rows: usize, nnz: usize| {
            let deg: Vec<u32> = (0..rows)
                .map(|i| (nnz * (i + 1) / rows - nnz * i / rows) as u32)
                .collect();
            assert_eq!(deg.iter().map(|&d| d as usize).sum::<usize>(), nnz);
            (DegreeStats::from_degrees(&deg), nnz)
        };
        let hp = |(s, nnz): &(DegreeStats, usize), k| prefer_hp(s, *nnz, k);
        // Reddit-shaped (114.5 M non-zeros, mean row 492): HP only at K = 16.
        let reddit = g(232_965, 114_543_559);
        assert!(hp(&reddit, 16));
        assert!([1, 4, 8, 32, 64, 128, 256].iter().all(|&k| !hp(&reddit, k)));
        // Reddit-shaped at 20 % (10.2 M non-zeros, mean row 220): HP up to K = 16.
        let fifth = g(46_593, 10_226_785);
        assert!([1, 4, 8, 16].iter().all(|&k| hp(&fifth, k)));
        assert!([32, 64].iter().all(|&k| !hp(&fifth, k)));
        // Its 8-head expansion (81.8 M non-zeros): the narrow widths go to GE.
        let heads = g(372_744, 81_814_280);
        assert!(hp(&heads, 16) && !hp(&heads, 8) && !hp(&heads, 1));
        // Sparse (mean row 12): HP at every K.
        let sparse = g(1_000_000, 11_993_340);
        assert!([16, 64, 256, 602].iter().all(|&k| hp(&sparse, k)));
        // Small and dense (Reddit-shaped at 1 %: 114 K non-zeros, mean row 49): HP to K = 128.
        let small = g(2_329, 114_376);
        assert!(hp(&small, 128) && !hp(&small, 256));
        // An empty graph is not "sparse" by its mean of 0 rows.
        let empty = (DegreeStats::from_degrees(&[]), 0);
        assert!(!hp(&empty, 256));
        assert!(hp(&empty, 128));
    }
}
