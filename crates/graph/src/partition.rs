//! 1-D node partitions for multi-device full-batch training (CAGNET's 1-D scheme): each of `P`
//! ranks owns a contiguous range of rows (target nodes) of `A`, with the rows' edges, and
//! receives from the other ranks the rows of `X` its edges reach outside its range (its halo).
//!
//! Ranges are balanced by non-zeros (the aggregation's work), not by rows. A rank's local graph
//! keeps every row's edges in their original order, with columns renumbered: owned nodes are
//! `0..n_local` (global id minus the range start), halo nodes follow, grouped by owner rank and
//! sorted by global id within each group. Both sides of an exchange derive the same order from
//! the global graph, so the send and receive lists need no negotiation.

use crate::bits;
use crate::csr::{check_kernel_nnz, Csr, OffsetWidth, RowPtr};
use crate::error::{Error, Result};
use rayon::prelude::*;
use std::ops::Range;

/// Contiguous row ranges, one per rank, covering `0..n` in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowPartition {
    /// `bounds[p]..bounds[p + 1]` is rank `p`'s range; `bounds[0] = 0`, `bounds[P] = n`.
    bounds: Vec<usize>,
}

impl RowPartition {
    /// `parts` contiguous ranges of `csr`'s rows holding about `nnz / parts` non-zeros each (each
    /// boundary is the first row where the running non-zero count reaches `p * nnz / parts`).
    /// A single row heavier than a share makes its range heavier; no row is ever split.
    pub fn balanced_by_nnz(csr: &Csr, parts: usize) -> Result<Self> {
        let n = csr.n_rows();
        if parts == 0 || parts > n.max(1) {
            return Err(Error::InvalidArgument(format!(
                "cannot partition {n} rows into {parts} parts (need 1 <= parts <= rows)"
            )));
        }
        let indptr = csr.indptr();
        let nnz = csr.nnz() as u64;
        let mut bounds = Vec::with_capacity(parts + 1);
        bounds.push(0);
        for p in 1..parts {
            let target = (p as u64 * nnz).div_ceil(parts as u64);
            // First row boundary r with indptr[r] >= target, at least one row past the last
            // boundary and leaving a row for each remaining part.
            let r = indptr.partition_point(|e| (e as u64) < target);
            let lo = bounds[p - 1] + 1;
            let hi = n - (parts - p);
            bounds.push(r.clamp(lo, hi));
        }
        bounds.push(n);
        Ok(Self { bounds })
    }

    /// Ranges from explicit boundaries (`0 = b[0] <= ... <= b[P] = n`).
    pub fn from_bounds(bounds: Vec<usize>, n: usize) -> Result<Self> {
        let ok = bounds.len() >= 2
            && bounds[0] == 0
            && bounds.last() == Some(&n)
            && bounds.windows(2).all(|w| w[0] <= w[1]);
        if !ok {
            return Err(Error::InvalidArgument(format!(
                "partition bounds {bounds:?} do not split 0..{n} into ordered ranges"
            )));
        }
        Ok(Self { bounds })
    }

    /// Number of ranks.
    pub fn parts(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Rank `p`'s rows.
    pub fn range(&self, p: usize) -> Range<usize> {
        self.bounds[p]..self.bounds[p + 1]
    }

    /// The range boundaries (`P + 1` entries).
    pub fn bounds(&self) -> &[usize] {
        &self.bounds
    }

    /// The rank owning global node `v` (`v < n`).
    pub fn owner(&self, v: usize) -> usize {
        self.bounds.partition_point(|&b| b <= v) - 1
    }

    /// The longest range: the block every rank contributes to an all-gather (NCCL's
    /// all-gather moves the same count from every rank, so shorter ranges are padded).
    pub fn max_len(&self) -> usize {
        self.bounds
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0)
    }

