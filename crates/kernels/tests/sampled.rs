//! Sampled SpMM: selection formulas on hand-checked rows, exactness when the sample covers
//! the row, the estimator's scaling, and input checks.

use candle_core::{Device, Tensor};
use gnn_graph::Csr;
use gnn_kernels::ops::spmm::reference::spmm_reference;
use gnn_kernels::{spmm_sampled, DeviceGraph, Reduce, Sampling};
use rand::{Rng, SeedableRng};

#[test]
fn selection_formulas_on_hand_checked_rows() {
    // Bucket: first s.
    assert_eq!(Sampling::EsBucket { s: 4 }.positions(10), vec![0, 1, 2, 3]);
    assert_eq!(Sampling::EsBucket { s: 4 }.positions(3), vec![0, 1, 2]);
    // FastRand: (i * 577) mod nnz; 577 mod 10 = 7, 1154 mod 10 = 4, 1731 mod 10 = 1.
    assert_eq!(
        Sampling::EsFastRand { s: 4 }.positions(10),
        vec![0, 7, 4, 1]
    );
    assert_eq!(
        Sampling::EsFastRand { s: 4 }.positions(4),
        vec![0, 1, 2, 3],
        "nnz <= s: whole row"
    );
    // AES, w = 32: R = 40/32 = 1.25 -> 4 runs of 8, starts (i*1429) mod 33 = 0, 10, 20, 30.
    let p = Sampling::aes(32).positions(40);
    let want: Vec<usize> = [0usize, 10, 20, 30]
        .iter()
        .flat_map(|&s| s..s + 8)
        .collect();
    assert_eq!(p, want);
    // R = 100/32 = 3.125 -> 8 runs of 4, starts (i*1429) mod 97: 0, 71, 45, 19, 90, 64, 38, 12.
    let starts: Vec<usize> = Sampling::aes(32)
        .positions(100)
        .chunks(4)
        .map(|c| c[0])
        .collect();
    assert_eq!(starts, vec![0, 71, 45, 19, 90, 64, 38, 12]);
    // R = 20 -> 16 runs of 2; R = 60 -> 32 runs of 1; R <= 1 -> whole row.
    assert_eq!(Sampling::aes(32).positions(640).len(), 32);
    assert_eq!(Sampling::aes(32).positions(1920).len(), 32);
    assert_eq!(
        Sampling::aes(32).positions(1920)[1],
        1429,
        "second run starts at 1429 mod (1920 - 1 + 1)"
    );
    assert_eq!(Sampling::aes(64).positions(50), (0..50).collect::<Vec<_>>());
    // Widths below 32 cap the run count at w: w = 16, R = 100 -> 16 runs of 1 edge at
    // (i*1429) mod 1600; w = 8, R = 2.5 -> 8 runs of 1 at (i*1429) mod 20.
    let p = Sampling::aes(16).positions(1600);
    assert_eq!(p, (0..16).map(|i| i * 1429 % 1600).collect::<Vec<_>>());
    let p = Sampling::aes(8).positions(20);
    assert_eq!(p, (0..8).map(|i| i * 1429 % 20).collect::<Vec<_>>());
    // w = 16, R = 1.5 -> 4 runs of 4 at (i*1429) mod 21: 0, 1, 2, 3.
    let p = Sampling::aes(16).positions(24);
    assert_eq!(
        p,
        [0, 1, 2, 3]
            .iter()
            .flat_map(|&s| s..s + 4)
            .collect::<Vec<usize>>()
    );
    // Custom bands move the thresholds: with b0 = 2, R = 1.25 takes the whole row.
    assert_eq!(
        Sampling::Aes {
            w: 32,
            bands: [2.0, 3.0, 10.0, 54.0]
        }
        .positions(40)
        .len(),
        40
    );
}

fn graph(seed: u64) -> Csr {
    let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut indptr = vec![0u32];
    let mut indices = Vec::new();
    for i in 0..60 {
        let len = if i == 3 {
            700
        } else if i % 7 == 0 {
            0
        } else {
            r.random_range(1..50)
        };
        indices.extend((0..len).map(|_| r.random_range(0..80u32)));
        indptr.push(indices.len() as u32);
    }
    Csr::new_checked(60, 80, indptr, indices).unwrap()
}

