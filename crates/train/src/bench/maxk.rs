//! MaxK-GNN kernels on the Reddit-shaped graph at width D: MaxK (selection + CBSR gather),
//! forward SpGEMM and backward SSpMM for each k, against cuSPARSE's CSR SpMM and our exact
//! SpMM at K = D on the same graph and GCN-normalised values.

use crate::report::chart::{draw_svg, Line, Panel};
use crate::{Precision, Result};
use candle_core::{DType, Tensor};
use gnn_graph::{generate, SyntheticSpec};
use gnn_kernels::peer::{gcn_operand, rel_diff, time_ms, Cusparse};
use gnn_kernels::verify::bench::floor_model;
use gnn_kernels::verify::floor::{fmt_tb_s, fmt_x, Distance, Floors, Maxk, Spmm};
use gnn_kernels::{maxk, spgemm, spmm_weighted, sspmm, Reduce};
use std::path::PathBuf;

/// What [`run`] measures and where it writes (with the `cli` feature, the `bench_maxk`
/// example's flags).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct MaxkBench {
    /// Node scale of the synthetic Reddit graph (1 = 232,965 nodes).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1.0))]
    pub scale: f64,
    /// Dense width before MaxK.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 256))]
    pub dim: usize,
    /// Values of k.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_delimiter = ',', default_value = "8,16,32,64,96,128,192")
    )]
    pub k: Vec<usize>,
    /// Storage precisions of the features (CBSR values and the dense comparison): f32, bf16.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_delimiter = ',', default_value = "f32,bf16")
    )]
    pub dtypes: Vec<Precision>,
    /// Timed repetitions (after 3 warm-ups).
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            default_value_t = 20,
            value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
        )
    )]
    pub reps: usize,
    /// Output folder (bench_maxk.json, bench_maxk.svg).
    #[cfg_attr(feature = "cli", arg(long, default_value = "runs/bench_maxk"))]
    pub out: PathBuf,
}

/// One k's timings (a row of `bench_maxk.json`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct MaxkRow {
    /// Storage precision of the features ("f32", "bf16").
    pub dtype: String,
    /// Our exact SpMM at K = D in that precision, ms.
    pub exact_spmm_ms: f64,
    /// Entries kept per row.
    pub k: usize,
    /// MaxK (selection + CBSR gather), ms.
    pub maxk_ms: f64,
    /// Forward SpGEMM, ms.
    pub spgemm_ms: f64,
    /// Backward SSpMM, ms.
    pub sspmm_ms: f64,
    /// cuSPARSE SpMM at K = D over the SpGEMM.
    pub spgemm_speedup_vs_cusparse: f64,
    /// cuSPARSE SpMM at K = D over the SSpMM.
    pub sspmm_speedup_vs_cusparse: f64,
    /// Our exact SpMM in the same precision over the SpGEMM.
    pub spgemm_speedup_vs_exact: f64,
    /// MaxK's time as a share of the SpGEMM's, percent.
    pub maxk_pct_of_spgemm: f64,
    /// Largest relative difference of the SpGEMM from the exact SpMM of the dense MaxK rows.
    pub spgemm_rel_err_vs_exact: f64,
    /// Floors of the exact SpMM, the SpGEMM and the SSpMM (gathered and compulsory bytes).
    pub floor: RowFloors,
    /// Each timing's distance to its floors.
    pub vs_floor: RowDistances,
}

/// The floors of one row's three products ([`gnn_kernels::verify::floor`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RowFloors {
    /// Our exact SpMM at K = D.
    pub exact: Floors,
    /// The forward SpGEMM over the CBSR rows.
    pub spgemm: Floors,
    /// The backward SSpMM.
    pub sspmm: Floors,
}

/// One row's timings against their floors.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RowDistances {
    /// Our exact SpMM at K = D.
    pub exact: Distance,
    /// The forward SpGEMM.
    pub spgemm: Distance,
    /// The backward SSpMM.
    pub sspmm: Distance,
}

