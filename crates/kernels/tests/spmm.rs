//! SpMM / SDDMM against the naive references and finite differences.

use candle_core::{DType, Device, Tensor, Var};
use gnn_graph::{BuildOptions, Coo, Csr};
use gnn_kernels::ops::spmm::reference::spmm_reference;
use gnn_kernels::{sddmm, sddmm_scaled, spmm, spmm_transposed, spmm_weighted, DeviceGraph, Reduce};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus as R;

mod common;
use common::{graph, to_f64};

const REDUCES: [Reduce; 4] = [Reduce::Sum, Reduce::Mean, Reduce::Max, Reduce::Min];

fn rand_vec(n: usize, seed: u64) -> Vec<f64> {
    let mut r = R::seed_from_u64(seed);
    (0..n).map(|_| r.random_range(-1.0..1.0)).collect()
}

fn max_rel_err(got: &[f64], want: &[f64]) -> f64 {
    let scale = want.iter().fold(1e-3f64, |m, v| m.max(v.abs()));
    got.iter()
        .zip(want)
        .fold(0.0, |m, (a, b)| m.max((a - b).abs() / scale))
}

#[test]
fn forward_matches_reference_over_shapes() {
    let dev = Device::Cpu;
    // (rows, cols, avg degree, huge row)
    let shapes = [
        (1, 1, 1, 0),
        (7, 9, 3, 0),
        (64, 40, 6, 0),
        (300, 300, 12, 0),
        (50, 2000, 4, 5000),
        (0, 5, 1, 0),
        (5, 0, 0, 0),
    ];
    for (si, &(nr, nc, avg, huge)) in shapes.iter().enumerate() {
        let csr = if nc == 0 {
            Csr::empty(nr, 0).unwrap()
        } else {
            graph(nr, nc, avg, huge, si as u64)
        };
        let g = DeviceGraph::upload(&csr, &dev).unwrap();
        for k in [1usize, 7, 16, 32, 33, 100] {
            let x = rand_vec(nc * k, 100 + k as u64);
            let v = rand_vec(csr.nnz(), 200 + k as u64);
            for dtype in [DType::F32, DType::F64] {
                let xt = Tensor::from_vec(x.clone(), (nc, k), &dev)
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap();
                let vt = Tensor::from_vec(v.clone(), csr.nnz(), &dev)
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap();
                let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
                for reduce in REDUCES {
                    let want = spmm_reference(&csr, &x, k, None, reduce);
                    let got = to_f64(&spmm(&g, &xt, reduce).unwrap());
                    let e = max_rel_err(&got, &want);
                    assert!(
                        e <= tol,
                        "{reduce:?} {dtype:?} shape {si} K={k}: rel err {e}"
                    );
                    let want = spmm_reference(&csr, &x, k, Some(&v), reduce);
                    let got = to_f64(&spmm_weighted(&g, &xt, &vt, reduce).unwrap());
                    let e = max_rel_err(&got, &want);
                    assert!(
                        e <= tol,
                        "weighted {reduce:?} {dtype:?} shape {si} K={k}: rel err {e}"
                    );
                }
            }
        }
    }
}

#[test]
fn empty_rows_give_zero_for_every_reduction() {
    let csr = Csr::new_checked(3, 2, vec![0, 0, 2, 2], vec![0, 1]).unwrap();
    let g = DeviceGraph::upload(&csr, &Device::Cpu).unwrap();
    let x = Tensor::new(&[[-3f32, -4.0], [-1.0, -2.0]], &Device::Cpu).unwrap();
    for reduce in REDUCES {
        let out = spmm(&g, &x, reduce).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(out[0], [0.0, 0.0], "{reduce:?}");
        assert_eq!(out[2], [0.0, 0.0], "{reduce:?}");
    }
    let max = spmm(&g, &x, Reduce::Max).unwrap().to_vec2::<f32>().unwrap();
    assert_eq!(
        max[1],
        [-1.0, -2.0],
        "all-negative rows keep their max, not 0"
    );
}

