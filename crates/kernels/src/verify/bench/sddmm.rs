//! SDDMM benchmark on the Reddit-shaped graph (A + I, the attention layers' pattern): our
//! HP-SDDMM (DTP's partition, and with `sweep` every edges-per-warp candidate) and our
//! row-per-warp kernel against cuSPARSE's CSR SDDMM, same operands, each timing beside its
//! floors (`crate::verify::floor::Sddmm`: gathered TB/s, time over the L1 gather floor and
//! over the compulsory-HBM floor); `dump` also writes the graph's CSR (`indptr.npy`,
//! `indices.npy`) for `bench/peers/torch_sddmm.py`.

use super::{cuda, floor_model, TIMING};
use crate::error::{Error, Result};
use crate::ops::sddmm::tuning::{auto_npw, NPW_CANDIDATES};
use crate::peer::{gcn_operand, rel_diff, time_ms, CusparseSddmm};
use crate::verify::floor::{fmt_tb_s, fmt_x, Sddmm};
use crate::{KernelPolicy, SddmmKernel};
use candle_core::{Device, Tensor};
use gnn_graph::io::npz::{write_npy, NpyArray, NpyData};
use gnn_graph::{generate, Reorder, SyntheticSpec};
use std::path::PathBuf;

/// What [`sddmm`] runs.
#[derive(Debug, Clone)]
pub struct SddmmBench {
    /// Node scale of the synthetic Reddit graph (1 = 232,965 nodes, ~114.6 M edges).
    pub scale: f64,
    /// Feature widths.
    pub k: Vec<usize>,
    /// Timed repetitions (after 3 warm-ups), at least 1.
    pub reps: usize,
    /// Also time HP-SDDMM at every edges-per-warp candidate.
    pub sweep: bool,
    /// Write the CSR as .npy files in this folder.
    pub dump: Option<PathBuf>,
    /// Renumber the nodes first (the cost is printed and recorded).
    pub reorder: Reorder,
    /// Generate the graph with ids numbered community by community.
    pub community_order: bool,
    /// The kernel policy of the graph (the HP and rows columns force their SDDMM kernel).
    pub policy: KernelPolicy,
}

