//! The graphs of the `bench_graphs` sweep, the data the SpMM dispatcher's rule is read from:
//! 30 graphs from 13 K to 324 M non-zeros (A + I), in six families.
//!
//! | family | graphs | shape |
//! |---|---|---|
//! | `citation` | `cora` (bundled) | 13 K non-zeros, mean row 4.9 |
//! | `power-law` | `reddit@S`, S = 0.005 .. 2; `reddit@1 degree / rcm / louvain / generator-community` | the Reddit-shaped generator (log-normal weights, sigma 1.3) at node scale S, 40 K to 324 M non-zeros; the full graph also in four node orders |
//! | `flat`, `skewed` | `flat@S`, `skewed@S`, S = 0.05, 0.5 | the same with degree sigma 0.2 (near-uniform rows) or 2.0 (heavier hubs), 1.3 M and 40 M |
//! | `sparse` | `sparse-100K`, `sparse-1M`, `sparse-2.5M`; `sparse-2.5M rcm / louvain`, `sparse-1M degree`, `sparse-2.5M degree` | arxiv / products-like: mean row 8, 12, 25 (random ids, or the named order) |
//! | `mesh` | `mesh-10K`, `mesh-1M-8nbr`, `mesh-4M`; `mesh-1M-8nbr degree`, `mesh-4M degree` | road-like 2-D lattices ([`MeshSpec`]): rows of 5 or 9 (self loop included), ids in lattice order (or by degree), 1 % of nodes with one long-range edge |
//!
//! Everything is built in process from a fixed seed, so a graph's name fixes it.

use crate::Result;
use gnn_graph::{generate, BuildOptions, Coo, Csr, Reorder, SyntheticSpec};
use std::time::Instant;

/// How a [`GraphCase`] is made.
#[derive(Debug, Clone)]
enum Source {
    /// The bundled Cora.
    Cora,
    /// A generated graph, in `order`.
    Synthetic { spec: SyntheticSpec, order: Reorder },
    /// A lattice, in `order` (`none`: lattice order).
    Mesh { spec: MeshSpec, order: Reorder },
}

/// One graph of the sweep.
#[derive(Debug, Clone)]
pub struct GraphCase {
    /// The name `--graphs` and the tables use.
    pub name: String,
    /// Its family (the table in the module docs).
    pub family: &'static str,
    /// The node order it is measured in (`none`: as built).
    pub order: Reorder,
    source: Source,
}

/// A road-like 2-D lattice: `side x side` nodes numbered row by row, each joined to its 4
/// (or 8, diagonals included) lattice neighbours, and one node in `long_per_mille / 1000`
/// joined to a random node anywhere (a few long roads). Undirected, no self loops (the
/// GCN operand adds them); seeded by `seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeshSpec {
    /// Nodes per side.
    pub side: usize,
    /// Diagonal neighbours too (8 instead of 4).
    pub diagonals: bool,
    /// Nodes with a long-range edge, per thousand.
    pub long_per_mille: u64,
    /// Seed of the long-range edges.
    pub seed: u64,
}

/// splitmix64: a well-mixed hash of `x` (the long-range edges' stream).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The lattice of `spec` as a symmetric CSR without self loops.
pub fn mesh(spec: &MeshSpec) -> Result<Csr> {
    let s = spec.side;
    let n = s * s;
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    let mut edge = |a: usize, b: usize| {
        src.push(a as u32);
        dst.push(b as u32);
    };
    for r in 0..s {
        for c in 0..s {
            let v = r * s + c;
            if c + 1 < s {
                edge(v, v + 1);
            }
            if r + 1 < s {
                edge(v, v + s);
                if spec.diagonals {
                    if c + 1 < s {
                        edge(v, v + s + 1);
                    }
                    if c > 0 {
                        edge(v, v + s - 1);
                    }
                }
            }
            let h = mix(spec.seed ^ mix(v as u64));
            if h % 1000 < spec.long_per_mille {
                let far = (mix(h) % n as u64) as usize;
                if far != v {
                    edge(v, far);
                }
            }
        }
    }
    Ok(Coo::new(n, src, dst)?.to_csr(BuildOptions::undirected())?)
}

/// The Reddit-shaped graph at node scale `scale`.
fn reddit(scale: f64) -> Result<SyntheticSpec> {
    Ok(SyntheticSpec::reddit().scaled(scale)?)
}

/// A sparse graph with a milder degree tail and few features (only the structure is used).
fn sparse(name: &str, nodes: usize, avg_degree: f64) -> SyntheticSpec {
    SyntheticSpec {
        name: name.into(),
        nodes,
        avg_degree,
        features: 8,
        degree_sigma: 1.0,
        max_weight: 100.0,
        ..SyntheticSpec::reddit()
    }
}