/// Gradient of `L = sum(f(x, v) * w)` by candle's backward vs central differences (f64).
fn check_grads(csr: &Csr, k: usize, reduce: Reduce, weighted: bool, seed: u64) {
    let dev = Device::Cpu;
    let g = DeviceGraph::upload(csr, &dev).unwrap();
    let (nr, nc) = (csr.n_rows(), csr.n_cols());
    let x0 = rand_vec(nc * k, seed);
    let v0 = rand_vec(csr.nnz(), seed + 1);
    let w = Tensor::from_vec(rand_vec(nr * k, seed + 2), (nr, k), &dev).unwrap();
    let loss = |x: &Tensor, v: &Tensor| -> Tensor {
        let out = if weighted {
            spmm_weighted(&g, x, v, reduce)
        } else {
            spmm(&g, x, reduce)
        }
        .unwrap();
        (out * &w).unwrap().sum_all().unwrap()
    };
    let xv = Var::from_tensor(&Tensor::from_vec(x0.clone(), (nc, k), &dev).unwrap()).unwrap();
    let vv = Var::from_tensor(&Tensor::from_vec(v0.clone(), csr.nnz(), &dev).unwrap()).unwrap();
    let grads = loss(xv.as_tensor(), vv.as_tensor()).backward().unwrap();
    let gx = to_f64(grads.get(xv.as_tensor()).unwrap());
    let h = 1e-6;
    let eval = |x: &[f64], v: &[f64]| -> f64 {
        let xt = Tensor::from_vec(x.to_vec(), (nc, k), &dev).unwrap();
        let vt = Tensor::from_vec(v.to_vec(), csr.nnz(), &dev).unwrap();
        loss(&xt, &vt).to_scalar::<f64>().unwrap()
    };
    for idx in 0..x0.len() {
        let (mut xp, mut xm) = (x0.clone(), x0.clone());
        xp[idx] += h;
        xm[idx] -= h;
        let fd = (eval(&xp, &v0) - eval(&xm, &v0)) / (2.0 * h);
        assert!(
            (fd - gx[idx]).abs() < 1e-6,
            "{reduce:?} weighted={weighted} dx[{idx}]: fd {fd} vs {}",
            gx[idx]
        );
    }
    if weighted {
        let gv = to_f64(grads.get(vv.as_tensor()).unwrap());
        for idx in 0..v0.len() {
            let (mut vp, mut vm) = (v0.clone(), v0.clone());
            vp[idx] += h;
            vm[idx] -= h;
            let fd = (eval(&x0, &vp) - eval(&x0, &vm)) / (2.0 * h);
            assert!(
                (fd - gv[idx]).abs() < 1e-6,
                "{reduce:?} dv[{idx}]: fd {fd} vs {}",
                gv[idx]
            );
        }
    } else {
        assert!(grads.get(vv.as_tensor()).is_none());
    }
}

#[test]
fn gradients_match_finite_differences() {
    let square = graph(12, 12, 3, 0, 7);
    let rect = graph(9, 14, 2, 30, 8);
    for reduce in REDUCES {
        for weighted in [false, true] {
            check_grads(&square, 5, reduce, weighted, 11);
            check_grads(&rect, 3, reduce, weighted, 12);
        }
    }
}

#[test]
fn max_ties_send_gradient_to_first_edge_only() {
    let csr = Csr::new_checked(1, 3, vec![0, 3], vec![2, 0, 1]).unwrap();
    let g = DeviceGraph::upload(&csr, &Device::Cpu).unwrap();
    let x = Var::new(&[[5f32], [5.0], [1.0]], &Device::Cpu).unwrap();
    let out = spmm(&g, x.as_tensor(), Reduce::Max).unwrap();
    assert_eq!(out.to_vec2::<f32>().unwrap(), [[5.0]]);
    let grads = out.sum_all().unwrap().backward().unwrap();
    // row order is [2, 0, 1]: edge 1 (column 0) is the first 5
    assert_eq!(
        grads.get(x.as_tensor()).unwrap().to_vec2::<f32>().unwrap(),
        [[1.0], [0.0], [0.0]]
    );
}

