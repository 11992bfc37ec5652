//! SpMM benchmark on the Reddit-shaped graph (`gnn::kernels::verify::bench::spmm`): our CSR
//! kernels against cuSPARSE's CSR SpMM, same process, stream and operands, CUDA events after
//! warm-up, medians. Prints ms, GFLOP/s (2 nnz K / t) and our/cuSPARSE speed ratio, writes JSON.
//!
//! ```text
//! cargo run --release --features cuda,verify --example bench_spmm -- --json runs/bench_spmm.json
//! ```
//!
//! `--kernels` adds a table of our kernels each forced (GE-SpMM's row kernel, its narrow-row
//! kernel, HP-SpMM) and the dispatcher's pick, in f32 and bf16 storage, with each forced
//! kernel's largest difference from the row kernel's result.
//!
//! `--column-blocks 2,4` adds a table of the weighted SpMM run as B column blocks (each block
//! reads a 1/B slice of `x`; their outputs summed), against the one SpMM, f32 and bf16: the
//! locality question behind a partitioned aggregation that runs per owner's block.

use anyhow::{Context, Result};
use candle_core::Device;
use clap::builder::RangedU64ValueParser;
use clap::Parser;
use gnn::kernels::verify::bench::{spmm, SpmmBench};
use std::path::PathBuf;

#[derive(Parser)]
struct Args {
    /// Node scale of the synthetic Reddit graph (1 = 232,965 nodes, ~114.6 M edges).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Feature widths.
    #[arg(long, value_delimiter = ',', default_value = "16,32,64,128,256,602")]
    k: Vec<usize>,
    /// Timed repetitions (after 3 warm-ups).
    #[arg(long, default_value_t = 20, value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    reps: usize,
    /// Also time every compiled tile shape and block order of our kernel (tuning data).
    #[arg(long)]
    sweep: bool,
    /// Also time each of our kernels forced, f32 and bf16 (dispatcher data).
    #[arg(long)]
    kernels: bool,
    /// Also time the SpMM cut into this many column blocks (comma-separated counts, each >= 1).
    #[arg(long, value_delimiter = ',', value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    column_blocks: Vec<usize>,
    /// JSON output.
    #[arg(long, default_value = "runs/bench_spmm.json")]
    json: PathBuf,
    /// The kernel policy of the main rows (`--kernels` and `--sweep` force theirs).
    #[command(flatten)]
    policy: gnn::train::cli::KernelFlags,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let device = Device::new_cuda(0).context("no CUDA device")?;
    // Outputs come from the stream-ordered pool as in training: freed memory stays in the
    // pool instead of being unmapped at every synchronisation (which timed each call's
    // output allocation as page mapping).
    gnn::train::keep_freed_memory(&device)?;
    let bench = SpmmBench {
        scale: args.scale,
        k: args.k,
        reps: args.reps,
        sweep: args.sweep,
        kernels: args.kernels,
        column_blocks: args.column_blocks,
        policy: args.policy.policy(),
    };
    let doc = spmm(&bench, &device)?;
    gnn::train::report::write_json(&args.json, &doc)?;
    println!("wrote {}", args.json.display());
    Ok(())
}