/// Runs the SDDMM benchmark on `device` (a CUDA device), printing its table, and returns the
/// JSON document: `graph` (with the reordering and its cost), `reps`, `timing`,
/// `floor_model`, `kernel_policy`, `kernels_used` and `rows` (per width: HP ms and its edges
/// per warp, rows ms, cuSPARSE ms, speed-ups, relative difference, the sweep, the `floor` and
/// each timing's distance in `vs_floor`).
pub fn sddmm(cfg: &SddmmBench, device: &Device) -> Result<serde_json::Value> {
    let (dev, stream) = cuda(device)?;
    let fm = floor_model(dev)?;
    let model = fm.model;
    let mut spec = SyntheticSpec::reddit().scaled(cfg.scale)?;
    spec.community_order = cfg.community_order;
    let (ds, rep) = generate(&spec, 0)?;
    println!("{rep}");
    let t = std::time::Instant::now();
    // The ordering applied (`auto` resolves by the graph's size).
    let reorder = cfg.reorder.resolve(&ds.graph);
    let graph = ds.graph.permute(&reorder.order(&ds.graph)?)?;
    let reorder_s = t.elapsed().as_secs_f64();
    println!("reorder {reorder}: {reorder_s:.2} s");
    let (a, g, _) = gcn_operand(&graph, device)?;
    let g = g.with_policy(cfg.policy);
    println!("kernels: {}", g.policy());
    drop((ds, graph));
    let nnz = a.nnz();
    if let Some(dir) = &cfg.dump {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Harness(format!("creating {}: {e}", dir.display())))?;
        let ints = |v: &[u32]| NpyArray {
            shape: vec![v.len()],
            data: NpyData::I64(v.iter().map(|&x| x as i64).collect()),
        };
        let indptr = NpyArray {
            shape: vec![a.indptr().len()],
            data: NpyData::I64(a.indptr().to_u64().iter().map(|&x| x as i64).collect()),
        };
        write_npy(dir.join("indptr.npy"), &indptr)?;
        write_npy(dir.join("indices.npy"), &ints(a.indices()))?;
        println!("wrote the CSR to {}", dir.display());
    }
    println!(
        "graph: {} nodes, {nnz} non-zeros (A+I), max row {}",
        a.n_rows(),
        a.degree_stats().max
    );
    println!(
        "{:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6} {:>6} {:>9}",
        "K",
        "HP ms",
        "npw",
        "rows ms",
        "cuSP ms",
        "vs cuSP",
        "vs rows",
        "TB/s",
        "x L1",
        "x HBM",
        "rel err"
    );
    let mut rows = Vec::new();
    for &k in &cfg.k {
        let x = Tensor::randn(0f32, 1.0, (a.n_rows(), k), device)?;
        let y = Tensor::randn(0f32, 1.0, (a.n_cols(), k), device)?;
        let time_kernel = |kernel: SddmmKernel| -> Result<f64> {
            let gk = g.with_policy(g.policy().with_sddmm(kernel));
            time_ms(&stream, cfg.reps, || {
                crate::sddmm(&gk, &x, &y)?;
                Ok(())
            })
        };
        let hp = time_kernel(SddmmKernel::Auto)?;
        let rows_ms = time_kernel(SddmmKernel::Rows)?;
        let sweep: Vec<(u32, f64)> = if cfg.sweep {
            NPW_CANDIDATES
                .into_iter()
                .map(|npw| Ok((npw, time_kernel(SddmmKernel::Hp(npw))?)))
                .collect::<Result<_>>()?
        } else {
            Vec::new()
        };
        let out = Tensor::zeros(nnz, candle_core::DType::F32, device)?;
        let peer = CusparseSddmm::new(&g, &x, &y, &out, dev)?;
        let cusp = time_ms(&stream, cfg.reps, || peer.run())?;
        let ours = crate::sddmm(&g, &x, &y)?;
        let err = rel_diff(&ours, &out)?;
        // DTP's choice, as the kernel computes it (the sweep row of the same npw matches).
        let npw = auto_npw(dev, nnz, k)?.map_or("-".to_string(), |n| n.to_string());
        // f32 operands: each B_j gathered once per edge, A_i once per row, f32 scores out.
        let traffic = Sddmm {
            n_rows: a.n_rows(),
            n_cols: a.n_cols(),
            nnz,
            k,
            elem_bytes: 4,
        }
        .traffic();
        let d = traffic.distance(&model, hp);
        println!(
            "{k:>5} {hp:>9.3} {npw:>9} {rows_ms:>9.3} {cusp:>9.3} {:>8.2}x {:>8.2}x {:>7} {:>6} {:>6} {err:>9.1e}",
            cusp / hp,
            rows_ms / hp,
            fmt_tb_s(d.gather_tb_s),
            fmt_x(d.x_gather_l1),
            fmt_x(d.x_hbm),
        );
        rows.push(serde_json::json!({
            "k": k, "hp_ms": hp, "hp_npw": npw, "rows_ms": rows_ms, "cusparse_ms": cusp,
            "speedup_vs_cusparse": cusp / hp,
            "speedup_vs_rows": rows_ms / hp, "rel_err_vs_cusparse": err,
            "floor": traffic.floors(&model),
            "vs_floor": {
                "hp": d, "rows": traffic.distance(&model, rows_ms),
                "cusparse": traffic.distance(&model, cusp),
            },
            "sweep": sweep.iter().map(|(n, ms)| serde_json::json!({
                "npw": n, "ms": ms, "x_gather_l1": traffic.distance(&model, *ms).x_gather_l1,
            })).collect::<Vec<_>>(),
        }));
    }
    Ok(serde_json::json!({
        "graph": {"nodes": a.n_rows(), "nnz": nnz, "max_row": a.degree_stats().max, "scale": cfg.scale,
                  "reorder": reorder, "reorder_asked": cfg.reorder, "reorder_s": reorder_s, "community_order": cfg.community_order},
        "reps": cfg.reps, "timing": TIMING, "floor_model": fm,
        "kernel_policy": g.policy(), "kernels_used": g.kernels_used(),
        "rows": rows,
    }))
}
