//! The partitioned products against the whole graph's, on ranks as threads.

use super::*;
use crate::LocalComm;
use candle_core::{DType, Var};
use gnn_graph::{BuildOptions, Coo};
use gnn_kernels::{spmm, spmm_weighted, DeviceGraph, Reduce};

fn graph(n: usize, m: usize, seed: u64) -> Csr {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % n as u64) as u32
    };
    // A hub (row 0 reaches a third of the nodes) plus random edges, and isolated nodes
    // (no edges beyond the self loop) at the end.
    let mut src: Vec<u32> = (1..n as u32 / 3).collect();
    let mut dst = vec![0u32; src.len()];
    for _ in 0..m {
        let (a, b) = (next(), next());
        if (a as usize) < n - 5 && (b as usize) < n - 5 {
            src.push(a);
            dst.push(b);
        }
    }
    Coo::new(n, src, dst)
        .unwrap()
        .to_csr(BuildOptions::undirected_self_loops())
        .unwrap()
}

/// Runs `f(local graph, its structure under the exchange, exchange)` on `parts` threads
/// and returns the results.
fn on_ranks<R: Send>(
    g: &Csr,
    parts: usize,
    exchange: Exchange,
    f: impl Fn(&LocalGraph, &DeviceGraph, &HaloExchange) -> R + Sync,
) -> Vec<R> {
    let part = RowPartition::balanced_by_nnz(g, parts).unwrap();
    LocalComm::run_group(parts, |c| {
        let local = LocalGraph::build(g, &part, c.rank()).unwrap();
        let comm: Arc<dyn Communicator> = Arc::new(c);
        let h = HaloExchange::with(exchange, &local, &part, comm, &Device::Cpu).unwrap();
        assert_eq!(h.kind(), exchange);
        let lg = h.local_csr(&local).unwrap();
        let lg = DeviceGraph::upload(&lg, &Device::Cpu).unwrap();
        f(&local, &lg, &h)
    })
}

fn close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
            "{what}[{i}]: {x} vs {y}"
        );
    }
}

/// `y = Â x` over the whole graph and `d(sum(y * w))/dx`: the reference.
fn whole_graph(
    g: &Csr,
    x: &Tensor,
    w: &Tensor,
    vals: Option<&Tensor>,
    reduce: Reduce,
) -> (Tensor, Tensor) {
    let whole = DeviceGraph::upload(g, x.device()).unwrap();
    let xv = Var::from_tensor(x).unwrap();
    let y = match vals {
        Some(v) => spmm_weighted(&whole, &xv, v, reduce).unwrap(),
        None => spmm(&whole, &xv, reduce).unwrap(),
    };
    let grads = (&y * w).unwrap().sum_all().unwrap().backward().unwrap();
    let dx = grads.get(&xv).unwrap().clone();
    (y, dx)
}

/// One rank's `(rows, y, dx)`: `y = aggregate(its rows of x)`, `dx` of `sum(y * w)`.
fn rank_pass(
    local: &LocalGraph,
    x: &Tensor,
    w: &Tensor,
    aggregate: impl FnOnce(&Tensor) -> Tensor,
) -> (std::ops::Range<usize>, Tensor, Tensor) {
    let r = local.rows.clone();
    let xl = Var::from_tensor(&x.narrow(0, r.start, r.len()).unwrap()).unwrap();
    let y = aggregate(&xl);
    let wl = w.narrow(0, r.start, r.len()).unwrap();
    let grads = (&y * &wl).unwrap().sum_all().unwrap().backward().unwrap();
    let dx = grads.get(&xl).unwrap().clone();
    (r, y, dx)
}

/// Every rank's rows of `y` and `dx` against the whole graph's.
fn check_ranks(
    got: Vec<(std::ops::Range<usize>, Tensor, Tensor)>,
    y: &Tensor,
    dx: &Tensor,
    what: &str,
) {
    let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    for (r, y_l, dx_l) in got {
        let part = |t: &Tensor| flat(&t.narrow(0, r.start, r.len()).unwrap());
        let what = format!("{what} rows {r:?}");
        close(&flat(&y_l), &part(y), &what);
        close(&flat(&dx_l), &part(dx), &what);
    }
}

