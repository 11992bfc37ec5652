//! The fused LayerNorm against the same formula composed of candle ops, values and every
//! gradient, over shapes with one column, widths that are not multiples of 32, a constant row
//! (zero variance), no rows, and a wide row; and its input checks.

mod common;

use candle_core::{DType, Device, Tensor, Var, D};
use common::to_f64;
use gnn_kernels::layer_norm;

/// torch's LayerNorm as candle ops (biased variance).
fn composed(x: &Tensor, w: &Tensor, b: &Tensor, eps: f64) -> Tensor {
    let d = x.dim(D::Minus1).unwrap() as f64;
    let mean = (x.sum_keepdim(D::Minus1).unwrap() / d).unwrap();
    let xc = x.broadcast_sub(&mean).unwrap();
    let var = (xc.sqr().unwrap().sum_keepdim(D::Minus1).unwrap() / d).unwrap();
    let y = xc
        .broadcast_div(&(var + eps).unwrap().sqrt().unwrap())
        .unwrap();
    y.broadcast_mul(w).unwrap().broadcast_add(b).unwrap()
}

fn assert_close(what: &str, got: &Tensor, want: &Tensor, tol: f64) {
    let (g, w) = (to_f64(got), to_f64(want));
    assert_eq!(g.len(), w.len(), "{what}: lengths");
    let scale = w.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= tol * scale,
            "{what}[{i}]: {a} vs {b} (scale {scale})"
        );
    }
}

/// Values and gradients of x, w, b (through a weighted sum, so every output element's gradient
/// differs) for one shape and dtype; `constant_row` makes row 0 constant.
fn check(n: usize, d: usize, dt: DType, constant_row: bool, tol: f64) {
    let dev = Device::Cpu;
    let mut x = (Tensor::randn(0f64, 1.0, (n, d), &dev).unwrap() * 3.0)
        .unwrap()
        .to_dtype(dt)
        .unwrap();
    if constant_row && n > 0 {
        let rest = x.narrow(0, 1, n - 1).unwrap();
        let first = Tensor::full(0.7f64, (1, d), &dev)
            .unwrap()
            .to_dtype(dt)
            .unwrap();
        x = Tensor::cat(&[&first, &rest], 0).unwrap();
    }
    let w = (Tensor::randn(0f64, 1.0, d, &dev).unwrap() + 1.0)
        .unwrap()
        .to_dtype(dt)
        .unwrap();
    let b = Tensor::randn(0f64, 1.0, d, &dev)
        .unwrap()
        .to_dtype(dt)
        .unwrap();
    let wt = Tensor::randn(0f64, 1.0, (n, d), &dev)
        .unwrap()
        .to_dtype(dt)
        .unwrap();
    let run = |fused: bool| {
        let (xv, wv, bv) = (
            Var::from_tensor(&x).unwrap(),
            Var::from_tensor(&w).unwrap(),
            Var::from_tensor(&b).unwrap(),
        );
        let y = if fused {
            layer_norm(xv.as_tensor(), wv.as_tensor(), bv.as_tensor(), 1e-5).unwrap()
        } else {
            composed(xv.as_tensor(), wv.as_tensor(), bv.as_tensor(), 1e-5)
        };
        let grads = (&y * &wt).unwrap().sum_all().unwrap().backward().unwrap();
        let g = |v: &Var| grads.get(v.as_tensor()).unwrap().clone();
        let out = [y.clone(), g(&xv), g(&wv), g(&bv)];
        if fused {
            for t in &out[1..] {
                assert!(!t.track_op(), "a fused gradient records an op");
            }
        }
        out
    };
    let (got, want) = (run(true), run(false));
    for (i, what) in ["y", "dx", "dw", "db"].iter().enumerate() {
        assert_eq!(got[i].dims(), want[i].dims(), "{what} shape");
        assert_eq!(got[i].dtype(), dt, "{what} dtype");
        assert_close(&format!("{what} {n}x{d} {dt:?}"), &got[i], &want[i], tol);
    }
}

#[test]
fn fused_layer_norm_matches_the_composed_ops() {
    for (n, d) in [(1, 1), (7, 1), (5, 33), (40, 256), (3, 1000), (64, 100)] {
        check(n, d, DType::F64, false, 1e-10);
        check(n, d, DType::F32, false, 2e-4);
    }
    // A constant row: zero variance, xhat = 0, rstd = 1 / sqrt(eps).
    check(6, 48, DType::F64, true, 1e-10);
    check(6, 48, DType::F32, true, 2e-4);
}

#[test]
fn no_rows_give_empty_outputs_and_zero_parameter_gradients() {
    let dev = Device::Cpu;
    let x = Var::from_tensor(&Tensor::zeros((0, 8), DType::F32, &dev).unwrap()).unwrap();
    let w = Var::from_tensor(&Tensor::ones(8, DType::F32, &dev).unwrap()).unwrap();
    let b = Var::from_tensor(&Tensor::zeros(8, DType::F32, &dev).unwrap()).unwrap();
    let y = layer_norm(x.as_tensor(), w.as_tensor(), b.as_tensor(), 1e-5).unwrap();
    assert_eq!(y.dims(), [0, 8]);
    let grads = y.sum_all().unwrap().backward().unwrap();
    assert_eq!(to_f64(grads.get(w.as_tensor()).unwrap()), vec![0.0; 8]);
    assert_eq!(to_f64(grads.get(b.as_tensor()).unwrap()), vec![0.0; 8]);
}

#[test]
fn bad_inputs_are_refused_naming_what_is_wrong() {
    let dev = Device::Cpu;
    let x = Tensor::ones((4, 8), DType::F32, &dev).unwrap();
    let w = Tensor::ones(8, DType::F32, &dev).unwrap();
    let b = Tensor::zeros(8, DType::F32, &dev).unwrap();
    let err = |r: gnn_kernels::Result<Tensor>| r.unwrap_err().to_string();
    let e = err(layer_norm(
        &x,
        &Tensor::ones(7, DType::F32, &dev).unwrap(),
        &b,
        1e-5,
    ));
    assert!(
        e.contains("weight") && e.contains("[7]") && e.contains("[8]"),
        "{e}"
    );
    let e = err(layer_norm(&x, &w, &b.to_dtype(DType::F64).unwrap(), 1e-5));
    assert!(e.contains("bias") && e.contains("F64"), "{e}");
    let e = err(layer_norm(&x.flatten_all().unwrap(), &w, &b, 1e-5));
    assert!(e.contains("[n, d]"), "{e}");
    let e = err(layer_norm(&x, &w, &b, 0.0));
    assert!(e.contains("eps"), "{e}");
    let e = err(layer_norm(&x.to_dtype(DType::BF16).unwrap(), &w, &b, 1e-5));
    assert!(e.contains("CUDA only"), "{e}");
}
