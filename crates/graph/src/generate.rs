//! Seeded synthetic node-classification graphs shaped like a real dataset.
//!
//! Model (a degree-corrected stochastic block model in Chung-Lu form):
//! - every node draws a community `c_i` (mildly imbalanced, `p_k ∝ (k+1)^-1/2`) and a weight
//!   `w_i ~ LogNormal(0, sigma)` (or a Pareto weight for a power-law tail,
//!   [`SyntheticSpec::power_law`]) capped at `max_weight` times the mean, so degrees are
//!   heavy-tailed (expected degree ∝ `w_i`);
//! - each undirected edge picks its first end ∝ `w`, and its second end ∝ `w` inside the first
//!   end's community with probability `homophily`, else ∝ `w` over all nodes; the edge list
//!   is symmetrised, de-duplicated and given one self loop per node (as DGL's Reddit);
//!   a second pass tops the edge count up to the target after de-duplication;
//! - features are `signal * mu_{c_i} + N(0, I)` with `mu_k ~ N(0, I)`; labels equal the
//!   community except for a `label_noise` fraction drawn uniformly (an accuracy ceiling, as
//!   real data has).
//!
//! Node ids are random: community and weight are drawn independently per node, which is the
//! same as shuffling ids of a community-sorted graph. Every random stream is split into fixed
//! chunks with their own seeds, so results do not depend on the number of threads.
//!
//! Parallel: nodes, edges and features are drawn chunk by chunk on all cores, and the CSR is
//! built by a parallel bucket sort (`Coo::to_csr`); the top-up rounds merge only their new
//! edges into the graph built so far. What stays sequential is `O(nodes)`: the alias tables'
//! construction, the mean weight, the per-community member lists, and the exact-count split
//! shuffle of specs without a [`SyntheticSpec::test_frac`].

use crate::coo::{build_csr, split_sizes_mut, BuildOptions};
use crate::csr::{Csr, DegreeStats, Offset, OffsetWidth};
use crate::dataset::{Dataset, DenseMatrix, Features, Split};
use crate::error::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Shape and difficulty of a synthetic dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyntheticSpec {
    /// Dataset name.
    pub name: String,
    /// Number of nodes.
    pub nodes: usize,
    /// Target mean row length of the final CSR, self loop included.
    pub avg_degree: f64,
    /// Feature width.
    pub features: usize,
    /// Number of classes (= communities).
    pub classes: usize,
    /// Train fraction.
    pub train_frac: f64,
    /// Validation fraction (the rest is test).
    pub val_frac: f64,
    /// Log-normal sigma of node weights.
    pub degree_sigma: f64,
    /// Cap on a node weight, in multiples of the mean weight.
    pub max_weight: f64,
    /// Probability that an edge stays inside its first end's community.
    pub homophily: f64,
    /// Scale of the class mean in the features (noise has unit variance).
    pub signal: f32,
    /// Fraction of nodes whose label is redrawn uniformly.
    pub label_noise: f64,
    /// Number nodes community by community (stable in the random order) instead of randomly,
    /// as in datasets whose ids follow a crawl or a clustering reorder. The graph is the same
    /// up to relabelling (same seed), so one trained model serves both orders; what changes
    /// is which neighbours come first in a CSR row, and memory locality.
    #[serde(default)]
    pub community_order: bool,
    /// Tail exponent `a` of a power-law degree distribution: node weights are Pareto,
    /// `P(w > x) = x^(1-a)` for `x >= 1` (density `∝ x^-a`; `a > 2` for a finite mean), before
    /// the cap. `None`: log-normal weights with [`Self::degree_sigma`].
    #[serde(default)]
    pub power_law: Option<f64>,
    /// How [`Self::scaled`] changes the mean degree with the node count.
    #[serde(default)]
    pub degree_scaling: DegreeScaling,
    /// Test fraction. `None`: every node outside train and validation is a test node (exact
    /// counts, from one seeded shuffle of all nodes). `Some(f)`: each node independently lands
    /// in train, validation, test or none of them with probabilities `train_frac`,
    /// `val_frac`, `f` and the rest (papers100M's split holds ~1.4 % of its nodes).
    #[serde(default)]
    pub test_frac: Option<f64>,
}

/// How [`SyntheticSpec::scaled`] changes the mean degree with the node count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DegreeScaling {
    /// Mean degree times `sqrt(scale)`: a small dense graph is not a near-clique.
    #[default]
    Sqrt,
    /// The same mean degree at every scale: a sparse graph stays as sparse.
    Fixed,
}

/// The top-up rounds of [`generate`] may end a little above the target non-zeros: the
/// memory estimate ([`SyntheticSpec::peak_bytes`]) counts this many times the target.
const NNZ_HEADROOM: f64 = 1.02;

