//! GPU correctness check: every sparse op and its backward on the CUDA device against the CPU
//! implementation, with the bounds `gnn::kernels::verify` documents. Prints a table of
//! relative errors, writes JSON, exits non-zero on any miss (replay with the printed seed).
//!
//! ```text
//! cargo run --release --features cuda,verify --example gpu_check -- --json gpu_check.json
//! cargo run --release --features cuda,verify --example gpu_check -- --seed 14 --deterministic
//! ```

use anyhow::{bail, Context, Result};
use candle_core::Device;
use clap::Parser;
use gnn::kernels::verify::{self, Checker};
use std::path::PathBuf;

#[derive(Parser)]
struct Args {
    /// Seed of every random input (graphs, features, edge values); a miss is replayed by
    /// running again with the seed it printed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Node scale of the synthetic Reddit graph checked at the end (1 = full size; 0 skips it).
    #[arg(long, default_value_t = 1.0)]
    reddit_scale: f64,
    /// JSON output.
    #[arg(long, default_value = "runs/gpu_check.json")]
    json: PathBuf,
    /// Check the deterministic-mode kernels (every graph under a deterministic
    /// `gnn_kernels::KernelPolicy`): no float atomics in the sums, max/min backward refused
    /// (skipped here).
    #[arg(long)]
    deterministic: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let policy = gnn::kernels::KernelPolicy::default().with_deterministic(args.deterministic);
    let gpu = Device::new_cuda(0).context("no CUDA device")?;
    // The pool keeps the driver's release threshold here (no `keep_freed_memory`): a freed
    // output is not handed straight to the next kernel under test, so a kernel that skips
    // rows does not inherit a correct candidate's results.
    let det = if args.deterministic {
        "; deterministic kernels"
    } else {
        ""
    };
    println!("seed {0} (replay a miss with --seed {0}){det}", args.seed);
    let mut c = Checker::new(args.seed).with_policy(policy);
    verify::run(&mut c, &gpu, args.reddit_scale, args.seed)?;
    let misses = c.misses();
    println!(
        "{} checks, {misses} misses; worst toleranced relative error {:.2e}; exact checks: {}",
        c.rows.len(),
        c.worst(),
        c.rows.iter().filter(|r| r.bound == 0.0).count()
    );
    let doc = serde_json::json!({
        "device": "cuda:0", "seed": args.seed, "deterministic": args.deterministic,
        "kernel_policy": policy,
        "checks": c.rows, "misses": misses,
    });
    gnn::train::report::write_json(&args.json, &doc)?;
    if misses > 0 {
        bail!(
            "{misses} checks missed their bound (replay: gpu_check --seed {})",
            args.seed
        );
    }
    Ok(())
}
