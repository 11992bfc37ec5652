//! MaxK, CBSR, SpGEMM and SSpMM on the CPU against dense references, with gradient checks.

use candle_core::{DType, Device, Tensor, Var};
use gnn_graph::Csr;
use gnn_kernels::{
    maxk, spgemm, spgemm_bias, spgemm_bias_residual, spmm, spmm_weighted, sspmm, DeviceGraph,
    Reduce,
};
use rand::{Rng, SeedableRng};

fn rng(seed: u64) -> rand_xoshiro::Xoshiro256PlusPlus {
    rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// 50 targets x 70 sources: empty rows, one 900-entry row, duplicates.
fn graph(seed: u64) -> Csr {
    let mut r = rng(seed);
    let mut indptr = vec![0u32];
    let mut indices = Vec::new();
    for i in 0..50 {
        let len = match i {
            5 => 900,
            _ if i % 6 == 0 => 0,
            _ => r.random_range(1..40),
        };
        indices.extend((0..len).map(|_| r.random_range(0..70u32)));
        indptr.push(indices.len() as u32);
    }
    Csr::new_checked(50, 70, indptr, indices).unwrap()
}

fn rows(t: &Tensor) -> Vec<Vec<f64>> {
    t.to_dtype(DType::F64).unwrap().to_vec2().unwrap()
}

fn cols(t: &Tensor) -> Vec<Vec<usize>> {
    match t.dtype() {
        DType::U8 => t
            .to_vec2::<u8>()
            .unwrap()
            .into_iter()
            .map(|r| r.into_iter().map(usize::from).collect())
            .collect(),
        DType::I16 => t
            .to_vec2::<i16>()
            .unwrap()
            .into_iter()
            .map(|r| r.into_iter().map(|c| c as u16 as usize).collect())
            .collect(),
        o => panic!("index dtype {o:?}"),
    }
}

fn close(a: &[Vec<f64>], b: &[Vec<f64>], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: rows");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        for (j, (p, q)) in x.iter().zip(y).enumerate() {
            assert!(
                (p - q).abs() <= tol * (1.0 + q.abs()),
                "{what}: ({i}, {j}) {p} vs {q}"
            );
        }
    }
}

#[test]
fn maxk_on_hand_checked_rows() {
    let dev = Device::Cpu;
    let h = Tensor::new(
        &[
            [1.0f32, 3.0, 3.0, 2.0, 3.0],
            [-1.0, -0.0, 0.0, -2.0, -0.5],
            [5.0, 5.0, 5.0, 5.0, 5.0],
        ],
        &dev,
    )
    .unwrap();
    let c = maxk(&h, 2).unwrap();
    assert_eq!(c.index().dtype(), DType::U8);
    // Ties go to the lower column; -0.0 < +0.0 in the total order.
    assert_eq!(cols(c.index()), vec![vec![1, 2], vec![1, 2], vec![0, 1]]);
    assert_eq!(
        rows(c.data()),
        vec![vec![3.0, 3.0], vec![-0.0, 0.0], vec![5.0, 5.0]]
    );
    let c = maxk(&h, 1).unwrap();
    assert_eq!(cols(c.index()), vec![vec![1], vec![2], vec![0]]);
    let all = maxk(&h, 5).unwrap();
    assert_eq!(cols(all.index())[0], vec![0, 1, 2, 3, 4]);
    assert_eq!(rows(&all.to_dense().unwrap()), rows(&h));
}

#[test]
fn maxk_keeps_the_largest_k_for_many_shapes() {
    let dev = Device::Cpu;
    for (n, d, k) in [
        (9, 7, 3),
        (20, 33, 32),
        (6, 256, 32),
        (5, 256, 256),
        (4, 300, 17),
        (3, 1024, 96),
        (0, 64, 8),
    ] {
        let mut r = rng(d as u64 * 31 + k as u64);
        // Few distinct values, so ties are common.
        let v: Vec<f32> = (0..n * d)
            .map(|_| r.random_range(-8..8) as f32 * 0.5)
            .collect();
        let h = Tensor::from_vec(v.clone(), (n, d), &dev).unwrap();
        let c = maxk(&h, k).unwrap();
        assert_eq!(
            c.index().dtype(),
            if d <= 256 { DType::U8 } else { DType::I16 }
        );
        assert_eq!(c.data().dims(), [n, k]);
        let dense = rows(&c.to_dense().unwrap());
        for (i, ix) in cols(c.index()).iter().enumerate() {
            let row = &v[i * d..(i + 1) * d];
            assert!(ix.windows(2).all(|p| p[0] < p[1]), "ascending, distinct");
            let kept: std::collections::HashSet<usize> = ix.iter().copied().collect();
            let min_kept = ix.iter().map(|&j| row[j]).fold(f32::INFINITY, f32::min);
            for j in 0..d {
                if kept.contains(&j) {
                    assert_eq!(dense[i][j], row[j] as f64);
                } else {
                    assert_eq!(dense[i][j], 0.0);
                    // Nothing dropped beats a kept entry; equal ones lose only to lower columns.
                    assert!(row[j] <= min_kept, "({d},{k}) row {i} col {j}");
                    if row[j] == min_kept {
                        assert!(ix.iter().filter(|&&q| row[q] == min_kept).all(|&q| q < j));
                    }
                }
            }
        }
    }
}