    /// The node count of `csr`, a square graph whose rows this partition covers; an error
    /// naming both sizes otherwise.
    fn check_covers(&self, csr: &Csr) -> Result<usize> {
        let n = csr.n_rows();
        if csr.n_cols() != n || self.bounds.last() != Some(&n) {
            return Err(Error::InvalidArgument(format!(
                "partition of {} rows over a {n}x{} graph",
                self.bounds.last().copied().unwrap_or(0),
                csr.n_cols()
            )));
        }
        Ok(n)
    }

    /// Halo rows of every rank (distinct outside columns of its rows) in one parallel pass
    /// over the edges, without building the local graphs: the point-to-point volume that
    /// [`Exchange::by_volume`] weighs.
    pub fn halo_sizes(&self, csr: &Csr) -> Result<Vec<usize>> {
        let n = self.check_covers(csr)?;
        let indptr = csr.indptr();
        Ok((0..self.parts())
            .into_par_iter()
            .map(|p| {
                let r = self.range(p);
                let edges = &csr.indices()[indptr.get(r.start)..indptr.get(r.end)];
                let outside = |c: u32| (!r.contains(&(c as usize))).then_some(c as usize);
                bits::count(&bits::mark(edges, n, outside))
            })
            .collect())
    }

    /// Non-zeros whose column lies outside their row's range (an undirected edge across
    /// ranges counts twice, once per direction), in one parallel pass over the edges: what
    /// [`crate::NodeParts::edge_cut`] gives for [`crate::NodeParts::from_ranges`] of this
    /// partition, without a part per node to look up.
    pub fn edge_cut(&self, csr: &Csr) -> Result<usize> {
        self.check_covers(csr)?;
        let indptr = csr.indptr();
        Ok((0..self.parts())
            .into_par_iter()
            .map(|p| {
                let r = self.range(p);
                csr.indices()[indptr.get(r.start)..indptr.get(r.end)]
                    .par_chunks(1 << 16)
                    .map(|c| c.iter().filter(|&&v| !r.contains(&(v as usize))).count())
                    .sum::<usize>()
            })
            .sum())
    }

    /// Non-zeros of every rank's rows under the row offsets `indptr` (of the graph this
    /// partition splits: `n + 1` offsets).
    pub fn nnz(&self, indptr: &RowPtr) -> Result<Vec<usize>> {
        if indptr.len() != self.bounds.last().copied().unwrap_or(0) + 1 {
            return Err(Error::InvalidArgument(format!(
                "partition of {} rows over row offsets of {} rows",
                self.bounds.last().copied().unwrap_or(0),
                indptr.len().saturating_sub(1)
            )));
        }
        Ok((0..self.parts())
            .map(|p| indptr.get(self.bounds[p + 1]) - indptr.get(self.bounds[p]))
            .collect())
    }

    /// Checks that every rank's share of the graph with row offsets `indptr` fits the
    /// kernels ([`crate::MAX_KERNEL_NNZ`]); the error names the first rank whose share does
    /// not (`rank 2's share has 5100000000 non-zeros ...: use more ranks`). The whole graph
    /// may hold any number: only the shares go to devices.
    pub fn check_kernel_shares(&self, indptr: &RowPtr) -> Result<()> {
        for (rank, nnz) in self.nnz(indptr)?.into_iter().enumerate() {
            check_kernel_nnz(&format!("rank {rank}'s share"), nnz)?;
        }
        Ok(())
    }
}

/// Rows an all-gather over `parts` ranks of blocks of `max_len` rows delivers, all ranks.
fn all_gather_rows(parts: usize, max_len: usize) -> usize {
    parts * parts.saturating_sub(1) * max_len
}

/// How a partitioned aggregation brings in the rows it reads from other ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exchange {
    /// Each rank receives exactly its halo rows from their owners (grouped send/receive):
    /// the least volume when halos are small (sparse graphs, community orders).
    PointToPoint,
    /// Every rank receives every other rank's rows (one all-gather of `P x max_len` rows),
    /// and the backward sums the gradients with one reduce-scatter: no per-peer index
    /// gather, no concatenation, NCCL's collective algorithms; the volume of
    /// `(P - 1) x max_len` rows per rank whatever the halo.
    AllGather,
}