/// Runs the benchmark on the first CUDA device: prints the table, writes
/// `bench_maxk.json` and `bench_maxk.svg` under `cfg.out`, and returns the rows.
pub fn run(cfg: &MaxkBench) -> Result<Vec<MaxkRow>> {
    let (gpu, dev) = super::cuda_device()?;
    let fm = floor_model(&dev)?;
    let model = fm.model;
    let stream = dev.cuda_stream();
    let (ds, rep) = generate(&SyntheticSpec::reddit().scaled(cfg.scale)?, 0)?;
    println!("{rep}");
    let (a, g, vals) = gcn_operand(&ds.graph, &gpu)?;
    let n = a.n_rows();
    drop(ds);
    let d = cfg.dim;
    let x = Tensor::randn(0f32, 1.0, (n, d), &gpu)?;
    let dout = Tensor::randn(0f32, 1.0, (n, d), &gpu)?;
    let c = Tensor::zeros((n, d), DType::F32, &gpu)?;
    let sp = Cusparse::new(&g, &vals, &stream)?;
    let [c0, c1] = sp.time_both(&x, &c, &dev, cfg.reps)?;
    let cusp = c0.min(c1);
    println!(
        "{n} nodes, {} edges, D = {d}: cuSPARSE SpMM (f32) {cusp:.3} ms",
        a.nnz()
    );
    println!(
        "{:>5} {:>4} {:>9} {:>9} {:>10} {:>9} {:>9} {:>11} {:>11} {:>7} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "dtype",
        "k",
        "exact ms",
        "maxk ms",
        "spgemm ms",
        "sspmm ms",
        "vs exact",
        "fwd vs cuSP",
        "bwd vs cuSP",
        "maxk %",
        "rel err",
        "fwd TB/s",
        "fwd x L1",
        "bwd x L1",
        "ex x L1"
    );
    let mut rows = Vec::new();
    for &prec in &cfg.dtypes {
        let dt = prec.dtype();
        let (x, dout) = (x.to_dtype(dt)?, dout.to_dtype(dt)?);
        let exact = time_ms(&stream, cfg.reps, || {
            spmm_weighted(&g, &x, &vals, Reduce::Sum)?;
            Ok(())
        })?;
        let s = dt.size_in_bytes();
        let exact_t = Spmm {
            n_rows: n,
            n_cols: n,
            nnz: a.nnz(),
            k: d,
            elem_bytes: s,
            value_bytes: 4,
        }
        .traffic();
        for &k in &cfg.k {
            let r = time_k(&g, &vals, &x, &dout, k, cfg.reps, &stream)?;
            let mk = Maxk {
                n_rows: n,
                n_cols: n,
                nnz: a.nnz(),
                dim: d,
                k,
                elem_bytes: s,
                index_bytes: gnn_kernels::ops::maxk::index_dtype(d).size_in_bytes(),
                value_bytes: 4,
            };
            let (fwd_t, bwd_t) = (mk.spgemm(), mk.sspmm());
            let r = MaxkRow {
                floor: RowFloors {
                    exact: exact_t.floors(&model),
                    spgemm: fwd_t.floors(&model),
                    sspmm: bwd_t.floors(&model),
                },
                vs_floor: RowDistances {
                    exact: exact_t.distance(&model, exact),
                    spgemm: fwd_t.distance(&model, r.spgemm_ms),
                    sspmm: bwd_t.distance(&model, r.sspmm_ms),
                },
                dtype: prec.to_string(),
                exact_spmm_ms: exact,
                k,
                maxk_ms: r.maxk_ms,
                spgemm_ms: r.spgemm_ms,
                sspmm_ms: r.sspmm_ms,
                spgemm_speedup_vs_cusparse: cusp / r.spgemm_ms,
                sspmm_speedup_vs_cusparse: cusp / r.sspmm_ms,
                spgemm_speedup_vs_exact: exact / r.spgemm_ms,
                maxk_pct_of_spgemm: 100.0 * r.maxk_ms / r.spgemm_ms,
                spgemm_rel_err_vs_exact: r.err,
            };
            println!(
                "{:>5} {:>4} {:>9.3} {:>9.3} {:>10.3} {:>9.3} {:>8.2}x {:>10.2}x {:>10.2}x {:>6.1}% {:>9.1e} {:>8} {:>8} {:>8} {:>8}",
                r.dtype,
                k,
                exact,
                r.maxk_ms,
                r.spgemm_ms,
                r.sspmm_ms,
                r.spgemm_speedup_vs_exact,
                r.spgemm_speedup_vs_cusparse,
                r.sspmm_speedup_vs_cusparse,
                r.maxk_pct_of_spgemm,
                r.spgemm_rel_err_vs_exact,
                fmt_tb_s(r.vs_floor.spgemm.gather_tb_s),
                fmt_x(r.vs_floor.spgemm.x_gather_l1),
                fmt_x(r.vs_floor.sspmm.x_gather_l1),
                fmt_x(r.vs_floor.exact.x_gather_l1)
            );
            rows.push(r);
        }
    }
    let doc = serde_json::json!({
        "device": "cuda:0", "graph": {"nodes": n, "edges": a.nnz(), "scale": cfg.scale},
        "dim": d, "reps": cfg.reps, "cusparse_f32_ms": cusp, "floor_model": fm, "rows": rows,
    });
    let json = cfg.out.join("bench_maxk.json");
    crate::report::write_json(&json, &doc)?;
    chart(&rows, &cfg.out.join("bench_maxk.svg"), d)?;
    println!("wrote {} and bench_maxk.svg", json.display());
    Ok(rows)
}

