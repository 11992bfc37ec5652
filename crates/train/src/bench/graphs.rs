//! The graph sweep: SpMM and SDDMM on the 26 graphs of [`super::graph_set`] (13 K to 324 M
//! non-zeros: power-law, flat, skewed, sparse and mesh-like), each at several widths K and
//! storage precisions, ours against cuSPARSE in the same process on the same operands, every
//! timing beside its floors ([`gnn_kernels::verify::floor`]), and the SpMM dispatcher judged:
//! - SpMM: the GCN operand (A + I, symmetric normalisation, f32 edge values), weighted sum;
//!   each of the dispatcher's candidates forced ([`CANDIDATES`]: GE-SpMM's row kernel, its
//!   narrow-row kernel, HP-SpMM with DTP's partition, row groups), the dispatcher's own run
//!   (`auto`), and
//!   cuSPARSE's CSR SpMM (f32 only: the faster of its default and CSR_ALG2);
//! - the dispatcher's verdict per (graph, K, precision) ([`super::regret`]): the kernel its
//!   run recorded (matched to the candidate whose forced run recorded the same), the fastest
//!   candidate, the regret: the pick's forced time over the fastest forced time, so exactly 1
//!   when the pick is the fastest (`auto_ms`, the dispatcher's own run of the same kernel, is
//!   the time `bench/run.py` reports); a summary over the sweep at the end;
//! - SDDMM on the same pattern: HP-SDDMM against cuSPARSE's SDDMM (f32 only).
//!
//! A candidate a width does not fit (the narrow kernel past 16 lanes of 16 bytes, where a
//! forced narrow policy runs the row kernel; row groups where a row is not whole 16-byte
//! loads) is not timed: `n/a` in the table, `null` in the
//! JSON. `dispatch_only` leaves out cuSPARSE and the SDDMM: the dispatcher's data, in about
//! half the time.

use super::graph_set::select;
use super::regret::{summarize, Case, Summary, Verdict};
use crate::report::chart::{draw_svg, Line, Panel};
use crate::report::{write_json, write_text, Table};
use crate::{Precision, Result};
use candle_core::{DType, Tensor};
use gnn_kernels::ops::spmm::dispatch::{group_shape, spmm_choice_for};
use gnn_kernels::partition::NPW_CANDIDATES;
use gnn_kernels::peer::{gcn_operand, rel_diff, time_ms, Cusparse, CusparseSddmm};
use gnn_kernels::verify::bench::floor_model;
use gnn_kernels::verify::floor::{fmt_tb_s, fmt_x, FloorModel, Sddmm, Spmm};
use gnn_kernels::{sddmm, spmm_weighted, KernelPolicy, KernelsUsed, Reduce, SpmmKernel};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

/// The kernels the dispatcher chooses among, by the names their runs record, each forced.
/// `group` (row groups writing the features' precision) is timed beside them though the
/// dispatcher does not pick it yet: the sweep is the data a rule for it needs.
pub const CANDIDATES: [(&str, SpmmKernel); 4] = [
    ("ge", SpmmKernel::Ge),
    ("narrow", SpmmKernel::Narrow),
    ("hp", SpmmKernel::Hp(0)),
    ("group", SpmmKernel::Group),
];

/// Worst cases the summary lists.
const WORST_LISTED: usize = 12;

/// What [`run`] measures and where it writes (with the `cli` feature, the `bench_graphs`
/// example's flags).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct GraphsBench {
    /// Feature widths (each at least 1).
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            value_delimiter = ',',
            default_value = "16,32,64,128,256",
            value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
        )
    )]
    pub k: Vec<usize>,
    /// Storage precisions of the features (f32, bf16, f16; edge values stay f32). cuSPARSE
    /// runs in f32 only.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_delimiter = ',', default_value = "f32")
    )]
    pub precision: Vec<Precision>,
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
    /// Only these graphs, by exact name (comma-separated; an unknown name is an error that
    /// lists the known ones); all by default.
    #[cfg_attr(feature = "cli", arg(long, value_delimiter = ','))]
    pub graphs: Vec<String>,
    /// Only the graphs whose name contains one of these (comma-separated); all by default.
    #[cfg_attr(feature = "cli", arg(long, value_delimiter = ','))]
    pub only: Vec<String>,
    /// Time only our SpMM kernels and the dispatcher's pick (no cuSPARSE, no SDDMM).
    #[cfg_attr(feature = "cli", arg(long))]
    pub dispatch_only: bool,
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
    /// Also write the JSON document here (what `bench/run.py` reads).
    #[cfg_attr(feature = "cli", arg(long))]
    pub json: Option<PathBuf>,
}