#[test]
fn exact_when_the_sample_covers_every_row() {
    let dev = Device::Cpu;
    let csr = graph(1);
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let k = 33;
    let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(2);
    let x: Vec<f64> = (0..80 * k).map(|_| r.random_range(-1.0..1.0)).collect();
    let v: Vec<f64> = (0..csr.nnz()).map(|_| r.random_range(0.0..1.0)).collect();
    let xt = Tensor::from_vec(x.clone(), (80, k), &dev).unwrap();
    let vt = Tensor::from_vec(v.clone(), csr.nnz(), &dev).unwrap();
    let max_deg = csr.degree_stats().max as usize;
    for sampling in [
        Sampling::EsBucket { s: max_deg },
        Sampling::EsFastRand { s: max_deg },
        Sampling::aes(max_deg.next_power_of_two()),
    ] {
        for reduce in [Reduce::Sum, Reduce::Mean] {
            let want = spmm_reference(&csr, &x, k, Some(&v), reduce);
            let got = spmm_sampled(&g, &xt, Some(&vt), reduce, sampling)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f64>()
                .unwrap();
            let err = got
                .iter()
                .zip(&want)
                .fold(0f64, |m, (a, b)| m.max((a - b).abs()));
            assert!(err < 1e-12, "{sampling:?} {reduce:?}: {err}");
        }
    }
}

#[test]
fn estimator_scales_the_sampled_sum() {
    // One row of 10 edges to sources 0..10 with x[j] = j: Bucket s = 4 takes j = 0..4
    // (sum 6, mean 1.5); the sum estimate is 6 * 10 / 4 = 15.
    let csr = Csr::new_checked(1, 10, vec![0, 10], (0..10).collect()).unwrap();
    let g = DeviceGraph::upload(&csr, &Device::Cpu).unwrap();
    let x = Tensor::arange(0f32, 10.0, &Device::Cpu)
        .unwrap()
        .reshape((10, 1))
        .unwrap();
    let s = Sampling::EsBucket { s: 4 };
    let sum = spmm_sampled(&g, &x, None, Reduce::Sum, s)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    let mean = spmm_sampled(&g, &x, None, Reduce::Mean, s)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    assert_eq!((sum[0][0], mean[0][0]), (15.0, 1.5));
    // FastRand picks 0, 7, 4, 1: sum 12 -> estimate 30, mean 3.
    let f = spmm_sampled(&g, &x, None, Reduce::Sum, Sampling::EsFastRand { s: 4 })
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    assert_eq!(f[0][0], 30.0);
}

#[test]
fn bad_inputs_are_rejected() {
    let csr = graph(3);
    let g = DeviceGraph::upload(&csr, &Device::Cpu).unwrap();
    let x = Tensor::zeros((80, 4), candle_core::DType::F32, &Device::Cpu).unwrap();
    assert!(
        spmm_sampled(&g, &x, None, Reduce::Max, Sampling::EsBucket { s: 4 })
            .unwrap_err()
            .to_string()
            .contains("no sampled estimator")
    );
    assert!(spmm_sampled(&g, &x, None, Reduce::Sum, Sampling::EsBucket { s: 0 }).is_err());
    assert!(spmm_sampled(&g, &x, None, Reduce::Sum, Sampling::aes(0))
        .unwrap_err()
        .to_string()
        .contains(">= 1"));
    assert!(spmm_sampled(&g, &x, None, Reduce::Sum, Sampling::EsBucket { s: 1 << 23 }).is_err());
    assert!(spmm_sampled(
        &g,
        &x,
        None,
        Reduce::Sum,
        Sampling::Aes {
            w: 64,
            bands: [1.0, 10.0, 2.0, 54.0]
        }
    )
    .is_err());
    let bad = Tensor::zeros((79, 4), candle_core::DType::F32, &Device::Cpu).unwrap();
    assert!(spmm_sampled(&g, &bad, None, Reduce::Sum, Sampling::EsBucket { s: 4 }).is_err());
    // Half precision is a CUDA path: the CPU refuses it with an error naming the dtype.
    let half = x.to_dtype(candle_core::DType::BF16).unwrap();
    let err = spmm_sampled(&g, &half, None, Reduce::Sum, Sampling::EsBucket { s: 4 })
        .unwrap_err()
        .to_string();
    assert!(err.contains("BF16"), "{err}");
    // Edge values: [nnz] of x's dtype (f32 here; f64 is refused).
    let v64 = Tensor::zeros(csr.nnz(), candle_core::DType::F64, &Device::Cpu).unwrap();
    let s4 = Sampling::EsBucket { s: 4 };
    assert!(spmm_sampled(&g, &x, Some(&v64), Reduce::Sum, s4).is_err());
}
