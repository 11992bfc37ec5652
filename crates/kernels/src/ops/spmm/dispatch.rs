//! The sum/mean SpMM dispatcher on CUDA: GE-SpMM's row-scheduled kernel, its narrow-row
//! kernel or HP-SpMM's nnz-balanced one, per (graph, K, element size), by a rule read off the
//! measured graph sweeps
//! (`c6f0242:docs/perf/`, `bench_graphs`). Plain arithmetic over the graph's degree statistics
//! ([`gnn_graph::csr::DegreeStats`], cached per [`crate::DeviceGraph`]) and the graph's
//! [`KernelPolicy`] ([`spmm_choice`]), tested without a GPU.

use crate::device_graph::DeviceGraph;
use crate::partition::NPW_CANDIDATES;
use crate::policy::{KernelPolicy, SpmmKernel};
use gnn_graph::csr::DegreeStats;
use serde::{Deserialize, Serialize};

/// Widest K at which HP-SpMM wins on every graph of the sweep but the smallest ones.
pub const HP_ALWAYS_K: usize = 16;
/// Below [`HP_ALWAYS_K`] (K = 1..8, the per-head widths of attention layers), HP-SpMM wins only
/// on graphs of at most this many non-zeros: its lane groups then hold a few columns each and
/// flush shared rows atomically per group, which large dense graphs pay for.
pub const HP_NARROW_NNZ: usize = 30_000_000;
/// Mean row length at or below which HP-SpMM wins at every width (sparse graphs).
pub const HP_SPARSE_MEAN_DEGREE: f64 = 32.0;
/// Widest K at which the narrow kernel takes over from HP-SpMM on a large sparse graph (mean row
/// <= [`HP_SPARSE_MEAN_DEGREE`], at least [`HP_NARROW_NNZ`] non-zeros): on the dispatch record
/// (`fd3e7d6:bench/records/dispatch/h100-2026-11-27`) the products-like graph (2.5 M rows, 62.5 M
/// non-zeros, mean row 25) runs HP-SpMM at 3.1-4.7 ms at K = 1..4 (slower than at K = 16: 2.3-2.7)
/// and the narrow kernel at 1.9-2.9 ms, in its random, RCM and Louvain orders, f32 and bf16;
/// from K = 8 they are within 13 % and HP-SpMM wins at 16. Smaller sparse graphs (12 M
/// non-zeros, meshes of 9 M and 20 M) keep HP-SpMM at every K (2-6x over the narrow kernel).
pub const SPARSE_NARROW_MAX_K: usize = 4;
/// Non-zeros at or below which HP-SpMM wins up to [`HP_SMALL_MAX_K`] (the small-graph tail).
pub const HP_SMALL_NNZ: usize = 400_000;
/// Widest K of the small-graph rule.
pub const HP_SMALL_MAX_K: usize = 128;