#[test]
fn partitioned_spmm_and_its_gradient_match_the_whole_graph() {
    let (n, d) = (120, 37);
    let g = graph(n, 500, 3);
    let dev = Device::Cpu;
    let x = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
    let w = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
    let vals = Tensor::randn(0f32, 1.0, g.nnz(), &dev).unwrap();
    for reduce in [Reduce::Sum, Reduce::Mean, Reduce::Max] {
        for weighted in [false, true] {
            let (y, dx) = whole_graph(&g, &x, &w, weighted.then_some(&vals), reduce);
            for (parts, exchange) in
                (1..=4).flat_map(|p| [Exchange::PointToPoint, Exchange::AllGather].map(|e| (p, e)))
            {
                let got = on_ranks(&g, parts, exchange, |local, lg, h| {
                    rank_pass(local, &x, &w, |xl| {
                        let full = h.forward(xl).unwrap();
                        // This rank's rows lie where own_rows says, unchanged.
                        let own = h.own_rows();
                        assert_eq!(own.len(), xl.dim(0).unwrap());
                        let mine = full.narrow(0, own.start, own.len()).unwrap();
                        let diff = (mine - xl).unwrap().abs().unwrap();
                        assert_eq!(diff.max_all().unwrap().to_scalar::<f32>().unwrap(), 0.0);
                        if weighted {
                            let v = vals
                                .narrow(0, local.edges.start, local.edges.len())
                                .unwrap();
                            spmm_weighted(lg, &full, &v, reduce).unwrap()
                        } else {
                            spmm(lg, &full, reduce).unwrap()
                        }
                    })
                });
                let what = format!("{reduce:?} weighted={weighted} P={parts} {exchange}");
                check_ranks(got, &y, &dx, &what);
            }
        }
    }
}

#[test]
fn symmetric_operand_of_a_graph_without_rows() {
    let g = Csr::empty(0, 0).unwrap();
    let dev = Device::Cpu;
    on_ranks(&g, 1, Exchange::AllGather, |local, _, h| {
        let op = h.symmetric_operand(local, None, 7, &dev).unwrap();
        assert_eq!((op.slice_count(), op.first_graph().n_rows()), (1, 0));
        let x = Tensor::zeros((0, 3), candle_core::DType::F32, &dev).unwrap();
        for reduce in [Reduce::Sum, Reduce::Mean] {
            let y = h.aggregate_symmetric(&op, &x, reduce).unwrap();
            assert_eq!(y.dims(), &[0, 3]);
        }
    });
}

