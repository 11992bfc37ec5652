//! Helpers shared by the kernel integration tests (each test file includes this module and
//! uses what it needs).
#![allow(dead_code)]

use candle_core::{DType, Tensor};
use gnn_graph::Csr;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus as R;

/// Random `n_rows x n_cols` pattern: ~`avg` entries per row, every 5th row empty, and optionally
/// row 1 holding `huge` entries (duplicates allowed, which the ops must treat as separate edges).
pub fn graph(n_rows: usize, n_cols: usize, avg: usize, huge: usize, seed: u64) -> Csr {
    let mut r = R::seed_from_u64(seed);
    let mut indptr = vec![0u32];
    let mut indices = Vec::new();
    for i in 0..n_rows {
        let len = if i == 1 && huge > 0 {
            huge
        } else if i % 5 == 4 {
            0
        } else {
            r.random_range(1..=2 * avg)
        };
        for _ in 0..len {
            indices.push(r.random_range(0..n_cols as u32));
        }
        indptr.push(indices.len() as u32);
    }
    Csr::new_checked(n_rows, n_cols, indptr, indices).unwrap()
}

/// Every element of `t` as f64, row-major.
pub fn to_f64(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f64>()
        .unwrap()
}
