//! Node reorderings for locality: a permutation `new_of_old` for [`crate::Dataset::permute`]
//! (or [`Csr::permute`]) that puts nodes whose rows share neighbours next to each other, so
//! the gathers of SpMM / SDDMM hit cache: degree sort, Reverse Cuthill-McKee, and the
//! community (Louvain, [`crate::louvain`]) ordering of HP-SpMM's GCR.

use crate::csr::Csr;
use crate::error::{Error, Result};
use rayon::prelude::*;

/// Which reordering to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reorder {
    /// Keep the ids.
    #[default]
    None,
    /// Descending degree (ties by id): hubs first, their rows adjacent.
    Degree,
    /// Reverse Cuthill-McKee on the symmetrised pattern: a band-reducing BFS order.
    Rcm,
    /// Louvain communities ([`crate::louvain`]) on consecutive ids, sub-communities nested:
    /// the graph-clustering reordering (GCR) of the HP-SpMM paper.
    Louvain,
    /// [`Reorder::Degree`] on graphs of at least [`AUTO_MIN_NODES`] nodes, none below
    /// ([`Reorder::resolve`]).
    Auto,
}

/// The smallest graph [`Reorder::Auto`] renumbers. Measured on one H100, bf16, 10 epochs
/// (bench/records/reorder/h100-2026-11-27 and its `papers-s0.1/`): on the papers100M-shaped
/// graph at scale 0.1 (11.1 M nodes, 334 M non-zeros, random ids; a 2.8 GB table at width
/// 128, 57x the L2) the degree order took GCN 3x128's epoch from 285.1 to 188.0 ms and
/// GraphSAGE 3x128's from 379.0 to 280.6 ms, for 4.6-5.5 s of reordering (repaid after about
/// 47-57 epochs); RCM gained less (242.2 ms, 22.6 s) and Louvain less again (248.6 ms,
/// 94.5 s). On the Reddit-shaped graph (233 K nodes, a 60 MB table, about the L2) the degree
/// order gained 2.5-3 %, RCM -1.3 to +2.3 % and Louvain lost 1.7-8.5 %. Between the two sizes
/// nothing is measured; a million nodes is where the table at width 128 passes five times the
/// L2. On graphs of that size whose ids already have locality the order costs little
/// (bench/records/reorder-spmm/h100-2026-11-28, SpMM at K = 64..256): -1 to +6 % on road-like
/// lattices (their rows have 5 or 9 entries, so ties keep the lattice), while products-like
/// graphs gain up to 1.52x, also against their RCM order in bf16. So `auto` needs no locality
/// estimate of the file's ids for these families; a graph with locality and mixed degrees (a
/// real road network) is not measured.
pub const AUTO_MIN_NODES: usize = 1_000_000;

impl std::str::FromStr for Reorder {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Self::None),
            "degree" => Ok(Self::Degree),
            "rcm" => Ok(Self::Rcm),
            "louvain" => Ok(Self::Louvain),
            "auto" => Ok(Self::Auto),
            "leiden" => Err(Error::InvalidArgument(
                "reordering `leiden` is not implemented; `louvain` gives the community order"
                    .into(),
            )),
            other => Err(Error::InvalidArgument(format!(
                "unknown reordering `{other}` (auto, none, degree, rcm, louvain)"
            ))),
        }
    }
}

impl std::fmt::Display for Reorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::None => "none",
            Self::Degree => "degree",
            Self::Rcm => "rcm",
            Self::Louvain => "louvain",
            Self::Auto => "auto",
        })
    }
}

impl Reorder {
    /// The ordering this one stands for on `csr`: [`Reorder::Auto`] becomes
    /// [`Reorder::Degree`] from [`AUTO_MIN_NODES`] nodes on and [`Reorder::None`] below; the
    /// others stay as they are.
    pub fn resolve(self, csr: &Csr) -> Self {
        match self {
            Self::Auto if csr.n_rows() >= AUTO_MIN_NODES => Self::Degree,
            Self::Auto => Self::None,
            other => other,
        }
    }

    /// [`Reorder::Auto`] as [`Reorder::None`], the others as they are: for the paths where
    /// `auto` keeps the file's ids (several devices, sampled inference).
    pub fn without_auto(self) -> Self {
        match self {
            Self::Auto => Self::None,
            other => other,
        }
    }