#[test]
fn sddmm_matches_reference_and_gradients() {
    let dev = Device::Cpu;
    let csr = graph(20, 15, 4, 40, 3);
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let k = 33;
    let a0 = rand_vec(20 * k, 1);
    let b0 = rand_vec(15 * k, 2);
    let a = Var::from_tensor(&Tensor::from_vec(a0.clone(), (20, k), &dev).unwrap()).unwrap();
    let b = Var::from_tensor(&Tensor::from_vec(b0.clone(), (15, k), &dev).unwrap()).unwrap();
    let e = sddmm(&g, a.as_tensor(), b.as_tensor()).unwrap();
    let ev = to_f64(&e);
    for i in 0..20 {
        for p in csr.row_range(i) {
            let j = csr.indices()[p] as usize;
            let want: f64 = (0..k).map(|t| a0[i * k + t] * b0[j * k + t]).sum();
            assert!((ev[p] - want).abs() < 1e-12);
        }
    }
    let w = Tensor::from_vec(rand_vec(csr.nnz(), 3), csr.nnz(), &dev).unwrap();
    let grads = (e * &w).unwrap().sum_all().unwrap().backward().unwrap();
    let ga = to_f64(grads.get(a.as_tensor()).unwrap());
    let gb = to_f64(grads.get(b.as_tensor()).unwrap());
    let wv = to_f64(&w);
    let (mut wa, mut wb) = (vec![0f64; 20 * k], vec![0f64; 15 * k]);
    for i in 0..20 {
        for p in csr.row_range(i) {
            let j = csr.indices()[p] as usize;
            for t in 0..k {
                wa[i * k + t] += wv[p] * b0[j * k + t];
                wb[j * k + t] += wv[p] * a0[i * k + t];
            }
        }
    }
    assert!(max_rel_err(&ga, &wa) < 1e-12 && max_rel_err(&gb, &wb) < 1e-12);
}

/// `e = (a b^T) ∘ pattern ∘ v` and its three gradients against the naive sums, over shapes
/// with empty rows, a huge row, K = 1, K not a multiple of 4 or 32, K = 1024, and a misaligned
/// start (a view one row into a larger tensor).
#[test]
fn sddmm_scaled_matches_reference_over_shapes() {
    let dev = Device::Cpu;
    for (rows, cols, avg, huge, k) in [
        (1, 1, 1, 0, 1),
        (30, 20, 3, 0, 7),
        (40, 25, 4, 300, 33),
        (12, 50, 6, 0, 1024),
        (64, 64, 2, 500, 602),
    ] {
        let csr = graph(rows, cols, avg, huge, (rows * k) as u64);
        let g = DeviceGraph::upload(&csr, &dev).unwrap();
        let a0 = rand_vec((rows + 1) * k, 1);
        let b0 = rand_vec(cols * k, 2);
        let v0 = rand_vec(csr.nnz(), 3);
        // `a` starts one row into its buffer.
        let a_full = Tensor::from_vec(a0.clone(), (rows + 1, k), &dev).unwrap();
        let a = Var::from_tensor(&a_full.narrow(0, 1, rows).unwrap()).unwrap();
        let b = Var::from_tensor(&Tensor::from_vec(b0.clone(), (cols, k), &dev).unwrap()).unwrap();
        let v = Var::from_tensor(&Tensor::from_vec(v0.clone(), csr.nnz(), &dev).unwrap()).unwrap();
        let e = sddmm_scaled(&g, a.as_tensor(), b.as_tensor(), v.as_tensor()).unwrap();
        let w0 = rand_vec(csr.nnz(), 4);
        let w = Tensor::from_vec(w0.clone(), csr.nnz(), &dev).unwrap();
        let grads = (&e * &w).unwrap().sum_all().unwrap().backward().unwrap();
        let (mut we, mut wa, mut wb, mut wv) = (
            vec![0f64; csr.nnz()],
            vec![0f64; rows * k],
            vec![0f64; cols * k],
            vec![0f64; csr.nnz()],
        );
        for i in 0..rows {
            for p in csr.row_range(i) {
                let j = csr.indices()[p] as usize;
                let dot: f64 = (0..k).map(|t| a0[(i + 1) * k + t] * b0[j * k + t]).sum();
                we[p] = dot * v0[p];
                wv[p] = w0[p] * dot;
                for t in 0..k {
                    wa[i * k + t] += w0[p] * v0[p] * b0[j * k + t];
                    wb[j * k + t] += w0[p] * v0[p] * a0[(i + 1) * k + t];
                }
            }
        }
        let tag = format!("{rows}x{cols} huge {huge} K {k}");
        assert!(max_rel_err(&to_f64(&e), &we) < 1e-12, "{tag} forward");
        let got = |t: &Var| to_f64(grads.get(t.as_tensor()).unwrap());
        assert!(max_rel_err(&got(&a), &wa) < 1e-12, "{tag} da");
        assert!(max_rel_err(&got(&b), &wb) < 1e-12, "{tag} db");
        assert!(max_rel_err(&got(&v), &wv) < 1e-12, "{tag} dv");
    }
    // Values of the wrong length are a typed error.
    let csr = graph(4, 4, 2, 0, 9);
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let a = Tensor::zeros((4, 3), DType::F64, &dev).unwrap();
    let bad = Tensor::zeros(csr.nnz() + 1, DType::F64, &dev).unwrap();
    let e = sddmm_scaled(&g, &a, &a, &bad).unwrap_err().to_string();
    assert!(e.contains("expected [") && e.contains("values"), "{e}");
}