impl SyntheticSpec {
    /// DGL's Reddit: 232,965 nodes, ~114.6 M directed edges with self loops (mean row length
    /// 492), max degree ~21.7 K, 602 features, 41 classes, 66/10/24 % split.
    pub fn reddit() -> Self {
        Self {
            name: "synthetic-reddit".into(),
            nodes: 232_965,
            avg_degree: 114_615_892.0 / 232_965.0,
            features: 602,
            classes: 41,
            train_frac: 0.66,
            val_frac: 0.10,
            degree_sigma: 1.3,
            max_weight: 44.0,
            homophily: 0.55,
            signal: 0.15,
            label_noise: 0.05,
            community_order: false,
            power_law: None,
            degree_scaling: DegreeScaling::Sqrt,
            test_frac: None,
        }
    }

    /// OGB's ogbn-papers100M: 111,059,956 nodes, 1,615,685,872 citation edges made undirected
    /// (~3.23 G directed non-zeros, mean degree ~29.1) plus a self loop per node (~3.34 G
    /// stored, mean row length ~30.1), 128 features, 172 classes (arXiv subject areas), and
    /// its split: 1,207,179 train / 125,265 validation / 214,338 test nodes (1.09 / 0.11 /
    /// 0.19 %; the other nodes are in no set). Degrees follow a power law with tail exponent
    /// 2.5 capped at 1,000 times the mean; the mean degree does not grow with `scale`
    /// ([`DegreeScaling::Fixed`]). Homophily, signal and label noise are chosen, not measured
    /// on the real graph: a homophilous graph whose features alone leave many nodes
    /// ambiguous.
    pub fn papers100m() -> Self {
        const NODES: f64 = 111_059_956.0;
        Self {
            name: "synthetic-papers100m".into(),
            nodes: NODES as usize,
            avg_degree: 2.0 * 1_615_685_872.0 / NODES + 1.0,
            features: 128,
            classes: 172,
            train_frac: 1_207_179.0 / NODES,
            val_frac: 125_265.0 / NODES,
            degree_sigma: 0.0,
            max_weight: 1000.0,
            homophily: 0.6,
            signal: 0.25,
            label_noise: 0.2,
            community_order: false,
            power_law: Some(2.5),
            degree_scaling: DegreeScaling::Fixed,
            test_frac: Some(214_338.0 / NODES),
        }
    }

    /// Looks a preset up by name (`reddit`, `papers100m`).
    pub fn preset(name: &str) -> Result<Self> {
        match name {
            "reddit" => Ok(Self::reddit()),
            "papers100m" => Ok(Self::papers100m()),
            other => Err(Error::InvalidArgument(format!(
                "unknown synthetic preset `{other}` (known: reddit, papers100m)"
            ))),
        }
    }

