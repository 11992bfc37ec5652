//! Where a run's data comes from ([`DataSource`]) and loading it into host memory
//! ([`load`], [`reorder`]): the first step of [`crate::run::run`], re-exported there.

use crate::error::{Error, Result};
use crate::progress;
use gnn_graph::io::binary::{self, MappedGraph};
use gnn_graph::reorder::REUSE_WINDOW;
use gnn_graph::{generate, load_auto, Dataset, Format, Reorder, SyntheticSpec};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Node-count scale of the Reddit-shaped graph on the CPU when none is given: a few minutes
/// on two cores instead of an hour.
pub const CPU_DEFAULT_SCALE: f64 = 0.2;

/// Node-count scale of the papers100M-shaped graph on the CPU when none is given: ~555 K
/// nodes and ~17 M non-zeros.
pub const PAPERS100M_CPU_DEFAULT_SCALE: f64 = 0.005;

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
        /// [`CPU_DEFAULT_SCALE`] on the CPU (saying so;
        /// [`PAPERS100M_CPU_DEFAULT_SCALE`] for the papers100M-shaped graph).
        scale: Option<f64>,
        /// Generation seed.
        seed: u64,
        /// Write the generated dataset here, in gnn's binary CSR format
        /// ([`gnn_graph::io::binary`], file [`binary::FILE_NAME`]), for `--data-dir` to load.
        save: Option<PathBuf>,
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
        Self::synthetic(SyntheticSpec::reddit(), scale, seed)
    }

    /// The graph `spec` describes at `scale`, generated from `seed`.
    pub fn synthetic(spec: SyntheticSpec, scale: Option<f64>, seed: u64) -> Self {
        DataSource::Synthetic {
            spec,
            scale,
            seed,
            save: None,
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
                Format::Binary(_) => "binary",
            };
            let mut provenance = json!({"source": tag, "dir": path});
            let mut raw_features = format == Format::DglReddit;
            if let Format::Binary(file) = &format {
                // What the file says it was written from, and how its features are used.
                let meta = MappedGraph::open(file).and_then(|g| g.meta())?;
                raw_features = meta.raw_features;
                provenance["written_from"] = meta.source;
            }
            Ok(Loaded {
                dataset: ds,
                provenance,
                raw_features,
                new_of_old: None,
            })
        }
        DataSource::Synthetic {
            spec,
            scale,
            seed,
            save,
        } => {
            let papers = spec.name == SyntheticSpec::papers100m().name;
            let scale = scale.unwrap_or_else(|| {
                if cpu && papers {
                    println!(
                        "no --data-dir: generating a papers100M-shaped graph at scale \
                         {PAPERS100M_CPU_DEFAULT_SCALE} (the CPU default); --scale 1 gives the \
                         full 111 M-node graph"
                    );
                    PAPERS100M_CPU_DEFAULT_SCALE
                } else if cpu {
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
            let provenance = serde_json::to_value(&report).unwrap_or_default();
            if let Some(dir) = save {
                let file = dir.join(binary::FILE_NAME);
                let t = Instant::now();
                progress::step(format!("writing {}", file.display()), || {
                    binary::write_dataset(
                        &file,
                        &ds,
                        true,
                        provenance.clone(),
                        ds.graph.offset_width(),
                    )
                })?;
                let bytes = std::fs::metadata(&file).map_or(0, |m| m.len());
                println!(
                    "wrote {} ({:.2} GB) in {:.1} s; --data-dir {} loads it",
                    file.display(),
                    bytes as f64 / 1e9,
                    t.elapsed().as_secs_f64(),
                    dir.display()
                );
            }
            Ok(Loaded {
                dataset: ds,
                provenance,
                raw_features: true,
                new_of_old: None,
            })
        }
    }
}

/// Non-zeros the gather-reuse estimate of [`reorder`] looks at (a deterministic sample of
/// windows beyond this): its cost stays a fraction of a second on any graph.
const REUSE_SAMPLE_NNZ: usize = 1 << 23;

/// Time to accuracy with `reorder_s` seconds of reordering counted (a one-off cost of the
/// run), printed: `None` where nothing was reordered or nothing was evaluated.
pub fn time_to_accuracy_with_reorder(
    tta: Option<crate::trainer::TimeToAccuracy>,
    reorder_s: f64,
) -> Option<f64> {
    let s = tta.filter(|_| reorder_s > 0.0)?.train_s + reorder_s;
    println!(
        "time to accuracy with the reordering: {s:.2} s ({reorder_s:.2} s of reordering, then \
         training)"
    );
    Some(s)
}

/// Renumbers `loaded`'s nodes by `new_of_old` ([`gnn_graph::Dataset::permute`]), composing
/// [`Loaded::new_of_old`] with an earlier renumbering so the map always leads back to the
/// file's ids.
pub fn renumber(loaded: &mut Loaded, new_of_old: &[u32]) -> Result<()> {
    loaded.dataset = loaded.dataset.permute(new_of_old)?;
    loaded.new_of_old = Some(match loaded.new_of_old.take() {
        Some(first) => first.iter().map(|&m| new_of_old[m as usize]).collect(),
        None => new_of_old.to_vec(),
    });
    Ok(())
}

/// Renumbers the loaded nodes by `how` (nothing for [`Reorder::None`], and for
/// [`Reorder::Auto`] what [`Reorder::resolve`] makes of it), saying what it cost; returns the
/// ordering applied and its seconds. The provenance records them and the gather-reuse estimate
/// ([`gnn_graph::reorder::window_distinct_ratio`]) before and after. Weights are not tied to
/// node ids (a model trained on one order serves the other); dropout masks follow the ids, so
/// a reordered training run is another draw of the same experiment, not a bit-identical one.
pub fn reorder(loaded: &mut Loaded, how: Reorder) -> Result<(Reorder, f64)> {
    let asked = how;
    let how = how.resolve(&loaded.dataset.graph);
    if how == Reorder::None {
        return Ok((how, 0.0));
    }
    let reuse = |g: &gnn_graph::Csr| {
        gnn_graph::reorder::window_distinct_ratio(g, REUSE_WINDOW, REUSE_SAMPLE_NNZ)
    };
    let reuse_before = reuse(&loaded.dataset.graph);
    let t = Instant::now();
    let ds = &loaded.dataset;
    let before = gnn_graph::reorder::bandwidth(&ds.graph);
    let order = how.order(&ds.graph)?;
    renumber(loaded, &order)?;
    let secs = t.elapsed().as_secs_f64();
    let after = gnn_graph::reorder::bandwidth(&loaded.dataset.graph);
    let reuse_after = reuse(&loaded.dataset.graph);
    let why = if asked == Reorder::Auto {
        format!(
            " (--reorder auto: {} nodes, at least {})",
            loaded.dataset.graph.n_rows(),
            gnn_graph::reorder::AUTO_MIN_NODES
        )
    } else {
        String::new()
    };
    println!(
        "reordered nodes by {how}{why} in {secs:.2} s (bandwidth {before} -> {after}; distinct \
         columns per {REUSE_WINDOW}-row window {reuse_before:.3} -> {reuse_after:.3} of the \
         non-zeros)"
    );
    if let Some(o) = loaded.provenance.as_object_mut() {
        o.insert(
            "reorder".into(),
            json!({
                "asked": asked,
                "how": how,
                "seconds": secs,
                "window_rows": REUSE_WINDOW,
                "window_distinct_ratio": [reuse_before, reuse_after],
            }),
        );
    }
    Ok((how, secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_graph_loads_back_as_generated() {
        let dir = tempfile::tempdir().unwrap();
        let save = dir.path().join("saved");
        let src = DataSource::Synthetic {
            spec: SyntheticSpec::reddit(),
            scale: Some(0.003),
            seed: 4,
            save: Some(save.clone()),
        };
        let made = load(&src, true).unwrap();
        let files = DataSource::Files {
            path: save.clone(),
            name: "ignored".into(),
            split_seed: 0,
        };
        let back = load(&files, true).unwrap();
        let (a, b) = (&made.dataset, &back.dataset);
        assert_eq!(
            (&a.name, &a.graph, &a.labels),
            (&b.name, &b.graph, &b.labels)
        );
        assert_eq!((&a.features, &a.split), (&b.features, &b.split));
        // Used raw like the generated graph, and the generator's report travels along.
        assert!(back.raw_features);
        assert_eq!(back.provenance["source"], "binary");
        assert_eq!(back.provenance["written_from"], made.provenance);
    }
}