impl GraphCase {
    fn new(name: impl Into<String>, family: &'static str, source: Source) -> Self {
        let order = match &source {
            Source::Synthetic { order, .. } | Source::Mesh { order, .. } => *order,
            Source::Cora => Reorder::None,
        };
        Self {
            name: name.into(),
            family,
            order,
            source,
        }
    }

    /// Builds the graph; returns it with the reordering's cost in seconds.
    pub fn build(&self) -> Result<(Csr, f64)> {
        match &self.source {
            Source::Cora => {
                let src = crate::run::DataSource::bundled_cora();
                Ok((crate::run::load(&src, false)?.dataset.graph, 0.0))
            }
            Source::Synthetic { spec, order } => reordered(generate(spec, 0)?.0.graph, *order),
            Source::Mesh { spec, order } => reordered(mesh(spec)?, *order),
        }
    }
}

/// `graph` in `order`, with the ordering's cost in seconds (0 for [`Reorder::None`]).
fn reordered(graph: Csr, order: Reorder) -> Result<(Csr, f64)> {
    if order == Reorder::None {
        return Ok((graph, 0.0));
    }
    let t = Instant::now();
    let graph = graph.permute(&order.order(&graph)?)?;
    Ok((graph, t.elapsed().as_secs_f64()))
}

/// The sweep's graphs, by family, each family smallest first; the full Reddit-shaped graph's
/// reorderings last.
pub fn cases() -> Result<Vec<GraphCase>> {
    let syn = |spec: SyntheticSpec| Source::Synthetic {
        spec,
        order: Reorder::None,
    };
    let mut v = vec![GraphCase::new("cora", "citation", Source::Cora)];
    for s in [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0] {
        v.push(GraphCase::new(
            format!("reddit@{s}"),
            "power-law",
            syn(reddit(s)?),
        ));
    }
    for s in [0.05, 0.5] {
        let mut flat = reddit(s)?;
        flat.degree_sigma = 0.2;
        flat.max_weight = 3.0;
        v.push(GraphCase::new(format!("flat@{s}"), "flat", syn(flat)));
        let mut skew = reddit(s)?;
        skew.degree_sigma = 2.0;
        v.push(GraphCase::new(format!("skewed@{s}"), "skewed", syn(skew)));
    }
    for (name, nodes, deg) in [
        ("sparse-100K", 100_000, 8.0),
        ("sparse-1M", 1_000_000, 12.0),
        ("sparse-2.5M", 2_500_000, 25.0),
    ] {
        v.push(GraphCase::new(
            name,
            "sparse",
            syn(sparse(name, nodes, deg)),
        ));
    }
    // A lattice of the sweep in `order` (1 % of nodes with a long edge, seed 0).
    let lattice = |name: String, side: usize, diagonals: bool, order: Reorder| {
        let spec = MeshSpec {
            side,
            diagonals,
            long_per_mille: 10,
            seed: 0,
        };
        GraphCase::new(name, "mesh", Source::Mesh { spec, order })
    };
    for (name, side, diagonals) in [
        ("mesh-10K", 100, false),
        ("mesh-1M-8nbr", 1000, true),
        ("mesh-4M", 2000, false),
    ] {
        v.push(lattice(name.into(), side, diagonals, Reorder::None));
    }
    for order in [Reorder::Degree, Reorder::Rcm, Reorder::Louvain] {
        v.push(GraphCase::new(
            format!("reddit@1 {order}"),
            "power-law",
            Source::Synthetic {
                spec: reddit(1.0)?,
                order,
            },
        ));
    }
    // The products-like graph's feature matrix outgrows L2 (2.5 M rows: 640 MB at K = 128
    // bf16), unlike the Reddit-shaped one's: whether an order pays there is the other half of
    // `--reorder auto`'s question.
    for order in [Reorder::Rcm, Reorder::Louvain] {
        v.push(GraphCase::new(
            format!("sparse-2.5M {order}"),
            "sparse",
            Source::Synthetic {
                spec: sparse("sparse-2.5M", 2_500_000, 25.0),
                order,
            },
        ));
    }
    // What `--reorder auto`'s degree order (from a million nodes) does to graphs whose ids
    // already have locality (the lattices) and to the products-like ones, beside their
    // lattice / random / RCM orders above.
    for (name, side, diagonals) in [("mesh-1M-8nbr", 1000, true), ("mesh-4M", 2000, false)] {
        v.push(lattice(
            format!("{name} degree"),
            side,
            diagonals,
            Reorder::Degree,
        ));
    }
    for (name, nodes, deg) in [
        ("sparse-1M", 1_000_000, 12.0),
        ("sparse-2.5M", 2_500_000, 25.0),
    ] {
        v.push(GraphCase::new(
            format!("{name} degree"),
            "sparse",
            Source::Synthetic {
                spec: sparse(name, nodes, deg),
                order: Reorder::Degree,
            },
        ));
    }
    let mut community = reddit(1.0)?;
    community.community_order = true;
    v.push(GraphCase::new(
        "reddit@1 generator-community",
        "power-law",
        syn(community),
    ));
    Ok(v)
}