    /// A smaller (or larger) graph of the same kind: `scale` times the nodes, the mean degree
    /// times `sqrt(scale)` (so a small graph is not a near-clique) or kept
    /// ([`Self::degree_scaling`]), and the weight cap lowered so no expected degree exceeds
    /// a quarter of the nodes. `scale = 1` is the preset itself. Any number of non-zeros is
    /// fine (the CSR's offsets go 64-bit past `u32::MAX`); what bounds the scale is memory,
    /// which [`generate`] checks ([`Self::peak_bytes`]).
    pub fn scaled(&self, scale: f64) -> Result<Self> {
        if !(scale > 0.0 && scale <= 16.0) {
            return Err(Error::InvalidArgument(format!(
                "scale {scale} must be in (0, 16]"
            )));
        }
        let s = self.scaled_unchecked(scale);
        if s.nodes >= u32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "{} at scale {scale}: {} nodes exceed the 32-bit node ids",
                self.name, s.nodes
            )));
        }
        Ok(s)
    }

    fn scaled_unchecked(&self, scale: f64) -> Self {
        if scale == 1.0 {
            return self.clone();
        }
        let mut s = self.clone();
        s.nodes = ((self.nodes as f64 * scale).round() as usize).max(self.classes * 4);
        let degree = match self.degree_scaling {
            DegreeScaling::Sqrt => self.avg_degree * scale.sqrt(),
            DegreeScaling::Fixed => self.avg_degree,
        };
        s.avg_degree = degree.clamp(1.0, s.nodes as f64 / 4.0);
        s.max_weight = self
            .max_weight
            .min(s.nodes as f64 / 4.0 / s.avg_degree)
            .max(1.0);
        s.name = format!("{}@{scale}", self.name);
        s
    }

    /// Non-zeros the generator aims at: mean row length times nodes.
    pub fn expected_nnz(&self) -> f64 {
        self.avg_degree * self.nodes as f64
    }

    /// Bytes [`generate`] holds at its peak, estimated from the spec (non-zeros at the
    /// target plus the top-up's headroom, `z`; nodes `n`; features `d`), the largest of:
    /// - building the CSR: `16 z + 48 n` (the edge list, 4 bytes per stored entry; the
    ///   bucket sort's 8-byte keys and 4-byte columns per entry; weights, communities,
    ///   labels and alias tables, 40 bytes per node; row lengths and offsets);
    /// - drawing the features: `4 z + 4 n d + 24 n` (the graph, its offsets, the features,
    ///   communities and labels);
    /// - with [`Self::community_order`], the renumbered copy of graph and features beside
    ///   the original: `8 z + 8 n d + 32 n`.
    ///
    /// Papers100M-shaped (`d = 128`, 30.1 non-zeros a node): 73 GB at scale 1 (the features
    /// phase; the CSR build peaks at 60 GB), 146 GB at scale 2.
    pub fn peak_bytes(&self) -> u64 {
        let z = self.expected_nnz() * NNZ_HEADROOM;
        let (n, d) = (self.nodes as f64, self.features as f64);
        let build = 16.0 * z + 48.0 * n;
        let features = 4.0 * z + 4.0 * n * d + 24.0 * n;
        let renumber = if self.community_order {
            8.0 * z + 8.0 * n * d + 32.0 * n
        } else {
            0.0
        };
        build.max(features).max(renumber) as u64
    }

    /// Refuses a spec whose [`Self::peak_bytes`] exceed `available` bytes, saying how much
    /// it needs and about what share of its nodes would fit (generating would otherwise run
    /// for minutes and then be killed for memory).
    pub fn check_memory(&self, available: u64) -> Result<()> {
        let need = self.peak_bytes();
        if need <= available {
            return Ok(());
        }
        // Bisect the share of the nodes (at the same mean degree) whose estimate fits.
        let at = |f: f64| {
            let mut s = self.clone();
            s.nodes = (self.nodes as f64 * f) as usize;
            s.peak_bytes()
        };
        let (mut lo, mut hi) = (0.0, 1.0);
        for _ in 0..40 {
            let mid = 0.5 * (lo + hi);
            if at(mid) <= available {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Err(Error::InvalidArgument(format!(
            "{}: {} nodes x mean row length {:.1} = {:.3e} non-zeros and {} features need about \
             {:.1} GB at generation's peak, {:.1} GB of memory is available: about {:.2} of \
             these nodes fit (lower the scale)",
            self.name,
            self.nodes,
            self.avg_degree,
            self.expected_nnz(),
            self.features,
            need as f64 / 1e9,
            available as f64 / 1e9,
            (lo * 100.0).floor() / 100.0
        )))
    }

    fn check(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if self.nodes < 2 || self.classes < 2 || self.features == 0 {
            return bad(format!(
                "need >= 2 nodes, >= 2 classes and >= 1 feature, got {}/{}/{}",
                self.nodes, self.classes, self.features
            ));
        }
        if !(self.avg_degree >= 1.0 && self.avg_degree <= self.nodes as f64) {
            return bad(format!(
                "avg_degree {} must be in [1, nodes]",
                self.avg_degree
            ));
        }
        if self.nodes >= u32::MAX as usize {
            return bad(format!(
                "{} nodes exceed the 32-bit node ids (at most {})",
                self.nodes,
                u32::MAX - 1
            ));
        }
        if !(0.0..=1.0).contains(&self.homophily) || !(0.0..=1.0).contains(&self.label_noise) {
            return bad("homophily and label_noise must be in [0, 1]".into());
        }
        if !(self.train_frac > 0.0 && self.val_frac >= 0.0 && self.train_frac + self.val_frac < 1.0)
        {
            return bad(format!(
                "split fractions {}/{} leave no test set",
                self.train_frac, self.val_frac
            ));
        }
        if let Some(t) = self.test_frac {
            if !(t > 0.0 && self.train_frac + self.val_frac + t <= 1.0) {
                return bad(format!(
                    "split fractions {}/{}/{t} must be positive and sum to at most 1",
                    self.train_frac, self.val_frac
                ));
            }
        }
        if let Some(a) = self.power_law {
            if !(a > 2.0 && a.is_finite()) {
                return bad(format!(
                    "power-law exponent {a} must be above 2 (a finite mean degree)"
                ));
            }
        }
        Ok(())
    }
}

/// What was generated, printed by the examples.
#[derive(Debug, Clone, Serialize)]
pub struct GenReport {
    /// The spec used.
    pub spec: SyntheticSpec,
    /// Seed.
    pub seed: u64,
    /// Stored directed edges (self loops included).
    pub nnz: usize,
    /// Row-length statistics.
    pub degrees: DegreeStats,
    /// Fraction of non-loop edges inside a community.
    pub edge_homophily: f64,
    /// Seconds spent.
    pub seconds: f64,
}

impl std::fmt::Display for GenReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "generated {} (seed {}): {} nodes, {} directed edges incl. self loops, {} features, {} classes in {:.1} s",
            self.spec.name, self.seed, self.spec.nodes, self.nnz, self.spec.features, self.spec.classes, self.seconds
        )?;
        write!(
            f,
            "  {}; edge homophily {:.2}",
            self.degrees, self.edge_homophily
        )
    }
}

const CHUNK: usize = 1 << 16;

fn rng(seed: u64, stream: u64, chunk: u64) -> Xoshiro256PlusPlus {
    // splitmix-style mixing of the three inputs
    let mut z = seed
        ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ chunk.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    Xoshiro256PlusPlus::seed_from_u64(z ^ (z >> 31))
}

