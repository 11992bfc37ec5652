//! The attention building blocks: edge softmax against naive per-row sums (forward and
//! backward, empty rows, a huge row, single-edge rows), and GAT's multi-head attention composed
//! from them on a head-expanded graph (scores by SDDMM, LeakyReLU, edge softmax, weighted SpMM)
//! against a dense per-node reference, with its gradient checked by finite differences; the
//! fused `gat_attention` op against that composed chain (values and both score gradients).

use candle_core::{DType, Device, Tensor, Var};
use gnn_graph::Csr;
use gnn_kernels::{edge_softmax, gat_attention, sddmm, spmm_weighted, DeviceGraph, Reduce};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus as R;

mod common;
use common::to_f64;

fn graph(n: usize, avg: usize, huge: usize, seed: u64) -> Csr {
    let mut r = R::seed_from_u64(seed);
    let mut indptr = vec![0u32];
    let mut indices = Vec::new();
    for i in 0..n {
        let len = match i {
            1 => huge,
            _ if i % 5 == 4 => 0,
            _ if i % 7 == 3 => 1,
            _ => r.random_range(1..=2 * avg),
        };
        let mut row: Vec<u32> = (0..len).map(|_| r.random_range(0..n as u32)).collect();
        row.sort_unstable();
        indices.extend(row);
        indptr.push(indices.len() as u32);
    }
    Csr::new_checked(n, n, indptr, indices).unwrap()
}

fn rand_vec(n: usize, seed: u64, scale: f64) -> Vec<f64> {
    let mut r = R::seed_from_u64(seed);
    (0..n).map(|_| scale * r.random_range(-1.0..1.0)).collect()
}

