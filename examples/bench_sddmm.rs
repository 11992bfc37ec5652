//! SDDMM benchmark on the Reddit-shaped graph (A + I, the attention layers' pattern): our
//! HP-SDDMM (DTP's partition, and with `--sweep` every edges-per-warp candidate) and our
//! row-per-warp kernel against cuSPARSE's CSR SDDMM through cudarc, same process, same
//! stream, same operands; CUDA events, medians after warm-up. `--dump DIR` also writes the
//! graph's CSR (`indptr.npy`, `indices.npy`) for `bench/peers/torch_sddmm.py`, which times
//! PyTorch's gather formulation `(A[row] * B[col]).sum(-1)` on the same structure.
//!
//! ```text
//! cargo run --release --features cuda,verify --example bench_sddmm -- --json runs/bench_sddmm.json
//! ```

use anyhow::{Context, Result};
use candle_core::{Device, Tensor};
use clap::Parser;
use gnn::graph::io::npz::{write_npy, NpyArray, NpyData};
use gnn::graph::{generate, SyntheticSpec};
use gnn::kernels::ops::sddmm::tuning::{auto_npw, SddmmKernel, NPW_CANDIDATES};
use gnn::kernels::peer::{gcn_operand, rel_diff, time_ms, CusparseSddmm};
use gnn::kernels::sddmm;
use gnn::train::report::{write_json, Table};
use std::path::PathBuf;

#[derive(Parser)]
struct Args {
    /// Node scale of the synthetic Reddit graph (1 = 232,965 nodes, ~114.6 M edges).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Feature widths.
    #[arg(long, value_delimiter = ',', default_value = "16,32,64,128,256")]
    k: Vec<usize>,
    /// Timed repetitions (after 3 warm-ups).
    #[arg(long, default_value_t = 20, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    reps: usize,
    /// Also time HP-SDDMM at every edges-per-warp candidate.
    #[arg(long)]
    sweep: bool,
    /// Write the CSR as .npy files here (for bench/peers/torch_sddmm.py).
    #[arg(long)]
    dump: Option<PathBuf>,
    /// Renumber the nodes first: none, degree, rcm, louvain (the cost is printed).
    #[arg(long, default_value = "none")]
    reorder: gnn::graph::Reorder,
    /// Generate the graph with ids numbered community by community (the ideal clustering
    /// order the generator knows; a bound for what a community reordering can buy).
    #[arg(long)]
    community_order: bool,
    /// JSON output.
    #[arg(long, default_value = "runs/bench_sddmm.json")]
    json: PathBuf,
    /// The kernel policy of the graph (the HP and rows columns force their SDDMM kernel).
    #[command(flatten)]
    kernels: gnn::train::cli::KernelFlags,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let device = Device::new_cuda(0).context("no CUDA device")?;
    let Device::Cuda(dev) = &device else {
        unreachable!("new_cuda returns a CUDA device")
    };
    let stream = dev.cuda_stream();
    let mut spec = SyntheticSpec::reddit().scaled(args.scale)?;
    spec.community_order = args.community_order;
    let (ds, rep) = generate(&spec, 0)?;
    println!("{rep}");
    let t = std::time::Instant::now();
    let graph = ds.graph.permute(&args.reorder.order(&ds.graph)?)?;
    let reorder_s = t.elapsed().as_secs_f64();
    println!("reorder {}: {reorder_s:.2} s", args.reorder);
    let (a, g, _) = gcn_operand(&graph, &device)?;
    let g = g.with_policy(args.kernels.policy());
    println!("kernels: {}", g.policy());
    drop((ds, graph));
    let nnz = a.nnz();
    if let Some(dir) = &args.dump {
        std::fs::create_dir_all(dir)?;
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
    let mut table = Table::new().right("K", 5);
    for h in [
        "HP ms", "npw", "rows ms", "cuSP ms", "HP GB/s", "vs cuSP", "vs rows", "rel err",
    ] {
        table = table.right(h, 9);
    }
    let mut rows = Vec::new();
    for &k in &args.k {
        let x = Tensor::randn(0f32, 1.0, (a.n_rows(), k), &device)?;
        let y = Tensor::randn(0f32, 1.0, (a.n_cols(), k), &device)?;
        let time_kernel = |kernel: SddmmKernel| -> Result<f64> {
            let gk = g.with_policy(g.policy().with_sddmm(kernel));
            Ok(time_ms(&stream, args.reps, || {
                sddmm(&gk, &x, &y)?;
                Ok(())
            })?)
        };
        let hp = time_kernel(SddmmKernel::Auto)?;
        let rows_ms = time_kernel(SddmmKernel::Rows)?;
        let sweep: Vec<(u32, f64)> = if args.sweep {
            NPW_CANDIDATES
                .into_iter()
                .map(|npw| Ok((npw, time_kernel(SddmmKernel::Hp(npw))?)))
                .collect::<Result<_>>()?
        } else {
            Vec::new()
        };
        let out = Tensor::zeros(nnz, candle_core::DType::F32, &device)?;
        let peer = CusparseSddmm::new(&g, &x, &y, &out, dev)?;
        let cusp = time_ms(&stream, args.reps, || peer.run())?;
        let ours = sddmm(&g, &x, &y)?;
        let err = rel_diff(&ours, &out)?;
        // DTP's choice, as the kernel computes it (the sweep row of the same npw matches).
        let npw = auto_npw(dev, nnz, k)?.map_or("-".to_string(), |n| n.to_string());
        // Bytes a perfect kernel moves: indices + output + each b row gathered once per edge
        // and each a row read once.
        let bytes = nnz as f64 * (8.0 + 4.0 * k as f64) + 4.0 * (a.n_rows() * k) as f64;
        let gbs = bytes / hp / 1e6;
        table.row(vec![
            k.to_string(),
            format!("{hp:.3}"),
            npw.clone(),
            format!("{rows_ms:.3}"),
            format!("{cusp:.3}"),
            format!("{gbs:.0}"),
            format!("{:.2}x", cusp / hp),
            format!("{:.2}x", rows_ms / hp),
            format!("{err:.1e}"),
        ]);
        rows.push(serde_json::json!({
            "k": k, "hp_ms": hp, "hp_npw": npw, "rows_ms": rows_ms, "cusparse_ms": cusp,
            "hp_effective_gb_s": gbs, "speedup_vs_cusparse": cusp / hp,
            "speedup_vs_rows": rows_ms / hp, "rel_err_vs_cusparse": err,
            "sweep": sweep.iter().map(|(n, ms)| serde_json::json!({"npw": n, "ms": ms})).collect::<Vec<_>>(),
        }));
    }
    print!("{}", table.text());
    let doc = serde_json::json!({
        "graph": {"nodes": a.n_rows(), "nnz": nnz, "max_row": a.degree_stats().max, "scale": args.scale,
                  "reorder": args.reorder, "reorder_s": reorder_s, "community_order": args.community_order},
        "reps": args.reps, "timing": "CUDA events on candle's stream, median after 3 warm-ups",
        "kernel_policy": g.policy(), "kernels_used": g.kernels_used(),
        "rows": rows,
    });
    write_json(&args.json, &doc)?;
    println!("wrote {}", args.json.display());
    Ok(())
}
