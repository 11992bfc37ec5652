//! The graph sweep: SpMM and SDDMM on 26 graphs from 13 K to 324 M non-zeros (power-law,
//! flat, skewed, sparse and mesh-like), each at several widths K and storage precisions, ours
//! against cuSPARSE in the same process on the same operands, every timing beside its floors,
//! and the SpMM dispatcher judged: its pick, each candidate kernel's time, the fastest, the
//! pick's regret, and a summary over the sweep (`gnn_train::bench::graphs` says which graphs
//! and kernels).
//!
//! CUDA events on candle's stream, medians after warm-up. Prints a table, writes JSON, a
//! Markdown table and an SVG chart (regrets and speed-ups against non-zeros).
//!
//! ```text
//! cargo run --release --features cuda,verify --example bench_graphs -- --out runs/bench_graphs
//! # the dispatcher's data (bench/suites/dispatch.toml): K = 1..602, f32 and bf16, no peers
//! cargo run --release --features cuda,verify --example bench_graphs -- \
//!     --k 1,2,4,8,16,32,64,128,256,602 --precision f32,bf16 --dispatch-only
//! ```

use anyhow::Result;
use clap::Parser;
use gnn::train::bench::graphs::{run, GraphsBench};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    bench: GraphsBench,
}

fn main() -> Result<()> {
    run(&Args::parse().bench)?;
    Ok(())
}