/// One slot of an [`Alias`] table: keep its own id with probability `keep`, else take the
/// alias's id. Both ids are stored, so a draw reads one slot and nothing else.
#[derive(Clone, Copy, Default)]
struct Slot {
    keep: f32,
    id: u32,
    alias: u32,
}

/// Walker/Vose alias table over `0..n` (or over a subset of ids).
struct Alias {
    table: Vec<Slot>,
}

impl Alias {
    /// Over `0..weights.len()`.
    fn over_range(weights: &[f64]) -> Self {
        Self {
            table: Self::table(weights, |i| i as u32),
        }
    }

    /// Over `ids` (one weight each).
    fn over_ids(ids: &[u32], weights: &[f64]) -> Self {
        Self {
            table: Self::table(weights, |i| ids[i]),
        }
    }

    fn table(weights: &[f64], id: impl Fn(usize) -> u32 + Sync) -> Vec<Slot> {
        let n = weights.len();
        // The sum and the pairing loop are sequential (the same table whatever the thread
        // count); the element-wise parts are not.
        let total: f64 = weights.iter().sum();
        let mut scaled: Vec<f64> = weights.par_iter().map(|w| w * n as f64 / total).collect();
        let mut table: Vec<Slot> = (0..n)
            .into_par_iter()
            .map(|i| Slot {
                keep: 1.0,
                id: id(i),
                alias: id(i),
            })
            .collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| scaled[i] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            table[s].keep = scaled[s] as f32;
            table[s].alias = id(l);
            scaled[l] -= 1.0 - scaled[s];
            if scaled[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        table
    }

    /// The random part of a draw: a slot and a uniform number (in this order).
    #[inline]
    fn draw(&self, r: &mut impl Rng) -> (usize, f32) {
        let k = r.random_range(0..self.table.len());
        (k, r.random::<f32>())
    }

    /// The id a draw picks, given the slot it drew and its uniform number.
    #[inline]
    fn resolve(slot: Slot, u: f32) -> u32 {
        if u < slot.keep {
            slot.id
        } else {
            slot.alias
        }
    }

    fn sample(&self, r: &mut impl Rng) -> u32 {
        let (k, u) = self.draw(r);
        Self::resolve(self.table[k], u)
    }
}

/// Chunks [`EdgeSampler::fill`] draws in lockstep.
const LANES: usize = 16;

/// One chunk of edges being drawn: its generator and its sources and targets.
type Lane<'a> = (Xoshiro256PlusPlus, &'a mut [u32], &'a mut [u32]);

/// Draws the edges of the model: the first end ∝ weight, the second ∝ weight inside the first
/// end's community with probability `homophily`, else ∝ weight over all nodes.
struct EdgeSampler<'a> {
    global: &'a Alias,
    local: &'a [Option<Alias>],
    comm: &'a [u32],
    homophily: f64,
}

impl EdgeSampler<'_> {
    /// One edge from `r` (the reference of [`Self::fill`]).
    fn edge(&self, r: &mut impl Rng) -> (u32, u32) {
        let s = self.global.sample(r);
        let d = match &self.local[self.comm[s as usize] as usize] {
            Some(a) if r.random::<f64>() < self.homophily => a.sample(r),
            _ => self.global.sample(r),
        };
        (s, d)
    }

    /// Fills up to [`LANES`] chunks, each with [`Self::edge`] from its own generator: the
    /// same draws in the same order per chunk, but edge `i` of every chunk is drawn stage by
    /// stage across the chunks, the memory reads of a stage in a loop of their own, so the
    /// cache misses of the chunks (tables far larger than the cache on a large graph) are in
    /// flight together instead of one after the other.
    fn fill(&self, lanes: &mut [Lane<'_>]) {
        let l = lanes.len();
        debug_assert!(l <= LANES);
        let common = lanes.iter().map(|x| x.1.len()).min().unwrap_or(0);
        let (mut k, mut u) = ([0usize; LANES], [0f32; LANES]);
        let mut slot = [Slot::default(); LANES];
        let (mut first, mut comm) = ([0u32; LANES], [0u32; LANES]);
        let mut pick: [&Alias; LANES] = [self.global; LANES];
        for i in 0..common {
            for (j, lane) in lanes.iter_mut().enumerate() {
                (k[j], u[j]) = self.global.draw(&mut lane.0);
            }
            for j in 0..l {
                slot[j] = self.global.table[k[j]];
            }
            for j in 0..l {
                first[j] = Alias::resolve(slot[j], u[j]);
            }
            for j in 0..l {
                comm[j] = self.comm[first[j] as usize];
            }
            for (j, lane) in lanes.iter_mut().enumerate() {
                let r = &mut lane.0;
                pick[j] = match &self.local[comm[j] as usize] {
                    Some(a) if r.random::<f64>() < self.homophily => a,
                    _ => self.global,
                };
                (k[j], u[j]) = pick[j].draw(r);
            }
            for j in 0..l {
                slot[j] = pick[j].table[k[j]];
            }
            for (j, lane) in lanes.iter_mut().enumerate() {
                lane.1[i] = first[j];
                lane.2[i] = Alias::resolve(slot[j], u[j]);
            }
        }
        for (r, src, dst) in lanes.iter_mut() {
            for (s, d) in src[common..].iter_mut().zip(&mut dst[common..]) {
                (*s, *d) = self.edge(r);
            }
        }
    }
}

