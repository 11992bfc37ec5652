//! SpMM benchmark: our CSR kernels against cuSPARSE's CSR SpMM (descriptors and workspace
//! created once, on candle's stream) on the GCN operand of the Reddit-shaped graph; ms,
//! our/cuSPARSE speed ratio, and the distance to the floor (gathered TB/s, time over the L1
//! gather floor and over the compulsory-HBM floor; GFLOP/s = 2 nnz K / t in the JSON).
//! Optional tables: every compiled tile shape (`sweep`), each of our kernels forced in f32 and
//! bf16 (`kernels`), and the SpMM cut into column blocks (`column_blocks`).

use super::{cuda, floor_model, json, TIMING};
use crate::error::{Error, Result};
use crate::peer::{gcn_operand, rel_diff, time_ms, Cusparse, SpmmAlg};
use crate::verify::floor::{fmt_tb_s, fmt_x, DeviceModel, Spmm, Traffic};
use crate::{spmm_weighted, DeviceGraph, KernelPolicy, Reduce, SpmmKernel};
use candle_core::cuda_backend::cudarc::driver::CudaStream;
use candle_core::{DType, Device, Tensor};
use gnn_graph::{generate, Csr, SyntheticSpec};
use std::sync::Arc;

/// What [`spmm`] runs.
#[derive(Debug, Clone)]
pub struct SpmmBench {
    /// Node scale of the synthetic Reddit graph (1 = 232,965 nodes, ~114.6 M edges).
    pub scale: f64,
    /// Feature widths.
    pub k: Vec<usize>,
    /// Timed repetitions (after 3 warm-ups), at least 1.
    pub reps: usize,
    /// Also time every compiled tile shape and block order of our kernel (tuning data).
    pub sweep: bool,
    /// Also time each of our kernels forced, f32 and bf16 (dispatcher data).
    pub kernels: bool,
    /// Also time the SpMM cut into this many column blocks (each at least 1).
    pub column_blocks: Vec<usize>,
    /// The kernel policy of the main rows (`kernels` and `sweep` force theirs).
    pub policy: KernelPolicy,
}

