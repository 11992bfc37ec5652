//! The sum/mean SpMM dispatcher on CUDA: GE-SpMM's row-scheduled kernel, its narrow-row
//! kernel or HP-SpMM's nnz-balanced one, per (graph, K, element size), by a rule read off the
//! measured graph sweeps
//! (`c6f0242:docs/perf/`, `bench_graphs`). Plain arithmetic over the graph's degree statistics
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

/// Widest row, in 16-byte lane loads, that the dispatcher gives GE-SpMM's narrow-row kernel.
/// From `bench_spmm --kernels` on the Reddit-shaped graph (H100,
/// `c6f0242:docs/perf/h100-2026-11-25-narrow`): against the row kernel it wins 1.6-1.8x at 1-2
/// lanes (K = 8, 16), 1.47x at bf16 K = 32 (4 lanes), 1.84x at bf16 K = 41 (6 lanes), 1.36x at bf16
/// K = 64 (8), 1.20x at f32 K = 41 (11); it ties at 8 lanes in f32 (K = 32) and at 16 (f32
/// K = 64) and loses at 16 lanes in bf16 (K = 128: 0.93x).
pub const NARROW_MAX_LANES: usize = 12;

/// Non-zeros from which the narrow kernel also takes widths it must pad (a copy of `x` into
/// 16-byte rows first): on the graph sweep (`c6f0242:docs/perf/h100-2026-11-25-narrow-graphs`) the
/// padded widths (K = 1, f32 K = 41) lose to HP-SpMM / the row kernel on 1.3 M non-zeros
/// (0.56-0.61x) and win from 10.2 M (1.1-1.3x); the boundary sits between the two.
pub const NARROW_PAD_MIN_NNZ: usize = 4_000_000;

/// The narrow kernel's shape for `k` columns of `elem_bytes`-byte elements under the
/// dispatcher: `(kp, lanes)`, the row stride padded to whole 16-byte loads and the lanes one
/// row needs; `None` when a row needs more than [`NARROW_MAX_LANES`].
pub fn narrow_shape(k: usize, elem_bytes: usize) -> Option<(usize, usize)> {
    narrow_shape_upto(k, elem_bytes, NARROW_MAX_LANES)
}

/// [`narrow_shape`] up to `max_lanes` lanes.
pub(crate) fn narrow_shape_upto(
    k: usize,
    elem_bytes: usize,
    max_lanes: usize,
) -> Option<(usize, usize)> {
    let vec = 16 / elem_bytes.clamp(1, 16);
    let kp = k.div_ceil(vec) * vec;
    let lanes = kp / vec;
    (k > 0 && lanes <= max_lanes).then_some((kp, lanes))
}

/// The kernel the dispatcher runs a sum/mean SpMM on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// HP-SpMM (nnz-balanced lane groups).
    Hp,
    /// GE-SpMM's narrow-row kernel (several edges per warp step).
    Narrow,
    /// GE-SpMM's row kernel (one edge per warp step, column tiles).
    Row,
}