#[test]
fn bad_inputs_are_typed_errors() {
    let dev = Device::Cpu;
    let csr = Coo::new(4, vec![0, 1], vec![1, 2])
        .unwrap()
        .to_csr(BuildOptions::default())
        .unwrap();
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let x = Tensor::zeros((3, 2), DType::F32, &dev).unwrap();
    let e = spmm(&g, &x, Reduce::Sum).unwrap_err().to_string();
    assert!(e.contains("[3, 2]") && e.contains("expected [4, K]"), "{e}");
    let x = Tensor::zeros((4, 2), DType::U32, &dev).unwrap();
    assert!(spmm(&g, &x, Reduce::Sum)
        .unwrap_err()
        .to_string()
        .contains("dtype U32"));
    let x = Tensor::zeros((4, 2), DType::F32, &dev).unwrap();
    let v = Tensor::zeros(5, DType::F32, &dev).unwrap();
    let e = spmm_weighted(&g, &x, &v, Reduce::Sum)
        .unwrap_err()
        .to_string();
    assert!(e.contains("[5]") && e.contains("expected [2]"), "{e}");
    let v = Tensor::zeros(2, DType::F64, &dev).unwrap();
    assert!(spmm_weighted(&g, &x, &v, Reduce::Sum)
        .unwrap_err()
        .to_string()
        .contains("F64"));
    // Non-contiguous input is accepted (made contiguous) and gives the same result.
    let xt = Tensor::arange(0f32, 8.0, &dev)
        .unwrap()
        .reshape((2, 4))
        .unwrap()
        .t()
        .unwrap();
    let a = spmm(&g, &xt, Reduce::Sum)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    let b = spmm(&g, &xt.contiguous().unwrap(), Reduce::Sum)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    assert_eq!(a, b);
}

#[test]
fn matmul_nt_gradients_equal_plain_matmul() {
    let dev = Device::Cpu;
    let x = Tensor::randn(0f64, 1.0, (13, 7), &dev).unwrap();
    let w = Var::from_tensor(&Tensor::randn(0f64, 1.0, (5, 7), &dev).unwrap()).unwrap();
    let r = Tensor::randn(0f64, 1.0, (13, 5), &dev).unwrap();
    // x constant: the custom path.
    let y = gnn_kernels::matmul_nt(&x, w.as_tensor()).unwrap();
    let want = x.matmul(&w.as_tensor().t().unwrap()).unwrap();
    assert_eq!(to_f64(&y), to_f64(&want));
    let g1 = (y * &r).unwrap().sum_all().unwrap().backward().unwrap();
    let g2 = (want * &r).unwrap().sum_all().unwrap().backward().unwrap();
    let d = |g: &candle_core::backprop::GradStore| to_f64(g.get(w.as_tensor()).unwrap());
    assert!(max_rel_err(&d(&g1), &d(&g2)) < 1e-12);
    assert!(g1.get(&x).is_none(), "no gradient for the constant input");
    // x tracked: both gradients.
    let xv = Var::from_tensor(&x).unwrap();
    let y = gnn_kernels::matmul_nt(xv.as_tensor(), w.as_tensor()).unwrap();
    let g = (y * &r).unwrap().sum_all().unwrap().backward().unwrap();
    let want_dx = r.matmul(w.as_tensor()).unwrap();
    assert!(max_rel_err(&to_f64(g.get(xv.as_tensor()).unwrap()), &to_f64(&want_dx)) < 1e-12);
    assert!(gnn_kernels::matmul_nt(&x, &Tensor::zeros((5, 6), DType::F64, &dev).unwrap()).is_err());
}

#[test]
fn transposed_values_are_permuted_and_cached_by_tensor() {
    let dev = Device::Cpu;
    let csr = graph(30, 20, 4, 0, 8);
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let (_, perm) = g.transpose().unwrap();
    let want = |v: &Tensor| to_f64(&v.index_select(&perm, 0).unwrap());
    let v1 = Tensor::new(rand_vec(csr.nnz(), 1), &dev).unwrap();
    let v2 = Tensor::new(rand_vec(csr.nnz(), 2), &dev).unwrap();
    for v in [&v1, &v1, &v2, &v1] {
        assert_eq!(to_f64(&g.transposed_values(v).unwrap()), want(v));
    }
    // A tracked tensor is permuted every time (and keeps its gradient path).
    let tracked = candle_core::Var::from_tensor(&v2).unwrap();
    let t = g.transposed_values(tracked.as_tensor()).unwrap();
    assert!(t.track_op());
    assert_eq!(to_f64(&t), want(&v2));
}

