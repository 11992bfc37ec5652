//! Louvain community detection (Blondel et al., 2008), the clustering behind the community
//! (GCR-style) node reordering: nodes of one community get consecutive ids, so the rows a
//! warp gathers in SpMM/SDDMM are more often ones its neighbours gathered too.
//!
//! Classic multi-level Louvain on the symmetrised pattern (every stored edge weight 1, self
//! loops dropped): local moving in id order until a pass moves fewer than
//! [`Louvain::MIN_MOVED`] of the nodes (or [`Louvain::MAX_PASSES`] passes), then the
//! communities become the nodes of a weighted graph and the process repeats until a level
//! moves nothing. Local moving is sequential, as in the original algorithm, so the result is
//! deterministic and independent of the thread count; building each coarser graph (the other
//! half of the work) runs in parallel over communities with rayon.

use crate::csr::Csr;
use crate::error::Result;
use rayon::prelude::*;

/// A weighted symmetric graph without self loops, plus each node's self-loop weight (the
/// internal weight of the community it stands for).
struct Level {
    indptr: Vec<usize>,
    nbr: Vec<u32>,
    w: Vec<f64>,
    self_w: Vec<f64>,
}

impl Level {
    fn n(&self) -> usize {
        self.self_w.len()
    }

    /// Weighted degree of every node (self loop included).
    fn strengths(&self) -> Vec<f64> {
        (0..self.n())
            .into_par_iter()
            .map(|i| {
                self.self_w[i]
                    + self.w[self.indptr[i]..self.indptr[i + 1]]
                        .iter()
                        .sum::<f64>()
            })
            .collect()
    }

    /// The symmetrised pattern of a square CSR: `i ~ j` when either stores the other, once.
    fn from_csr(csr: &Csr) -> Result<Self> {
        let n = csr.n_rows();
        let t = csr.transpose_pattern()?;
        let mut stamp = vec![u32::MAX; n];
        let mut indptr = Vec::with_capacity(n + 1);
        indptr.push(0);
        let mut nbr = Vec::with_capacity(csr.nnz());
        for i in 0..n {
            for &j in csr.row(i).iter().chain(t.row(i)) {
                if j as usize != i && stamp[j as usize] != i as u32 {
                    stamp[j as usize] = i as u32;
                    nbr.push(j);
                }
            }
            indptr.push(nbr.len());
        }
        let w = vec![1.0; nbr.len()];
        Ok(Self {
            indptr,
            nbr,
            w,
            self_w: vec![0.0; n],
        })
    }

    /// Local moving; returns each node's community (not compacted) and the nodes moved.
    fn local_moving(&self, m2: f64) -> (Vec<u32>, usize) {
        let n = self.n();
        let k = self.strengths();
        let mut comm: Vec<u32> = (0..n as u32).collect();
        let mut tot = k.clone();
        let mut link = vec![0.0f64; n];
        let mut seen = vec![false; n];
        let mut touched: Vec<u32> = Vec::new();
        let mut moved_total = 0;
        for _ in 0..Louvain::MAX_PASSES {
            let mut moved = 0;
            for i in 0..n {
                let ci = comm[i] as usize;
                for p in self.indptr[i]..self.indptr[i + 1] {
                    let c = comm[self.nbr[p] as usize] as usize;
                    if !seen[c] {
                        seen[c] = true;
                        touched.push(c as u32);
                    }
                    link[c] += self.w[p];
                }
                tot[ci] -= k[i];
                let ki = k[i] / m2;
                // Gain of joining c, up to a positive factor: links into c minus the expected.
                let mut best = ci;
                let mut best_gain = link[ci] - tot[ci] * ki;
                for &c in &touched {
                    let c = c as usize;
                    let gain = link[c] - tot[c] * ki;
                    // Strictly better only: ties keep the node where it is.
                    if c != ci && gain > best_gain + 1e-12 {
                        best = c;
                        best_gain = gain;
                    }
                }
                tot[best] += k[i];
                if best != ci {
                    comm[i] = best as u32;
                    moved += 1;
                }
                for &c in &touched {
                    link[c as usize] = 0.0;
                    seen[c as usize] = false;
                }
                touched.clear();
            }
            moved_total += moved;
            if (moved as f64) < Louvain::MIN_MOVED * n as f64 || moved == 0 {
                break;
            }
        }
        (comm, moved_total)
    }

    /// Renumbers `comm` to `0..c` in order of first appearance; returns the count.
    fn compact(comm: &mut [u32]) -> usize {
        let mut id = vec![u32::MAX; comm.len()];
        let mut next = 0u32;
        for c in comm.iter_mut() {
            if id[*c as usize] == u32::MAX {
                id[*c as usize] = next;
                next += 1;
            }
            *c = id[*c as usize];
        }
        next as usize
    }

