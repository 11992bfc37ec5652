//! The sum/mean SpMM dispatcher on CUDA: GE-SpMM's row-scheduled kernel or HP-SpMM's
//! nnz-balanced one, per (graph, K), by a rule read off the measured graph sweep
//! (`docs/perf/`, `bench_graphs`). Plain arithmetic over the graph's degree statistics,
//! tested without a GPU.

/// What the dispatcher knows of a graph: computed once per [`crate::DeviceGraph`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DegreeStats {
    /// Rows (output rows of the SpMM).
    pub rows: usize,
    /// Stored edges.
    pub nnz: usize,
    /// Largest row degree.
    pub max_degree: usize,
}

impl DegreeStats {
    /// The statistics of a CSR given by its row pointers.
    pub fn of(indptr: &[u32]) -> Self {
        let rows = indptr.len().saturating_sub(1);
        let nnz = indptr.last().copied().unwrap_or(0) as usize;
        let max_degree = indptr
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0);
        Self {
            rows,
            nnz,
            max_degree,
        }
    }

    /// Mean row degree (0 for a graph without rows).
    pub fn mean_degree(&self) -> f64 {
        if self.rows == 0 {
            0.0
        } else {
            self.nnz as f64 / self.rows as f64
        }
    }
}

/// Largest width at which HP-SpMM wins on any graph of the sweep.
pub const HP_ALWAYS_K: usize = 16;
/// Mean row length at or below which HP-SpMM wins at every width (sparse graphs).
pub const HP_SPARSE_MEAN_DEGREE: f64 = 32.0;
/// Non-zeros at or below which HP-SpMM wins up to [`HP_SMALL_MAX_K`] (the small-graph tail).
pub const HP_SMALL_NNZ: usize = 400_000;
/// Widest K of the small-graph rule.
pub const HP_SMALL_MAX_K: usize = 128;

/// Whether HP-SpMM should run a sum/mean SpMM of width `k` over a graph with `stats`.
///
/// The rule read off the H100 graph sweep (`docs/perf/h100-2026-11-24-hp-spmm`, 21 graphs x
/// K = 16..256, both kernels timed on every pair): HP-SpMM wins at K <= 16 almost everywhere
/// (1.1-1.8x; its lane groups keep every lane busy on narrow rows), on sparse graphs (mean row
/// <= 32: 1.0-1.8x at every K) and on small graphs (<= 400 K non-zeros, K <= 128: 1.2-1.6x,
/// the tail effect of one warp per row); GE-SpMM's row schedule wins on large dense graphs
/// from K = 32 up (HP 0.56-0.97x at K >= 64 on the Reddit-shaped graph, where its atomic
/// flushes of partial rows and re-read rows cost more than the balance buys). Over the sweep
/// this rule is 2.0 % slower than always picking the faster kernel; GE-SpMM alone is 13.9 %.
pub fn prefer_hp(stats: DegreeStats, k: usize) -> bool {
    k <= HP_ALWAYS_K
        || (stats.rows > 0 && stats.mean_degree() <= HP_SPARSE_MEAN_DEGREE)
        || (stats.nnz <= HP_SMALL_NNZ && k <= HP_SMALL_MAX_K)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_a_small_csr() {
        let s = DegreeStats::of(&[0, 0, 3, 13, 14]);
        assert_eq!((s.rows, s.nnz, s.max_degree), (4, 14, 10));
        assert!((s.mean_degree() - 3.5).abs() < 1e-12);
        let e = DegreeStats::of(&[0]);
        assert_eq!((e.rows, e.nnz, e.max_degree), (0, 0, 0));
        assert_eq!(e.mean_degree(), 0.0);
    }

    #[test]
    fn rule_matches_the_sweep_regions() {
        let g = |rows: usize, nnz: usize| DegreeStats {
            rows,
            nnz,
            max_degree: 0,
        };
        // Reddit-shaped (114.5 M non-zeros, mean row 492): HP only at K = 16.
        let reddit = g(232_965, 114_543_559);
        assert!(prefer_hp(reddit, 16) && prefer_hp(reddit, 8));
        assert!([32, 64, 128, 256].iter().all(|&k| !prefer_hp(reddit, k)));
        // Sparse (mean row 12): HP at every K.
        let sparse = g(1_000_000, 11_993_340);
        assert!([16, 64, 256, 602].iter().all(|&k| prefer_hp(sparse, k)));
        // Small and dense (Reddit-shaped at 1 %: 114 K non-zeros, mean row 49): HP to K = 128.
        let small = g(2_329, 114_376);
        assert!(prefer_hp(small, 128) && !prefer_hp(small, 256));
        // An empty graph is not "sparse" by its mean of 0 rows.
        assert!(!prefer_hp(g(0, 0), 256));
        assert!(prefer_hp(g(0, 0), 128));
    }
}