impl Exchange {
    /// The point-to-point exchange when it moves less than [`Self::ALL_GATHER_SHARE`] of the
    /// all-gather's rows, the all-gather otherwise. `halo`: each rank's halo rows
    /// ([`RowPartition::halo_sizes`]); `max_len`: the longest range
    /// ([`RowPartition::max_len`]).
    pub fn by_volume(halo: &[usize], max_len: usize) -> Self {
        let p2p: usize = halo.iter().sum();
        let gather = all_gather_rows(halo.len(), max_len);
        if p2p as f64 >= Self::ALL_GATHER_SHARE * gather as f64 && gather > 0 {
            Self::AllGather
        } else {
            Self::PointToPoint
        }
    }

    /// The point-to-point volume, as a share of the all-gather's, from which the all-gather
    /// is chosen: at 0.75 it moves at most a third more bytes, in exchange for the send-side
    /// gather and receive-side copy the point-to-point path pays on every row it moves.
    pub const ALL_GATHER_SHARE: f64 = 0.75;
}

impl std::fmt::Display for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::PointToPoint => "point-to-point",
            Self::AllGather => "all-gather",
        })
    }
}

impl std::str::FromStr for Exchange {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "p2p" | "point-to-point" => Ok(Self::PointToPoint),
            "allgather" | "all-gather" => Ok(Self::AllGather),
            _ => Err(Error::InvalidArgument(format!(
                "unknown exchange `{s}` (p2p or allgather)"
            ))),
        }
    }
}

/// One rank's share of a graph: its rows with columns renumbered to local + halo, and the
/// exchange lists of the halo rows.
#[derive(Debug, Clone)]
pub struct LocalGraph {
    /// This rank.
    pub rank: usize,
    /// The global rows this rank owns.
    pub rows: Range<usize>,
    /// `rows.len()` rows, `rows.len() + halo.len()` columns: column `c < rows.len()` is global
    /// node `rows.start + c`, column `rows.len() + h` is global node `halo[h]`. Edges keep
    /// their global order, so entry `e` here is entry `global.indptr()[rows.start] + e` there.
    pub csr: Csr,
    /// Global ids of the halo nodes, grouped by owner rank (ascending), sorted within a group.
    pub halo: Vec<u32>,
    /// How many halo nodes each rank owns (`recv_counts[rank] = 0`); the groups of `halo`.
    pub recv_counts: Vec<usize>,
    /// For each rank `p`, the local row ids (`< rows.len()`) rank `p` receives from this one,
    /// in the order of `p`'s halo group for this rank (`send[rank]` is empty).
    pub send: Vec<Vec<u32>>,
    /// The global edge range this rank's edges came from (`global.indptr()[rows]`): slice
    /// per-edge values of the global graph with it.
    pub edges: Range<usize>,
}