/// Largest max-row / mean-row ratio of a sparse graph (mean row <= [`HP_SPARSE_MEAN_DEGREE`])
/// that counts as uniform, where row groups ([`Pick::Group`]) take every width they can run:
/// on the dispatch record (`bench/records/dispatch/h100-2026-11-28/h100x4-2026-11-27`) the road-like meshes
/// (ratios 1.2-1.6; 10 K to 4 M rows) run them faster than every other kernel in all 39 cases
/// they apply to (21 f32, 18 bf16), 0.21-0.78x the best other in f32 and 0.28-0.60x in bf16
/// (mesh-4M bf16 K = 128: 3.27 ms against HP-SpMM's 7.60). Power-law sparse graphs have ratios
/// of 34-70.
pub const GROUP_UNIFORM_MAX_RATIO: f64 = 4.0;
/// Rows from which a non-uniform sparse graph takes row groups at the widths of
/// [`GROUP_NARROW_MAX_K`] and [`GROUP_WIDE_MIN_BYTES`]: on the record the arxiv/products-like
/// graphs of 1 M and 2.5 M rows (mean rows 12 and 25, any order) run them at 0.43-0.99x the
/// best other kernel there, while those of 100 K rows (and Cora) lose at most widths
/// (1.02-2.5x): with few rows the longest ones hold the tail.
pub const GROUP_MIN_ROWS: usize = 1_000_000;
/// Widest K at which a large non-uniform sparse graph takes row groups (K = 4, 8: one or two
/// 16-byte loads per row; 0.43-0.99x on the record).
pub const GROUP_NARROW_MAX_K: usize = 8;
/// Row bytes (K x element size) from which a large non-uniform sparse graph takes row groups
/// (f32 K >= 64, bf16 K >= 128: 0.57-0.99x on the record). Between the two HP-SpMM stays:
/// row groups are mixed at bf16 K = 16-64 (0.89-1.41x) and a few percent faster at f32 K = 16.
pub const GROUP_WIDE_MIN_BYTES: usize = 256;
/// Row bytes from which a large sparse graph whose rows come in descending degree order
/// ([`DegreeStats::descending`], as `--reorder auto` leaves graphs of a million nodes or more)
/// takes row groups: the rows that share a warp are then about as long as each other, so no
/// hub row stalls the others. On `bench/records/reorder-spmm/h100-2026-11-28` (the
/// products-like graphs of 1 M and 2.5 M rows by degree, K = 64..256, f32 and bf16) row groups
/// are the fastest candidate in all 12 cases, and at bf16 K = 64, below
/// [`GROUP_WIDE_MIN_BYTES`], 1.86x and 1.34x faster than HP-SpMM, the rule's pick before. Its
/// `rule-check/` (the same graphs, K = 32..128, this rule at 128 bytes) adds f32 K = 32 (row
/// groups the fastest, 0.500 / 2.573 ms) and bf16 K = 32, 64-byte rows (row groups 1.05x and
/// 1.30x faster than HP-SpMM, the pick there). f32 K = 16 has the same 64-byte rows and lane
/// layout (4 lanes a row) and follows, unmeasured; narrower rows were not measured.
pub const GROUP_DESCENDING_MIN_BYTES: usize = 64;

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

/// The row-group kernel's shape ([`SpmmChoice::Group`]) for `k` columns of `elem_bytes`-byte
/// elements starting `offset` elements into their buffer: `(lanes, tiles)`, the lanes a row
/// takes in one column tile (at most 32, each 16 bytes per load) and the tiles; `None` where a
/// row is not whole 16-byte loads or the rows are not 16-byte aligned (the row kernel runs
/// then).
pub fn group_shape(k: usize, elem_bytes: usize, offset: usize) -> Option<(usize, usize)> {
    let vec = 16 / elem_bytes.clamp(1, 16);
    if k == 0 || !k.is_multiple_of(vec) || !offset.is_multiple_of(vec) {
        return None;
    }
    let loads = k / vec;
    Some((loads.min(32), loads.div_ceil(32)))
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
    /// Row groups (several short rows per warp, the result written in the features'
    /// precision).
    Group,
}