    /// The permutation `new_of_old` for a square `csr` (identity for [`Reorder::None`]).
    pub fn order(self, csr: &Csr) -> Result<Vec<u32>> {
        if csr.n_rows() != csr.n_cols() {
            return Err(Error::InvalidArgument(format!(
                "reordering needs a square graph, got {} x {}",
                csr.n_rows(),
                csr.n_cols()
            )));
        }
        Ok(match self.resolve(csr) {
            Self::None | Self::Auto => (0..csr.n_rows() as u32).collect(),
            Self::Degree => degree_order(csr),
            Self::Rcm => rcm_order(csr)?,
            Self::Louvain => crate::louvain::Louvain::run(csr)?.order(),
        })
    }
}

/// `new_of_old` from the visiting order `old_of_new`.
fn invert(old_of_new: &[u32]) -> Vec<u32> {
    let mut new_of_old = vec![0u32; old_of_new.len()];
    for (new, &old) in old_of_new.iter().enumerate() {
        new_of_old[old as usize] = new as u32;
    }
    new_of_old
}

/// Descending row length, ties by id.
pub fn degree_order(csr: &Csr) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..csr.n_rows() as u32).collect();
    by_descending_degree(csr, &mut ids);
    invert(&ids)
}

/// Sorts node ids by descending row length of `csr`; stable, so ties keep their order.
fn by_descending_degree(csr: &Csr, ids: &mut [u32]) {
    ids.par_sort_by_key(|&i| std::cmp::Reverse(csr.row_len(i as usize)));
}

/// Descending row length within each part of `parts` (ties by id): every part keeps its id
/// range, so the partition, its halos and its balance stay as they are, while each rank's
/// block of the gathered rows has its hubs first. The globally degree-sorted ids instead
/// gave the range partition's first rank the hubs alone (bench/records/dist-papers/
/// h100x4-2026-11-27-7/checks/call8-3adf3e2: 2.9x slower on 4 GPUs).
pub fn degree_order_within(csr: &Csr, parts: &crate::partition::RowPartition) -> Result<Vec<u32>> {
    let n = csr.n_rows();
    let covered = (0..parts.parts())
        .map(|p| parts.range(p).len())
        .sum::<usize>();
    if covered != n {
        return Err(Error::InvalidArgument(format!(
            "a partition of {covered} rows for a graph of {n}"
        )));
    }
    let mut old_of_new: Vec<u32> = (0..n as u32).collect();
    for p in 0..parts.parts() {
        by_descending_degree(csr, &mut old_of_new[parts.range(p)]);
    }
    Ok(invert(&old_of_new))
}

/// Reverse Cuthill-McKee over the symmetrised pattern: each component is walked breadth-first
/// from its lowest-degree node, neighbours in ascending degree, and the whole order reversed.
pub fn rcm_order(csr: &Csr) -> Result<Vec<u32>> {
    let n = csr.n_rows();
    let t = csr.transpose_pattern()?;
    let neighbours = |i: usize| csr.row(i).iter().chain(t.row(i)).copied();
    let degree: Vec<usize> = (0..n).map(|i| csr.row_len(i) + t.row_len(i)).collect();
    let mut starts: Vec<u32> = (0..n as u32).collect();
    starts.sort_by_key(|&i| degree[i as usize]);
    let mut seen = vec![false; n];
    let mut order: Vec<u32> = Vec::with_capacity(n);
    let mut next: Vec<u32> = Vec::new();
    for &s in &starts {
        if seen[s as usize] {
            continue;
        }
        seen[s as usize] = true;
        let mut head = order.len();
        order.push(s);
        while head < order.len() {
            let u = order[head] as usize;
            head += 1;
            next.clear();
            next.extend(neighbours(u).filter(|&v| !seen[v as usize]));
            next.sort_unstable();
            next.dedup();
            next.sort_by_key(|&v| degree[v as usize]);
            for &v in &next {
                seen[v as usize] = true;
                order.push(v);
            }
        }
    }
    order.reverse();
    Ok(invert(&order))
}

/// The largest `|i - j|` over stored edges: what RCM minimises.
pub fn bandwidth(csr: &Csr) -> usize {
    (0..csr.n_rows())
        .flat_map(|i| {
            csr.row(i)
                .iter()
                .map(move |&j| (i as i64 - j as i64).unsigned_abs() as usize)
        })
        .max()
        .unwrap_or(0)
}

/// Rows per window in [`window_distinct_ratio`]'s default use: the row windows of a
/// row-window SpMM (16 rows, one tensor-core tile's height).
pub const REUSE_WINDOW: usize = 16;

