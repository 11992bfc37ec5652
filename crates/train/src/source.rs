//! Where a run's data comes from ([`DataSource`]) and loading it into host memory
//! ([`load`], [`reorder`]): the first step of [`crate::run::run`], re-exported there.

use crate::error::{Error, Result};
use crate::progress;
use gnn_graph::reorder::REUSE_WINDOW;
use gnn_graph::{generate, load_auto, Dataset, Format, Reorder, SyntheticSpec};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Node-count scale of the Reddit-shaped graph on the CPU when none is given: a few minutes
/// on two cores instead of an hour.
pub const CPU_DEFAULT_SCALE: f64 = 0.2;

/// Where a run's data comes from.
#[derive(Debug, Clone)]
pub enum DataSource {
    /// A folder or file in any format [`gnn_graph::detect`] recognises; `name` is the
    /// dataset's name inside it (Planetoid prefix, gnn-benchmark stem), `split_seed` seeds
    /// the stratified split of formats that carry none.
    Files {
        /// Folder or `.npz` file.
        path: PathBuf,
        /// Dataset name.
        name: String,
        /// Seed of the split, where the format has none.
        split_seed: u64,
    },
    /// A generated graph.
    Synthetic {
        /// Its shape at scale 1.
        spec: SyntheticSpec,
        /// Node-count scale (see [`SyntheticSpec::scaled`]); `None`: 1 on a GPU,
        /// [`CPU_DEFAULT_SCALE`] on the CPU (saying so).
        scale: Option<f64>,
        /// Generation seed.
        seed: u64,
    },
}

impl DataSource {
    /// The Cora files in the repository: `data/cora/raw` under the working directory when it
    /// exists (binaries run from a checkout elsewhere), else the workspace's own.
    pub fn bundled_cora() -> Self {
        let rel = PathBuf::from("data/cora/raw");
        let path = if rel.is_dir() {
            rel
        } else {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cora/raw")
        };
        DataSource::Files {
            path,
            name: "cora".into(),
            split_seed: 0,
        }
    }

    /// The Reddit-shaped graph at `scale`, generated from `seed`.
    pub fn reddit_shaped(scale: Option<f64>, seed: u64) -> Self {
        DataSource::Synthetic {
            spec: SyntheticSpec::reddit(),
            scale,
            seed,
        }
    }
}

/// A loaded dataset and where it came from.
pub struct Loaded {
    /// The data.
    pub dataset: Dataset,
    /// What the report records as its source: the format and path, or the generator's report.
    pub provenance: Value,
    /// Whether it was read from DGL's Reddit files or generated (graphs whose features are
    /// used raw; the citation formats are row-normalised by convention).
    pub raw_features: bool,
    /// Set by [`reorder`]: the node permutation applied after loading (`new_of_old[old]` is
    /// the node's id in `dataset`), so per-node outputs can be written in the file's order.
    pub new_of_old: Option<Vec<u32>>,
}

/// Loads or generates `src`, with a spinner while it works and a summary line after; `cpu`
/// picks a generated graph's default scale.
pub fn load(src: &DataSource, cpu: bool) -> Result<Loaded> {
    match src {
        DataSource::Files {
            path,
            name,
            split_seed,
        } => {
            let t = Instant::now();
            let (ds, format) = progress::step(format!("loading {}", path.display()), || {
                load_auto(path, name, *split_seed)
            })
            .map_err(|e| {
                // Named as the loader names it (an edge-list folder after the folder, not after
                // the Planetoid prefix `name`).
                let what = gnn_graph::detect(path, name).map_or_else(
                    |_| String::new(),
                    |f| format!("{} ({f}) from ", f.dataset_name(path, name)),
                );
                Error::Invalid(format!("loading {what}{}: {e}", path.display()))
            })?;
            println!(
                "loaded {} ({format}) in {:.1} s; {}",
                ds.summary(),
                t.elapsed().as_secs_f64(),
                ds.graph.degree_stats()
            );
            let tag = match format {
                Format::Planetoid => "planetoid",
                Format::DglReddit => "dgl",
                Format::Ogb => "ogb",
                Format::GnnBenchmark(_) => "gnn-benchmark",
                Format::EdgeList => "edge-list",
            };
            Ok(Loaded {
                dataset: ds,
                provenance: json!({"source": tag, "dir": path}),
                raw_features: format == Format::DglReddit,
                new_of_old: None,
            })
        }
        DataSource::Synthetic { spec, scale, seed } => {
            let scale = scale.unwrap_or_else(|| {
                if cpu {
                    println!(
                        "no --data-dir: generating a Reddit-shaped graph at scale \
                         {CPU_DEFAULT_SCALE} (the CPU default, a few minutes on 2 cores); \
                         --scale 1 gives the full 232,965-node graph"
                    );
                    CPU_DEFAULT_SCALE
                } else {
                    1.0
                }
            });
            let spec = spec.scaled(scale)?;
            let (ds, report) = progress::step(
                format!("generating a {} graph of {} nodes", spec.name, spec.nodes),
                || generate(&spec, *seed),
            )?;
            println!("{report}");
            println!("{}", ds.summary());
            Ok(Loaded {
                dataset: ds,
                provenance: serde_json::to_value(&report).unwrap_or_default(),
                raw_features: true,
                new_of_old: None,
            })
        }
    }
}

/// Non-zeros the gather-reuse estimate of [`reorder`] looks at (a deterministic sample of
/// windows beyond this): its cost stays a fraction of a second on any graph.
const REUSE_SAMPLE_NNZ: usize = 1 << 23;

/// Renumbers the loaded nodes by `how` (nothing for [`Reorder::None`]), saying what it cost;
/// the provenance records the ordering, its seconds and the gather-reuse estimate
/// ([`gnn_graph::reorder::window_distinct_ratio`]) before and after. Weights are not tied to
/// node ids (a model trained on one order serves the other); dropout masks follow the ids, so
/// a reordered training run is another draw of the same experiment, not a bit-identical one.
pub fn reorder(loaded: &mut Loaded, how: Reorder) -> Result<()> {
    if how == Reorder::None {
        return Ok(());
    }
    let reuse = |g: &gnn_graph::Csr| {
        gnn_graph::reorder::window_distinct_ratio(g, REUSE_WINDOW, REUSE_SAMPLE_NNZ)
    };
    let reuse_before = reuse(&loaded.dataset.graph);
    let t = Instant::now();
    let ds = &loaded.dataset;
    let before = gnn_graph::reorder::bandwidth(&ds.graph);
    let order = how.order(&ds.graph)?;
    loaded.dataset = ds.permute(&order)?;
    // Compose with an earlier reordering, so the map always leads back to the file's ids.
    loaded.new_of_old = Some(match loaded.new_of_old.take() {
        Some(first) => first.iter().map(|&m| order[m as usize]).collect(),
        None => order,
    });
    let secs = t.elapsed().as_secs_f64();
    let after = gnn_graph::reorder::bandwidth(&loaded.dataset.graph);
    let reuse_after = reuse(&loaded.dataset.graph);
    println!(
        "reordered nodes by {how} in {secs:.2} s (bandwidth {before} -> {after}; distinct \
         columns per {REUSE_WINDOW}-row window {reuse_before:.3} -> {reuse_after:.3} of the \
         non-zeros)"
    );
    if let Some(o) = loaded.provenance.as_object_mut() {
        o.insert(
            "reorder".into(),
            json!({
                "how": how,
                "seconds": secs,
                "window_rows": REUSE_WINDOW,
                "window_distinct_ratio": [reuse_before, reuse_after],
            }),
        );
    }
    Ok(())
}