/// The kernel for a sum/mean SpMM of width `k` over `elem_bytes`-byte features (4: f32, 2:
/// bf16 / f16) on a graph of `nnz` stored edges whose row degrees `stats` summarises.
///
/// Read off the H100 graph sweeps (`c6f0242:docs/perf/h100-2026-11-24-hp-spmm`: 21 graphs x K =
/// 16..256 and K = 1..32; `c6f0242:docs/perf/h100-2026-11-25-narrow-graphs`: 12 graphs x K = 1..64
/// with the narrow kernel):
/// - Sparse graphs (mean row <= 32): HP-SpMM at every K (1.0-3.5x over the row kernel; the
///   narrow kernel does not beat it there), but the narrow kernel up to [`SPARSE_NARROW_MAX_K`]
///   from [`HP_NARROW_NNZ`] non-zeros.
///
/// Re-measured on 26 graphs x K = 1..602 x f32/bf16 (`fd3e7d6:bench/records/dispatch/h100-2026-11-27`,
/// 520 cases, its README): the rule before the large-sparse exception picked the fastest kernel
/// in 446 cases, regret (pick / fastest) geometric mean 1.027, worst 2.15; with it 464, 1.010,
/// 1.70.
///
/// Re-measured with row groups as a fourth candidate (`bench/records/dispatch/h100-2026-11-28/h100x4-2026-11-27`,
/// the same 520 cases; its README): the rule above picks the fastest in 390 cases, regret
/// geometric mean 1.085 (row groups win 89 cases, 82 of them on sparse graphs); with the row-group
/// branch below 461, 1.017. Timed again with the benchmark's allocator pool keeping freed
/// memory (`bench/records/dispatch/h100-2026-11-28`; before, every timed output was a fresh
/// page mapping, which had made the meshes' times 1.6-2.0x): the same rule picks the fastest in 447
/// cases, regret geometric mean 1.018, worst 1.65 (replayed there by `tests/dispatch_record.rs`).
/// - Sparse graphs where row groups can run the width (whole 16-byte loads per row): row
///   groups when the graph is uniform (max row <= [`GROUP_UNIFORM_MAX_RATIO`] x mean), or has
///   at least [`GROUP_MIN_ROWS`] rows and K <= [`GROUP_NARROW_MAX_K`] or rows of at least
///   [`GROUP_WIDE_MIN_BYTES`] bytes ([`GROUP_DESCENDING_MIN_BYTES`] when the rows come in
///   descending degree order).
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
    if sparse && group_shape(k, elem_bytes, 0).is_some() {
        let uniform = f64::from(stats.max) <= GROUP_UNIFORM_MAX_RATIO * stats.mean;
        let large = stats.count >= GROUP_MIN_ROWS;
        let wide = if stats.descending {
            GROUP_DESCENDING_MIN_BYTES
        } else {
            GROUP_WIDE_MIN_BYTES
        };
        if uniform || (large && (k <= GROUP_NARROW_MAX_K || k * elem_bytes >= wide)) {
            return Pick::Group;
        }
    }
    if sparse && nnz >= HP_NARROW_NNZ && k <= SPARSE_NARROW_MAX_K {
        return Pick::Narrow;
    }
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

/// Widest row of a forced narrow kernel (two edges per step).
pub const NARROW_FORCED_MAX_LANES: usize = 16;

/// The kernel one sum/mean SpMM runs, and its shape where the choice fixes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpmmChoice {
    /// HP-SpMM with a forced edges-per-group (one of [`NPW_CANDIDATES`]), or `None` for DTP's.
    Hp(Option<u32>),
    /// GE-SpMM's narrow-row kernel over rows padded to this stride.
    Narrow(usize),
    /// GE-SpMM's row kernel (the built-in shape or the policy's forced tiling).
    Row,
    /// Row groups ([`SpmmKernel::Group`]): the result written in the features' precision;
    /// the launch falls back to [`Self::Row`] where a row is not whole 16-byte loads.
    Group,
}

impl SpmmChoice {
    /// The kernel's name in a [`crate::policy::KernelsUsed`] record: `hp`, `narrow`, `ge`,
    /// `group`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Hp(_) => "hp",
            Self::Narrow(_) => "narrow",
            Self::Row => "ge",
            Self::Group => "group",
        }
    }
}

/// The kernel a sum/mean SpMM of width `k` over `elem_bytes`-byte features runs under
/// `policy` on a graph of `nnz` edges whose row degrees `stats` summarises: a forced kernel,
/// else [`pick`]'s. Deterministic mode never takes HP-SpMM (its shared rows meet through
/// atomics; row groups, which write each row once, it keeps); a forced tiling takes the row
/// kernel unless HP-SpMM is forced; a forced narrow
/// kernel runs up to [`NARROW_FORCED_MAX_LANES`] lanes, the row kernel beyond. A pure
/// function: what it returns for a graph depends on that graph's policy alone.
pub fn spmm_choice(
    policy: &KernelPolicy,
    stats: &DegreeStats,
    nnz: usize,
    k: usize,
    elem_bytes: usize,
) -> SpmmChoice {
    let det = policy.deterministic;
    let forced_tiling = policy.spmm_tiling.is_some();
    let narrow = |shape: Option<(usize, usize)>| {
        shape.map_or(SpmmChoice::Row, |(kp, _)| SpmmChoice::Narrow(kp))
    };
    match policy.spmm {
        SpmmKernel::Hp(npw) if !det => SpmmChoice::Hp(NPW_CANDIDATES.contains(&npw).then_some(npw)),
        SpmmKernel::Narrow if !forced_tiling => {
            narrow(narrow_shape_upto(k, elem_bytes, NARROW_FORCED_MAX_LANES))
        }
        SpmmKernel::Group if !forced_tiling => SpmmChoice::Group,
        SpmmKernel::Auto if !forced_tiling => match pick(stats, nnz, k, elem_bytes) {
            Pick::Hp if !det => SpmmChoice::Hp(None),
            Pick::Narrow => narrow(narrow_shape(k, elem_bytes)),
            Pick::Group => SpmmChoice::Group,
            _ => SpmmChoice::Row,
        },
        _ => SpmmChoice::Row,
    }
}

