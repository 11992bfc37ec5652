//! The graph sweep of the HP-SpMM/HP-SDDMM issue: SpMM and SDDMM on ~20 graphs from ~10 K to
//! 100 M+ non-zeros (bundled Cora, Reddit-shaped graphs from 0.5 % to 2x scale, flat and
//! heavily skewed degree distributions, sparse arxiv/products-like graphs, and the full
//! Reddit-shaped graph in random, degree, RCM, Louvain and generator-community order), each at
//! several widths K, ours against cuSPARSE in the same process on the same operands:
//! - SpMM: the GCN operand (A + I, symmetric normalisation), weighted sum; GE-SpMM's row
//!   kernel (row schedule) and narrow-row kernel, HP-SpMM (DTP), the dispatcher's pick (timed
//!   as it runs), cuSPARSE CSR SpMM (the faster of its default and CSR_ALG2);
//! - SDDMM on the same pattern: HP-SDDMM (DTP) vs cuSPARSE SDDMM.

use crate::report::chart::{draw_svg, Line, Panel};
use crate::report::{write_json, write_text, Table};
use crate::Result;
use candle_core::{DType, Tensor};
use gnn_graph::{generate, Csr, Reorder, SyntheticSpec};
use gnn_kernels::ops::spmm::dispatch::{pick, Pick};
use gnn_kernels::partition::NPW_CANDIDATES;
use gnn_kernels::peer::{gcn_operand, rel_diff, time_ms, Cusparse, CusparseSddmm};
use gnn_kernels::{sddmm, spmm_weighted, Reduce, SpmmKernel};
use std::path::PathBuf;
use std::time::Instant;

/// What [`run`] measures and where it writes (with the `cli` feature, the `bench_graphs`
/// example's flags).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct GraphsBench {
    /// Feature widths.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_delimiter = ',', default_value = "16,32,64,128,256")
    )]
    pub k: Vec<usize>,
    /// Timed repetitions (after 3 warm-ups).
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            default_value_t = 10,
            value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
        )
    )]
    pub reps: usize,
    /// Only the graphs whose name contains one of these (comma-separated); all by default.
    #[cfg_attr(feature = "cli", arg(long, value_delimiter = ','))]
    pub only: Vec<String>,
    /// Also time HP-SpMM at every edges-per-group candidate (checks DTP's choice).
    #[cfg_attr(feature = "cli", arg(long))]
    pub npw_sweep: bool,
    /// Run every graph head-expanded (each row repeated per head, the graph an attention layer
    /// with this many heads aggregates over, at K = the head width); 1: the graph itself.
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            default_value_t = 1,
            value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64)
        )
    )]
    pub heads: usize,
    /// Output folder: graphs.json, graphs.md, graphs.svg.
    #[cfg_attr(feature = "cli", arg(long, default_value = "runs/bench_graphs"))]
    pub out: PathBuf,
}

/// One graph of the sweep: how it is made.
enum Case {
    /// The bundled Cora.
    Cora,
    /// A generated graph, in `order`.
    Synthetic { spec: SyntheticSpec, order: Reorder },
}

/// The Reddit-shaped graph at `scale`.
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

/// The sweep's graphs by name, smallest first, then the full graph reordered.
fn cases() -> Result<Vec<(String, Case)>> {
    let syn = |spec: SyntheticSpec| Case::Synthetic {
        spec,
        order: Reorder::None,
    };
    let mut v = vec![("cora".to_string(), Case::Cora)];
    for s in [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0] {
        v.push((format!("reddit@{s}"), syn(reddit(s)?)));
    }
    for s in [0.05, 0.5] {
        let mut flat = reddit(s)?;
        flat.degree_sigma = 0.2;
        flat.max_weight = 3.0;
        v.push((format!("flat@{s}"), syn(flat)));
        let mut skew = reddit(s)?;
        skew.degree_sigma = 2.0;
        v.push((format!("skewed@{s}"), syn(skew)));
    }
    v.push((
        "sparse-100K".into(),
        syn(sparse("sparse-100K", 100_000, 8.0)),
    ));
    v.push((
        "sparse-1M".into(),
        syn(sparse("sparse-1M", 1_000_000, 12.0)),
    ));
    v.push((
        "sparse-2.5M".into(),
        syn(sparse("sparse-2.5M", 2_500_000, 25.0)),
    ));
    for order in [Reorder::Degree, Reorder::Rcm, Reorder::Louvain] {
        v.push((
            format!("reddit@1 {order}"),
            Case::Synthetic {
                spec: reddit(1.0)?,
                order,
            },
        ));
    }
    let mut community = reddit(1.0)?;
    community.community_order = true;
    v.push(("reddit@1 generator-community".into(), syn(community)));
    Ok(v)
}