    /// The graph of the `nc` communities of `comm` (compacted): weights summed, internal
    /// weight on the diagonal.
    fn aggregate(&self, comm: &[u32], nc: usize) -> Self {
        // Members of each community: `comm` holds ids below `nc` (compacted).
        let members = Csr::group_by_key(nc, comm).expect("compacted community ids");
        let rows: Vec<(Vec<u32>, Vec<f64>, f64)> = (0..nc)
            .into_par_iter()
            .map_init(
                || (vec![0.0f64; nc], vec![false; nc], Vec::<u32>::new()),
                |(acc, seen, touched), c| {
                    let mut self_w = 0.0;
                    for &i in members.row(c) {
                        let i = i as usize;
                        self_w += self.self_w[i];
                        for p in self.indptr[i]..self.indptr[i + 1] {
                            let d = comm[self.nbr[p] as usize] as usize;
                            if d == c {
                                self_w += self.w[p];
                            } else {
                                if !seen[d] {
                                    seen[d] = true;
                                    touched.push(d as u32);
                                }
                                acc[d] += self.w[p];
                            }
                        }
                    }
                    touched.sort_unstable();
                    let ws = touched.iter().map(|&d| acc[d as usize]).collect();
                    for &d in touched.iter() {
                        acc[d as usize] = 0.0;
                        seen[d as usize] = false;
                    }
                    (std::mem::take(touched), ws, self_w)
                },
            )
            .collect();
        let mut indptr = Vec::with_capacity(nc + 1);
        indptr.push(0);
        let (mut nbr, mut w, mut self_w) = (Vec::new(), Vec::new(), Vec::with_capacity(nc));
        for (r, ws, s) in rows {
            nbr.extend(r);
            w.extend(ws);
            self_w.push(s);
            indptr.push(nbr.len());
        }
        Self {
            indptr,
            nbr,
            w,
            self_w,
        }
    }

    /// Newman's modularity of the partition `comm` of this level.
    fn modularity(&self, comm: &[u32], nc: usize, m2: f64) -> f64 {
        let k = self.strengths();
        let mut internal = vec![0.0f64; nc];
        let mut tot = vec![0.0f64; nc];
        for i in 0..self.n() {
            let c = comm[i] as usize;
            tot[c] += k[i];
            internal[c] += self.self_w[i];
            for p in self.indptr[i]..self.indptr[i + 1] {
                if comm[self.nbr[p] as usize] as usize == c {
                    internal[c] += self.w[p];
                }
            }
        }
        (0..nc)
            .map(|c| internal[c] / m2 - (tot[c] / m2).powi(2))
            .sum()
    }
}

/// A Louvain clustering: the community of every node at every level of the dendrogram.
#[derive(Debug, Clone, PartialEq)]
pub struct Louvain {
    /// `levels[l][i]`: the level-`l` community of node `i` (level 0 the finest).
    pub levels: Vec<Vec<u32>>,
    /// Communities at each level.
    pub counts: Vec<usize>,
    /// Modularity of the top level's partition.
    pub modularity: f64,
}

impl Louvain {
    /// A level's local moving stops when a pass moves fewer than this fraction of its nodes.
    pub const MIN_MOVED: f64 = 1e-3;
    /// At most this many local-moving passes per level.
    pub const MAX_PASSES: usize = 16;
    /// At most this many levels.
    pub const MAX_LEVELS: usize = 12;

    /// Clusters a square `csr` (rows and columns the same nodes). An error only when its
    /// transpose cannot be built ([`Csr::transpose_pattern`]).
    pub fn run(csr: &Csr) -> Result<Self> {
        let n = csr.n_rows();
        let mut level = Level::from_csr(csr)?;
        let m2: f64 = level.w.iter().sum();
        let mut node_comm: Vec<u32> = (0..n as u32).collect();
        let (mut levels, mut counts) = (Vec::new(), Vec::new());
        let mut modularity = 0.0;
        if m2 == 0.0 {
            return Ok(Self {
                levels: vec![node_comm],
                counts: vec![n],
                modularity,
            });
        }
        for _ in 0..Self::MAX_LEVELS {
            let (mut comm, moved) = level.local_moving(m2);
            let nc = Level::compact(&mut comm);
            if moved == 0 && !levels.is_empty() {
                break;
            }
            modularity = level.modularity(&comm, nc, m2);
            for c in node_comm.iter_mut() {
                *c = comm[*c as usize];
            }
            levels.push(node_comm.clone());
            counts.push(nc);
            if nc == level.n() {
                break;
            }
            level = level.aggregate(&comm, nc);
        }
        Ok(Self {
            levels,
            counts,
            modularity,
        })
    }