/// Runs the SpMM benchmark on `device` (a CUDA device), printing its tables, and returns the
/// JSON document: `graph`, `reps`, `timing`, `floor_model`, `kernel_policy`, `kernels_used`,
/// `rows` (per width: ours weighted sum and mean, cuSPARSE default and CSR_ALG2, GFLOP/s,
/// speed-up, relative difference, the tile sweep, `floor` / `floor_mean` and each timing's
/// distance in `vs_floor`), `kernels` and `column_blocks` (each row with its `floor` and
/// `vs_floor`).
pub fn spmm(cfg: &SpmmBench, device: &Device) -> Result<serde_json::Value> {
    let (dev, stream) = cuda(device)?;
    let fm = floor_model(dev)?;
    let model = fm.model;
    let spec = SyntheticSpec::reddit().scaled(cfg.scale)?;
    let (ds, rep) = generate(&spec, 0)?;
    println!("{rep}");
    // GCN operand: A + I with symmetric normalisation (what the GCN layer aggregates with).
    let (a, g, vals) = gcn_operand(&ds.graph, device)?;
    let g = g.with_policy(cfg.policy);
    println!("kernels: {}", g.policy());
    let nnz = a.nnz();
    let sp = Cusparse::new(&g, &vals, &stream)?;
    println!(
        "graph: {} nodes, {} non-zeros (A+I), max row {}",
        a.n_rows(),
        nnz,
        a.degree_stats().max
    );
    println!(
        "{:>5} {:>10} {:>10} {:>10} {:>10} {:>8} {:>7} {:>6} {:>6} {:>9}",
        "K",
        "ours w ms",
        "ours mean",
        "cuSP dflt",
        "cuSP alg2",
        "ratio",
        "TB/s",
        "x L1",
        "x HBM",
        "max err"
    );
    let mut rows = Vec::new();
    for &k in &cfg.k {
        // The weighted sum reads f32 edge values; the mean reads none.
        let traffic = spmm_traffic(&a, k, 4);
        let traffic_mean = Spmm {
            value_bytes: 0,
            ..spmm_shape(&a, k, 4)
        }
        .traffic();
        let x = Tensor::randn(0f32, 1.0, (a.n_cols(), k), device)?;
        let c = Tensor::zeros((a.n_rows(), k), candle_core::DType::F32, device)?;
        let ours = time_ms(&stream, cfg.reps, || {
            spmm_weighted(&g, &x, &vals, Reduce::Sum)?;
            Ok(())
        })?;
        let ours_mean = time_ms(&stream, cfg.reps, || {
            crate::spmm(&g, &x, Reduce::Mean)?;
            Ok(())
        })?;
        let cusp = sp.time_both(&x, &c, dev, cfg.reps)?;
        // Cross-check the two results.
        let out = spmm_weighted(&g, &x, &vals, Reduce::Sum)?;
        let plan = sp.plan(&x, &c, SpmmAlg::CUSPARSE_SPMM_ALG_DEFAULT, dev)?;
        sp.run(&plan)?;
        let err = rel_diff(&out, &c)?;
        let best = cusp[0].min(cusp[1]);
        let mut sweep = Vec::new();
        if cfg.sweep {
            use crate::ops::spmm::tuning::{SpmmTiling, CFS};
            for (vi, vec) in [1usize, 2, 4].into_iter().enumerate() {
                for &cf in CFS[vi] {
                    for (tile_major, unroll, schedule) in [
                        (false, 4, false),
                        (true, 4, false),
                        (false, 8, false),
                        (true, 8, false),
                        (false, 8, true),
                        (true, 8, true),
                    ] {
                        let t = SpmmTiling {
                            vec,
                            cf,
                            tile_major,
                            unroll,
                            schedule,
                        };
                        if !t.valid(k, 0) || 32 * vec * cf > 2 * k.max(32) {
                            continue;
                        }
                        let gt = g.with_policy(crate::KernelPolicy {
                            spmm_tiling: Some(t),
                            ..*g.policy()
                        });
                        let ms = time_ms(&stream, cfg.reps.min(10), || {
                            spmm_weighted(&gt, &x, &vals, Reduce::Sum)?;
                            Ok(())
                        })?;
                        sweep.push(serde_json::json!({"vec": vec, "cf": cf, "tile_major": tile_major, "unroll": unroll, "schedule": schedule, "ms": ms,
                            "x_gather_l1": traffic.distance(&model, ms).x_gather_l1}));
                    }
                }
            }
            let mut v: Vec<(f64, String)> = sweep
                .iter()
                .map(|r| {
                    (
                        r["ms"].as_f64().unwrap_or(f64::MAX),
                        format!(
                            "vec {} cf {} u{} {} {}",
                            r["vec"],
                            r["cf"],
                            r["unroll"],
                            if r["tile_major"].as_bool().unwrap_or(false) {
                                "tile-major"
                            } else {
                                "node-major"
                            },
                            if r["schedule"].as_bool().unwrap_or(false) {
                                "scheduled"
                            } else {
                                "per-row"
                            }
                        ),
                    )
                })
                .collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            println!(
                "  K={k} sweep, fastest: {}",
                v.iter()
                    .take(4)
                    .map(|(ms, n)| format!("{n} {ms:.3} ms"))
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
        }
        let gf = |ms: f64| 2.0 * nnz as f64 * k as f64 / ms / 1e6;
        let d = traffic.distance(&model, ours);
        println!(
            "{:>5} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>7.2}x {:>7} {:>6} {:>6} {:>9.1e}",
            k,
            ours,
            ours_mean,
            cusp[0],
            cusp[1],
            best / ours,
            fmt_tb_s(d.gather_tb_s),
            fmt_x(d.x_gather_l1),
            fmt_x(d.x_hbm),
            err
        );
        rows.push(serde_json::json!({
            "k": k, "ours_weighted_sum_ms": ours, "ours_mean_ms": ours_mean,
            "cusparse_default_ms": cusp[0], "cusparse_csr_alg2_ms": cusp[1],
            "ours_gflops": gf(ours), "cusparse_best_gflops": gf(best),
            "speedup_vs_best_cusparse": best / ours, "rel_err_vs_cusparse": err,
            "floor": traffic.floors(&model), "floor_mean": traffic_mean.floors(&model),
            "vs_floor": {
                "ours_weighted_sum": d,
                "ours_mean": traffic_mean.distance(&model, ours_mean),
                "cusparse_best": traffic.distance(&model, best),
            },
            "sweep": sweep,
        }));
    }
    let kernels = if cfg.kernels {
        compare_kernels(&a, &g, &vals, &cfg.k, cfg.reps, &stream, device, &model)?
    } else {
        Vec::new()
    };
    let column_blocks = if cfg.column_blocks.is_empty() {
        Vec::new()
    } else {
        compare_column_blocks(&a, &g, &vals, cfg, &stream, device, &model)?
    };
    Ok(serde_json::json!({
        "graph": {"name": ds.name, "nodes": a.n_rows(), "nnz": nnz, "max_row": a.degree_stats().max},
        "reps": cfg.reps, "timing": TIMING, "floor_model": fm,
        "kernel_policy": g.policy(), "kernels_used": g.kernels_used(),
        "rows": rows, "kernels": kernels, "column_blocks": column_blocks,
    }))
}

/// One SpMM over `a` at width `k` with `elem_bytes`-byte features and f32 edge values.
fn spmm_shape(a: &Csr, k: usize, elem_bytes: usize) -> Spmm {
    Spmm {
        n_rows: a.n_rows(),
        n_cols: a.n_cols(),
        nnz: a.nnz(),
        k,
        elem_bytes,
        value_bytes: 4,
    }
}

/// [`spmm_shape`]'s traffic.
fn spmm_traffic(a: &Csr, k: usize, elem_bytes: usize) -> Traffic {
    spmm_shape(a, k, elem_bytes).traffic()
}

/// Each kernel forced (and the dispatcher's pick; row groups fall back to the row kernel where a
/// row is not whole 16-byte loads, as `kernels_used` records) at every width, f32 and bf16 storage: the
/// weighted sum of the GCN operand, medians, the pick's distance to the floor; the forced
/// kernels' largest relative difference from the row kernel's output (same storage type).
#[allow(clippy::too_many_arguments)]
fn compare_kernels(
    a: &Csr,
    g: &DeviceGraph,
    vals: &Tensor,
    ks: &[usize],
    reps: usize,
    stream: &Arc<CudaStream>,
    device: &Device,
    model: &DeviceModel,
) -> Result<Vec<serde_json::Value>> {
    let kernels = [
        ("ge", SpmmKernel::Ge),
        ("narrow", SpmmKernel::Narrow),
        ("hp", SpmmKernel::Hp(0)),
        ("auto", SpmmKernel::Auto),
        ("group", SpmmKernel::Group),
    ];
    println!(
        "{:>5} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6} {:>6} {:>10} {:>10} {:>10}",
        "K",
        "dtype",
        "ge ms",
        "narrow",
        "hp",
        "auto",
        "group",
        "ge/narr",
        "TB/s",
        "x L1",
        "x HBM",
        "narrow err",
        "hp err",
        "group err"
    );
    let mut rows = Vec::new();
    for &k in ks {
        for dt in [DType::F32, DType::BF16] {
            let x = Tensor::randn(0f32, 1.0, (g.n_cols(), k), device)?.to_dtype(dt)?;
            let mut ms = Vec::new();
            let mut outs = Vec::new();
            let mut used = serde_json::Map::new();
            for (name, kernel) in kernels {
                let gk = g.with_policy(g.policy().with_spmm(kernel));
                let t = time_ms(stream, reps, || {
                    spmm_weighted(&gk, &x, vals, Reduce::Sum)?;
                    Ok(())
                })?;
                let out = spmm_weighted(&gk, &x, vals, Reduce::Sum)?.to_dtype(DType::F32)?;
                used.insert(name.into(), json(gk.kernels_used())?);
                ms.push(t);
                outs.push(out);
            }
            let (e_narrow, e_hp, e_group) = (
                rel_diff(&outs[1], &outs[0])?,
                rel_diff(&outs[2], &outs[0])?,
                rel_diff(&outs[4], &outs[0])?,
            );
            let name = format!("{dt:?}").to_lowercase();
            let traffic = spmm_traffic(a, k, dt.size_in_bytes());
            let d = traffic.distance(model, ms[3]);
            println!(
                "{:>5} {:>5} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>8.2}x {:>7} {:>6} {:>6} {:>10.1e} {:>10.1e} {:>10.1e}",
                k,
                name,
                ms[0],
                ms[1],
                ms[2],
                ms[3],
                ms[4],
                ms[0] / ms[1],
                fmt_tb_s(d.gather_tb_s),
                fmt_x(d.x_gather_l1),
                fmt_x(d.x_hbm),
                e_narrow,
                e_hp,
                e_group
            );
            let vs_floor: serde_json::Map<String, serde_json::Value> = kernels
                .iter()
                .zip(&ms)
                .map(|((n, _), &t)| Ok(((*n).to_string(), json(traffic.distance(model, t))?)))
                .collect::<Result<_>>()?;
            rows.push(serde_json::json!({
                "k": k, "dtype": name, "ge_ms": ms[0], "narrow_ms": ms[1], "hp_ms": ms[2],
                "auto_ms": ms[3], "group_ms": ms[4], "narrow_rel_diff": e_narrow, "hp_rel_diff": e_hp,
                "group_rel_diff": e_group,
                "kernels_used": used, "floor": traffic.floors(model), "vs_floor": vs_floor,
            }));
        }
    }
    Ok(rows)
}

/// The weighted SpMM as `B` column blocks of equal node ranges (each block's SpMM reads its
/// slice of `x`; the outputs added in the storage type), against the one SpMM, at every width,
/// f32 and bf16: medians of the blocked SpMMs alone and with the adds, the one SpMM's and the
/// blocked one's distance to the one SpMM's gather floor, and the largest relative difference
/// of the blocked result from the whole one.
fn compare_column_blocks(
    a: &Csr,
    g: &DeviceGraph,
    vals: &Tensor,
    cfg: &SpmmBench,
    stream: &Arc<CudaStream>,
    device: &Device,
    model: &DeviceModel,
) -> Result<Vec<serde_json::Value>> {
    let host_vals = vals.to_vec1::<f32>()?;
    println!(
        "{:>3} {:>5} {:>5} {:>9} {:>11} {:>11} {:>8} {:>7} {:>8} {:>10}",
        "B",
        "K",
        "dtype",
        "one ms",
        "blocks ms",
        "+ adds ms",
        "speedup",
        "one xL1",
        "+add xL1",
        "max diff"
    );
    let mut rows = Vec::new();
    for &b in &cfg.column_blocks {
        if b == 0 {
            return Err(Error::Harness(
                "column blocks: a block count must be at least 1".into(),
            ));
        }
        let n = a.n_cols();
        let bounds: Vec<usize> = (0..=b).map(|i| n * i / b).collect();
        let blocks = a
            .column_blocks(&bounds, Some(&host_vals))?
            .into_iter()
            .map(|(csr, v)| -> Result<_> {
                let v = v.ok_or_else(|| Error::Harness("column blocks: no values".into()))?;
                Ok((
                    DeviceGraph::upload(&csr, device)?.with_policy_of(g),
                    Tensor::from_vec(v, csr.nnz(), device)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        for &k in &cfg.k {
            for dt in [DType::F32, DType::BF16] {
                let x = Tensor::randn(0f32, 1.0, (n, k), device)?.to_dtype(dt)?;
                let parts = |add: bool| -> Result<Option<Tensor>> {
                    let mut acc: Option<Tensor> = None;
                    for ((bg, bv), w) in blocks.iter().zip(bounds.windows(2)) {
                        let y =
                            spmm_weighted(bg, &x.narrow(0, w[0], w[1] - w[0])?, bv, Reduce::Sum)?;
                        acc = Some(match acc {
                            Some(s) if add => (s + y)?,
                            _ => y,
                        });
                    }
                    Ok(acc)
                };
                let one = time_ms(stream, cfg.reps, || {
                    spmm_weighted(g, &x, vals, Reduce::Sum)?;
                    Ok(())
                })?;
                let alone = time_ms(stream, cfg.reps, || {
                    parts(false)?;
                    Ok(())
                })?;
                let added = time_ms(stream, cfg.reps, || {
                    parts(true)?;
                    Ok(())
                })?;
                let whole = spmm_weighted(g, &x, vals, Reduce::Sum)?.to_dtype(DType::F32)?;
                let blocked = parts(true)?
                    .ok_or_else(|| Error::Harness("column blocks: none".into()))?
                    .to_dtype(DType::F32)?;
                let diff = rel_diff(&blocked, &whole)?;
                let name = format!("{dt:?}").to_lowercase();
                let traffic = spmm_traffic(a, k, dt.size_in_bytes());
                let at = |ms| traffic.distance(model, ms);
                println!(
                    "{b:>3} {k:>5} {name:>5} {one:>9.3} {alone:>11.3} {added:>11.3} {:>7.2}x {:>7} {:>8} {diff:>10.1e}",
                    one / added,
                    fmt_x(at(one).x_gather_l1),
                    fmt_x(at(added).x_gather_l1),
                );
                rows.push(serde_json::json!({
                    "blocks": b, "k": k, "dtype": name, "one_ms": one, "blocks_ms": alone,
                    "blocks_and_adds_ms": added, "max_rel_diff": diff,
                    "floor": traffic.floors(model),
                    "vs_floor": {"one": at(one), "blocks": at(alone), "blocks_and_adds": at(added)},
                }));
            }
        }
    }
    Ok(rows)
}