/// Half-precision storage is a CUDA path: on the CPU the ops refuse bf16 / f16 with an error
/// that says so (rather than computing silently in another precision).
#[test]
fn half_precision_features_are_refused_on_the_cpu() {
    let csr = graph(10, 10, 3, 0, 7);
    let g = DeviceGraph::upload(&csr, &Device::Cpu).unwrap();
    for dt in [DType::BF16, DType::F16] {
        let x = Tensor::ones((10, 4), dt, &Device::Cpu).unwrap();
        let e = spmm(&g, &x, Reduce::Sum).unwrap_err().to_string();
        assert!(
            e.contains("CUDA only") && e.contains(&format!("{dt:?}")),
            "{e}"
        );
        let e = gnn_kernels::dropout(&x, 0.5, 1).unwrap_err().to_string();
        assert!(e.contains("CUDA only"), "{e}");
        let e = gnn_kernels::sddmm(&g, &x, &x).unwrap_err().to_string();
        assert!(
            e.contains("CUDA only") && e.contains(&format!("{dt:?}")),
            "{e}"
        );
    }
}

/// SDDMM's edge values must be the edge dtype of its features: their own for f32 / f64 (f32
/// edge values under f64 features are refused, naming both).
#[test]
fn sddmm_scaled_refuses_edge_values_of_another_dtype() {
    let csr = graph(10, 10, 3, 0, 7);
    let g = DeviceGraph::upload(&csr, &Device::Cpu).unwrap();
    let x = Tensor::ones((10, 4), DType::F64, &Device::Cpu).unwrap();
    let v = Tensor::ones(csr.nnz(), DType::F32, &Device::Cpu).unwrap();
    let e = gnn_kernels::sddmm_scaled(&g, &x, &x, &v)
        .unwrap_err()
        .to_string();
    assert!(e.contains("F32") && e.contains("F64"), "{e}");
    let v = v.to_dtype(DType::F64).unwrap();
    assert_eq!(
        gnn_kernels::sddmm_scaled(&g, &x, &x, &v).unwrap().dims(),
        [csr.nnz()]
    );
}