#[test]
fn symmetric_aggregation_matches_the_whole_graph_both_ways() {
    let (n, d) = (120, 37);
    let g = graph(n, 500, 4);
    assert!(g.is_symmetric());
    let dev = Device::Cpu;
    let x = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
    let w = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
    // Symmetric edge values: a function of the unordered pair.
    let mut v = Vec::with_capacity(g.nnz());
    for i in 0..n {
        for &j in g.row(i) {
            let (a, b) = (i.min(j as usize) as f32, i.max(j as usize) as f32);
            v.push(((a * 0.37 + b * 0.11).sin() + 1.5) * 0.3);
        }
    }
    let vals = Tensor::from_vec(v.clone(), g.nnz(), &dev).unwrap();
    for reduce in [Reduce::Sum, Reduce::Mean] {
        for weighted in [false, true] {
            let (y, dx) = whole_graph(&g, &x, &w, weighted.then_some(&vals), reduce);
            // The whole local graph, and column slices: many small ones (some empty:
            // padding rows and rows of no edge), a few, and slices no wider than 1 row.
            for slice_rows in [None, Some(7), Some(45), Some(1)] {
                for parts in 1..=4 {
                    let got = on_ranks(&g, parts, Exchange::AllGather, |local, lg, h| {
                        let lv = weighted.then(|| &v[local.edges.clone()]);
                        let op = match slice_rows {
                            None => SymmetricOperand::whole(
                                lg.clone(),
                                lv.map(|v| Tensor::from_slice(v, v.len(), &dev).unwrap()),
                            ),
                            Some(r) => h.symmetric_operand(local, lv, r, &dev).unwrap(),
                        };
                        assert_eq!(op.first_graph().n_rows(), local.rows.len());
                        assert!(op.is_sliced() || op.slice_count() == 1);
                        // Cut at every rank's block: sliced from two ranks on.
                        let cut = slice_rows.is_some_and(|r| parts > 1 || r < n);
                        assert_eq!(op.is_sliced(), cut);
                        if matches!(slice_rows, Some(1 | 7)) {
                            assert!(op.slice_count() > 2, "{}", op.slice_count());
                        }
                        // Max has no transpose product: refused.
                        let xl = x.narrow(0, local.rows.start, local.rows.len()).unwrap();
                        assert!(h.aggregate_symmetric(&op, &xl, Reduce::Max).is_err());
                        rank_pass(local, &x, &w, |xl| {
                            h.aggregate_symmetric(&op, xl, reduce).unwrap()
                        })
                    });
                    check_ranks(
                        got,
                        &y,
                        &dx,
                        &format!(
                            "{reduce:?} weighted={weighted} P={parts} slices of {slice_rows:?}"
                        ),
                    );
                }
            }
        }
    }
    // The point-to-point exchange has no padded layout for it.
    let refused = on_ranks(&g, 2, Exchange::PointToPoint, |local, lg, h| {
        let xl = x.narrow(0, local.rows.start, local.rows.len()).unwrap();
        let op = SymmetricOperand::whole(lg.clone(), None);
        h.aggregate_symmetric(&op, &xl, Reduce::Sum).is_err()
            && h.symmetric_operand(local, None, 8, &dev).is_err()
    });
    assert!(refused.into_iter().all(|e| e));
    // An operand of another rank's shape is refused, not read out of bounds.
    let refused = on_ranks(&g, 2, Exchange::AllGather, |local, _, h| {
        let other = graph(n, 200, 9);
        let wrong = SymmetricOperand::whole(DeviceGraph::upload(&other, &dev).unwrap(), None);
        let xl = x.narrow(0, local.rows.start, local.rows.len()).unwrap();
        h.aggregate_symmetric(&wrong, &xl, Reduce::Sum).is_err()
    });
    assert!(refused.into_iter().all(|e| e));
}

#[test]
fn feature_chunks_give_the_whole_width_product_bit_for_bit() {
    let (n, d) = (120, 37);
    let g = graph(n, 500, 6);
    let dev = Device::Cpu;
    let x = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
    let w = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
    let vals: Vec<f32> = (0..g.nnz()).map(|e| 0.5 + (e % 7) as f32 * 0.1).collect();
    let bits = |t: &Tensor| -> Vec<u32> {
        let v = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        v.iter().map(|x| x.to_bits()).collect()
    };
    for reduce in [Reduce::Sum, Reduce::Mean] {
        for (slice_rows, parts) in [(None, 1), (None, 3), (Some(45), 2), (Some(7), 4)] {
            let run = |chunk: Option<usize>| {
                on_ranks(&g, parts, Exchange::AllGather, |local, lg, h| {
                    let lv = &vals[local.edges.clone()];
                    let op = match slice_rows {
                        None => SymmetricOperand::whole(
                            lg.clone(),
                            Some(Tensor::from_slice(lv, lv.len(), &dev).unwrap()),
                        ),
                        Some(r) => h.symmetric_operand(local, Some(lv), r, &dev).unwrap(),
                    }
                    .with_feature_chunk(chunk);
                    assert_eq!(op.feature_chunk(), chunk.filter(|&c| c > 0));
                    let (_, y, dx) = rank_pass(local, &x, &w, |xl| {
                        h.aggregate_symmetric(&op, xl, reduce).unwrap()
                    });
                    (bits(&y), bits(&dx))
                })
            };
            let whole = run(None);
            // Uneven chunks (the last one narrower), one column, the whole width and more.
            for chunk in [Some(5), Some(1), Some(16), Some(37), Some(100), Some(0)] {
                assert_eq!(
                    run(chunk),
                    whole,
                    "{reduce:?} slices {slice_rows:?} P={parts} chunk {chunk:?}"
                );
            }
        }
    }
}