impl LocalGraph {
    /// Builds rank `rank`'s local graph of `csr` (square) under `part`. Costs one pass over
    /// the whole graph (to find what the other ranks need from this one), in parallel: the
    /// halo and the send lists are sets of bits (one per node) filled from blocks of edges,
    /// a halo column's local id the count of halo nodes below it.
    pub fn build(csr: &Csr, part: &RowPartition, rank: usize) -> Result<Self> {
        let n = csr.n_rows();
        if csr.n_cols() != n {
            return Err(Error::InvalidArgument(format!(
                "a 1-D partition needs a square graph, got {n}x{}",
                csr.n_cols()
            )));
        }
        if part.bounds().last() != Some(&n) {
            return Err(Error::InvalidArgument(format!(
                "partition covers {} rows, the graph has {n}",
                part.bounds().last().copied().unwrap_or(0)
            )));
        }
        if rank >= part.parts() {
            return Err(Error::InvalidArgument(format!(
                "rank {rank} out of range for {} parts",
                part.parts()
            )));
        }
        let parts = part.parts();
        let rows = part.range(rank);
        let n_local = rows.len();
        let indptr = csr.indptr();
        let edges = indptr.get(rows.start)..indptr.get(rows.end);
        let own = |v: usize| rows.contains(&v);
        let own_edges = &csr.indices()[edges.clone()];

        // The halo: distinct outside columns of the owned rows, sorted (owner order follows,
        // since ranges are contiguous and ascending).
        let outside = |c: u32| (!own(c as usize)).then_some(c as usize);
        let halo_set = bits::mark(own_edges, n, outside);
        let halo = bits::ones(&halo_set);
        let below = |v: usize| halo.partition_point(|&h| (h as usize) < v);
        let recv_counts = (0..parts)
            .map(|q| below(part.range(q).end) - below(part.range(q).start))
            .collect();
        // The renumbered indices: a halo node's local column counts the halo nodes below it.
        let before = bits::prefix_counts(&halo_set);
        let indices = own_edges
            .par_iter()
            .map(|&c| {
                let c = c as usize;
                if own(c) {
                    (c - rows.start) as u32
                } else {
                    n_local as u32 + bits::rank(&halo_set, &before, c)
                }
            })
            .collect();
        drop((halo_set, before));
        // The share's offsets at the narrowest width for its own non-zeros: a graph too big
        // for 32-bit offsets may still split into shares that fit them.
        let offsets = (rows.start..=rows.end).into_par_iter();
        let local_indptr = match OffsetWidth::for_nnz(edges.len()) {
            OffsetWidth::U32 => RowPtr::U32(
                offsets
                    .map(|r| (indptr.get(r) - edges.start) as u32)
                    .collect(),
            ),
            OffsetWidth::U64 => RowPtr::U64(
                offsets
                    .map(|r| (indptr.get(r) - edges.start) as u64)
                    .collect(),
            ),
        };
        let local = Csr::from_row_ptr(n_local, n_local + halo.len(), local_indptr, indices)?;

        // What each other rank needs from this one: the distinct columns of its rows that this
        // rank owns, sorted (= its halo group for this rank).
        let send = (0..parts)
            .into_par_iter()
            .map(|p| {
                if p == rank {
                    return Vec::new();
                }
                let r = part.range(p);
                let theirs = &csr.indices()[indptr.get(r.start)..indptr.get(r.end)];
                let mine = |c: u32| own(c as usize).then(|| c as usize - rows.start);
                bits::ones(&bits::mark(theirs, n_local, mine))
            })
            .collect();
        Ok(Self {
            rank,
            rows,
            csr: local,
            halo,
            recv_counts,
            send,
            edges,
        })
    }

    /// Owned rows.
    pub fn n_local(&self) -> usize {
        self.rows.len()
    }

    /// Rows sent to other ranks per exchange (the sum of `send`'s lengths).
    pub fn send_rows(&self) -> usize {
        self.send.iter().map(Vec::len).sum()
    }

    /// The local rows with the columns an [`Exchange::AllGather`] delivers: global node `v`
    /// of rank `q` is column `q * part.max_len() + (v - part.range(q).start)` of
    /// `part.parts() * part.max_len()` (each rank's block padded to the longest range).
    /// `part` must be the partition this graph was built under.
    pub fn gathered_columns(&self, part: &RowPartition) -> Result<Csr> {
        if part.range(self.rank) != self.rows || part.parts() != self.send.len() {
            return Err(Error::InvalidArgument(format!(
                "local graph of rank {} (rows {:?}) under a partition that gives it {:?}",
                self.rank,
                self.rows,
                (self.rank < part.parts()).then(|| part.range(self.rank))
            )));
        }
        let m = part.max_len();
        let column = |v: usize| -> u32 {
            let q = part.owner(v);
            (q * m + v - part.range(q).start) as u32
        };
        let own = self.rank * m;
        let halo: Vec<u32> = self.halo.par_iter().map(|&v| column(v as usize)).collect();
        let n_local = self.n_local();
        let indices = self
            .csr
            .indices()
            .par_iter()
            .map(|&c| {
                let c = c as usize;
                if c < n_local {
                    (own + c) as u32
                } else {
                    halo[c - n_local]
                }
            })
            .collect();
        Csr::from_row_ptr(
            n_local,
            part.parts() * m,
            self.csr.indptr().clone(),
            indices,
        )
    }
}

