//! Graph structure on the device: the transpose's permutation and symmetry verdict.

use crate::error::Result;
use crate::verify::{random_graph, Checker};
use crate::DeviceGraph;
use candle_core::{Device, Tensor};
use gnn_graph::Csr;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// [`DeviceGraph::transpose`]'s edge permutation on the device graph against the host
/// counting sort's (exact), and its symmetry verdict against the host's.
pub(super) fn check_transpose(c: &mut Checker, gname: &str, csr: &Csr, gpu: &Device) -> Result<()> {
    let (_, want) = csr.transpose()?;
    let want = Tensor::from_vec(want, csr.nnz(), &Device::Cpu)?;
    let g = DeviceGraph::upload(csr, gpu)?;
    let (_, perm) = g.transpose()?;
    c.check(gname, "transpose permutation".into(), 0, &perm, &want, 0.0)?;
    let (dev, host) = (g.is_symmetric()?, csr.is_symmetric());
    let op = format!("transpose is itself: {dev} (host {host})");
    c.record(
        gname,
        op,
        0,
        (dev != host) as u8 as f64,
        0.0,
        dev == host,
        "",
    );
    Ok(())
}

/// The transpose's edge permutation (the device search for symmetric structures, else the
/// host counting sort) on symmetric graphs with self loops, empty rows and a hub row, and on
/// the unsorted / rectangular / directed ones that must take the host path; the symmetric
/// ones also run the fused layers.
pub(super) fn check_structures(
    c: &mut Checker,
    (g2, g3): (&Csr, &Csr),
    gpu: &Device,
    seed: u64,
) -> Result<()> {
    let sym = |csr: &Csr| {
        csr.rebuild(gnn_graph::BuildOptions {
            symmetrize: true,
            self_loops: gnn_graph::SelfLoops::Add,
            ..Default::default()
        })
    };
    let g4 = random_graph(c, 3000, 3000, 8, 50_000, 4)?;
    let directed = g3.rebuild(gnn_graph::BuildOptions::default())?;
    // Edges among the first 1,000 of 2,000 nodes: rows 1,000.. are empty.
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x7a);
    let (src, dst): (Vec<u32>, Vec<u32>) = (0..6_000)
        .map(|_| (r.random_range(0..1000u32), r.random_range(0..1000u32)))
        .unzip();
    let half_isolated =
        gnn_graph::Coo::new(2000, src, dst)?.to_csr(gnn_graph::BuildOptions::undirected())?;
    for (gname, csr) in [
        ("sym-hub-row", sym(&g4)?),
        ("sym-half-isolated", half_isolated),
        (
            "sym-no-loops",
            g3.rebuild(gnn_graph::BuildOptions::undirected())?,
        ),
        ("unsorted-dup", g3.clone()),
        ("directed-sorted", directed),
        ("random-rect", g2.clone()),
    ] {
        check_transpose(c, gname, &csr, gpu)?;
        if csr.n_rows() == csr.n_cols() && gname.starts_with("sym") {
            super::layers::check_aggregate_layer(c, gname, &csr, gpu)?;
            super::layers::check_maxk_layer(c, gname, &csr, gpu)?;
        }
    }
    Ok(())
}