#[test]
fn cbsr_rows_travel_with_their_columns() {
    let (n, d, k) = (90, 40, 7);
    let g = graph(n, 300, 5);
    let dev = Device::Cpu;
    let x = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
    let whole = DeviceGraph::upload(&g, &dev).unwrap();
    let xv = Var::from_tensor(&x).unwrap();
    let y = gnn_kernels::spgemm(
        &whole,
        &gnn_kernels::maxk(&xv, k).unwrap(),
        None,
        Reduce::Sum,
    )
    .unwrap();
    let dx = y.sqr().unwrap().sum_all().unwrap().backward().unwrap();
    let dx = dx.get(&xv).unwrap().clone();
    let got: Vec<_> = [Exchange::PointToPoint, Exchange::AllGather]
        .into_iter()
        .flat_map(|ex| {
            on_ranks(&g, 3, ex, |local, lg, h| {
                let r = local.rows.clone();
                let xl = Var::from_tensor(&x.narrow(0, r.start, r.len()).unwrap()).unwrap();
                let c = h.forward_cbsr(&gnn_kernels::maxk(&xl, k).unwrap()).unwrap();
                assert_eq!(c.rows(), lg.csr().n_cols());
                assert_eq!(c.index().dtype(), DType::U8);
                let y = gnn_kernels::spgemm(lg, &c, None, Reduce::Sum).unwrap();
                let grads = y.sqr().unwrap().sum_all().unwrap().backward().unwrap();
                (r, y, grads.get(&xl).unwrap().clone())
            })
        })
        .collect();
    for (r, y_l, dx_l) in got {
        let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        close(
            &flat(&y_l),
            &flat(&y.narrow(0, r.start, r.len()).unwrap()),
            "spgemm",
        );
        close(
            &flat(&dx_l),
            &flat(&dx.narrow(0, r.start, r.len()).unwrap()),
            "dx",
        );
    }
}

/// Symmetric edge values of `g` (a function of the unordered pair), aligned with its entries.
fn symmetric_values(g: &Csr) -> Vec<f32> {
    let mut v = Vec::with_capacity(g.nnz());
    for i in 0..g.n_rows() {
        for &j in g.row(i) {
            let (a, b) = (i.min(j as usize) as f32, i.max(j as usize) as f32);
            v.push(((a * 0.37 + b * 0.11).sin() + 1.5) * 0.3);
        }
    }
    v
}

/// `Â x` on the host in f64 (`x` row-major `[n, d]`).
fn host_product(g: &Csr, v: &[f32], x: &[f32], d: usize) -> Vec<f64> {
    let mut y = vec![0f64; g.n_rows() * d];
    for i in 0..g.n_rows() {
        let r = g.row_range(i);
        for (&j, &w) in g.indices()[r.clone()].iter().zip(&v[r]) {
            for c in 0..d {
                y[i * d + c] += w as f64 * x[j as usize * d + c] as f64;
            }
        }
    }
    y
}

/// Every rank's selected rows (local ids) of the partition: one rank selects a single row,
/// the others every third, fifth or so row (one of them none at P = 3).
fn selections(part: &RowPartition) -> Vec<Vec<u32>> {
    (0..part.parts())
        .map(|q| {
            let len = part.range(q).len() as u32;
            match q {
                0 => (0..len).filter(|r| r % 3 == 1).collect(),
                1 => vec![len / 2],
                _ => Vec::new(),
            }
        })
        .collect()
}