/// The nodes of each community, ascending: a parallel counting sort of `comm` (values `< c`).
fn group_by_community(comm: &[u32], c: usize) -> Vec<Vec<u32>> {
    let counts: Vec<Vec<usize>> = comm
        .par_chunks(CHUNK)
        .map(|part| {
            let mut n = vec![0usize; c];
            part.iter().for_each(|&k| n[k as usize] += 1);
            n
        })
        .collect();
    let mut members: Vec<Vec<u32>> = (0..c)
        .map(|k| vec![0u32; counts.iter().map(|n| n[k]).sum()])
        .collect();
    // Chunk `ch` owns slice `ch` of every community's list.
    let mut slices: Vec<Vec<&mut [u32]>> = counts.iter().map(|_| Vec::with_capacity(c)).collect();
    for (k, list) in members.iter_mut().enumerate() {
        let sizes: Vec<usize> = counts.iter().map(|n| n[k]).collect();
        for (ch, part) in split_sizes_mut(list, &sizes).into_iter().enumerate() {
            slices[ch].push(part);
        }
    }
    slices
        .into_par_iter()
        .zip(comm.par_chunks(CHUNK))
        .enumerate()
        .for_each(|(ch, (mut out, part))| {
            let mut fill = vec![0usize; c];
            for (q, &k) in part.iter().enumerate() {
                out[k as usize][fill[k as usize]] = (ch * CHUNK + q) as u32;
                fill[k as usize] += 1;
            }
        });
    members
}

/// Train, validation and test sets of exactly `train_frac` and `val_frac` of the nodes (the
/// rest test), from one seeded shuffle of all nodes.
fn shuffled_split(spec: &SyntheticSpec, seed: u64) -> Split {
    let n = spec.nodes;
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut r = rng(seed, 6, 0);
    for i in (1..n).rev() {
        order.swap(i, r.random_range(0..=i));
    }
    let n_train = (spec.train_frac * n as f64).round() as usize;
    let n_val = (spec.val_frac * n as f64).round() as usize;
    let mut split = Split {
        train: order[..n_train].to_vec(),
        val: order[n_train..n_train + n_val].to_vec(),
        test: order[n_train + n_val..].to_vec(),
    };
    split.train.sort_unstable();
    split.val.sort_unstable();
    split.test.sort_unstable();
    split
}