/// [`spmm_choice`] on `g` under its own policy.
pub fn spmm_choice_for(g: &DeviceGraph, k: usize, elem_bytes: usize) -> SpmmChoice {
    spmm_choice(g.policy(), g.degree_stats(), g.nnz(), k, elem_bytes)
}

/// A forced shape of GE-SpMM's row kernel ([`KernelPolicy::spmm_tiling`]): floats per lane
/// per load, column chunks per warp, block order, unroll and schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SpmmTiling {
    /// Floats per lane per load (1, 2 or 4; `k` and the input offset must be multiples).
    pub vec: usize,
    /// 32*vec-column chunks per warp (a compiled factor for `vec`, see [`SpmmTiling::valid`]).
    pub cf: usize,
    /// Tile-major block order instead of node-major.
    pub tile_major: bool,
    /// Edges unrolled per step (4, or 8 when `cf == 1`).
    pub unroll: usize,
    /// Walk the graph's row schedule (nnz-balanced work items, see [`crate::schedule`])
    /// instead of one warp per row; sum and mean only (max/min always run per row).
    pub schedule: bool,
}

impl SpmmTiling {
    /// True when this shape is compiled and legal for `k` at `offset`.
    pub fn valid(&self, k: usize, offset: usize) -> bool {
        matches!(self.vec, 1 | 2 | 4)
            && k.is_multiple_of(self.vec)
            && offset.is_multiple_of(self.vec)
            && CFS[self.vec.trailing_zeros() as usize].contains(&self.cf)
            && (self.unroll == 4 || (self.unroll == 8 && self.cf == 1))
    }
}