#[test]
fn spgemm_matches_spmm_on_the_dense_features() {
    let dev = Device::Cpu;
    let csr = graph(3);
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let vals = Tensor::randn(0f64, 1.0, csr.nnz(), &dev).unwrap();
    for (d, k) in [(16, 16), (40, 5), (256, 32), (300, 33), (1024, 100)] {
        let h = Tensor::randn(0f64, 1.0, (70, d), &dev).unwrap();
        let x = maxk(&h, k).unwrap();
        let dense = x.to_dense().unwrap();
        for reduce in [Reduce::Sum, Reduce::Mean] {
            let got = spgemm(&g, &x, None, reduce).unwrap();
            let want = spmm(&g, &dense, reduce).unwrap();
            close(
                &rows(&got),
                &rows(&want),
                1e-12,
                &format!("{d}/{k} {reduce:?}"),
            );
            let got = spgemm(&g, &x, Some(&vals), reduce).unwrap();
            let want = spmm_weighted(&g, &dense, &vals, reduce).unwrap();
            close(
                &rows(&got),
                &rows(&want),
                1e-12,
                &format!("{d}/{k} {reduce:?} w"),
            );
        }
    }
}

#[test]
fn sspmm_is_the_gradient_through_the_dense_path() {
    let dev = Device::Cpu;
    let csr = graph(4);
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let vals = Tensor::randn(0f64, 1.0, csr.nnz(), &dev).unwrap();
    for (d, k) in [(40, 7), (300, 33)] {
        let h0 = Tensor::randn(0f64, 1.0, (70, d), &dev).unwrap();
        let w = Tensor::randn(0f64, 1.0, (50, d), &dev).unwrap();
        for (reduce, v) in [(Reduce::Sum, Some(&vals)), (Reduce::Mean, None)] {
            // Through spgemm (backward = sspmm) ...
            let h = Var::from_tensor(&h0).unwrap();
            let x = maxk(h.as_tensor(), k).unwrap();
            let y = spgemm(&g, &x, v, reduce).unwrap();
            let gr = (y * &w).unwrap().sum_all().unwrap().backward().unwrap();
            let a = gr.get(h.as_tensor()).unwrap().clone();
            // ... and through the dense features and the exact SpMM.
            let h2 = Var::from_tensor(&h0).unwrap();
            let x2 = maxk(h2.as_tensor(), k).unwrap();
            let dense = x2.to_dense().unwrap();
            let y2 = match v {
                Some(v) => spmm_weighted(&g, &dense, v, reduce).unwrap(),
                None => spmm(&g, &dense, reduce).unwrap(),
            };
            let gr2 = (y2 * &w).unwrap().sum_all().unwrap().backward().unwrap();
            let b = gr2.get(h2.as_tensor()).unwrap().clone();
            // The exact mean path scales by 1/deg cached in f32, hence the looser bound.
            let tol = if reduce == Reduce::Mean { 1e-6 } else { 1e-12 };
            close(&rows(&a), &rows(&b), tol, &format!("{d}/{k} {reduce:?}"));
            // The public sspmm agrees with the pattern-sampled dense gradient.
            let direct = sspmm(&g, &w, &x, v, reduce).unwrap();
            assert_eq!(direct.dims(), [70, k]);
            let (ga, dr) = (rows(&a), rows(&direct));
            for (j, ix) in cols(x.index()).iter().enumerate() {
                for (s, &c) in ix.iter().enumerate() {
                    assert!((ga[j][c] - dr[j][s]).abs() < 1e-12, "sspmm ({j}, {s})");
                }
            }
        }
    }
}