/// Each node independently in train, validation, test or none, with probabilities
/// `train_frac`, `val_frac`, `test_frac` and the rest; chunk by chunk in parallel (sets come
/// out sorted).
fn drawn_split(spec: &SyntheticSpec, test_frac: f64, seed: u64) -> Split {
    let n = spec.nodes;
    let (a, b) = (spec.train_frac, spec.train_frac + spec.val_frac);
    let c = b + test_frac;
    let parts: Vec<[Vec<u32>; 3]> = (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .map(|ch| {
            let mut r = rng(seed, 7, ch as u64);
            let mut sets: [Vec<u32>; 3] = Default::default();
            for i in ch * CHUNK..((ch + 1) * CHUNK).min(n) {
                let u: f64 = r.random();
                let set = if u < a {
                    0
                } else if u < b {
                    1
                } else if u < c {
                    2
                } else {
                    continue;
                };
                sets[set].push(i as u32);
            }
            sets
        })
        .collect();
    let join = |k: usize| parts.iter().flat_map(|p| p[k].iter().copied()).collect();
    Split {
        train: join(0),
        val: join(1),
        test: join(2),
    }
}

/// Visits the union of two sorted, duplicate-free runs in order.
fn merge(x: &[u32], y: &[u32], mut f: impl FnMut(u32)) {
    let (mut i, mut j) = (0, 0);
    while i < x.len() && j < y.len() {
        let (u, v) = (x[i], y[j]);
        f(u.min(v));
        i += (u <= v) as usize;
        j += (v <= u) as usize;
    }
    x[i..].iter().chain(&y[j..]).for_each(|&v| f(v));
}

/// Rows per task of [`union_rows`].
const UNION_BLOCK: usize = 4096;

/// The row-wise union of two patterns of the same shape with sorted, duplicate-free rows
/// (rows of the result are too), in parallel over blocks of rows, with offsets at the
/// narrowest width for the union's entries.
fn union_rows(a: &Csr, b: &Csr) -> Result<Csr> {
    let n = a.n_rows();
    debug_assert_eq!((n, a.n_cols()), (b.n_rows(), b.n_cols()));
    // A union row has distinct columns, fewer than n_cols < u32::MAX.
    let mut lens = vec![0u32; n];
    lens.par_chunks_mut(UNION_BLOCK)
        .enumerate()
        .for_each(|(blk, lens)| {
            for (k, len) in lens.iter_mut().enumerate() {
                let i = blk * UNION_BLOCK + k;
                merge(a.row(i), b.row(i), |_| *len += 1);
            }
        });
    let block_len: Vec<usize> = lens
        .par_chunks(UNION_BLOCK)
        .map(|l| l.iter().map(|&x| x as usize).sum())
        .collect();
    let total: usize = block_len.iter().sum();
    match OffsetWidth::for_nnz(total) {
        OffsetWidth::U32 => union_fill::<u32>(a, b, &block_len, total),
        OffsetWidth::U64 => union_fill::<u64>(a, b, &block_len, total),
    }
}

/// [`union_rows`]' second pass with offsets of type `O`: block `k` of rows writes its
/// `block_len[k]` entries after the blocks before it.
fn union_fill<O: Offset>(a: &Csr, b: &Csr, block_len: &[usize], total: usize) -> Result<Csr> {
    let n = a.n_rows();
    let mut indptr = vec![O::default(); n + 1];
    let mut indices = vec![0u32; total];
    let mut start = 0usize;
    let starts: Vec<usize> = block_len
        .iter()
        .map(|&l| {
            let s = start;
            start += l;
            s
        })
        .collect();
    indptr[1..]
        .par_chunks_mut(UNION_BLOCK)
        .zip(split_sizes_mut(&mut indices, block_len))
        .zip(starts)
        .enumerate()
        .for_each(|(blk, ((ptr, out), start))| {
            let mut w = 0usize;
            for (k, p) in ptr.iter_mut().enumerate() {
                let i = blk * UNION_BLOCK + k;
                merge(a.row(i), b.row(i), |v| {
                    out[w] = v;
                    w += 1;
                });
                *p = O::from_usize(start + w);
            }
        });
    Csr::from_row_ptr(n, n, O::into_row_ptr(indptr), indices)
}

/// Bytes of memory this process can still take: the host's `MemAvailable` (Linux), lowered
/// to what the cgroup (v2) limit leaves when one is set (the limit less the cgroup's
/// anonymous memory: its page cache is reclaimed on demand, as `MemAvailable` counts it);
/// `None` where neither is readable.
pub fn available_memory() -> Option<u64> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let field = |text: &str, key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    let host = read("/proc/meminfo")
        .and_then(|m| field(&m, "MemAvailable:"))
        .map(|kb| kb * 1024);
    // `memory.max` reads `max` when unlimited: no number, no cgroup bound.
    let cgroup = read("/sys/fs/cgroup/memory.max")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|max| {
            let anon = read("/sys/fs/cgroup/memory.stat").and_then(|s| field(&s, "anon "));
            max.saturating_sub(anon.unwrap_or(0))
        });
    match (host, cgroup) {
        (Some(h), Some(c)) => Some(h.min(c)),
        (h, c) => h.or(c),
    }
}