/// Gather reuse of the current row order: the distinct columns of each window of `window`
/// consecutive rows, summed over the windows and divided by their non-zeros. A kernel that
/// gathers each distinct column once per window moves this fraction of the feature rows a
/// per-row kernel gathers: 1.0 is no reuse (every non-zero of a window has its own column),
/// lower is better. A cheap estimate for choosing an order: when the graph holds more than
/// `max_nnz` non-zeros, every `ceil(nnz / max_nnz)`-th window is counted (deterministic
/// stride), so the cost is bounded by sorting `max_nnz` ids. An empty graph (or `window` 0,
/// taken as 1) gives 1.0.
pub fn window_distinct_ratio(csr: &Csr, window: usize, max_nnz: usize) -> f64 {
    let window = window.max(1);
    let n = csr.n_rows();
    let nnz = csr.nnz();
    if nnz == 0 {
        return 1.0;
    }
    let stride = nnz.div_ceil(max_nnz.max(1)).max(1);
    let windows = n.div_ceil(window);
    let indptr = csr.indptr();
    let (distinct, total) = (0..windows)
        .into_par_iter()
        .step_by(stride)
        .map(|w| {
            let lo = indptr.get(w * window);
            let hi = indptr.get(((w + 1) * window).min(n));
            let mut cols = csr.indices()[lo..hi].to_vec();
            cols.sort_unstable();
            cols.dedup();
            (cols.len(), hi - lo)
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    if total == 0 {
        1.0
    } else {
        distinct as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coo::{BuildOptions, Coo};

    fn is_permutation(p: &[u32]) -> bool {
        let mut seen = vec![false; p.len()];
        p.iter()
            .all(|&v| (v as usize) < p.len() && !std::mem::replace(&mut seen[v as usize], true))
    }

    /// A 20 x 20 grid with its ids scrambled.
    fn scrambled_grid() -> Csr {
        let side = 20u32;
        let n = side * side;
        let scramble = |v: u32| (v * 137 + 11) % n; // 137 is coprime with 400
        let (mut src, mut dst) = (Vec::new(), Vec::new());
        for r in 0..side {
            for c in 0..side {
                let v = r * side + c;
                if c + 1 < side {
                    src.push(scramble(v));
                    dst.push(scramble(v + 1));
                }
                if r + 1 < side {
                    src.push(scramble(v));
                    dst.push(scramble(v + side));
                }
            }
        }
        Coo::new(n as usize, src, dst)
            .unwrap()
            .to_csr(BuildOptions::undirected())
            .unwrap()
    }

    #[test]
    fn rcm_recovers_a_narrow_band_and_orders_are_permutations() {
        let g = scrambled_grid();
        let before = bandwidth(&g);
        let rcm = Reorder::Rcm.order(&g).unwrap();
        assert!(is_permutation(&rcm));
        let after = bandwidth(&g.permute(&rcm).unwrap());
        // A 20-wide grid has bandwidth 20 in row order; RCM's diagonal sweep stays near it.
        assert!(after <= 40 && before > 200, "bandwidth {before} -> {after}");
        let deg = Reorder::Degree.order(&g).unwrap();
        assert!(is_permutation(&deg));
        let p = g.permute(&deg).unwrap();
        let lens: Vec<usize> = (0..p.n_rows()).map(|i| p.row_len(i)).collect();
        assert!(
            lens.windows(2).all(|w| w[0] >= w[1]),
            "degree order not descending"
        );
        // The statistics the SpMM dispatcher reads say so, and not for the scrambled ids
        // (grid rows of 2, 3 and 4 in any order).
        assert!(p.degree_stats().descending);
        assert!(!g.degree_stats().descending);
        // A row one longer than the one before still counts (a self loop added after the
        // order where the row had none); two longer does not.
        let d = |v: &[u32]| crate::csr::DegreeStats::from_degrees(v).descending;
        assert!(d(&[5, 5, 4, 5, 3, 0]));
        assert!(!d(&[5, 3, 5]) && !d(&[]));
        assert_eq!(
            Reorder::None.order(&g).unwrap(),
            (0..400).collect::<Vec<u32>>()
        );
        // Graphs with isolated nodes and several components are covered too.
        let h = Csr::new_checked(5, 5, vec![0, 1, 2, 2, 2, 2], vec![1, 0]).unwrap();
        assert!(is_permutation(&rcm_order(&h).unwrap()));
    }

    #[test]
    fn degree_order_within_parts_keeps_each_part_its_ids() {
        let g = scrambled_grid();
        let parts =
            crate::partition::RowPartition::from_bounds(vec![0, 150, 151, 400], 400).unwrap();
        let perm = degree_order_within(&g, &parts).unwrap();
        assert!(is_permutation(&perm));
        for p in 0..parts.parts() {
            let r = parts.range(p);
            assert!(
                r.clone().all(|old| r.contains(&(perm[old] as usize))),
                "part {p}"
            );
        }
        let h = g.permute(&perm).unwrap();
        for p in 0..parts.parts() {
            let lens: Vec<usize> = parts.range(p).map(|i| h.row_len(i)).collect();
            assert!(lens.windows(2).all(|w| w[0] >= w[1]), "part {p}: {lens:?}");
        }
        let short = crate::partition::RowPartition::from_bounds(vec![0, 10], 10).unwrap();
        assert!(degree_order_within(&g, &short).is_err());
    }

    #[test]
    fn auto_is_the_degree_order_from_a_million_nodes() {
        let small = scrambled_grid();
        assert_eq!(Reorder::Auto.resolve(&small), Reorder::None);
        assert_eq!(
            Reorder::Auto.order(&small).unwrap(),
            Reorder::None.order(&small).unwrap()
        );
        // A million nodes, a path through every tenth: rows of length 0, 1 and 2.
        let n = AUTO_MIN_NODES;
        let (src, dst): (Vec<u32>, Vec<u32>) = (0..n as u32 / 10 - 1)
            .map(|k| (10 * k, 10 * (k + 1)))
            .unzip();
        let big = Coo::new(n, src, dst)
            .unwrap()
            .to_csr(BuildOptions::undirected())
            .unwrap();
        assert_eq!(Reorder::Auto.resolve(&big), Reorder::Degree);
        assert_eq!(Reorder::Auto.without_auto(), Reorder::None);
        assert_eq!(Reorder::Rcm.without_auto(), Reorder::Rcm);
        assert_eq!(Reorder::Degree.resolve(&big), Reorder::Degree);
        assert_eq!(Reorder::Rcm.resolve(&small), Reorder::Rcm);
        assert_eq!(
            Reorder::Auto.order(&big).unwrap(),
            Reorder::Degree.order(&big).unwrap()
        );
        assert_eq!("auto".parse::<Reorder>().unwrap(), Reorder::Auto);
        assert_eq!(Reorder::Auto.to_string(), "auto");
    }

    #[test]
    fn names_parse_and_unsupported_ones_say_so() {
        assert_eq!("RCM".parse::<Reorder>().unwrap(), Reorder::Rcm);
        assert_eq!("Louvain".parse::<Reorder>().unwrap(), Reorder::Louvain);
        let e = "leiden".parse::<Reorder>().unwrap_err().to_string();
        assert!(e.contains("not implemented"), "{e}");
        assert!("zigzag".parse::<Reorder>().is_err());
        let rect = Csr::new_checked(2, 3, vec![0, 1, 1], vec![2]).unwrap();
        assert!(Reorder::Rcm.order(&rect).is_err());
    }

    #[test]
    fn window_reuse_counts_each_windows_distinct_columns() {
        // Rows 0..16 all hold columns {0, 1, 2, 3}; rows 16..20 hold their own column each
        // (an edge `src -> dst` is stored in row `dst`: the row gathers its sources).
        let (mut src, mut dst) = (Vec::new(), Vec::new());
        for r in 0..16u32 {
            for c in 0..4u32 {
                src.push(c);
                dst.push(r);
            }
        }
        for r in 16..20u32 {
            src.push(r);
            dst.push(r);
        }
        let g = Coo::new(20, src, dst)
            .unwrap()
            .to_csr(BuildOptions {
                symmetrize: false,
                dedup: true,
                self_loops: crate::coo::SelfLoops::Keep,
            })
            .unwrap();
        // Window 0: 4 distinct of 64; window 1 (rows 16..20): 4 of 4.
        let r = window_distinct_ratio(&g, 16, usize::MAX);
        assert!((r - 8.0 / 68.0).abs() < 1e-12, "{r}");
        // One row per window: every non-zero's column is distinct within its row.
        assert_eq!(window_distinct_ratio(&g, 1, usize::MAX), 1.0);
        assert_eq!(window_distinct_ratio(&g, 0, usize::MAX), 1.0);
        // Sampling every other window (max_nnz half the graph): window 0 alone.
        let r = window_distinct_ratio(&g, 16, 34);
        assert!((r - 4.0 / 64.0).abs() < 1e-12, "{r}");
        assert_eq!(
            window_distinct_ratio(&Csr::empty(5, 5).unwrap(), 16, 8),
            1.0
        );
    }

    #[test]
    fn a_band_order_has_more_window_reuse_than_scrambled_ids() {
        let g = scrambled_grid();
        let before = window_distinct_ratio(&g, REUSE_WINDOW, usize::MAX);
        let rcm = Reorder::Rcm.order(&g).unwrap();
        let after = window_distinct_ratio(&g.permute(&rcm).unwrap(), REUSE_WINDOW, usize::MAX);
        assert!(after < 0.7 * before, "rcm {after} vs scrambled {before}");
    }
}