/// The cases `bench_graphs` runs: those named exactly in `names` (in the sweep's order; an
/// unknown name is an error listing the known ones), then only those whose name contains one
/// of `only`; empty lists select everything.
pub fn select(names: &[String], only: &[String]) -> Result<Vec<GraphCase>> {
    let all = cases()?;
    if let Some(bad) = names.iter().find(|n| !all.iter().any(|c| &c.name == *n)) {
        let known: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
        return Err(crate::Error::Invalid(format!(
            "no graph `{bad}` in the sweep (known: {})",
            known.join(", ")
        )));
    }
    Ok(all
        .into_iter()
        .filter(|c| names.is_empty() || names.contains(&c.name))
        .filter(|c| only.is_empty() || only.iter().any(|o| c.name.contains(o.as_str())))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_covers_the_families() {
        let all = cases().unwrap();
        assert!(all.len() >= 20, "{} graphs", all.len());
        let mut names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len(), "names are unique");
        for fam in ["citation", "power-law", "flat", "skewed", "sparse", "mesh"] {
            assert!(all.iter().any(|c| c.family == fam), "{fam}");
        }
        let orders: Vec<Reorder> = all.iter().map(|c| c.order).collect();
        for o in [Reorder::Degree, Reorder::Rcm, Reorder::Louvain] {
            assert!(orders.contains(&o));
        }
    }

    #[test]
    fn select_by_name_and_substring() {
        let names = |v: Vec<GraphCase>| v.into_iter().map(|c| c.name).collect::<Vec<_>>();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        // Exact names: "reddit@1" is not "reddit@1 rcm".
        assert_eq!(
            names(select(&s(&["reddit@1", "cora"]), &[]).unwrap()),
            ["cora", "reddit@1"]
        );
        assert_eq!(
            names(select(&[], &s(&["reddit@1 "])).unwrap()),
            [
                "reddit@1 degree",
                "reddit@1 rcm",
                "reddit@1 louvain",
                "reddit@1 generator-community"
            ]
        );
        assert_eq!(names(select(&[], &s(&["mesh"])).unwrap()).len(), 5);
        assert_eq!(
            names(select(&[], &s(&[" degree"])).unwrap()),
            [
                "reddit@1 degree",
                "mesh-1M-8nbr degree",
                "mesh-4M degree",
                "sparse-1M degree",
                "sparse-2.5M degree",
            ]
        );
        let e = select(&s(&["reddit@3"]), &[]).unwrap_err().to_string();
        assert!(
            e.contains("no graph `reddit@3`") && e.contains("mesh-4M"),
            "{e}"
        );
    }

    #[test]
    fn mesh_rows_are_lattice_rows() {
        // 4-neighbour lattice, no long edges: 2 * side * (side - 1) undirected edges.
        let spec = MeshSpec {
            side: 30,
            diagonals: false,
            long_per_mille: 0,
            seed: 0,
        };
        let g = mesh(&spec).unwrap();
        assert_eq!(g.n_rows(), 900);
        assert_eq!(g.nnz(), 2 * 2 * 30 * 29);
        assert!(g.is_symmetric() && g.is_sorted_unique() && g.self_loop_count() == 0);
        // An inner node has its four neighbours, a corner two.
        assert_eq!(g.row(31), [1, 30, 32, 61]);
        assert_eq!(g.row(0), [1, 30]);
        // Diagonals: inner rows of 8, plus 2 * (side - 1)^2 undirected diagonal edges.
        let d = mesh(&MeshSpec {
            diagonals: true,
            ..spec
        })
        .unwrap();
        assert_eq!(d.row_len(31), 8);
        assert_eq!(d.nnz(), g.nnz() + 2 * 2 * 29 * 29);
        // Long edges: about 1 % of nodes, seeded (same seed, same graph).
        let long = MeshSpec {
            side: 100,
            long_per_mille: 10,
            ..spec
        };
        let (a, b) = (mesh(&long).unwrap(), mesh(&long).unwrap());
        assert_eq!(a.indices(), b.indices());
        let lattice = 2 * 2 * 100 * 99;
        let extra = (a.nnz() - lattice) / 2;
        assert!((50..=150).contains(&extra), "{extra} long edges");
        assert!(a.is_symmetric());
        let other = mesh(&MeshSpec { seed: 1, ..long }).unwrap();
        assert_ne!(other.indices(), a.indices());
    }

    #[test]
    fn the_smallest_graphs_build() {
        for c in select(&[], &[]).unwrap() {
            if !["cora", "mesh-10K", "reddit@0.005"].contains(&c.name.as_str()) {
                continue;
            }
            let (g, reorder_s) = c.build().unwrap();
            assert_eq!(reorder_s, 0.0);
            assert!(g.nnz() > 10_000, "{}: {}", c.name, g.nnz());
        }
    }
}