/// Coarsening factors compiled for each vector width (`cf * vec <= 16`).
pub const CFS: [&[usize]; 3] = [
    &[1, 2, 3, 4, 5, 6, 8],
    &[1, 2, 3, 4, 5, 6, 8],
    &[1, 2, 3, 4],
];

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
        use Pick::{Group, Hp, Narrow, Row};
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
        // Sparse and uniform (mean row 12, every row 11 or 12 long, like a mesh): row groups
        // wherever a row is whole 16-byte loads, HP-SpMM at the other widths.
        let mesh = g(1_000_000, 11_993_340);
        assert!([4, 16, 64, 256].iter().all(|&k| at(&mesh, k, 4) == Group));
        assert!([1, 6, 602].iter().all(|&k| at(&mesh, k, 4) == Hp));
        assert!([8, 128].iter().all(|&k| at(&mesh, k, 2) == Group));
        assert_eq!(at(&mesh, 4, 2), Hp);
        // The same sizes with power-law rows (the longest 70 x the mean, as the record's
        // arxiv/products-like graphs): row groups at K <= 8 and from 256-byte rows only.
        let skewed = |(mut s, nnz): (DegreeStats, usize)| {
            s.max = (s.mean * 70.0) as u32;
            s.descending = false; // the power-law rows in random order
            (s, nnz)
        };
        let sparse = skewed(g(1_000_000, 11_993_340));
        assert!([4, 8, 64, 128, 256]
            .iter()
            .all(|&k| at(&sparse, k, 4) == Group));
        assert!([1, 16, 32, 602].iter().all(|&k| at(&sparse, k, 4) == Hp));
        assert!([8, 128, 256].iter().all(|&k| at(&sparse, k, 2) == Group));
        assert!([16, 32, 64].iter().all(|&k| at(&sparse, k, 2) == Hp));
        // The same rows by descending degree (`--reorder auto` from a million nodes): row
        // groups from 64-byte rows (bf16 K = 32), HP-SpMM below.
        let by_degree = (
            DegreeStats {
                descending: true,
                ..sparse.0.clone()
            },
            sparse.1,
        );
        assert!([32, 64, 128, 256]
            .iter()
            .all(|&k| at(&by_degree, k, 2) == Group));
        assert!([16, 32, 64].iter().all(|&k| at(&by_degree, k, 4) == Group));
        assert_eq!(at(&by_degree, 16, 2), Hp);
        // Below a million rows the longest rows hold the tail: HP-SpMM at every K.
        let small_sparse = skewed(g(100_000, 800_000));
        assert!([4, 8, 64, 256]
            .iter()
            .all(|&k| at(&small_sparse, k, 4) == Hp));
        // Large and sparse (62.5 M non-zeros, mean row 25): the narrow kernel to K = 4 where
        // row groups cannot run the width, row groups at K = 4 (f32) and 8, HP-SpMM at 16.
        let products = skewed(g(2_500_000, 62_470_734));
        assert!([1, 2].iter().all(|&k| at(&products, k, 4) == Narrow));
        assert!([1, 2, 4].iter().all(|&k| at(&products, k, 2) == Narrow));
        assert_eq!(at(&products, 4, 4), Group);
        for b in [4, 2] {
            assert_eq!(at(&products, 8, b), Group);
            assert_eq!(at(&products, 16, b), Hp);
            assert_eq!(at(&products, 128, b), Group);
        }
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

    /// Degree statistics of `rows` rows averaging `nnz / rows`, and `nnz`.
    fn shape(rows: usize, nnz: usize) -> (DegreeStats, usize) {
        let deg: Vec<u32> = (0..rows)
            .map(|i| (nnz * (i + 1) / rows - nnz * i / rows) as u32)
            .collect();
        (DegreeStats::from_degrees(&deg), nnz)
    }

    const WIDTHS: [usize; 13] = [1, 4, 6, 8, 16, 32, 41, 48, 64, 96, 128, 256, 602];

    /// `choices` in the short form of the table below: `H` HP-SpMM (DTP), `Hn` HP-SpMM at n
    /// edges per group, `Nkp` the narrow kernel at stride kp, `R` the row kernel.
    fn short(c: SpmmChoice) -> String {
        match c {
            SpmmChoice::Hp(None) => "H".into(),
            SpmmChoice::Hp(Some(n)) => format!("H{n}"),
            SpmmChoice::Narrow(kp) => format!("N{kp}"),
            SpmmChoice::Row => "R".into(),
            SpmmChoice::Group => "G".into(),
        }
    }

    fn row(p: &KernelPolicy, (s, nnz): &(DegreeStats, usize), elem: usize) -> String {
        WIDTHS
            .iter()
            .map(|&k| short(spmm_choice(p, s, *nnz, k, elem)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn the_default_policy_makes_the_choices_of_the_process_wide_rule() {
        // Written down from the rule before policies (`spmm/cuda.rs`'s `choice` under the
        // `Auto` override, no forced tiling, deterministic mode off), at K = 1, 4, 6, 8, 16,
        // 32, 41, 48, 64, 96, 128, 256, 602, f32 then half.
        let want = [
            (
                (232_965, 114_543_559),
                "N4 N4 N8 N8 N16 N32 N44 N48 R R R R R",
                "N8 N8 N8 N8 N16 N32 N48 N48 N64 N96 R R R",
            ),
            (
                (46_593, 10_226_785),
                "N4 N4 N8 N8 N16 N32 N44 N48 R R R R R",
                "N8 N8 N8 N8 N16 N32 N48 N48 N64 N96 R R R",
            ),
            (
                (11_646, 1_280_344),
                "H N4 H N8 N16 N32 R N48 R R R R R",
                "H H H N8 N16 N32 R N48 N64 N96 R R R",
            ),
            // Since row groups joined the rule: a uniform sparse graph takes them wherever a
            // row is whole 16-byte loads (it took HP-SpMM at every width before).
            (
                (1_000_000, 11_993_340),
                "H G H G G G H G G G G G H",
                "H H H G G G H G G G G G H",
            ),
            (
                (2_329, 114_376),
                "H H H H H H H H H H H R R",
                "H H H H H H H H H H H R R",
            ),
        ];
        let d = KernelPolicy::default();
        for ((rows, nnz), f32_row, half_row) in want {
            let g = shape(rows, nnz);
            assert_eq!(row(&d, &g, 4), f32_row, "{rows} rows, {nnz} nnz, f32");
            assert_eq!(row(&d, &g, 2), half_row, "{rows} rows, {nnz} nnz, half");
        }
        let empty = (DegreeStats::from_degrees(&[]), 0);
        assert_eq!(row(&d, &empty, 4), "H H H H H H H H H H H R R");
    }

    #[test]
    fn group_shapes_cover_whole_rows_of_16_byte_loads() {
        assert_eq!(group_shape(128, 2, 0), Some((16, 1)));
        assert_eq!(group_shape(128, 4, 0), Some((32, 1)));
        assert_eq!(group_shape(256, 4, 0), Some((32, 2)));
        assert_eq!(group_shape(96, 4, 0), Some((24, 1)));
        assert_eq!(group_shape(8, 2, 0), Some((1, 1)));
        assert_eq!(group_shape(264, 2, 0), Some((32, 2)));
        // Not whole 16-byte loads, or misaligned rows: the row kernel.
        assert_eq!(group_shape(41, 4, 0), None);
        assert_eq!(group_shape(602, 2, 0), None);
        assert_eq!(group_shape(128, 2, 4), None);
        assert_eq!(group_shape(0, 4, 0), None);
        for elem in [2, 4] {
            for k in 1..=1100 {
                if let Some((lanes, tiles)) = group_shape(k, elem, 0) {
                    let vec = 16 / elem;
                    assert!(lanes <= 32 && lanes * tiles * vec >= k, "k {k}");
                    assert!((tiles - 1) * 32 * vec < k, "k {k}: an empty tile");
                }
            }
        }
    }

    #[test]
    fn forced_kernels_make_the_choices_of_the_old_overrides() {
        // Written down from the rule before policies under `set_kernel_override`,
        // `set_deterministic` and `set_tiling_override`, on the Reddit-shaped degrees in f32
        // (the old `Hp(0)` forced "DTP's", which is `Hp(None)` here).
        let reddit = shape(232_965, 114_543_559);
        let tiling = Some(SpmmTiling {
            vec: 2,
            cf: 1,
            tile_major: false,
            unroll: 8,
            schedule: true,
        });
        let d = KernelPolicy::default();
        let cases = [
            (d.with_spmm(SpmmKernel::Ge), "R R R R R R R R R R R R R"),
            (
                d.with_spmm(SpmmKernel::Narrow),
                "N4 N4 N8 N8 N16 N32 N44 N48 N64 R R R R",
            ),
            (
                d.with_spmm(SpmmKernel::Hp(64)),
                "H64 H64 H64 H64 H64 H64 H64 H64 H64 H64 H64 H64 H64",
            ),
            (d.with_spmm(SpmmKernel::Hp(0)), "H H H H H H H H H H H H H"),
            (d.with_spmm(SpmmKernel::Hp(7)), "H H H H H H H H H H H H H"),
            (d.with_spmm(SpmmKernel::Group), "G G G G G G G G G G G G G"),
            (
                d.with_spmm(SpmmKernel::Group).with_deterministic(true),
                "G G G G G G G G G G G G G",
            ),
            (
                d.with_deterministic(true),
                "N4 N4 N8 N8 N16 N32 N44 N48 R R R R R",
            ),
            (
                d.with_spmm(SpmmKernel::Narrow).with_deterministic(true),
                "N4 N4 N8 N8 N16 N32 N44 N48 N64 R R R R",
            ),
            (
                d.with_spmm(SpmmKernel::Hp(64)).with_deterministic(true),
                "R R R R R R R R R R R R R",
            ),
            (
                KernelPolicy {
                    spmm_tiling: tiling,
                    ..d
                },
                "R R R R R R R R R R R R R",
            ),
            (
                KernelPolicy {
                    spmm_tiling: tiling,
                    ..d.with_spmm(SpmmKernel::Hp(64))
                },
                "H64 H64 H64 H64 H64 H64 H64 H64 H64 H64 H64 H64 H64",
            ),
            (
                KernelPolicy {
                    spmm_tiling: tiling,
                    ..d.with_spmm(SpmmKernel::Narrow)
                },
                "R R R R R R R R R R R R R",
            ),
            (
                KernelPolicy {
                    spmm_tiling: tiling,
                    ..d.with_spmm(SpmmKernel::Group)
                },
                "R R R R R R R R R R R R R",
            ),
        ];
        for (p, want) in cases {
            assert_eq!(row(&p, &reddit, 4), want, "{p}");
        }
        // A uniform sparse graph when deterministic: row groups (each row written once) where
        // the rule takes them, the row kernel where it would take HP-SpMM.
        let sparse = shape(1_000_000, 11_993_340);
        assert_eq!(
            row(&d.with_deterministic(true), &sparse, 2),
            "R R R G G G R G G G G G R"
        );
        assert_eq!(
            row(&d.with_spmm(SpmmKernel::Narrow), &sparse, 2),
            "N8 N8 N8 N8 N16 N32 N48 N48 N64 N96 N128 R R"
        );
    }

    /// A graph of `rows` rows of `deg` edges each (dense enough that the dispatcher's pick
    /// depends on K), on the CPU.
    fn graph(rows: usize, deg: usize) -> DeviceGraph {
        let indptr: Vec<u32> = (0..=rows).map(|i| (i * deg) as u32).collect();
        let indices: Vec<u32> = (0..rows * deg).map(|p| (p % rows) as u32).collect();
        let csr = gnn_graph::Csr::new_checked(rows, rows, indptr, indices).unwrap();
        DeviceGraph::upload(&csr, &candle_core::Device::Cpu).unwrap()
    }

    #[test]
    fn two_graphs_with_different_policies_get_their_own_kernels() {
        // 2,000 rows of 64 edges: dense and small, so the dispatcher takes HP-SpMM to K = 128.
        let base = graph(2_000, 64);
        let d = KernelPolicy::default();
        let graphs = [
            (base.clone(), "H H H H H H H H H H H R R"),
            (
                base.with_policy(d.with_spmm(SpmmKernel::Ge)),
                "R R R R R R R R R R R R R",
            ),
            (
                base.with_policy(d.with_spmm(SpmmKernel::Narrow)),
                "N4 N4 N8 N8 N16 N32 N44 N48 N64 R R R R",
            ),
            (
                base.with_policy(d.with_deterministic(true)),
                "R R R R R R R R R R R R R",
            ),
            (
                base.with_policy(d.with_spmm(SpmmKernel::Hp(256))),
                "H256 H256 H256 H256 H256 H256 H256 H256 H256 H256 H256 H256 H256",
            ),
        ];
        let choices = |g: &DeviceGraph| {
            WIDTHS
                .iter()
                .map(|&k| short(spmm_choice_for(g, k, 4)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        // One structure, several handles: each answers by its own policy ...
        for (g, want) in &graphs {
            assert!(g.same(&base));
            assert_eq!(choices(g), *want, "{}", g.policy());
        }
        assert_eq!(*base.policy(), KernelPolicy::default());
        // ... also when asked from several threads at once, interleaved.
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..50 {
                        for (g, want) in graphs.iter().rev() {
                            assert_eq!(choices(g), *want);
                        }
                    }
                });
            }
        });
        // The transpose (a symmetric structure's is itself) keeps the policy.
        for (g, want) in &graphs {
            assert_eq!(choices(&g.transpose_graph().unwrap()), *want);
        }
    }
}