#[test]
fn finite_differences_agree_with_the_maxk_spgemm_gradient() {
    let dev = Device::Cpu;
    let csr = graph(5);
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let (d, k) = (24, 5);
    // Well separated values so a small step never changes the selection.
    let mut r = rng(9);
    let mut v: Vec<f64> = (0..70 * d).map(|i| i as f64 * 0.01).collect();
    for i in (1..v.len()).rev() {
        v.swap(i, r.random_range(0..=i));
    }
    let w = Tensor::randn(0f64, 1.0, (50, d), &dev).unwrap();
    let f = |v: &[f64]| -> f64 {
        let h = Tensor::from_vec(v.to_vec(), (70, d), &dev).unwrap();
        let y = spgemm(&g, &maxk(&h, k).unwrap(), None, Reduce::Mean).unwrap();
        (y * &w).unwrap().sum_all().unwrap().to_scalar().unwrap()
    };
    let h = Var::from_tensor(&Tensor::from_vec(v.clone(), (70, d), &dev).unwrap()).unwrap();
    let y = spgemm(&g, &maxk(h.as_tensor(), k).unwrap(), None, Reduce::Mean).unwrap();
    let grad = (y * &w).unwrap().sum_all().unwrap().backward().unwrap();
    let grad: Vec<f64> = grad
        .get(h.as_tensor())
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let eps = 1e-4;
    let mut nonzero = 0;
    for p in (0..v.len()).step_by(7) {
        let mut a = v.clone();
        let mut b = v.clone();
        a[p] += eps;
        b[p] -= eps;
        let fd = (f(&a) - f(&b)) / (2.0 * eps);
        assert!(
            (fd - grad[p]).abs() < 1e-6,
            "entry {p}: fd {fd} vs {}",
            grad[p]
        );
        nonzero += (grad[p] != 0.0) as usize;
    }
    assert!(nonzero > 5, "the check must reach kept entries ({nonzero})");
}

/// The `(d, k, reduce)` cases of the fused-bias tests.
const BIAS_CASES: [(usize, usize, Reduce); 3] = [
    (16, 4, Reduce::Sum),
    (40, 7, Reduce::Mean),
    (300, 33, Reduce::Sum),
];

/// The fused-bias tests' graph of seed `seed` (it has empty rows), uploaded, and f64 edge
/// values.
fn bias_graph(seed: u64, dev: &Device) -> (Csr, DeviceGraph, Tensor) {
    let csr = graph(seed);
    let g = DeviceGraph::upload(&csr, dev).unwrap();
    let vals = Tensor::randn(0f64, 1.0, csr.nnz(), dev).unwrap();
    (csr, g, vals)
}

#[test]
fn spgemm_bias_adds_the_bias_and_differentiates_it() {
    let dev = Device::Cpu;
    let (csr, g, vals) = bias_graph(6, &dev); // empty rows keep the bias alone
    for (d, k, reduce) in BIAS_CASES {
        let h0 = Tensor::randn(0f64, 1.0, (70, d), &dev).unwrap();
        let b0 = Tensor::randn(0f64, 1.0, d, &dev).unwrap();
        let w = Tensor::randn(0f64, 1.0, (50, d), &dev).unwrap();
        // Fused and unfused, each with its own leaves.
        let run = |fused: bool| {
            let h = Var::from_tensor(&h0).unwrap();
            let b = Var::from_tensor(&b0).unwrap();
            let x = maxk(h.as_tensor(), k).unwrap();
            let y = if fused {
                spgemm_bias(&g, &x, Some(&vals), reduce, Some(b.as_tensor())).unwrap()
            } else {
                spgemm(&g, &x, Some(&vals), reduce)
                    .unwrap()
                    .broadcast_add(b.as_tensor())
                    .unwrap()
            };
            let grads = (&y * &w).unwrap().sum_all().unwrap().backward().unwrap();
            let dh = grads.get(h.as_tensor()).unwrap().clone();
            let db = grads.get(b.as_tensor()).unwrap().clone();
            (y, dh, db)
        };
        let (yf, dhf, dbf) = run(true);
        let (yu, dhu, dbu) = run(false);
        let tag = format!("{d}/{k} {reduce:?}");
        close(&rows(&yf), &rows(&yu), 1e-12, &format!("{tag} out"));
        close(&rows(&dhf), &rows(&dhu), 1e-12, &format!("{tag} dh"));
        let (dbf, dbu) = (dbf.unsqueeze(0).unwrap(), dbu.unsqueeze(0).unwrap());
        close(&rows(&dbf), &rows(&dbu), 1e-12, &format!("{tag} db"));
        // The bias gradient is the column sum of the upstream gradient, here `w`.
        close(
            &rows(&dbf),
            &rows(&w.sum_keepdim(0).unwrap()),
            1e-12,
            &format!("{tag} db = sum w"),
        );
        let empty = csr.row_degrees().iter().position(|&n| n == 0).unwrap();
        close(
            &rows(&yf.narrow(0, empty, 1).unwrap()),
            &rows(&b0.unsqueeze(0).unwrap()),
            0.0,
            &format!("{tag} empty row"),
        );
    }
}

