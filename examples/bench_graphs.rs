//! The graph sweep of the HP-SpMM/HP-SDDMM issue: SpMM and SDDMM on ~20 graphs from ~10 K to
//! 100 M+ non-zeros, each at several widths K, ours against cuSPARSE in the same process on
//! the same operands (`gnn_train::bench::graphs` says which graphs and kernels).
//!
//! CUDA events on candle's stream, medians after warm-up. Prints a table, writes JSON, a
//! Markdown table and an SVG chart (speed-ups against non-zeros).
//!
//! ```text
//! cargo run --release --features cuda,verify --example bench_graphs -- --out runs/bench_graphs
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