/// Communication volume of a partition: what every rank receives per halo exchange.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HaloStats {
    /// Number of ranks.
    pub parts: usize,
    /// Owned rows per rank.
    pub rows: Vec<usize>,
    /// Non-zeros per rank.
    pub nnz: Vec<usize>,
    /// Halo rows per rank (received per exchange).
    pub halo: Vec<usize>,
}

impl HaloStats {
    /// The statistics of `locals` (one per rank, in rank order).
    pub fn of(locals: &[LocalGraph]) -> Self {
        Self {
            parts: locals.len(),
            rows: locals.iter().map(LocalGraph::n_local).collect(),
            nnz: locals.iter().map(|l| l.csr.nnz()).collect(),
            halo: locals.iter().map(|l| l.halo.len()).collect(),
        }
    }

    /// Rows moved per exchange over all ranks (each halo row once per receiving rank).
    pub fn total_halo(&self) -> usize {
        self.halo.iter().sum()
    }

    /// Rows an all-gather exchange moves over all ranks (`P (P - 1)` blocks of the longest
    /// range).
    pub fn all_gather_rows(&self) -> usize {
        all_gather_rows(self.parts, self.rows.iter().copied().max().unwrap_or(0))
    }

    /// The exchange [`Exchange::by_volume`] picks for this partition.
    pub fn exchange(&self) -> Exchange {
        Exchange::by_volume(&self.halo, self.rows.iter().copied().max().unwrap_or(0))
    }

    /// Largest non-zero share over the mean (1.0 = perfect balance).
    pub fn nnz_imbalance(&self) -> f64 {
        let total: usize = self.nnz.iter().sum();
        let max = self.nnz.iter().copied().max().unwrap_or(0);
        if total == 0 {
            1.0
        } else {
            max as f64 * self.parts as f64 / total as f64
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::coo::{BuildOptions, Coo};

    /// An undirected graph with self loops from an edge list (shared with the partitioner's
    /// tests).
    pub(crate) fn graph(n: usize, edges: &[(u32, u32)]) -> Csr {
        let (r, c): (Vec<u32>, Vec<u32>) = edges.iter().copied().unzip();
        Coo::new(n, r, c)
            .unwrap()
            .to_csr(BuildOptions::undirected_self_loops())
            .unwrap()
    }

    fn random(n: usize, m: usize, seed: u64) -> Csr {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % n as u64) as u32
        };
        let e: Vec<_> = (0..m).map(|_| (next(), next())).collect();
        graph(n, &e)
    }

    #[test]
    fn nnz_balanced_ranges_cover_and_balance() {
        let g = random(500, 4000, 1);
        for parts in 1..=7 {
            let p = RowPartition::balanced_by_nnz(&g, parts).unwrap();
            assert_eq!(p.parts(), parts);
            assert_eq!(p.bounds()[0], 0);
            assert_eq!(*p.bounds().last().unwrap(), 500);
            let locals: Vec<_> = (0..parts)
                .map(|r| LocalGraph::build(&g, &p, r).unwrap())
                .collect();
            let stats = HaloStats::of(&locals);
            assert_eq!(stats.nnz.iter().sum::<usize>(), g.nnz());
            // Contiguous boundaries are within one row's degree of the ideal share.
            let max_deg = g.row_degrees().into_iter().max().unwrap() as f64;
            let share = g.nnz() as f64 / parts as f64;
            for &z in &stats.nnz {
                assert!((z as f64) <= share + max_deg + 1.0, "{z} vs share {share}");
            }
        }
    }