#[test]
fn selected_aggregation_matches_the_dense_reference_both_ways() {
    let n = 97;
    let g = graph(n, 400, 11);
    assert!(g.is_symmetric());
    let v = symmetric_values(&g);
    let dev = Device::Cpu;
    for d in [5, 16] {
        let x: Vec<f32> = (0..n * d)
            .map(|i| ((i * 7919) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let y = host_product(&g, &v, &x, d);
        for parts in 1..=3 {
            let part = RowPartition::balanced_by_nnz(&g, parts).unwrap();
            let sel = selections(&part);
            // The output gradient: rank q's selected row k holds a value of (q, k).
            let dy_of = |q: usize, k: usize, c: usize| ((q * 31 + k * 7 + c) % 13) as f32 - 6.0;
            // Its dense reference: Âᵀ DY, DY holding each selected row's gradient at its node.
            let mut dy_all = vec![0f32; n * d];
            for (q, s) in sel.iter().enumerate() {
                for (k, &r) in s.iter().enumerate() {
                    let node = part.range(q).start + r as usize;
                    for c in 0..d {
                        dy_all[node * d + c] = dy_of(q, k, c);
                    }
                }
            }
            // Â is symmetric: Âᵀ DY = Â DY.
            let dx = host_product(&g, &v, &dy_all, d);
            let got = LocalComm::run_group(parts, |c| {
                let rank = c.rank();
                let local = LocalGraph::build(&g, &part, rank).unwrap();
                let comm: Arc<dyn Communicator> = Arc::new(c);
                let lv = &v[local.edges.clone()];
                let agg = SelectedAggregation::new(&local, lv, &part, &sel, comm, &dev).unwrap();
                assert_eq!(agg.rows(), &sel[rank][..]);
                assert_eq!(agg.block(), sel.iter().map(Vec::len).max().unwrap().max(1));
                let r = local.rows.clone();
                let xl =
                    Tensor::from_slice(&x[r.start * d..r.end * d], (r.len(), d), &dev).unwrap();
                let yl = agg.forward(&xl).unwrap();
                assert_eq!(agg.forward_calls(), 1);
                let m = sel[rank].len();
                let dyl: Vec<f32> = (0..m)
                    .flat_map(|k| (0..d).map(move |c| dy_of(rank, k, c)))
                    .collect();
                let dyl = Tensor::from_vec(dyl, (m, d), &dev).unwrap();
                let dxl = agg.backward(&dyl).unwrap();
                let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                (rank, r, flat(&yl), flat(&dxl))
            });
            for (rank, r, yl, dxl) in got {
                let what = format!("d={d} P={parts} rank {rank}");
                let want: Vec<f32> = sel[rank]
                    .iter()
                    .flat_map(|&s| {
                        let node = r.start + s as usize;
                        (0..d).map(move |c| node * d + c)
                    })
                    .map(|i| y[i] as f32)
                    .collect();
                close(&yl, &want, &format!("{what} forward"));
                let want: Vec<f32> = (r.start * d..r.end * d).map(|i| dx[i] as f32).collect();
                close(&dxl, &want, &format!("{what} backward"));
            }
        }
    }
}

#[test]
fn selected_aggregation_refuses_inconsistent_inputs() {
    let n = 40;
    let g = graph(n, 120, 12);
    let v = symmetric_values(&g);
    let dev = Device::Cpu;
    let part = RowPartition::balanced_by_nnz(&g, 2).unwrap();
    let errors = LocalComm::run_group(2, |c| {
        let local = LocalGraph::build(&g, &part, c.rank()).unwrap();
        let comm: Arc<dyn Communicator> = Arc::new(c);
        let lv = &v[local.edges.clone()];
        let new = |vals: &[f32], sel: &[Vec<u32>]| {
            SelectedAggregation::new(&local, vals, &part, sel, comm.clone(), &dev)
                .err()
                .map(|e| e.to_string())
        };
        let len = local.rows.len() as u32;
        let ok = vec![vec![0], vec![1]];
        [
            new(&lv[1..], &ok),
            new(lv, &[vec![0]]),
            new(lv, &[vec![2, 1], vec![0]]),
            new(lv, &[vec![len + 30], vec![len + 30]]),
        ]
        .map(|e| e.unwrap_or_default())
    });
    for e in errors.into_iter().flatten() {
        assert!(e.contains("invalid argument"), "{e}");
    }
}