#[test]
fn edge_softmax_matches_naive_rows() {
    let dev = Device::Cpu;
    for (n, avg, huge) in [(1, 1, 0), (40, 4, 0), (60, 3, 2_000)] {
        let csr = graph(n, avg, huge, n as u64);
        let g = DeviceGraph::upload(&csr, &dev).unwrap();
        // Large scores: a naive exp would overflow without the max subtraction.
        let s0 = rand_vec(csr.nnz(), 1, 300.0);
        let s = Var::from_tensor(&Tensor::from_vec(s0.clone(), csr.nnz(), &dev).unwrap()).unwrap();
        let a = edge_softmax(&g, s.as_tensor()).unwrap();
        let d0 = rand_vec(csr.nnz(), 2, 1.0);
        let d = Tensor::from_vec(d0.clone(), csr.nnz(), &dev).unwrap();
        let grads = (&a * &d).unwrap().sum_all().unwrap().backward().unwrap();
        let (got, ds) = (to_f64(&a), to_f64(grads.get(s.as_tensor()).unwrap()));
        for i in 0..n {
            let r = csr.row_range(i);
            let m = s0[r.clone()]
                .iter()
                .cloned()
                .fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = s0[r.clone()].iter().map(|v| (v - m).exp()).sum();
            let want: Vec<f64> = s0[r.clone()].iter().map(|v| (v - m).exp() / z).collect();
            let t: f64 = want.iter().zip(&d0[r.clone()]).map(|(a, d)| a * d).sum();
            for (q, p) in r.enumerate() {
                assert!((got[p] - want[q]).abs() < 1e-12, "row {i} edge {p}");
                let wd = want[q] * (d0[p] - t);
                assert!((ds[p] - wd).abs() < 1e-12, "row {i} edge {p} grad");
            }
            if !want.is_empty() {
                assert!((want.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            }
        }
    }
    let csr = graph(5, 2, 0, 3);
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let bad = Tensor::zeros(csr.nnz() + 1, DType::F32, &dev).unwrap();
    let e = edge_softmax(&g, &bad).unwrap_err().to_string();
    assert!(e.contains("one per edge"), "{e}");
}

/// GAT's attention for `heads` heads of width `f` on `csr` (with self loops), from the ops.
fn gat_layer(csr: &Csr, xw: &Tensor, att_src: &Tensor, att_dst: &Tensor, heads: usize) -> Tensor {
    let dev = xw.device();
    let n = csr.n_rows();
    let f = xw.dims()[1] / heads;
    let gh = DeviceGraph::upload(&csr.expand_heads(heads).unwrap(), dev).unwrap();
    let x3 = xw.reshape((n, heads, f)).unwrap();
    // Per (node, head) scores, flattened to the expanded graph's rows.
    let s_src = x3
        .broadcast_mul(&att_src.unsqueeze(0).unwrap())
        .unwrap()
        .sum(2)
        .unwrap();
    let s_dst = x3
        .broadcast_mul(&att_dst.unsqueeze(0).unwrap())
        .unwrap()
        .sum(2)
        .unwrap();
    let ones = Tensor::ones((n * heads, 1), xw.dtype(), dev).unwrap();
    // u_add_v as a K = 2 SDDMM: <[s_dst_i, 1], [1, s_src_j]> = s_dst_i + s_src_j.
    let a = Tensor::cat(&[&s_dst.reshape((n * heads, 1)).unwrap(), &ones], 1).unwrap();
    let b = Tensor::cat(&[&ones, &s_src.reshape((n * heads, 1)).unwrap()], 1).unwrap();
    let e = sddmm(&gh, &a, &b).unwrap();
    let e = (e.relu().unwrap() - (e.neg().unwrap().relu().unwrap() * 0.2).unwrap()).unwrap();
    let alpha = edge_softmax(&gh, &e).unwrap();
    let out = spmm_weighted(
        &gh,
        &xw.reshape((n * heads, f)).unwrap(),
        &alpha,
        Reduce::Sum,
    )
    .unwrap();
    out.reshape((n, heads * f)).unwrap()
}

#[test]
fn gat_attention_from_the_ops_matches_a_dense_reference() {
    let dev = Device::Cpu;
    let (n, heads, f) = (30, 3, 4);
    let mut csr = graph(n, 3, 0, 9);
    csr = csr
        .rebuild(gnn_graph::BuildOptions {
            self_loops: gnn_graph::SelfLoops::Add,
            ..Default::default()
        })
        .unwrap();
    let x0 = rand_vec(n * heads * f, 4, 1.0);
    let (as0, ad0) = (rand_vec(heads * f, 5, 1.0), rand_vec(heads * f, 6, 1.0));
    let xw = Tensor::from_vec(x0.clone(), (n, heads * f), &dev).unwrap();
    let att = |v: &[f64]| Tensor::from_vec(v.to_vec(), (heads, f), &dev).unwrap();
    let att_src = Var::from_tensor(&att(&as0)).unwrap();
    let out = gat_layer(&csr, &xw, att_src.as_tensor(), &att(&ad0), heads);
    // Dense reference.
    let reference = |as_: &[f64]| -> Vec<f64> {
        let mut o = vec![0f64; n * heads * f];
        for i in 0..n {
            for h in 0..heads {
                let s = |j: usize, att: &[f64]| -> f64 {
                    (0..f)
                        .map(|t| x0[(j * heads + h) * f + t] * att[h * f + t])
                        .sum()
                };
                let nb: Vec<usize> = csr.indices()[csr.row_range(i)]
                    .iter()
                    .map(|&j| j as usize)
                    .collect();
                let e: Vec<f64> = nb
                    .iter()
                    .map(|&j| {
                        let v = s(i, &ad0) + s(j, as_);
                        if v > 0.0 {
                            v
                        } else {
                            0.2 * v
                        }
                    })
                    .collect();
                let m = e.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = e.iter().map(|v| (v - m).exp()).sum();
                for (q, &j) in nb.iter().enumerate() {
                    let a = (e[q] - m).exp() / z;
                    for t in 0..f {
                        o[(i * heads + h) * f + t] += a * x0[(j * heads + h) * f + t];
                    }
                }
            }
        }
        o
    };
    let want = reference(&as0);
    let got = to_f64(&out);
    let err = got
        .iter()
        .zip(&want)
        .fold(0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(err < 1e-12, "forward differs by {err}");
    // d sum(out * w) / d att_src against central differences of the reference.
    let w0 = rand_vec(n * heads * f, 7, 1.0);
    let w = Tensor::from_vec(w0.clone(), (n, heads * f), &dev).unwrap();
    let grads = (&out * &w).unwrap().sum_all().unwrap().backward().unwrap();
    let g = to_f64(grads.get(att_src.as_tensor()).unwrap());
    let loss = |a: &[f64]| -> f64 { reference(a).iter().zip(&w0).map(|(x, y)| x * y).sum() };
    for q in 0..heads * f {
        let (mut up, mut dn) = (as0.clone(), as0.clone());
        up[q] += 1e-6;
        dn[q] -= 1e-6;
        let fd = (loss(&up) - loss(&dn)) / 2e-6;
        assert!(
            (g[q] - fd).abs() < 1e-6 * (1.0 + fd.abs()),
            "att_src[{q}]: {} vs {fd}",
            g[q]
        );
    }
}

#[test]
fn fused_gat_attention_equals_the_composed_chain() {
    let dev = Device::Cpu;
    for (n, avg, huge, seed) in [
        (1usize, 1usize, 0usize, 1u64),
        (50, 4, 0, 2),
        (80, 3, 3_000, 3),
    ] {
        let csr = graph(n, avg, huge, seed);
        let g = DeviceGraph::upload(&csr, &dev).unwrap();
        // Scores large enough that the softmax needs its row maximum and LeakyReLU both sides.
        let sd =
            Var::from_tensor(&Tensor::from_vec(rand_vec(n, seed + 10, 30.0), n, &dev).unwrap())
                .unwrap();
        let ss =
            Var::from_tensor(&Tensor::from_vec(rand_vec(n, seed + 20, 30.0), n, &dev).unwrap())
                .unwrap();
        let w = Tensor::from_vec(rand_vec(csr.nnz(), seed + 30, 1.0), csr.nnz(), &dev).unwrap();
        let fused = gat_attention(&g, sd.as_tensor(), ss.as_tensor(), 0.2).unwrap();
        let ones = Tensor::ones((n, 1), DType::F64, &dev).unwrap();
        let a = Tensor::cat(&[&sd.as_tensor().reshape((n, 1)).unwrap(), &ones], 1).unwrap();
        let b = Tensor::cat(&[&ones, &ss.as_tensor().reshape((n, 1)).unwrap()], 1).unwrap();
        let e = sddmm(&g, &a, &b).unwrap();
        let e = (e.relu().unwrap() - (e.neg().unwrap().relu().unwrap() * 0.2).unwrap()).unwrap();
        let chain = edge_softmax(&g, &e).unwrap();
        let grads = |t: &Tensor| {
            let gr = (t * &w).unwrap().sum_all().unwrap().backward().unwrap();
            (
                to_f64(gr.get(sd.as_tensor()).unwrap()),
                to_f64(gr.get(ss.as_tensor()).unwrap()),
            )
        };
        let close = |x: &[f64], y: &[f64], what: &str| {
            assert_eq!(x.len(), y.len());
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                assert!(
                    (p - q).abs() <= 1e-12 * (1.0 + q.abs()),
                    "{what}[{i}]: {p} vs {q} (n {n})"
                );
            }
        };
        close(&to_f64(&fused), &to_f64(&chain), "alpha");
        let (fd, fs) = grads(&fused);
        let (cd, cs) = grads(&chain);
        close(&fd, &cd, "ds_dst");
        close(&fs, &cs, "ds_src");
    }
    // Bad inputs are named.
    let csr = graph(6, 2, 0, 4);
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let s = Tensor::zeros(6, DType::F32, &dev).unwrap();
    let short = Tensor::zeros(5, DType::F32, &dev).unwrap();
    let e = gat_attention(&g, &s, &short, 0.2).unwrap_err().to_string();
    assert!(e.contains("s_src") && e.contains("[6]"), "{e}");
    let e = gat_attention(&g, &s, &s, 0.0).unwrap_err().to_string();
    assert!(e.contains("negative_slope"), "{e}");
    let s64 = Tensor::zeros(6, DType::F64, &dev).unwrap();
    assert!(gat_attention(&g, &s, &s64, 0.2).is_err());
}

/// The GAT aggregation by the chain the fused op replaces: the head-expanded graph,
/// `gat_attention`, the dropout factors (`keep`, edge-major `[nnz, heads]`) moved to the
/// expanded edge order, and the weighted SpMM.
fn gat_chain(
    csr: &Csr,
    xs: &Tensor,
    (s_dst, s_src): (&Tensor, &Tensor),
    heads: usize,
    keep: Option<&Tensor>,
) -> Tensor {
    let dev = xs.device();
    let (cols, hf) = xs.dims2().unwrap();
    let (n, w) = (csr.n_rows(), hf / heads);
    let gh = DeviceGraph::upload(&csr.expand_heads(heads).unwrap(), dev).unwrap();
    let flat = |t: &Tensor| t.flatten_all().unwrap();
    let mut alpha = gat_attention(&gh, &flat(s_dst), &flat(s_src), 0.2).unwrap();
    if let Some(k) = keep {
        // Expanded edge heads * indptr[i] + h * deg(i) + (p - indptr[i]) is edge p, head h.
        let mut order = vec![0u32; csr.nnz() * heads];
        for i in 0..n {
            let r = csr.row_range(i);
            for p in r.clone() {
                for h in 0..heads {
                    order[heads * r.start + h * r.len() + (p - r.start)] = (p * heads + h) as u32;
                }
            }
        }
        let order = Tensor::from_vec(order, csr.nnz() * heads, dev).unwrap();
        alpha = (alpha * flat(k).index_select(&order, 0).unwrap()).unwrap();
    }
    let x = xs.reshape((cols * heads, w)).unwrap();
    spmm_weighted(&gh, &x, &alpha, Reduce::Sum)
        .unwrap()
        .reshape((n, hf))
        .unwrap()
}

/// The fused GAT aggregation's CPU reference equals the head-expanded chain, values and the
/// gradients of xs and both score matrices, with and without attention dropout: square and
/// rectangular graphs (a partition's rows and halo columns), empty rows, a 3,000-edge row, and
/// head shapes of each lane layout the CUDA kernels pick (1 to 8 heads, 256 columns, 41
/// columns in one head). The CUDA kernels are held to this reference by `gpu_check`.
#[test]
fn fused_gat_aggregation_equals_the_head_expanded_chain() {
    use gnn_kernels::{dropout, gat_aggregate, gat_aggregate_supports};
    let dev = Device::Cpu;
    let cases = [
        (1, 1, 1, 0, 1, 1),
        (50, 50, 4, 0, 8, 8),
        (60, 60, 3, 3_000, 1, 41),
        (40, 70, 5, 0, 2, 16),
        (30, 30, 3, 0, 4, 2),
        (20, 25, 3, 200, 8, 32),
    ];
    for (c, &(n, m, avg, huge, heads, w)) in cases.iter().enumerate() {
        assert!(gat_aggregate_supports(heads, w));
        let csr = common::graph(n, m, avg, huge, c as u64);
        let g = DeviceGraph::upload(&csr, &dev).unwrap();
        let hf = heads * w;
        let t = |v: Vec<f64>, shape: (usize, usize)| Tensor::from_vec(v, shape, &dev).unwrap();
        let xs = Var::from_tensor(&t(rand_vec(m * hf, 10 + c as u64, 1.0), (m, hf))).unwrap();
        let sd = Var::from_tensor(&t(rand_vec(n * heads, 20 + c as u64, 3.0), (n, heads))).unwrap();
        let ss = Var::from_tensor(&t(rand_vec(m * heads, 30 + c as u64, 3.0), (m, heads))).unwrap();
        let weight = t(rand_vec(n * hf, 40 + c as u64, 1.0), (n, hf));
        // Both score layouts: the two sides packed from row 0 (`gat_score_pair`), and the
        // destinations from row 3 of a longer tensor (a partition's own rows in its columns).
        for (p, dst) in [(0.0f32, 0usize), (0.5, 0), (0.5, 3)] {
            let seed = 99 + c as u64;
            let scores = (sd.as_tensor(), ss.as_tensor());
            let packed = if dst == 0 {
                gnn_kernels::gat_score_pair(ss.as_tensor(), sd.as_tensor()).unwrap()
            } else {
                let len = m.max(n + dst) + 2;
                let pad = |t: &Tensor, before: usize, rows: usize| {
                    t.pad_with_zeros(0, before, len - before - rows).unwrap()
                };
                Tensor::stack(&[pad(ss.as_tensor(), 0, m), pad(sd.as_tensor(), dst, n)], 0).unwrap()
            };
            let mask = (p > 0.0).then_some((p, seed));
            let fused = gat_aggregate(&g, xs.as_tensor(), &packed, dst, heads, 0.2, mask).unwrap();
            let ones = Tensor::ones((csr.nnz(), heads), DType::F64, &dev).unwrap();
            let keep = (p > 0.0).then(|| dropout(&ones, p, seed).unwrap());
            let chain = gat_chain(&csr, xs.as_tensor(), scores, heads, keep.as_ref());
            let (a, b) = (to_f64(&fused), to_f64(&chain));
            let what = format!("case {c} p {p} dst {dst}");
            for (k, (x, y)) in a.iter().zip(&b).enumerate() {
                assert!(
                    (x - y).abs() < 1e-10 * (1.0 + y.abs()),
                    "{what} out[{k}]: {x} vs {y}"
                );
            }
            let grads = |o: &Tensor| {
                (o * &weight)
                    .unwrap()
                    .sum_all()
                    .unwrap()
                    .backward()
                    .unwrap()
            };
            let (gf, gc) = (grads(&fused), grads(&chain));
            for (v, name) in [(&xs, "xs"), (&sd, "s_dst"), (&ss, "s_src")] {
                let (x, y) = (
                    to_f64(gf.get(v.as_tensor()).unwrap()),
                    to_f64(gc.get(v.as_tensor()).unwrap()),
                );
                let scale = y.iter().fold(1.0f64, |a, v| a.max(v.abs()));
                for (k, (x, y)) in x.iter().zip(&y).enumerate() {
                    assert!(
                        (x - y).abs() < 1e-10 * scale,
                        "{what} d{name}[{k}]: {x} vs {y}"
                    );
                }
            }
        }
    }
}

/// Shapes outside the fused kernels and malformed inputs are refused with what is wrong.
#[test]
fn gat_aggregation_refuses_what_it_cannot_run() {
    use gnn_kernels::{gat_aggregate, gat_aggregate_supports};
    let dev = Device::Cpu;
    assert!(!gat_aggregate_supports(3, 8));
    assert!(!gat_aggregate_supports(16, 8));
    assert!(!gat_aggregate_supports(8, 40));
    assert!(!gat_aggregate_supports(4, 12));
    let csr = common::graph(6, 6, 2, 0, 1);
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let z = |r: usize, c: usize| Tensor::zeros((r, c), DType::F32, &dev).unwrap();
    let s = |m: usize, h: usize| Tensor::zeros((2, m, h), DType::F32, &dev).unwrap();
    let err = |x: &Tensor, scores: &Tensor, dst: usize, heads: usize| {
        gat_aggregate(&g, x, scores, dst, heads, 0.2, None)
            .unwrap_err()
            .to_string()
    };
    let e = err(&z(6, 24), &s(6, 3), 0, 3);
    assert!(e.contains("3 heads of width 8"), "{e}");
    let e = err(&z(5, 16), &s(6, 2), 0, 2);
    assert!(e.contains("xs has 5 rows"), "{e}");
    let e = err(&z(6, 16), &s(6, 4), 0, 2);
    assert!(e.contains("scores are [2, 6, 4]"), "{e}");
    let e = err(&z(6, 16), &s(5, 2), 0, 2);
    assert!(e.contains("scores are [2, 5, 2]"), "{e}");
    let e = err(&z(6, 16), &s(6, 2), 1, 2);
    assert!(e.contains("dst 1 + 6 rows"), "{e}");
    let e = err(&z(6, 16), &s(7, 2).to_dtype(DType::BF16).unwrap(), 0, 2);
    assert!(e.contains("scores are BF16"), "{e}");
    let e = err(&z(6, 15), &s(6, 2), 0, 2);
    assert!(e.contains("not a multiple of 2 heads"), "{e}");
    let x = z(6, 16);
    let e = gat_aggregate(&g, &x, &s(6, 2), 0, 2, -1.0, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("negative_slope"), "{e}");
    let e = gat_aggregate(&g, &x, &s(6, 2), 0, 2, 0.2, Some((1.0, 0)))
        .unwrap_err()
        .to_string();
    assert!(e.contains("drop probability"), "{e}");
}
