//! SDDMM benchmark on the Reddit-shaped graph (`gnn::kernels::verify::bench::sddmm`; A + I,
//! the attention layers' pattern): our HP-SDDMM (DTP's partition, and with `--sweep` every
//! edges-per-warp candidate) and our row-per-warp kernel against cuSPARSE's CSR SDDMM, same
//! process, stream and operands; CUDA events, medians after warm-up. `--dump DIR` also writes
//! the graph's CSR (`indptr.npy`, `indices.npy`) for `bench/peers/torch_sddmm.py`, which times
//! PyTorch's gather formulation `(A[row] * B[col]).sum(-1)` on the same structure.
//!
//! ```text
//! cargo run --release --features cuda,verify --example bench_sddmm -- --json runs/bench_sddmm.json
//! ```

use anyhow::{Context, Result};
use candle_core::Device;
use clap::Parser;
use gnn::kernels::verify::bench::{sddmm, SddmmBench};
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
    /// Renumber the nodes first: none, degree, rcm, louvain, auto (degree from a million
    /// nodes; the cost is printed).
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
    // Outputs come from the stream-ordered pool as in training: freed memory stays in the
    // pool instead of being unmapped at every synchronisation (which timed each call's
    // output allocation as page mapping).
    gnn::train::keep_freed_memory(&device)?;
    let bench = SddmmBench {
        scale: args.scale,
        k: args.k,
        reps: args.reps,
        sweep: args.sweep,
        dump: args.dump,
        reorder: args.reorder,
        community_order: args.community_order,
        policy: args.kernels.policy(),
    };
    let doc = sddmm(&bench, &device)?;
    gnn::train::report::write_json(&args.json, &doc)?;
    println!("wrote {}", args.json.display());
    Ok(())
}
