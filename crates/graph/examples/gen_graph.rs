//! Generates a synthetic dataset and reports the rate: directed non-zeros of the final CSR
//! per second, overall and per thread; optionally writes it in the binary CSR format and
//! times loading it back.
//!
//! ```text
//! cargo run --release -p gnn-graph --example gen_graph -- [PRESET] [--scale S] [--seed N]
//!     [--threads N] [--out DIR] [--digest]
//! ```
//!
//! `PRESET` is `reddit` (default) or `papers100m`; `--threads` sizes the rayon pool (default:
//! every core); `--out DIR` writes `DIR/graph.gnncsr` and loads it again; `--digest` prints
//! a hash of every array (graph, feature bits, labels, split: std's `DefaultHasher`), which
//! is the same for a seed whatever the thread count.

use gnn_graph::io::binary::{load_binary, write_dataset, FILE_NAME};
use gnn_graph::{generate, Dataset, Features, RowPtr, SyntheticSpec};
use std::error::Error;
use std::hash::Hasher;
use std::path::PathBuf;
use std::time::Instant;

fn main() -> Result<(), Box<dyn Error>> {
    let (mut preset, mut scale, mut seed, mut threads, mut out) =
        ("reddit".to_string(), 1.0, 0u64, 0usize, None::<PathBuf>);
    let mut digest = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--scale" => scale = value()?.parse()?,
            "--seed" => seed = value()?.parse()?,
            "--threads" => threads = value()?.parse()?,
            "--out" => out = Some(value()?.into()),
            "--digest" => digest = true,
            "-h" | "--help" => {
                println!(
                    "gen_graph [reddit|papers100m] [--scale S] [--seed N] [--threads N] \
                     [--out DIR] [--digest]"
                );
                return Ok(());
            }
            p if !p.starts_with('-') => preset = p.to_string(),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let threads = pool.current_num_threads();
    let spec = SyntheticSpec::preset(&preset)?.scaled(scale)?;
    let t = Instant::now();
    let (ds, report) = pool.install(|| generate(&spec, seed))?;
    let secs = t.elapsed().as_secs_f64();
    let nnz = ds.graph.nnz() as f64;
    println!("{report}");
    println!(
        "{} threads: {nnz:.0} non-zeros in {secs:.2} s = {:.1} M/s ({:.2} M/s per thread)",
        threads,
        nnz / secs / 1e6,
        nnz / secs / 1e6 / threads as f64
    );
    if digest {
        println!("digest {:016x}", hash(&ds));
    }
    if let Some(dir) = out {
        let file = dir.join(FILE_NAME);
        let t = Instant::now();
        write_dataset(
            &file,
            &ds,
            true,
            serde_json::to_value(&report)?,
            ds.graph.offset_width(),
        )?;
        let bytes = std::fs::metadata(&file)?.len() as f64;
        println!(
            "wrote {} ({:.2} GB) in {:.2} s",
            file.display(),
            bytes / 1e9,
            t.elapsed().as_secs_f64()
        );
        let t = Instant::now();
        let (back, _) = pool.install(|| load_binary(&file))?;
        let secs = t.elapsed().as_secs_f64();
        println!(
            "loaded it back in {secs:.2} s ({:.2} GB/s), checked and copied",
            bytes / secs / 1e9
        );
        if back.graph != ds.graph || back.features != ds.features || back.split != ds.split {
            return Err("the loaded dataset differs from the generated one".into());
        }
    }
    Ok(())
}

/// std's `DefaultHasher` (fixed keys) over every array of `ds`.
fn hash(ds: &Dataset) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    // u32 offsets hash as they always have; a graph past u32::MAX non-zeros hashes its u64s.
    match ds.graph.indptr() {
        RowPtr::U32(p) => p.iter().for_each(|&v| h.write_u32(v)),
        RowPtr::U64(p) => p.iter().for_each(|&v| h.write_u64(v)),
    }
    ds.graph.indices().iter().for_each(|&v| h.write_u32(v));
    if let Features::Dense(d) = &ds.features {
        d.data.iter().for_each(|v| h.write_u32(v.to_bits()));
    }
    ds.labels.iter().for_each(|&v| h.write_i32(v));
    let s = &ds.split;
    s.train
        .iter()
        .chain(&s.val)
        .chain(&s.test)
        .for_each(|&v| h.write_u32(v));
    h.finish()
}