/// Builds a case's graph; returns it with the reordering's cost in seconds.
fn build(case: &Case) -> Result<(Csr, f64)> {
    match case {
        Case::Cora => {
            let src = crate::run::DataSource::bundled_cora();
            Ok((crate::run::load(&src, false)?.dataset.graph, 0.0))
        }
        Case::Synthetic { spec, order } => {
            let (ds, _) = generate(spec, 0)?;
            let t = Instant::now();
            let graph = match order {
                Reorder::None => ds.graph,
                o => ds.graph.permute(&o.order(&ds.graph)?)?,
            };
            Ok((graph, t.elapsed().as_secs_f64()))
        }
    }
}

/// Runs the sweep on the first CUDA device: prints the table as it goes, writes
/// `graphs.json` (with the kernel policy of the operands), `graphs.md` and `graphs.svg` under
/// `args.out`, and returns the JSON rows.
pub fn run(args: &GraphsBench) -> Result<Vec<serde_json::Value>> {
    let (device, dev) = super::cuda_device()?;
    let dev = &dev;
    let stream = dev.cuda_stream();
    let mut table = Table::new()
        .left("graph", 30)
        .right("nnz", 11)
        .right("K", 4);
    for h in [
        "GE ms",
        "narrow ms",
        "HP ms",
        "cuSP ms",
        "pick",
        "pick/cuSP",
        "HP/GE",
        "HPsd ms",
        "cuSPsd ms",
        "sd/cuSP",
    ] {
        table = table.right(h, 10);
    }
    let mut rows = Vec::new();
    let mut policy = None;
    for (name, case) in cases()? {
        if !args.only.is_empty() && !args.only.iter().any(|o| name.contains(o.as_str())) {
            continue;
        }
        let t = Instant::now();
        let (graph, reorder_s) =
            build(&case).map_err(|e| crate::Error::Invalid(format!("building {name}: {e}")))?;
        let (name, graph) = match args.heads {
            1 => (name, graph),
            h => (format!("{name} x{h} heads"), graph.expand_heads(h)?),
        };
        let (a, g, vals) = gcn_operand(&graph, &device)?;
        policy.get_or_insert(*g.policy());
        drop(graph);
        let nnz = a.nnz();
        let st = a.degree_stats();
        println!(
            "{name}: {} nodes, {nnz} non-zeros (A + I), mean row {:.1}, max row {} (built in {:.1} s{})",
            a.n_rows(),
            st.mean,
            st.max,
            t.elapsed().as_secs_f64(),
            if reorder_s > 0.0 {
                format!(", reordering {reorder_s:.2} s")
            } else {
                String::new()
            }
        );
        let sp = Cusparse::new(&g, &vals, &stream)?;
        for &k in &args.k {
            let x = Tensor::randn(0f32, 1.0, (a.n_cols(), k), &device)?;
            let time_spmm = |kernel: SpmmKernel| -> Result<f64> {
                let gk = g.with_policy(g.policy().with_spmm(kernel));
                Ok(time_ms(&stream, args.reps, || {
                    spmm_weighted(&gk, &x, &vals, Reduce::Sum)?;
                    Ok(())
                })?)
            };
            let ge = time_spmm(SpmmKernel::Ge)?;
            let narrow = time_spmm(SpmmKernel::Narrow)?;
            let hp = time_spmm(SpmmKernel::Hp(0))?;
            let auto = time_spmm(SpmmKernel::Auto)?;
            let npw_sweep: Vec<(u32, f64)> = if args.npw_sweep {
                NPW_CANDIDATES
                    .into_iter()
                    .map(|n| Ok((n, time_spmm(SpmmKernel::Hp(n))?)))
                    .collect::<Result<_>>()?
            } else {
                Vec::new()
            };
            let c = Tensor::zeros((a.n_rows(), k), DType::F32, &device)?;
            let cusp = sp.time_both(&x, &c, dev, args.reps)?;
            let cusp_best = cusp[0].min(cusp[1]);
            // Both kernels against cuSPARSE's product (time_both leaves CSR_ALG2's in c).
            let mut errs = Vec::new();
            for kernel in [SpmmKernel::Ge, SpmmKernel::Hp(0), SpmmKernel::Narrow] {
                let gk = g.with_policy(g.policy().with_spmm(kernel));
                let out = spmm_weighted(&gk, &x, &vals, Reduce::Sum)?;
                errs.push(rel_diff(&out, &c)?);
            }
            // The dispatcher's choice (HP-SpMM by its rule, else GE-SpMM's narrow-row kernel
            // where a row fits, else its row kernel), timed as it runs.
            let pick_name = match pick(&st, nnz, k, 4) {
                Pick::Hp => "HP",
                Pick::Narrow => "narrow",
                Pick::Row => "GE",
            };
            let chosen = auto;
            // SDDMM on the same pattern (a = rows' features, b = x).
            let y = Tensor::randn(0f32, 1.0, (a.n_rows(), k), &device)?;
            let sd = time_ms(&stream, args.reps, || {
                sddmm(&g, &y, &x)?;
                Ok(())
            })?;
            let e = Tensor::zeros(nnz, DType::F32, &device)?;
            let peer = CusparseSddmm::new(&g, &y, &x, &e, dev)?;
            let sd_cusp = time_ms(&stream, args.reps, || peer.run())?;
            let sd_err = rel_diff(&sddmm(&g, &y, &x)?, &e)?;
            drop(peer);
            table.row(vec![
                name.clone(),
                nnz.to_string(),
                k.to_string(),
                format!("{ge:.3}"),
                format!("{narrow:.3}"),
                format!("{hp:.3}"),
                format!("{cusp_best:.3}"),
                pick_name.into(),
                format!("{:.2}x", cusp_best / chosen),
                format!("{:.2}x", ge / hp),
                format!("{sd:.3}"),
                format!("{sd_cusp:.3}"),
                format!("{:.2}x", sd_cusp / sd),
            ]);
            println!("{}", table.text().lines().last().unwrap_or_default());
            rows.push(serde_json::json!({
                "graph": name, "nodes": a.n_rows(), "nnz": nnz, "mean_row": st.mean,
                "max_row": st.max, "reorder_s": reorder_s, "k": k,
                "ge_ms": ge, "narrow_ms": narrow, "hp_ms": hp, "auto_ms": auto,
                "cusparse_default_ms": cusp[0],
                "cusparse_csr_alg2_ms": cusp[1], "dispatch": pick_name.to_lowercase(),
                "dispatch_vs_cusparse": cusp_best / chosen,
                "best_vs_cusparse": cusp_best / ge.min(hp).min(narrow),
                "hp_vs_ge": ge / hp,
                "rel_err_ge": errs[0], "rel_err_hp": errs[1], "rel_err_narrow": errs[2],
                "hp_npw_sweep": npw_sweep.iter().map(|(n, ms)| serde_json::json!({"npw": n, "ms": ms})).collect::<Vec<_>>(),
                "sddmm_hp_ms": sd, "sddmm_cusparse_ms": sd_cusp, "sddmm_vs_cusparse": sd_cusp / sd,
                "sddmm_rel_err": sd_err,
            }));
        }
    }
    print!("{}", table.text());
    std::fs::create_dir_all(&args.out).map_err(|e| crate::Error::Io {
        path: args.out.display().to_string(),
        source: e,
    })?;
    let doc = serde_json::json!({
        "reps": args.reps, "kernel_policy": policy, "timing": "CUDA events on candle's stream, median after 3 warm-ups",
        "operand": "A + I, GCN symmetric normalisation; SpMM weighted sum, SDDMM on the same pattern",
        "rows": rows,
    });
    write_json(&args.out.join("graphs.json"), &doc)?;
    write_text(&args.out.join("graphs.md"), &table.markdown())?;
    chart(args, &rows)?;
    println!("wrote {}/graphs.{{json,md,svg}}", args.out.display());
    Ok(rows)
}

