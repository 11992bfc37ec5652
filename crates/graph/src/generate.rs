//! Seeded synthetic node-classification graphs shaped like a real dataset.
//!
//! Model (a degree-corrected stochastic block model in Chung-Lu form):
//! - every node draws a community `c_i` (mildly imbalanced, `p_k ∝ (k+1)^-1/2`) and a weight
//!   `w_i ~ LogNormal(0, sigma)` capped at `max_weight` times the mean, so degrees are
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

use crate::coo::{BuildOptions, Coo};
use crate::csr::DegreeStats;
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
}

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
        }
    }

    /// Looks a preset up by name (`reddit`).
    pub fn preset(name: &str) -> Result<Self> {
        match name {
            "reddit" => Ok(Self::reddit()),
            other => Err(Error::InvalidArgument(format!(
                "unknown synthetic preset `{other}` (known: reddit)"
            ))),
        }
    }

    /// A smaller (or larger) graph of the same kind: `scale` times the nodes, mean degree times
    /// `sqrt(scale)` (so a small graph is not a near-clique), and the weight cap lowered so no
    /// expected degree exceeds a quarter of the nodes. `scale = 1` is the preset itself.
    pub fn scaled(&self, scale: f64) -> Result<Self> {
        if !(scale > 0.0 && scale <= 16.0) {
            return Err(Error::InvalidArgument(format!(
                "scale {scale} must be in (0, 16]"
            )));
        }
        if scale == 1.0 {
            return Ok(self.clone());
        }
        let mut s = self.clone();
        s.nodes = ((self.nodes as f64 * scale).round() as usize).max(self.classes * 4);
        s.avg_degree = (self.avg_degree * scale.sqrt()).clamp(1.0, s.nodes as f64 / 4.0);
        s.max_weight = self
            .max_weight
            .min(s.nodes as f64 / 4.0 / s.avg_degree)
            .max(1.0);
        s.name = format!("{}@{scale}", self.name);
        Ok(s)
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

/// Walker/Vose alias table over `0..n` (or over a subset of ids).
struct Alias {
    ids: Vec<u32>,
    prob: Vec<f32>,
    alias: Vec<u32>,
}

impl Alias {
    fn new(ids: Vec<u32>, weights: &[f64]) -> Self {
        let n = ids.len();
        let total: f64 = weights.iter().sum();
        let mut scaled: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut prob = vec![1f32; n];
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| scaled[i] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            prob[s] = scaled[s] as f32;
            alias[s] = l as u32;
            scaled[l] -= 1.0 - scaled[s];
            if scaled[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        Self { ids, prob, alias }
    }
    fn sample(&self, r: &mut impl Rng) -> u32 {
        let k = r.random_range(0..self.ids.len());
        let k = if r.random::<f32>() < self.prob[k] {
            k
        } else {
            self.alias[k] as usize
        };
        self.ids[k]
    }
}

/// Generates a dataset from `spec` with `seed`.
pub fn generate(spec: &SyntheticSpec, seed: u64) -> Result<(Dataset, GenReport)> {
    spec.check()?;
    let t0 = std::time::Instant::now();
    let n = spec.nodes;
    let c = spec.classes;

    // Communities, weights, labels.
    let class_p: Vec<f64> = (0..c).map(|k| 1.0 / ((k + 1) as f64).sqrt()).collect();
    let class_alias = Alias::new((0..c as u32).collect(), &class_p);
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
                    let w = lognormal.sample(&mut r);
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
    let mean_w = per_node.iter().map(|p| p.1).sum::<f64>() / n as f64;
    let weights: Vec<f64> = per_node
        .iter()
        .map(|p| (p.1 / mean_w).min(spec.max_weight))
        .collect();
    let comm: Vec<u32> = per_node.iter().map(|p| p.0).collect();
    let labels: Vec<i32> = per_node.iter().map(|p| p.2 as i32).collect();
    drop(per_node);

    let global = Alias::new((0..n as u32).collect(), &weights);
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); c];
    for (i, &k) in comm.iter().enumerate() {
        members[k as usize].push(i as u32);
    }
    let local: Vec<Option<Alias>> = members
        .into_iter()
        .map(|ids| {
            if ids.is_empty() {
                None
            } else {
                let w: Vec<f64> = ids.iter().map(|&i| weights[i as usize]).collect();
                Some(Alias::new(ids, &w))
            }
        })
        .collect();

    // Edges: target nnz = avg_degree * n, of which n are self loops.
    let target = (spec.avg_degree * n as f64).round() as usize;
    let undirected_target = target.saturating_sub(n) / 2;
    let sample_edges = |count: usize, stream: u64| -> (Vec<u32>, Vec<u32>) {
        let pairs: Vec<(u32, u32)> = (0..count.div_ceil(CHUNK))
            .into_par_iter()
            .flat_map_iter(|ch| {
                let mut r = rng(seed, stream, ch as u64);
                let m = CHUNK.min(count - ch * CHUNK);
                let (global, local, comm) = (&global, &local, &comm);
                (0..m)
                    .map(move |_| {
                        let s = global.sample(&mut r);
                        let d = match &local[comm[s as usize] as usize] {
                            Some(a) if r.random::<f64>() < spec.homophily => a.sample(&mut r),
                            _ => global.sample(&mut r),
                        };
                        (s, d)
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        pairs.into_iter().unzip()
    };
    let opts = BuildOptions::undirected_self_loops();
    let (mut src, mut dst) = sample_edges(undirected_target, 2);
    let mut graph = Coo::new(n, src.clone(), dst.clone())?.to_csr(opts)?;
    // Top up: duplicates and self pairs were lost; draw the shortfall scaled by the loss rate,
    // a few rounds at most (a dense small graph may saturate).
    for round in 0..4u64 {
        if graph.nnz() as f64 >= 0.995 * target as f64 || undirected_target == 0 {
            break;
        }
        let kept = (graph.nnz() - n) as f64 / src.len() as f64 / 2.0;
        let extra = ((target - graph.nnz()) as f64 / 2.0 / kept.max(0.05) * 1.02) as usize;
        let (s2, d2) = sample_edges(extra, 3 + round * 16);
        src.extend(s2);
        dst.extend(d2);
        graph = Coo::new(n, src.clone(), dst.clone())?.to_csr(opts)?;
    }
    drop((src, dst));
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

    // Split.
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
