//! `x + b` with `b [D]` broadcast over the rows of `x [N, D]` (an output layer's bias), whose
//! backward sums the bias gradient as one GEMM row ([`crate::ops::column_sum`]).
//!
//! candle's broadcast add reduces the bias gradient with its dim-0 sum, which runs one block
//! per column: 184 µs for `[233 K, 41]` bf16 on an H100 (GAT's output layer,
//! `bench/records/gat-sparse/h100-2026-11-28-2/row-term/call6-kernels.csv.xz`, kernel 268),
//! against tens of µs for the GEMM row. The forward is candle's broadcast add, whose result
//! [`crate::attach_backward`] hands over as a copy: one more `[N, D]` pass, cheap for an
//! output layer's few columns, which is where the layers use it (measured: GAT's output
//! layer, `bench/records/gat-sparse/h100-2026-11-28-2/bias-add-h200`). Wide hidden layers
//! keep candle's add, whose dim-0 sum has a block per column to spread over.

use crate::error::Result;
use crate::ops::fused::attach::attach_backward;
use candle_core::Tensor;

/// `x + b` (`x [N, D]`, `b [D]`, one dtype). Backward: `dx = dy`, `db = dy.sum(0)` as one
/// GEMM row. Untracked inputs give an untracked result.
pub fn bias_add(x: &Tensor, b: &Tensor) -> Result<Tensor> {
    const OP: &str = "bias_add";
    crate::ops::check_row_bias(OP, "x", x, b)?;
    let y = x.detach().broadcast_add(&b.detach())?;
    if !x.track_op() && !b.track_op() {
        return Ok(y);
    }
    attach_backward(
        y,
        &[x, b],
        Box::new(|ins, dy| {
            let dx = ins[0].track_op().then(|| dy.clone());
            let db = if ins[1].track_op() {
                Some(crate::ops::column_sum(dy)?)
            } else {
                None
            };
            Ok(vec![dx, db])
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device, Var};

    /// Values and both gradients against candle's broadcast add (f64; the bias gradient
    /// summed in another order), with either input untracked, over a one-row and a
    /// one-column shape.
    #[test]
    fn bias_add_equals_the_broadcast_add_both_ways() {
        let dev = Device::Cpu;
        for (n, d) in [(100usize, 37usize), (1, 9), (257, 1)] {
            let x0 = Tensor::randn(0f64, 1.0, (n, d), &dev).unwrap();
            let b0 = Tensor::randn(0f64, 1.0, d, &dev).unwrap();
            let w = Tensor::randn(0f64, 1.0, (n, d), &dev).unwrap();
            for (track_x, track_b) in [(true, true), (true, false), (false, true)] {
                let var = |t: &Tensor, on: bool| {
                    if on {
                        Var::from_tensor(t).unwrap().as_tensor().clone()
                    } else {
                        t.clone()
                    }
                };
                let (xa, ba) = (var(&x0, track_x), var(&b0, track_b));
                let (xb, bb) = (var(&x0, track_x), var(&b0, track_b));
                let ya = bias_add(&xa, &ba).unwrap();
                let yb = xb.broadcast_add(&bb).unwrap();
                assert_eq!(ya.to_vec2::<f64>().unwrap(), yb.to_vec2::<f64>().unwrap());
                let ga = (&ya * &w).unwrap().sum_all().unwrap().backward().unwrap();
                let gb = (&yb * &w).unwrap().sum_all().unwrap().backward().unwrap();
                for (a, b, on) in [(&xa, &xb, track_x), (&ba, &bb, track_b)] {
                    if !on {
                        // candle's add hands an untracked input a gradient too; this op not.
                        assert!(ga.get(a).is_none(), "an untracked input got a gradient");
                        continue;
                    }
                    let flat = |t: Option<&Tensor>| -> Vec<f64> {
                        t.expect("a tracked input's gradient")
                            .flatten_all()
                            .unwrap()
                            .to_vec1()
                            .unwrap()
                    };
                    let (p, q) = (flat(ga.get(a)), flat(gb.get(b)));
                    assert_eq!(p.len(), q.len());
                    for (u, v) in p.iter().zip(&q) {
                        assert!((u - v).abs() <= 1e-12 * (1.0 + v.abs()), "{u} vs {v}");
                    }
                }
            }
        }
        let x = Tensor::ones((4, 3), DType::F32, &dev).unwrap();
        let b = Tensor::ones(3, DType::F32, &dev).unwrap();
        assert!(bias_add(&x, &Tensor::ones(4, DType::F32, &dev).unwrap()).is_err());
        assert!(bias_add(&x, &b.to_dtype(DType::F64).unwrap()).is_err());
        assert!(!bias_add(&x, &b).unwrap().track_op());
    }
}