/// Three panels against non-zeros (log scale), one line per K: the dispatched SpMM over
/// cuSPARSE, HP-SpMM over GE-SpMM, HP-SDDMM over cuSPARSE. Graphs in reordered ids are left
/// out of the lines (they share the full graph's nnz).
fn chart(args: &GraphsBench, rows: &[serde_json::Value]) -> Result<()> {
    let series = |field: &str| -> Vec<Line> {
        let mut lines: Vec<Line> = args
            .k
            .iter()
            .map(|&k| {
                let mut pts: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|r| r["k"] == k && !r["graph"].as_str().unwrap_or("").contains(' '))
                    .filter_map(|r| Some((r["nnz"].as_f64()?, r[field].as_f64()?)))
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                Line::measured(format!("K={k}"), pts)
            })
            .collect();
        let hi = rows
            .iter()
            .filter_map(|r| r["nnz"].as_f64())
            .fold(1.0, f64::max);
        let lo = rows
            .iter()
            .filter_map(|r| r["nnz"].as_f64())
            .fold(hi, f64::min);
        lines.push(Line::level("parity", 1.0, lo, hi));
        lines
    };
    let mut panels = vec![
        Panel::lines(
            "SpMM (dispatched) speed-up over cuSPARSE",
            "non-zeros",
            "x cuSPARSE",
            series("dispatch_vs_cusparse"),
        ),
        Panel::lines(
            "HP-SpMM speed-up over GE-SpMM",
            "non-zeros",
            "GE ms / HP ms",
            series("hp_vs_ge"),
        ),
        Panel::lines(
            "HP-SDDMM speed-up over cuSPARSE SDDMM",
            "non-zeros",
            "x cuSPARSE",
            series("sddmm_vs_cusparse"),
        ),
    ];
    for p in &mut panels {
        p.log_x = true;
    }
    draw_svg(&args.out.join("graphs.svg"), &panels, 3, (560, 420))
}