#[test]
fn spgemm_bias_residual_equals_the_separate_add_both_ways() {
    let dev = Device::Cpu;
    let (csr, g, vals) = bias_graph(8, &dev); // empty rows keep bias + residual alone
    for (d, k, reduce) in BIAS_CASES {
        let h0 = Tensor::randn(0f64, 1.0, (70, d), &dev).unwrap();
        let b0 = Tensor::randn(0f64, 1.0, d, &dev).unwrap();
        let r0 = Tensor::randn(0f64, 1.0, (50, d), &dev).unwrap();
        let w = Tensor::randn(0f64, 1.0, (50, d), &dev).unwrap();
        let run = |fused: bool| {
            let h = Var::from_tensor(&h0).unwrap();
            let b = Var::from_tensor(&b0).unwrap();
            let r = Var::from_tensor(&r0).unwrap();
            let x = maxk(h.as_tensor(), k).unwrap();
            let y = if fused {
                spgemm_bias_residual(&g, &x, Some(&vals), reduce, b.as_tensor(), r.as_tensor())
                    .unwrap()
            } else {
                (spgemm_bias(&g, &x, Some(&vals), reduce, Some(b.as_tensor())).unwrap()
                    + r.as_tensor())
                .unwrap()
            };
            let grads = (&y * &w).unwrap().sum_all().unwrap().backward().unwrap();
            let get = |t: &Tensor| grads.get(t).unwrap().clone();
            let db = get(b.as_tensor()).unsqueeze(0).unwrap();
            (y, get(h.as_tensor()), db, get(r.as_tensor()))
        };
        let (yf, dhf, dbf, drf) = run(true);
        let (yu, dhu, dbu, dru) = run(false);
        let tag = format!("{d}/{k} {reduce:?}");
        close(&rows(&yf), &rows(&yu), 1e-12, &format!("{tag} out"));
        close(&rows(&dhf), &rows(&dhu), 1e-12, &format!("{tag} dh"));
        close(&rows(&dbf), &rows(&dbu), 1e-12, &format!("{tag} db"));
        close(&rows(&drf), &rows(&dru), 0.0, &format!("{tag} dresidual"));
        close(&rows(&drf), &rows(&w), 0.0, &format!("{tag} dresidual = w"));
        let empty = csr.row_degrees().iter().position(|&n| n == 0).unwrap();
        let want = (b0.unsqueeze(0).unwrap() + r0.narrow(0, empty, 1).unwrap()).unwrap();
        close(
            &rows(&yf.narrow(0, empty, 1).unwrap()),
            &rows(&want),
            0.0,
            &format!("{tag} empty row"),
        );
    }
    // Shape and dtype are checked.
    let x = maxk(&Tensor::randn(0f64, 1.0, (70, 16), &dev).unwrap(), 4).unwrap();
    let b = Tensor::zeros(16, DType::F64, &dev).unwrap();
    let bad = Tensor::zeros((49, 16), DType::F64, &dev).unwrap();
    assert!(spgemm_bias_residual(&g, &x, None, Reduce::Sum, &b, &bad).is_err());
    let bad = Tensor::zeros((50, 16), DType::F32, &dev).unwrap();
    assert!(spgemm_bias_residual(&g, &x, None, Reduce::Sum, &b, &bad).is_err());
}

