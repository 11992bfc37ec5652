//! SDDMM benchmark on the Reddit-shaped graph (A + I, the attention layers' pattern): our
//! HP-SDDMM (DTP's partition, and with `sweep` every edges-per-warp candidate) and our
//! row-per-warp kernel against cuSPARSE's CSR SDDMM, same operands; `dump` also writes the
//! graph's CSR (`indptr.npy`, `indices.npy`) for `bench/peers/torch_sddmm.py`.

use super::{cuda, TIMING};
use crate::error::{Error, Result};
use crate::ops::sddmm::tuning::{auto_npw, NPW_CANDIDATES};
use crate::peer::{gcn_operand, rel_diff, time_ms, CusparseSddmm};
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
/// `kernel_policy`, `kernels_used` and `rows` (per width: HP ms and its edges per warp, rows
/// ms, cuSPARSE ms, effective GB/s, speed-ups, relative difference, the sweep).
pub fn sddmm(cfg: &SddmmBench, device: &Device) -> Result<serde_json::Value> {
    let (dev, stream) = cuda(device)?;
    let mut spec = SyntheticSpec::reddit().scaled(cfg.scale)?;
    spec.community_order = cfg.community_order;
    let (ds, rep) = generate(&spec, 0)?;
    println!("{rep}");
    let t = std::time::Instant::now();
    let graph = ds.graph.permute(&cfg.reorder.order(&ds.graph)?)?;
    let reorder_s = t.elapsed().as_secs_f64();
    println!("reorder {}: {reorder_s:.2} s", cfg.reorder);
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
        write_npy(dir.join("indptr.npy"), &ints(a.indptr()))?;
        write_npy(dir.join("indices.npy"), &ints(a.indices()))?;
        println!("wrote the CSR to {}", dir.display());
    }
    println!(
        "graph: {} nodes, {nnz} non-zeros (A+I), max row {}",
        a.n_rows(),
        a.degree_stats().max
    );
    println!(
        "{:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "K", "HP ms", "npw", "rows ms", "cuSP ms", "HP GB/s", "vs cuSP", "vs rows", "rel err"
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
        // Bytes a perfect kernel moves: indices + output + each b row gathered once per edge
        // and each a row read once.
        let bytes = nnz as f64 * (8.0 + 4.0 * k as f64) + 4.0 * (a.n_rows() * k) as f64;
        let gbs = bytes / hp / 1e6;
        println!(
            "{k:>5} {hp:>9.3} {npw:>9} {rows_ms:>9.3} {cusp:>9.3} {gbs:>9.0} {:>8.2}x {:>8.2}x {err:>9.1e}",
            cusp / hp,
            rows_ms / hp
        );
        rows.push(serde_json::json!({
            "k": k, "hp_ms": hp, "hp_npw": npw, "rows_ms": rows_ms, "cusparse_ms": cusp,
            "hp_effective_gb_s": gbs, "speedup_vs_cusparse": cusp / hp,
            "speedup_vs_rows": rows_ms / hp, "rel_err_vs_cusparse": err,
            "sweep": sweep.iter().map(|(n, ms)| serde_json::json!({"npw": n, "ms": ms})).collect::<Vec<_>>(),
        }));
    }
    Ok(serde_json::json!({
        "graph": {"nodes": a.n_rows(), "nnz": nnz, "max_row": a.degree_stats().max, "scale": cfg.scale,
                  "reorder": cfg.reorder, "reorder_s": reorder_s, "community_order": cfg.community_order},
        "reps": cfg.reps, "timing": TIMING,
        "kernel_policy": g.policy(), "kernels_used": g.kernels_used(),
        "rows": rows,
    }))
}