    #[test]
    fn a_huge_row_gets_its_own_range_and_no_part_is_empty() {
        // Row 0 (a hub) holds a third of the non-zeros, more than a quarter share.
        let e: Vec<(u32, u32)> = (1..200).map(|j| (0, j)).collect();
        let g = graph(200, &e);
        let p = RowPartition::balanced_by_nnz(&g, 4).unwrap();
        for r in 0..4 {
            assert!(!p.range(r).is_empty(), "{:?}", p.bounds());
        }
        assert_eq!(p.range(0), 0..1);
        assert!(RowPartition::balanced_by_nnz(&g, 0).is_err());
        assert!(RowPartition::balanced_by_nnz(&g, 201).is_err());
    }

    #[test]
    fn local_graphs_reproduce_the_global_rows_and_exchange_lists_match() {
        let g = random(300, 2500, 7);
        for parts in 1..=4 {
            let p = RowPartition::balanced_by_nnz(&g, parts).unwrap();
            let locals: Vec<_> = (0..parts)
                .map(|r| LocalGraph::build(&g, &p, r).unwrap())
                .collect();
            for l in &locals {
                assert_eq!(l.recv_counts.iter().sum::<usize>(), l.halo.len());
                assert_eq!(l.recv_counts[l.rank], 0);
                assert!(l.send[l.rank].is_empty());
                let global_of = |c: u32| -> u32 {
                    let c = c as usize;
                    if c < l.n_local() {
                        (l.rows.start + c) as u32
                    } else {
                        l.halo[c - l.n_local()]
                    }
                };
                // Every local row maps back to its global row, edge for edge, in order.
                for i in 0..l.n_local() {
                    let mapped: Vec<u32> = l.csr.row(i).iter().map(|&c| global_of(c)).collect();
                    assert_eq!(mapped, g.row(l.rows.start + i));
                }
                assert_eq!(
                    &g.indices()[l.edges.clone()].len(),
                    &l.csr.nnz(),
                    "edge range"
                );
                // Halo groups are ordered by owner, sorted, and owned by that rank.
                let mut at = 0;
                for (q, &cnt) in l.recv_counts.iter().enumerate() {
                    let group = &l.halo[at..at + cnt];
                    assert!(group.windows(2).all(|w| w[0] < w[1]));
                    assert!(group.iter().all(|&v| p.owner(v as usize) == q));
                    // What q sends to l.rank is exactly this group, in order.
                    let sent: Vec<u32> = locals[q].send[l.rank]
                        .iter()
                        .map(|&r| (locals[q].rows.start + r as usize) as u32)
                        .collect();
                    assert_eq!(sent, group);
                    at += cnt;
                }
            }
        }
    }