/// Generates a dataset from `spec` with `seed`. Refused up front when the host's available
/// memory ([`available_memory`]) is below the spec's [`SyntheticSpec::peak_bytes`].
pub fn generate(spec: &SyntheticSpec, seed: u64) -> Result<(Dataset, GenReport)> {
    spec.check()?;
    if let Some(available) = available_memory() {
        spec.check_memory(available)?;
    }
    let t0 = std::time::Instant::now();
    let n = spec.nodes;
    let c = spec.classes;

    // Communities, weights, labels.
    let class_p: Vec<f64> = (0..c).map(|k| 1.0 / ((k + 1) as f64).sqrt()).collect();
    let class_alias = Alias::over_range(&class_p);
    let lognormal = LogNormal::new(0.0, spec.degree_sigma)
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    let per_node: Vec<(u32, f64, u32)> = (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .flat_map_iter(|ch| {
            let mut r = rng(seed, 1, ch as u64);
            let lo = ch * CHUNK;
            let hi = (lo + CHUNK).min(n);
            let class_alias = &class_alias;
            (lo..hi)
                .map(move |_| {
                    let comm = class_alias.sample(&mut r);
                    let w = match spec.power_law {
                        None => lognormal.sample(&mut r),
                        // Inverse CDF of the Pareto law with minimum 1 (`1 - u` is in (0, 1]).
                        Some(a) => (1.0 - r.random::<f64>()).powf(-1.0 / (a - 1.0)),
                    };
                    let label = if r.random::<f64>() < spec.label_noise {
                        r.random_range(0..c as u32)
                    } else {
                        comm
                    };
                    (comm, w, label)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    // A sequential sum: the same bits whatever the thread count.
    let mean_w = per_node.iter().map(|p| p.1).sum::<f64>() / n as f64;
    let weights: Vec<f64> = per_node
        .par_iter()
        .map(|p| (p.1 / mean_w).min(spec.max_weight))
        .collect();
    let comm: Vec<u32> = per_node.par_iter().map(|p| p.0).collect();
    let labels: Vec<i32> = per_node.par_iter().map(|p| p.2 as i32).collect();
    drop(per_node);

    let global = Alias::over_range(&weights);
    let members = group_by_community(&comm, c);
    let local: Vec<Option<Alias>> = members
        .into_par_iter()
        .map(|ids| {
            if ids.is_empty() {
                None
            } else {
                let w: Vec<f64> = ids.iter().map(|&i| weights[i as usize]).collect();
                Some(Alias::over_ids(&ids, &w))
            }
        })
        .collect();

    // Edges: target nnz = avg_degree * n, of which n are self loops.
    let target = (spec.avg_degree * n as f64).round() as usize;
    let undirected_target = target.saturating_sub(n) / 2;
    // Chunk `ch` of stream `stream` draws edges `ch * CHUNK ..` from its own generator;
    // a task draws `LANES` consecutive chunks.
    let sampler = EdgeSampler {
        global: &global,
        local: &local,
        comm: &comm,
        homophily: spec.homophily,
    };
    let sample_edges = |count: usize, stream: u64| -> (Vec<u32>, Vec<u32>) {
        let (mut src, mut dst) = (vec![0u32; count], vec![0u32; count]);
        src.par_chunks_mut(CHUNK * LANES)
            .zip(dst.par_chunks_mut(CHUNK * LANES))
            .enumerate()
            .for_each(|(task, (src, dst))| {
                let mut lanes: Vec<Lane<'_>> = src
                    .chunks_mut(CHUNK)
                    .zip(dst.chunks_mut(CHUNK))
                    .enumerate()
                    .map(|(j, (s, d))| (rng(seed, stream, (task * LANES + j) as u64), s, d))
                    .collect();
                sampler.fill(&mut lanes);
            });
        (src, dst)
    };
    let (src, dst) = sample_edges(undirected_target, 2);
    let mut sampled = src.len();
    let mut graph = build_csr(n, &src, &dst, BuildOptions::undirected_self_loops())?;
    drop((src, dst));
    // Top up: duplicates and self pairs were lost; draw the shortfall scaled by the loss rate,
    // a few rounds at most (a dense small graph may saturate). Each round's edges are built
    // alone and merged row by row into the graph so far: the same graph as building all the
    // edges drawn at once.
    for round in 0..4u64 {
        if graph.nnz() as f64 >= 0.995 * target as f64 || undirected_target == 0 {
            break;
        }
        let kept = (graph.nnz() - n) as f64 / sampled as f64 / 2.0;
        let extra = ((target - graph.nnz()) as f64 / 2.0 / kept.max(0.05) * 1.02) as usize;
        let (src, dst) = sample_edges(extra, 3 + round * 16);
        sampled += src.len();
        let more = build_csr(n, &src, &dst, BuildOptions::undirected())?;
        drop((src, dst));
        graph = union_rows(&graph, &more)?;
    }
    // The tables are not needed again: free them before the features are drawn.
    drop((global, local, weights));
    let within: usize = (0..n)
        .into_par_iter()
        .map(|i| {
            graph
                .row(i)
                .iter()
                .filter(|&&j| j as usize != i && comm[j as usize] == comm[i])
                .count()
        })
        .sum();
    let edge_homophily = within as f64 / (graph.nnz() - n).max(1) as f64;

    // Features.
    let d = spec.features;
    let mut mu = vec![0f32; c * d];
    let mut r = rng(seed, 4, 0);
    mu.iter_mut()
        .for_each(|v| *v = r.sample::<f32, _>(StandardNormal) * spec.signal);
    let mut x = vec![0f32; n * d];
    x.par_chunks_mut(CHUNK / 16 * d)
        .enumerate()
        .for_each(|(ch, block)| {
            let mut r = rng(seed, 5, ch as u64);
            for (k, row) in block.chunks_mut(d).enumerate() {
                let i = ch * (CHUNK / 16) + k;
                let m = &mu[comm[i] as usize * d..(comm[i] as usize + 1) * d];
                for (v, &mv) in row.iter_mut().zip(m) {
                    *v = mv + r.sample::<f32, _>(StandardNormal);
                }
            }
        });

    let split = match spec.test_frac {
        None => shuffled_split(spec, seed),
        Some(test_frac) => drawn_split(spec, test_frac, seed),
    };

    let report = GenReport {
        spec: spec.clone(),
        seed,
        nnz: graph.nnz(),
        degrees: graph.degree_stats(),
        edge_homophily,
        seconds: t0.elapsed().as_secs_f64(),
    };
    let ds = Dataset {
        name: spec.name.clone(),
        graph,
        features: Features::Dense(DenseMatrix {
            rows: n,
            cols: d,
            data: x,
        }),
        labels,
        num_classes: c,
        split,
    };
    ds.validate()?;
    if spec.community_order {
        let mut old_of_new: Vec<u32> = (0..n as u32).collect();
        old_of_new.sort_by_key(|&i| comm[i as usize]);
        let mut new_of_old = vec![0u32; n];
        for (new, &old) in old_of_new.iter().enumerate() {
            new_of_old[old as usize] = new as u32;
        }
        let mut ds = ds.permute(&new_of_old)?;
        ds.name = format!("{}+community-order", spec.name);
        return Ok((ds, report));
    }
    Ok((ds, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_a_top_up_equals_building_all_edges_at_once() {
        let n = 2500;
        let mut r = rng(1, 2, 3);
        let (src, dst): (Vec<u32>, Vec<u32>) = (0..40_000)
            .map(|_| (r.random_range(0..n as u32), r.random_range(0..60)))
            .unzip();
        let all = build_csr(n, &src, &dst, BuildOptions::undirected_self_loops()).unwrap();
        let (a, b) = (30_000, 40_000);
        let first = build_csr(
            n,
            &src[..a],
            &dst[..a],
            BuildOptions::undirected_self_loops(),
        );
        let more = build_csr(n, &src[a..b], &dst[a..b], BuildOptions::undirected());
        assert_eq!(union_rows(&first.unwrap(), &more.unwrap()).unwrap(), all);
    }

    /// `MemAvailable` parses (kB to bytes) wherever there is a /proc/meminfo.
    #[cfg(target_os = "linux")]
    #[test]
    fn available_memory_reads_the_host() {
        let bytes = available_memory().expect("/proc/meminfo has MemAvailable");
        assert!(bytes > 1 << 20 && bytes.is_multiple_of(1024), "{bytes}");
    }

    #[test]
    fn a_union_with_64_bit_offsets_is_the_32_bit_one() {
        let n = 3000;
        let mut r = rng(5, 6, 7);
        let (src, dst): (Vec<u32>, Vec<u32>) = (0..20_000)
            .map(|_| (r.random_range(0..n as u32), r.random_range(0..n as u32)))
            .unzip();
        let a = build_csr(
            n,
            &src[..12_000],
            &dst[..12_000],
            BuildOptions::undirected(),
        )
        .unwrap();
        let b = build_csr(
            n,
            &src[12_000..],
            &dst[12_000..],
            BuildOptions::undirected(),
        )
        .unwrap();
        let narrow = union_rows(&a, &b).unwrap();
        assert_eq!(narrow.offset_width(), OffsetWidth::U32);
        // The second pass at 64 bits, as a union past u32::MAX entries runs it.
        let block_len: Vec<usize> = (0..n.div_ceil(UNION_BLOCK))
            .map(|k| {
                let rows = k * UNION_BLOCK..((k + 1) * UNION_BLOCK).min(n);
                narrow.indptr().get(rows.end) - narrow.indptr().get(rows.start)
            })
            .collect();
        let wide = union_fill::<u64>(&a, &b, &block_len, narrow.nnz()).unwrap();
        assert_eq!(wide.offset_width(), OffsetWidth::U64);
        assert_eq!(wide, narrow);
    }

    #[test]
    fn communities_group_in_id_order() {
        let mut r = rng(4, 5, 6);
        let comm: Vec<u32> = (0..3 * CHUNK + 17).map(|_| r.random_range(0..7)).collect();
        let mut want = vec![Vec::new(); 8];
        for (i, &k) in comm.iter().enumerate() {
            want[k as usize].push(i as u32);
        }
        assert_eq!(group_by_community(&comm, 8), want);
    }

    #[test]
    fn lockstep_lanes_draw_what_one_edge_at_a_time_draws() {
        let weights: Vec<f64> = (0..500).map(|i| 1.0 + (i % 17) as f64).collect();
        let comm: Vec<u32> = (0..500).map(|i| (i * 7 % 5) as u32).collect();
        let global = Alias::over_range(&weights);
        let local: Vec<Option<Alias>> = group_by_community(&comm, 6)
            .into_iter()
            .map(|ids| {
                let w: Vec<f64> = ids.iter().map(|&i| weights[i as usize]).collect();
                (!ids.is_empty()).then(|| Alias::over_ids(&ids, &w))
            })
            .collect();
        let s = EdgeSampler {
            global: &global,
            local: &local,
            comm: &comm,
            homophily: 0.6,
        };
        // Lanes of unequal length (the last chunk of a stream is short).
        let lens = [50usize, 50, 50, 31];
        let mut bufs: Vec<(Vec<u32>, Vec<u32>)> =
            lens.iter().map(|&m| (vec![0; m], vec![0; m])).collect();
        let mut lanes: Vec<Lane<'_>> = bufs
            .iter_mut()
            .enumerate()
            .map(|(j, (a, b))| (rng(9, 2, j as u64), &mut a[..], &mut b[..]))
            .collect();
        s.fill(&mut lanes);
        for (j, (a, b)) in bufs.iter().enumerate() {
            let mut r = rng(9, 2, j as u64);
            let want: Vec<(u32, u32)> = (0..lens[j]).map(|_| s.edge(&mut r)).collect();
            let got: Vec<(u32, u32)> = a.iter().copied().zip(b.iter().copied()).collect();
            assert_eq!(got, want, "lane {j}");
        }
        // Community 5 is empty: no table.
        assert!(local[5].is_none());
    }
}