/// One k's medians (ms) and the SpGEMM's largest relative difference from the exact SpMM.
struct Timed {
    maxk_ms: f64,
    spgemm_ms: f64,
    sspmm_ms: f64,
    err: f64,
}

/// Times one k: MaxK, the SpGEMM and the SSpMM, and the SpGEMM's largest relative difference
/// from the exact SpMM of the dense MaxK rows.
fn time_k(
    g: &gnn_kernels::DeviceGraph,
    vals: &Tensor,
    x: &Tensor,
    dout: &Tensor,
    k: usize,
    reps: usize,
    stream: &std::sync::Arc<candle_core::cuda_backend::cudarc::driver::CudaStream>,
) -> Result<Timed> {
    let maxk_ms = time_ms(stream, reps, || {
        maxk(x, k)?;
        Ok(())
    })?;
    let cb = maxk(x, k)?;
    let spgemm_ms = time_ms(stream, reps, || {
        spgemm(g, &cb, Some(vals), Reduce::Sum)?;
        Ok(())
    })?;
    let sspmm_ms = time_ms(stream, reps, || {
        sspmm(g, dout, &cb, Some(vals), Reduce::Sum)?;
        Ok(())
    })?;
    let err = rel_diff(
        &spgemm(g, &cb, Some(vals), Reduce::Sum)?.to_dtype(DType::F32)?,
        &spmm_weighted(g, &cb.to_dense()?, vals, Reduce::Sum)?.to_dtype(DType::F32)?,
    )?;
    Ok(Timed {
        maxk_ms,
        spgemm_ms,
        sspmm_ms,
        err,
    })
}

/// Speed-ups over cuSPARSE against k, with the 2.5x target as a level.
fn chart(rows: &[MaxkRow], path: &std::path::Path, dim: usize) -> Result<()> {
    let kmax = rows.iter().map(|r| r.k).max().unwrap_or(1) as f64;
    let pts = |f: fn(&MaxkRow) -> f64| rows.iter().map(|r| (r.k as f64, f(r))).collect();
    let mut p = Panel::lines(
        format!("MaxK kernels vs cuSPARSE SpMM at K = {dim}"),
        "k (entries kept per row)",
        "speed-up",
        vec![
            Line::measured("SpGEMM forward", pts(|r| r.spgemm_speedup_vs_cusparse)),
            Line::measured("SSpMM backward", pts(|r| r.sspmm_speedup_vs_cusparse)),
            Line::level("2.5x target", 2.5, 0.0, kmax),
        ],
    );
    let top = rows
        .iter()
        .map(|r| {
            r.spgemm_speedup_vs_cusparse
                .max(r.sspmm_speedup_vs_cusparse)
        })
        .fold(3.0, f64::max);
    p.y_range = Some((0.0, top * 1.1));
    draw_svg(path, &[p], 1, (760, 460))
}