    /// `new_of_old`: nodes sorted by top-level community, then by each finer level's
    /// community, then by id, so every community (and sub-community) is a contiguous id range.
    pub fn order(&self) -> Vec<u32> {
        let n = self.levels.first().map_or(0, |l| l.len());
        let mut ids: Vec<u32> = (0..n as u32).collect();
        // Stable sorts from the finest level to the coarsest: a radix sort on the levels.
        for l in &self.levels {
            ids.sort_by_key(|&i| l[i as usize]);
        }
        let mut new_of_old = vec![0u32; n];
        for (new, &old) in ids.iter().enumerate() {
            new_of_old[old as usize] = new as u32;
        }
        new_of_old
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coo::{BuildOptions, Coo};

    /// `k` cliques of `size` nodes joined in a ring by one edge each, ids scrambled by a
    /// multiplier coprime with the node count.
    fn ring_of_cliques(k: u32, size: u32, mult: u32) -> (Csr, impl Fn(u32) -> u32) {
        let n = k * size;
        let scramble = move |v: u32| (v * mult + 3) % n;
        let (mut src, mut dst) = (Vec::new(), Vec::new());
        for c in 0..k {
            for a in 0..size {
                for b in a + 1..size {
                    src.push(scramble(c * size + a));
                    dst.push(scramble(c * size + b));
                }
            }
            src.push(scramble(c * size));
            dst.push(scramble(((c + 1) % k) * size + 1));
        }
        let csr = Coo::new(n as usize, src, dst)
            .unwrap()
            .to_csr(BuildOptions::undirected())
            .unwrap();
        (csr, scramble)
    }

    #[test]
    fn finds_planted_cliques_and_makes_them_contiguous() {
        let (k, size) = (8u32, 12u32);
        let (g, scramble) = ring_of_cliques(k, size, 37);
        let l = Louvain::run(&g).unwrap();
        let top = l.levels.last().unwrap();
        // Every clique is one community, and different cliques are different communities.
        for c in 0..k {
            let first = top[scramble(c * size) as usize];
            for a in 0..size {
                assert_eq!(top[scramble(c * size + a) as usize], first, "clique {c}");
            }
        }
        let mut reps: Vec<u32> = (0..k).map(|c| top[scramble(c * size) as usize]).collect();
        reps.sort_unstable();
        reps.dedup();
        assert_eq!(reps.len(), k as usize);
        // Modularity of k cliques in a ring: close to 1 - 1/k.
        assert!(l.modularity > 0.8, "modularity {}", l.modularity);
        // The order is a permutation placing each clique on consecutive ids.
        let order = l.order();
        let mut seen = vec![false; order.len()];
        assert!(order
            .iter()
            .all(|&v| !std::mem::replace(&mut seen[v as usize], true)));
        for c in 0..k {
            let ids: Vec<u32> = (0..size)
                .map(|a| order[scramble(c * size + a) as usize])
                .collect();
            let (lo, hi) = (ids.iter().min().unwrap(), ids.iter().max().unwrap());
            assert_eq!(hi - lo, size - 1, "clique {c} spread over {lo}..={hi}");
        }
    }

    #[test]
    fn coarser_levels_merge_finer_communities() {
        let (g, _) = ring_of_cliques(30, 5, 7);
        let l = Louvain::run(&g).unwrap();
        assert_eq!(l.levels.len(), l.counts.len());
        for w in l.levels.windows(2) {
            // A finer community never straddles two coarser ones.
            let mut up = std::collections::HashMap::new();
            for (fine, coarse) in w[0].iter().zip(&w[1]) {
                assert_eq!(*up.entry(*fine).or_insert(*coarse), *coarse);
            }
        }
        assert!(l.counts.windows(2).all(|c| c[1] <= c[0]), "{:?}", l.counts);
    }

    #[test]
    fn edgeless_and_isolated_nodes() {
        let empty = Csr::new_checked(4, 4, vec![0; 5], vec![]).unwrap();
        let l = Louvain::run(&empty).unwrap();
        assert_eq!(l.order(), vec![0, 1, 2, 3]);
        assert_eq!(l.modularity, 0.0);
        // Two isolated nodes beside an edge; a directed edge counts as undirected.
        let g = Csr::new_checked(4, 4, vec![0, 0, 1, 1, 1], vec![3]).unwrap();
        let l = Louvain::run(&g).unwrap();
        let top = l.levels.last().unwrap();
        assert_eq!(top[1], top[3]);
        assert_ne!(top[0], top[1]);
        let mut o = l.order();
        o.sort_unstable();
        assert_eq!(o, vec![0, 1, 2, 3]);
    }
}