/// A graph held with 64-bit row offsets (forced: it is small) runs the CPU kernels to the
/// same bits as its 32-bit twin, forward and backward: the kernels read offsets through the
/// row ranges, whatever their width.
#[test]
fn a_graph_with_64_bit_offsets_gives_the_32_bit_results_bit_for_bit() {
    let dev = Device::Cpu;
    let narrow = graph(120, 90, 6, 300, 11);
    let wide = narrow
        .clone()
        .with_offset_width(gnn_graph::OffsetWidth::U64)
        .unwrap();
    assert_eq!(wide.offset_width(), gnn_graph::OffsetWidth::U64);
    let (ga, gb) = (
        DeviceGraph::upload(&narrow, &dev).unwrap(),
        DeviceGraph::upload(&wide, &dev).unwrap(),
    );
    assert_eq!(gb.csr().offset_width(), gnn_graph::OffsetWidth::U64);
    let k = 16;
    let bits = |t: &Tensor| -> Vec<u32> {
        t.flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    let x = Tensor::from_vec(
        rand_vec(90 * k, 5)
            .iter()
            .map(|&v| v as f32)
            .collect::<Vec<_>>(),
        (90, k),
        &dev,
    )
    .unwrap();
    let v = Tensor::from_vec(
        rand_vec(narrow.nnz(), 6)
            .iter()
            .map(|&v| v as f32)
            .collect::<Vec<_>>(),
        narrow.nnz(),
        &dev,
    )
    .unwrap();
    // Forward and gradients w.r.t. the features and the edge values.
    let run = |g: &DeviceGraph, reduce: Reduce, weighted: bool| {
        let (xv, vv) = (Var::from_tensor(&x).unwrap(), Var::from_tensor(&v).unwrap());
        let y = if weighted {
            spmm_weighted(g, xv.as_tensor(), vv.as_tensor(), reduce).unwrap()
        } else {
            spmm(g, xv.as_tensor(), reduce).unwrap()
        };
        let loss = (&y * &y).unwrap().sum_all().unwrap();
        let grads = loss.backward().unwrap();
        let dx = grads.get(xv.as_tensor()).map(bits);
        let dv = grads.get(vv.as_tensor()).map(bits);
        (bits(&y), dx, dv)
    };
    for reduce in REDUCES {
        for weighted in [false, true] {
            let what = format!("{reduce:?} weighted {weighted}");
            let (a, b) = (run(&ga, reduce, weighted), run(&gb, reduce, weighted));
            assert!(a.1.is_some(), "{what}: a feature gradient");
            assert_eq!(a, b, "{what}");
        }
    }
    // SDDMM on the same edges (rows x cols both read by position).
    let sq = graph(90, 90, 5, 0, 12);
    let sq_wide = sq
        .clone()
        .with_offset_width(gnn_graph::OffsetWidth::U64)
        .unwrap();
    let (sa, sb) = (
        DeviceGraph::upload(&sq, &dev).unwrap(),
        DeviceGraph::upload(&sq_wide, &dev).unwrap(),
    );
    assert_eq!(
        bits(&sddmm(&sa, &x, &x).unwrap()),
        bits(&sddmm(&sb, &x, &x).unwrap())
    );
    let s = sddmm(&sa, &x, &x).unwrap();
    assert_eq!(
        bits(&gnn_kernels::edge_softmax(&sa, &s).unwrap()),
        bits(&gnn_kernels::edge_softmax(&sb, &s).unwrap())
    );
}

/// `spmm_transposed` is `Aᵀ dy` (mean: `Aᵀ D⁻¹ dy`), with and without edge values, against a
/// direct f64 sum over the edges: rectangular graphs, empty rows, one huge row, K not a
/// multiple of 32; other reductions and shapes are typed errors.
#[test]
fn spmm_transposed_is_the_transpose_product() {
    let dev = Device::Cpu;
    for (si, &(nr, nc, avg, huge)) in [
        (7, 9, 3, 0),
        (64, 40, 6, 0),
        (50, 2000, 4, 5000),
        (0, 5, 1, 0),
    ]
    .iter()
    .enumerate()
    {
        let csr = graph(nr, nc, avg, huge, 40 + si as u64);
        let g = DeviceGraph::upload(&csr, &dev).unwrap();
        for k in [1usize, 7, 33, 100] {
            let dy = rand_vec(nr * k, 300 + k as u64);
            let v = rand_vec(csr.nnz(), 400 + k as u64);
            let dyt = Tensor::from_vec(dy.clone(), (nr, k), &dev).unwrap();
            let vt = Tensor::from_vec(v.clone(), csr.nnz(), &dev).unwrap();
            for reduce in [Reduce::Sum, Reduce::Mean] {
                for weighted in [false, true] {
                    let mut want = vec![0f64; nc * k];
                    for i in 0..nr {
                        let (start, end) = (csr.row_range(i).start, csr.row_range(i).end);
                        let scale = match reduce {
                            Reduce::Mean if end > start => 1.0 / (end - start) as f64,
                            _ => 1.0,
                        };
                        let row = csr.indices()[start..end].iter().zip(&v[start..end]);
                        for (&j, &w) in row {
                            let a = if weighted { w } else { 1.0 } * scale;
                            for c in 0..k {
                                want[j as usize * k + c] += a * dy[i * k + c];
                            }
                        }
                    }
                    let got = spmm_transposed(&g, &dyt, weighted.then_some(&vt), reduce).unwrap();
                    assert_eq!(got.dims(), [nc, k]);
                    let e = max_rel_err(&to_f64(&got), &want);
                    // The mean's 1/deg is cached in f32 (DeviceGraph::inv_degrees), for every
                    // dtype's backward.
                    let tol = if reduce == Reduce::Mean { 1e-7 } else { 1e-12 };
                    assert!(
                        e <= tol,
                        "{reduce:?} weighted {weighted} shape {si} K={k}: rel err {e}"
                    );
                }
            }
        }
    }
    let csr = graph(7, 9, 3, 0, 1);
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let dy = Tensor::zeros((7, 4), DType::F64, &dev).unwrap();
    let e = spmm_transposed(&g, &dy, None, Reduce::Max)
        .unwrap_err()
        .to_string();
    assert!(e.contains("Max") && e.contains("sum or mean"), "{e}");
    let wrong = Tensor::zeros((9, 4), DType::F64, &dev).unwrap();
    let e = spmm_transposed(&g, &wrong, None, Reduce::Sum)
        .unwrap_err()
        .to_string();
    assert!(e.contains("[9, 4]") && e.contains("[7, K]"), "{e}");
}