/// The kernel for a sum/mean SpMM of width `k` over `elem_bytes`-byte features (4: f32, 2:
/// bf16 / f16) on a graph of `nnz` stored edges whose row degrees `stats` summarises.
///
/// Read off the H100 graph sweeps (`c6f0242:docs/perf/h100-2026-11-24-hp-spmm`: 21 graphs x K =
/// 16..256 and K = 1..32; `c6f0242:docs/perf/h100-2026-11-25-narrow-graphs`: 12 graphs x K = 1..64
/// with the narrow kernel):
/// - Sparse graphs (mean row <= 32): HP-SpMM at every K (1.0-3.5x over the row kernel; the
///   narrow kernel does not beat it there).
/// - Small graphs (<= 400 K non-zeros, K <= 128): HP-SpMM (1.2-1.6x, the tail of one warp per
///   row).
/// - Otherwise the narrow kernel wherever a row fits [`NARROW_MAX_LANES`] lanes, unless the
///   width must be padded on a graph under [`NARROW_PAD_MIN_NNZ`]: at K = 4-16 it beats
///   HP-SpMM, the previous choice there, on every dense graph of the sweep from 1.3 M
///   non-zeros up (e.g. 0.111 against 0.155 ms at K = 16 on 10.2 M, 0.367 against 0.904 at
///   K = 4 on 40 M), and the row kernel from K = 32 to 48 (f32) / 96 (half).
/// - Then, as before the narrow kernel: HP-SpMM at K = 16 and at K < 16 up to
///   [`HP_NARROW_NNZ`] (the padded narrow widths on mid-sized graphs), the row kernel
///   otherwise (wide rows on large dense graphs, where HP's atomic flushes cost more than its
///   balance buys).
pub fn pick(stats: &DegreeStats, nnz: usize, k: usize, elem_bytes: usize) -> Pick {
    let sparse = stats.count > 0 && stats.mean <= HP_SPARSE_MEAN_DEGREE;
    if sparse || (nnz <= HP_SMALL_NNZ && k <= HP_SMALL_MAX_K) {
        return Pick::Hp;
    }
    if let Some((kp, _)) = narrow_shape(k, elem_bytes) {
        if kp == k || nnz >= NARROW_PAD_MIN_NNZ {
            return Pick::Narrow;
        }
    }
    if (k < HP_ALWAYS_K && nnz <= HP_NARROW_NNZ) || k == HP_ALWAYS_K {
        Pick::Hp
    } else {
        Pick::Row
    }
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
        let at = |(s, nnz): &(DegreeStats, usize), k, b| pick(s, *nnz, k, b);
        use Pick::{Hp, Narrow, Row};
        // Reddit-shaped (114.5 M non-zeros, mean row 492): the narrow kernel to 12 lanes.
        let reddit = g(232_965, 114_543_559);
        for k in [1, 4, 8, 16, 32, 41, 48] {
            assert_eq!(at(&reddit, k, 4), Narrow, "f32 K = {k}");
        }
        assert_eq!(at(&reddit, 64, 4), Row);
        assert_eq!(at(&reddit, 96, 2), Narrow);
        assert!([128, 256, 602].iter().all(|&k| at(&reddit, k, 2) == Row));
        // Reddit-shaped at 20 % (10.2 M non-zeros): padded widths too.
        let fifth = g(46_593, 10_226_785);
        assert!([1, 4, 16, 32, 41]
            .iter()
            .all(|&k| at(&fifth, k, 4) == Narrow));
        assert_eq!(at(&fifth, 64, 4), Row);
        // 1.3 M non-zeros, dense: unpadded widths narrow, padded ones as before.
        let mid = g(11_646, 1_280_344);
        assert!([4, 8, 16, 32].iter().all(|&k| at(&mid, k, 4) == Narrow));
        assert_eq!(at(&mid, 1, 4), Hp);
        assert_eq!(at(&mid, 41, 4), Row);
        assert_eq!(at(&mid, 41, 2), Row);
        assert_eq!(at(&mid, 6, 2), Hp);
        // Sparse (mean row 12): HP at every K.
        let sparse = g(1_000_000, 11_993_340);
        assert!([1, 16, 64, 256, 602]
            .iter()
            .all(|&k| at(&sparse, k, 4) == Hp));
        // Small and dense (Reddit-shaped at 1 %: 114 K non-zeros, mean row 49): HP to K = 128.
        let small = g(2_329, 114_376);
        assert!(at(&small, 128, 4) == Hp && at(&small, 256, 4) == Row);
        // An empty graph is not "sparse" by its mean of 0 rows.
        let empty = (DegreeStats::from_degrees(&[]), 0);
        assert_eq!(at(&empty, 256, 4), Row);
        assert_eq!(at(&empty, 128, 4), Hp);
        // Shapes: 16-byte rows.
        assert_eq!(narrow_shape(41, 2), Some((48, 6)));
        assert_eq!(narrow_shape(41, 4), Some((44, 11)));
        assert_eq!(narrow_shape(49, 4), None);
        assert_eq!(narrow_shape(0, 4), None);
    }
}