/// The table's columns: the graph, the candidates' times, the dispatcher's verdict, the
/// pick's distance to the floor and, with the peers, cuSPARSE and the SDDMM.
fn table(peers: bool) -> Table {
    let mut t = Table::new()
        .left("graph", 28)
        .right("nnz", 11)
        .right("K", 4)
        .left("prec", 4);
    for (h, w) in [
        ("GE ms", 8),
        ("narrow", 8),
        ("HP ms", 8),
        ("group", 8),
        ("pick", 6),
        ("fastest", 7),
        ("regret", 6),
        ("TB/s", 6),
        ("x L1", 5),
        ("x HBM", 5),
    ] {
        t = t.right(h, w);
    }
    if peers {
        for (h, w) in [
            ("cuSP ms", 8),
            ("pick/cuSP", 9),
            ("SDDMM ms", 8),
            ("sd/cuSP", 7),
            ("sd x L1", 7),
        ] {
            t = t.right(h, w);
        }
    }
    t
}

fn ms_cell(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |t| format!("{t:.3}"))
}

fn json<T: serde::Serialize>(v: T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

/// Runs the sweep on the first CUDA device: prints the table as it goes and the dispatcher's
/// summary at the end, writes `graphs.json` (with the kernel policy of the operands, the
/// floor model and the summary), `graphs.md` and `graphs.svg` under `args.out` (and the JSON
/// to `args.json` too), and returns the JSON rows.
pub fn run(args: &GraphsBench) -> Result<Vec<serde_json::Value>> {
    if args.k.contains(&0) {
        return Err(crate::Error::Invalid(
            "bench_graphs: every K must be at least 1".into(),
        ));
    }
    let (device, dev) = super::cuda_device()?;
    let dev = &dev;
    let stream = dev.cuda_stream();
    let fm = floor_model(dev)?;
    let model = fm.model;
    let peers = !args.dispatch_only;
    std::fs::create_dir_all(&args.out).map_err(|e| crate::Error::Io {
        path: args.out.display().to_string(),
        source: e,
    })?;
    let mut table = table(peers);
    print!("{}", table.text());
    let mut rows = Vec::new();
    let mut cases: Vec<(Precision, Case)> = Vec::new();
    let mut policy = None;
    for case in select(&args.graphs, &args.only)? {
        let t = Instant::now();
        let (graph, reorder_s) = case
            .build()
            .map_err(|e| crate::Error::Invalid(format!("building {}: {e}", case.name)))?;
        let (name, graph) = match args.heads {
            1 => (case.name.clone(), graph),
            h => (format!("{} x{h} heads", case.name), graph.expand_heads(h)?),
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
        let sp = if peers {
            Some(Cusparse::new(&g, &vals, &stream)?)
        } else {
            None
        };
        for &prec in &args.precision {
            let dt = prec.dtype();
            let s = dt.size_in_bytes();
            for &k in &args.k {
                let x = Tensor::randn(0f32, 1.0, (a.n_cols(), k), &device)?.to_dtype(dt)?;
                let spmm_on = |gk: &gnn_kernels::DeviceGraph| -> Result<f64> {
                    Ok(time_ms(&stream, args.reps, || {
                        spmm_weighted(gk, &x, &vals, Reduce::Sum)?;
                        Ok(())
                    })?)
                };
                // The candidates, each forced where the width fits it.
                let mut times: Vec<(String, f64)> = Vec::new();
                let mut kernel_ms: BTreeMap<&str, Option<f64>> = BTreeMap::new();
                let mut recorded: Vec<(&str, KernelsUsed)> = Vec::new();
                for (cand, kernel) in CANDIDATES {
                    let gk = g.with_policy(g.policy().with_spmm(kernel));
                    let fits = match kernel {
                        SpmmKernel::Group => group_shape(k, s, 0).is_some(),
                        _ => spmm_choice_for(&gk, k, s).name() == cand,
                    };
                    if !fits {
                        kernel_ms.insert(cand, None);
                        continue;
                    }
                    let ms = spmm_on(&gk)?;
                    kernel_ms.insert(cand, Some(ms));
                    times.push((cand.to_string(), ms));
                    recorded.push((cand, gk.kernels_used()));
                }
                // The dispatcher's own run, and which candidate it is.
                let ga = g.with_policy(g.policy().with_spmm(SpmmKernel::Auto));
                let auto = spmm_on(&ga)?;
                let auto_kernels = ga.kernels_used().kernels("spmm");
                let pick = match recorded
                    .iter()
                    .find(|(_, u)| u.kernels("spmm") == auto_kernels)
                {
                    Some((cand, _)) => cand.to_string(),
                    None => {
                        let n = auto_kernels.join("+");
                        times.push((n.clone(), auto));
                        n
                    }
                };
                let verdict = Verdict::new(&pick, &times);
                let npw_sweep: Vec<(u32, f64)> = if args.npw_sweep {
                    NPW_CANDIDATES
                        .into_iter()
                        .map(|n| {
                            Ok((
                                n,
                                spmm_on(&g.with_policy(g.policy().with_spmm(SpmmKernel::Hp(n))))?,
                            ))
                        })
                        .collect::<Result<_>>()?
                } else {
                    Vec::new()
                };
                // cuSPARSE (f32 only): its product is the reference; else the row kernel's.
                let cusp = match (&sp, dt) {
                    (Some(sp), DType::F32) => {
                        let c = Tensor::zeros((a.n_rows(), k), DType::F32, &device)?;
                        let t = sp.time_both(&x, &c, dev, args.reps)?;
                        Some((t, c))
                    }
                    _ => None,
                };
                let mut rel_err = BTreeMap::new();
                let reference = match &cusp {
                    Some((_, c)) => ("cusparse", c.clone()),
                    None => (
                        "ge",
                        spmm_weighted(
                            &g.with_policy(g.policy().with_spmm(SpmmKernel::Ge)),
                            &x,
                            &vals,
                            Reduce::Sum,
                        )?
                        .to_dtype(DType::F32)?,
                    ),
                };
                for (cand, kernel) in CANDIDATES {
                    if kernel_ms[cand].is_none() || cand == reference.0 {
                        continue;
                    }
                    let gk = g.with_policy(g.policy().with_spmm(kernel));
                    let out = spmm_weighted(&gk, &x, &vals, Reduce::Sum)?.to_dtype(DType::F32)?;
                    rel_err.insert(cand, rel_diff(&out, &reference.1)?);
                }
                drop(reference);
                let cusp_ms = cusp.map(|(t, _)| t);
                let cusp_best = cusp_ms.map(|t| t[0].min(t[1]));
                // SDDMM on the same pattern (a = rows' features, b = x); cuSPARSE's in f32.
                let sd = if peers {
                    let y = Tensor::randn(0f32, 1.0, (a.n_rows(), k), &device)?.to_dtype(dt)?;
                    let ours = time_ms(&stream, args.reps, || {
                        sddmm(&g, &y, &x)?;
                        Ok(())
                    })?;
                    let peer = if dt == DType::F32 {
                        let e = Tensor::zeros(nnz, DType::F32, &device)?;
                        let peer = CusparseSddmm::new(&g, &y, &x, &e, dev)?;
                        let ms = time_ms(&stream, args.reps, || peer.run())?;
                        let err = rel_diff(&sddmm(&g, &y, &x)?, &e)?;
                        Some((ms, err))
                    } else {
                        None
                    };
                    Some((ours, peer))
                } else {
                    None
                };
                drop(x);
                // Floors: f32 edge values, features of `s` bytes.
                let spmm_t = Spmm {
                    n_rows: a.n_rows(),
                    n_cols: a.n_cols(),
                    nnz,
                    k,
                    elem_bytes: s,
                    value_bytes: 4,
                }
                .traffic();
                let sddmm_t = Sddmm {
                    n_rows: a.n_rows(),
                    n_cols: a.n_cols(),
                    nnz,
                    k,
                    elem_bytes: s,
                }
                .traffic();
                let mut vs_floor = serde_json::Map::new();
                for (cand, ms) in &kernel_ms {
                    if let Some(ms) = ms {
                        vs_floor.insert(cand.to_string(), json(spmm_t.distance(&model, *ms)));
                    }
                }
                vs_floor.insert("auto".into(), json(spmm_t.distance(&model, auto)));
                if let Some(t) = cusp_best {
                    vs_floor.insert("cusparse".into(), json(spmm_t.distance(&model, t)));
                }
                if let Some((ours, peer)) = sd {
                    vs_floor.insert("sddmm_hp".into(), json(sddmm_t.distance(&model, ours)));
                    if let Some((ms, _)) = peer {
                        vs_floor
                            .insert("sddmm_cusparse".into(), json(sddmm_t.distance(&model, ms)));
                    }
                }
                let d = spmm_t.distance(&model, auto);
                let mut cells = vec![
                    name.clone(),
                    nnz.to_string(),
                    k.to_string(),
                    prec.to_string(),
                    ms_cell(kernel_ms["ge"]),
                    ms_cell(kernel_ms["narrow"]),
                    ms_cell(kernel_ms["hp"]),
                    ms_cell(kernel_ms["group"]),
                    pick.clone(),
                    verdict.as_ref().map_or("-".into(), |v| v.best.clone()),
                    verdict
                        .as_ref()
                        .map_or("-".into(), |v| format!("{:.2}x", v.regret)),
                    fmt_tb_s(d.gather_tb_s),
                    fmt_x(d.x_gather_l1),
                    fmt_x(d.x_hbm),
                ];
                if peers {
                    let sd_peer = sd.and_then(|(_, p)| p);
                    cells.extend([
                        cusp_best.map_or("-".into(), |t| format!("{t:.3}")),
                        cusp_best.map_or("-".into(), |t| format!("{:.2}x", t / auto)),
                        sd.map_or("-".into(), |(ms, _)| format!("{ms:.3}")),
                        match (sd, sd_peer) {
                            (Some((ours, _)), Some((ms, _))) => format!("{:.2}x", ms / ours),
                            _ => "-".into(),
                        },
                        sd.map_or("-".into(), |(ms, _)| {
                            fmt_x(sddmm_t.distance(&model, ms).x_gather_l1)
                        }),
                    ]);
                }
                table.row(cells);
                println!("{}", table.text().lines().last().unwrap_or_default());
                let ge = kernel_ms["ge"];
                let hp = kernel_ms["hp"];
                let fastest = times.iter().map(|t| t.1).fold(f64::INFINITY, f64::min);
                rows.push(serde_json::json!({
                    "graph": name, "family": case.family, "order": case.order.to_string(),
                    "nodes": a.n_rows(), "nnz": nnz, "mean_row": st.mean,
                    "max_row": st.max, "reorder_s": reorder_s, "k": k, "precision": prec,
                    "ge_ms": ge, "narrow_ms": kernel_ms["narrow"], "hp_ms": hp, "group_ms": kernel_ms["group"], "auto_ms": auto,
                    "auto_kernels": auto_kernels,
                    "kernels_used": recorded.iter().map(|(c, u)| (c.to_string(), u.kernels("spmm"))).collect::<BTreeMap<_, _>>(),
                    "dispatch": pick, "best": verdict.as_ref().map(|v| v.best.clone()),
                    "best_ms": verdict.as_ref().map(|v| v.best_ms),
                    "pick_ms": verdict.as_ref().map(|v| v.pick_ms),
                    "regret": verdict.as_ref().map(|v| v.regret),
                    "pick_is_best": verdict.as_ref().map(Verdict::pick_is_best),
                    "cusparse_default_ms": cusp_ms.map(|t| t[0]),
                    "cusparse_csr_alg2_ms": cusp_ms.map(|t| t[1]),
                    "dispatch_vs_cusparse": cusp_best.map(|t| t / auto),
                    "best_vs_cusparse": cusp_best.map(|t| t / fastest),
                    "hp_vs_ge": ge.zip(hp).map(|(ge, hp)| ge / hp),
                    "rel_err": rel_err, "rel_err_reference": if cusp_best.is_some() { "cusparse" } else { "ge" },
                    "hp_npw_sweep": npw_sweep.iter().map(|(n, ms)| serde_json::json!({"npw": n, "ms": ms})).collect::<Vec<_>>(),
                    "sddmm_hp_ms": sd.map(|(ms, _)| ms),
                    "sddmm_cusparse_ms": sd.and_then(|(_, p)| p).map(|(ms, _)| ms),
                    "sddmm_vs_cusparse": sd.and_then(|(ours, p)| p.map(|(ms, _)| ms / ours)),
                    "sddmm_rel_err": sd.and_then(|(_, p)| p).map(|(_, e)| e),
                    "floor": spmm_t.floors(&model),
                    "sddmm_floor": sd.map(|_| sddmm_t.floors(&model)),
                    "vs_floor": vs_floor,
                }));
                if let Some(verdict) = verdict {
                    cases.push((
                        prec,
                        Case {
                            case: format!("{name} K={k} {prec}"),
                            verdict,
                        },
                    ));
                }
            }
        }
        // The document so far after every graph: a run cut short keeps what it measured.
        let (doc, _, _) = document(args, policy, &fm, &cases, &rows);
        write_doc(args, &doc)?;
    }
    print!("{}", table.text());
    let (doc, overall, by_precision) = document(args, policy, &fm, &cases, &rows);
    println!("\nthe dispatcher over {} cases:\n{overall}", overall.cases);
    for (p, s) in &by_precision {
        println!("\n{p}:\n{s}");
    }
    write_doc(args, &doc)?;
    write_text(&args.out.join("graphs.md"), &table.markdown())?;
    chart(args, &rows)?;
    println!("wrote {}/graphs.{{json,md,svg}}", args.out.display());
    Ok(rows)
}

/// The sweep's JSON document from its rows and verdicts so far, with the dispatcher's
/// summaries: over all cases, and per precision when there are several.
fn document(
    args: &GraphsBench,
    policy: Option<KernelPolicy>,
    fm: &FloorModel,
    cases: &[(Precision, Case)],
    rows: &[serde_json::Value],
) -> (serde_json::Value, Summary, BTreeMap<String, Summary>) {
    let of = |p: Option<Precision>| -> Vec<Case> {
        cases
            .iter()
            .filter(|(q, _)| p.is_none_or(|p| *q == p))
            .map(|(_, c)| c.clone())
            .collect()
    };
    let overall = summarize(&of(None), WORST_LISTED);
    let by_precision: BTreeMap<String, Summary> = if args.precision.len() > 1 {
        args.precision
            .iter()
            .map(|&p| (p.to_string(), summarize(&of(Some(p)), WORST_LISTED)))
            .collect()
    } else {
        BTreeMap::new()
    };
    let doc = serde_json::json!({
        "reps": args.reps, "kernel_policy": policy, "timing": "CUDA events on candle's stream, median after 3 warm-ups; outputs allocated per call from the stream-ordered pool, which keeps freed memory",
        "operand": "A + I, GCN symmetric normalisation (f32 edge values); SpMM weighted sum, SDDMM on the same pattern",
        "ks": args.k, "precisions": args.precision, "dispatch_only": args.dispatch_only,
        "candidates": CANDIDATES.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        "floor_model": fm,
        "dispatch_summary": {"all": overall, "by_precision": by_precision},
        "rows": rows,
    });
    (doc, overall, by_precision)
}

/// Writes `doc` as `graphs.json` under `args.out`, and to `args.json` when given.
fn write_doc(args: &GraphsBench, doc: &serde_json::Value) -> Result<()> {
    write_json(&args.out.join("graphs.json"), doc)?;
    if let Some(path) = &args.json {
        write_json(path, doc)?;
    }
    Ok(())
}

/// Panels against non-zeros (log scale), one line per K: the dispatcher's regret per
/// precision and, with the peers, the dispatched SpMM and HP-SDDMM over cuSPARSE (f32). Graphs
/// in reordered ids are left out of the lines (they share the full graph's nnz).
fn chart(args: &GraphsBench, rows: &[serde_json::Value]) -> Result<()> {
    let series = |field: &str, prec: Precision| -> Vec<Line> {
        let prec = prec.to_string();
        let of = |r: &&serde_json::Value| {
            r["precision"] == prec.as_str() && !r["graph"].as_str().unwrap_or("").contains(' ')
        };
        let mut lines: Vec<Line> = args
            .k
            .iter()
            .map(|&k| {
                let mut pts: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(of)
                    .filter(|r| r["k"] == k)
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
    let mut panels: Vec<Panel> = args
        .precision
        .iter()
        .map(|&p| {
            Panel::lines(
                format!("SpMM dispatcher's regret, {p}"),
                "non-zeros",
                "pick ms / fastest ms",
                series("regret", p),
            )
        })
        .collect();
    if !args.dispatch_only && args.precision.contains(&Precision::F32) {
        panels.push(Panel::lines(
            "SpMM (dispatched) speed-up over cuSPARSE, f32",
            "non-zeros",
            "x cuSPARSE",
            series("dispatch_vs_cusparse", Precision::F32),
        ));
        panels.push(Panel::lines(
            "HP-SDDMM speed-up over cuSPARSE SDDMM, f32",
            "non-zeros",
            "x cuSPARSE",
            series("sddmm_vs_cusparse", Precision::F32),
        ));
    }
    for p in &mut panels {
        p.log_x = true;
    }
    draw_svg(&args.out.join("graphs.svg"), &panels, 3, (560, 420))
}