#[test]
fn bad_inputs_are_refused() {
    let dev = Device::Cpu;
    let h = Tensor::zeros((4, 8), DType::F32, &dev).unwrap();
    assert!(maxk(&h, 0).is_err());
    assert!(maxk(&h, 9).is_err());
    assert!(maxk(&Tensor::zeros((2, 1025), DType::F32, &dev).unwrap(), 4).is_err());
    let csr = graph(1);
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let x = maxk(&Tensor::randn(0f32, 1.0, (70, 16), &dev).unwrap(), 4).unwrap();
    assert!(spgemm(&g, &x, None, Reduce::Max)
        .unwrap_err()
        .to_string()
        .contains("not available"));
    let tracked = Var::ones(csr.nnz(), DType::F32, &dev).unwrap();
    assert!(spgemm(&g, &x, Some(tracked.as_tensor()), Reduce::Sum)
        .unwrap_err()
        .to_string()
        .contains("edge values"));
    let wrong_rows = maxk(&Tensor::randn(0f32, 1.0, (50, 16), &dev).unwrap(), 4).unwrap();
    assert!(spgemm(&g, &wrong_rows, None, Reduce::Sum).is_err());
    let short_bias = Tensor::zeros(15, DType::F32, &dev).unwrap();
    assert!(spgemm_bias(&g, &x, None, Reduce::Sum, Some(&short_bias))
        .unwrap_err()
        .to_string()
        .contains("bias"));
}

/// Soundness: a caller's CBSR arrays are checked before any kernel indexes with them.
#[test]
fn cbsr_new_refuses_bad_columns_shapes_and_dtypes() {
    use gnn_kernels::Cbsr;
    let dev = Device::Cpu;
    let data = Tensor::ones((2, 2), DType::F32, &dev).unwrap();
    let u8s = |v: &[u8]| Tensor::from_vec(v.to_vec(), (2, 2), &dev).unwrap();
    let i16s = |v: &[i16]| Tensor::from_vec(v.to_vec(), (2, 2), &dev).unwrap();
    let ok = Cbsr::new(data.clone(), u8s(&[0, 3, 1, 2]), 4).unwrap();
    assert_eq!((ok.k(), ok.rows(), ok.dim()), (2, 2, 4));
    let cases: Vec<(Tensor, usize, &str)> = vec![
        (u8s(&[0, 4, 1, 2]), 4, "column 4"),           // out of range
        (u8s(&[0, 1, 2, 2]), 4, "row 1 slot 1"),       // repeated
        (u8s(&[3, 1, 0, 1]), 4, "row 0 slot 1"),       // descending
        (i16s(&[0, 1, 2, 3]), 4, "must be [2, 2] U8"), // wrong dtype for D <= 256
        (i16s(&[-5, 1, 0, 1]), 300, "column -5"),      // negative i16
        (i16s(&[0, 1000, 0, 1]), 300, "column 1000"),
        (u8s(&[0, 1, 0, 1]), 1, "k <= D"),
        (u8s(&[0, 1, 0, 1]), 2000, "k <= D <= 1024"),
    ];
    for (index, dim, want) in cases {
        let e = Cbsr::new(data.clone(), index, dim).unwrap_err().to_string();
        assert!(e.contains(want), "{e} should contain {want}");
    }
    let e = Cbsr::new(
        data.clone(),
        Tensor::zeros((2, 3), DType::U8, &dev).unwrap(),
        4,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("[2, 2]"), "{e}");
    let ints = Tensor::zeros((2, 2), DType::U32, &dev).unwrap();
    assert!(Cbsr::new(ints, u8s(&[0, 1, 0, 1]), 4).is_err());
    // A checked CBSR aggregates like its dense form; a pattern of the wrong row count is
    // refused by the sspmm.
    let g = DeviceGraph::upload(
        &Csr::new_checked(2, 2, vec![0, 1, 2], vec![1, 0]).unwrap(),
        &dev,
    )
    .unwrap();
    let y = spgemm(&g, &ok, None, Reduce::Sum).unwrap();
    let y2 = spmm(&g, &ok.to_dense().unwrap(), Reduce::Sum).unwrap();
    assert_eq!(rows(&y), rows(&y2));
    let g3 = DeviceGraph::upload(&Csr::empty(4, 3).unwrap(), &dev).unwrap();
    let dout = Tensor::zeros((4, 4), DType::F32, &dev).unwrap();
    let e = sspmm(&g3, &dout, &ok, None, Reduce::Sum)
        .unwrap_err()
        .to_string();
    assert!(e.contains("2 rows, the graph 3 columns"), "{e}");
}
