//! MaxK-GNN kernels on the Reddit-shaped graph at width D (default 256): MaxK (selection +
//! CBSR gather), forward SpGEMM and backward SSpMM for each k, against cuSPARSE's CSR SpMM
//! and our exact SpMM at K = D on the same graph and GCN-normalised values (same process, same
//! stream, CUDA events, medians after warm-up). Prints a table, writes JSON and an SVG chart.
//!
//! ```text
//! cargo run --release --features cuda,verify --example bench_maxk -- --out runs/bench_maxk
//! ```

use anyhow::Result;
use clap::Parser;
use gnn::train::bench::maxk::{run, MaxkBench};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    bench: MaxkBench,
}

fn main() -> Result<()> {
    run(&Args::parse().bench)?;
    Ok(())
}