    #[test]
    fn gathered_columns_and_halo_sizes() {
        let g = random(301, 2500, 9);
        for parts in 1..=4 {
            let p = RowPartition::balanced_by_nnz(&g, parts).unwrap();
            let m = p.max_len();
            let sizes = p.halo_sizes(&g).unwrap();
            assert_eq!(sizes.len(), parts);
            for (r, &size) in sizes.iter().enumerate() {
                let l = LocalGraph::build(&g, &p, r).unwrap();
                assert_eq!(size, l.halo.len());
                let gc = l.gathered_columns(&p).unwrap();
                assert_eq!(gc.n_cols(), parts * m);
                // Column q * m + o is node start(q) + o, edge for edge.
                let global = |c: u32| {
                    let (q, o) = (c as usize / m, c as usize % m);
                    assert!(o < p.range(q).len(), "a padding column is referenced");
                    (p.range(q).start + o) as u32
                };
                for i in 0..l.n_local() {
                    let mapped: Vec<u32> = gc.row(i).iter().map(|&c| global(c)).collect();
                    assert_eq!(mapped, g.row(l.rows.start + i));
                }
            }
            // All-gather only once the halos cover enough of the graph.
            let ex = Exchange::by_volume(&sizes, m);
            let share = sizes.iter().sum::<usize>() as f64 / (parts * (parts - 1) * m) as f64;
            assert_eq!(
                ex == Exchange::AllGather,
                parts > 1 && share >= Exchange::ALL_GATHER_SHARE
            );
        }
        // A path graph's halos are one row per neighbour: point-to-point.
        let path: Vec<(u32, u32)> = (0..99).map(|i| (i, i + 1)).collect();
        let g = graph(100, &path);
        let p = RowPartition::balanced_by_nnz(&g, 4).unwrap();
        assert_eq!(p.halo_sizes(&g).unwrap(), vec![1, 2, 2, 1]);
        assert_eq!(
            Exchange::by_volume(&p.halo_sizes(&g).unwrap(), p.max_len()),
            Exchange::PointToPoint
        );
        // A dense graph's halos are everything else: all-gather.
        let all: Vec<(u32, u32)> = (0..40).flat_map(|i| (0..40).map(move |j| (i, j))).collect();
        let g = graph(40, &all);
        let p = RowPartition::balanced_by_nnz(&g, 4).unwrap();
        assert_eq!(
            Exchange::by_volume(&p.halo_sizes(&g).unwrap(), p.max_len()),
            Exchange::AllGather
        );
        let other = RowPartition::balanced_by_nnz(&random(50, 100, 1), 2).unwrap();
        let l = LocalGraph::build(&g, &p, 1).unwrap();
        assert!(l.gathered_columns(&other).is_err());
        assert!("allgather".parse::<Exchange>().is_ok());
        assert!("ring".parse::<Exchange>().is_err());
    }

    /// The serial build the parallel one replaced (one pass per rank, marks per node): the
    /// parallel build must give the same local graph, field for field.
    fn reference_build(csr: &Csr, part: &RowPartition, rank: usize) -> LocalGraph {
        let (n, parts, rows) = (csr.n_rows(), part.parts(), part.range(rank));
        let n_local = rows.len();
        let indptr = csr.indptr();
        let edges = indptr.get(rows.start)..indptr.get(rows.end);
        let own = |v: usize| rows.contains(&v);
        let mut seen = vec![false; n];
        let mut halo: Vec<u32> = Vec::new();
        for &c in &csr.indices()[edges.clone()] {
            let c = c as usize;
            if !own(c) && !seen[c] {
                seen[c] = true;
                halo.push(c as u32);
            }
        }
        halo.sort_unstable();
        let mut recv_counts = vec![0usize; parts];
        for &h in &halo {
            recv_counts[part.owner(h as usize)] += 1;
        }
        let mut col_of = vec![u32::MAX; n];
        for (h, &g) in halo.iter().enumerate() {
            col_of[g as usize] = (n_local + h) as u32;
        }
        let indices = csr.indices()[edges.clone()]
            .iter()
            .map(|&c| {
                let c = c as usize;
                if own(c) {
                    (c - rows.start) as u32
                } else {
                    col_of[c]
                }
            })
            .collect();
        let mut local_indptr =
            RowPtr::with_capacity(OffsetWidth::for_nnz(edges.len()), n_local + 1);
        for r in rows.start..=rows.end {
            local_indptr.push(indptr.get(r) - edges.start);
        }
        let local =
            Csr::from_row_ptr(n_local, n_local + halo.len(), local_indptr, indices).unwrap();
        let mut send = vec![Vec::new(); parts];
        let mut mark = vec![u32::MAX; n_local];
        for (p, list) in send.iter_mut().enumerate() {
            if p == rank {
                continue;
            }
            let r = part.range(p);
            for &c in &csr.indices()[indptr.get(r.start)..indptr.get(r.end)] {
                let c = c as usize;
                if own(c) && mark[c - rows.start] != p as u32 {
                    mark[c - rows.start] = p as u32;
                    list.push((c - rows.start) as u32);
                }
            }
            list.sort_unstable();
        }
        LocalGraph {
            rank,
            rows,
            csr: local,
            halo,
            recv_counts,
            send,
            edges,
        }
    }

    #[test]
    fn the_parallel_build_equals_the_serial_one() {
        // Directed (not symmetric) and undirected graphs, balanced and uneven partitions with
        // empty ranges, 32- and 64-bit offsets.
        let directed = |n: usize, m: usize, seed: u64| {
            let g = random(n, m, seed);
            let (s, d): (Vec<u32>, Vec<u32>) = g
                .to_coo()
                .src()
                .iter()
                .zip(g.to_coo().dst())
                .filter(|(s, d)| !(**s as u64 * 7 + **d as u64 + seed).is_multiple_of(3))
                .map(|(s, d)| (*s, *d))
                .unzip();
            Coo::new(n, s, d)
                .unwrap()
                .to_csr(BuildOptions::default())
                .unwrap()
        };
        let graphs = [
            random(700, 9000, 3),
            directed(700, 9000, 4),
            directed(130, 3000, 5),
            random(300, 2000, 6)
                .with_offset_width(OffsetWidth::U64)
                .unwrap(),
        ];
        for g in &graphs {
            let n = g.n_rows();
            let mut partitions: Vec<RowPartition> = (1..=5)
                .map(|p| RowPartition::balanced_by_nnz(g, p).unwrap())
                .collect();
            partitions.push(RowPartition::from_bounds(vec![0, 0, n / 3, n / 3, n], n).unwrap());
            partitions.push(RowPartition::from_bounds(vec![0, 1, n - 1, n], n).unwrap());
            for p in &partitions {
                let sizes = p.halo_sizes(g).unwrap();
                for (r, &size) in sizes.iter().enumerate() {
                    let (a, b) = (
                        LocalGraph::build(g, p, r).unwrap(),
                        reference_build(g, p, r),
                    );
                    let what = format!("{:?} rank {r}", p.bounds());
                    assert_eq!(a.rows, b.rows, "{what}");
                    assert_eq!(a.csr, b.csr, "{what}");
                    assert_eq!(a.csr.offset_width(), b.csr.offset_width(), "{what}");
                    assert_eq!(a.halo, b.halo, "{what}");
                    assert_eq!(a.recv_counts, b.recv_counts, "{what}");
                    assert_eq!(a.send, b.send, "{what}");
                    assert_eq!(a.edges, b.edges, "{what}");
                    assert_eq!(size, b.halo.len(), "{what}");
                }
                let parts = crate::NodeParts::from_ranges(p);
                assert_eq!(p.edge_cut(g).unwrap(), parts.edge_cut(g).unwrap());
            }
        }
    }

    #[test]
    fn owner_and_bad_inputs() {
        let p = RowPartition::from_bounds(vec![0, 3, 3, 10], 10).unwrap();
        assert_eq!(p.owner(0), 0);
        assert_eq!(p.owner(2), 0);
        assert_eq!(p.owner(3), 2);
        assert_eq!(p.owner(9), 2);
        assert!(RowPartition::from_bounds(vec![0, 5, 4, 10], 10).is_err());
        assert!(RowPartition::from_bounds(vec![0, 5], 10).is_err());
        let g = random(10, 20, 3);
        assert!(LocalGraph::build(&g, &p, 3).is_err());
        let short = RowPartition::from_bounds(vec![0, 9], 9).unwrap();
        assert!(LocalGraph::build(&g, &short, 0).is_err());
        // An empty range is a valid (idle) rank.
        let l = LocalGraph::build(&g, &p, 1).unwrap();
        assert_eq!(l.n_local(), 0);
        assert_eq!(l.csr.nnz(), 0);
    }
}
