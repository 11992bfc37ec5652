//! A GCN hidden layer as one op from its input (`Aggregate` + `LinearProduct::of_aggregate` +
//! the bias/ReLU/dropout epilogue, with or without the residual add) against the composed ops
//! it replaces, values and every gradient.

use candle_core::{DType, Device, Tensor, Var};
use gnn_graph::Csr;
use gnn_kernels::{
    bias_relu_dropout, matmul_nt, spmm, spmm_weighted, Aggregate, DeviceGraph, LinearProduct,
    Reduce,
};

mod common;
use common::to_f64;

/// A square random pattern ([`common::graph`]): every 5th row empty, row 1 `huge` long.
fn graph(n: usize, avg: usize, huge: usize, seed: u64) -> Csr {
    common::graph(n, n, avg, huge, seed)
}

fn assert_close(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.dims(), want.dims(), "{what}");
    let (a, b) = (to_f64(got), to_f64(want));
    let scale = b.iter().fold(1e-9f64, |m, v| m.max(v.abs()));
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-12 * scale,
            "{what}: element {i}: {x} vs {y}"
        );
    }
}

/// One hidden layer's setting: graph, edge values, reduction, drop rate, residual or not.
struct Layer<'a> {
    g: &'a DeviceGraph,
    v: Option<&'a Tensor>,
    reduce: Reduce,
    p: f32,
    residual: bool,
}

impl Layer<'_> {
    /// The layer composed from the public ops: `dropout(relu(Â h · wᵀ + b)) [+ h]`.
    fn composed(&self, h: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
        let a = match self.v {
            Some(v) => spmm_weighted(self.g, h, v, self.reduce).unwrap(),
            None => spmm(self.g, h, self.reduce).unwrap(),
        };
        let y = bias_relu_dropout(&matmul_nt(&a, w).unwrap(), b, self.p, 13).unwrap();
        if self.residual {
            (y + h).unwrap()
        } else {
            y
        }
    }

    /// The same layer as one op.
    fn fused(&self, h: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
        let a = Aggregate::new(self.g, h, self.v, self.reduce).unwrap();
        let z = LinearProduct::of_aggregate(a, w).unwrap();
        if self.residual {
            z.bias_relu_dropout_residual(b, self.p, 13).unwrap()
        } else {
            z.bias_relu_dropout(b, self.p, 13).unwrap()
        }
    }
}

#[test]
fn aggregate_first_layer_equals_the_composed_ops_both_ways() {
    let dev = Device::Cpu;
    // (nodes, avg degree, huge row, in, out): widths not a multiple of 32, empty rows (every
    // 5th), a single huge row, one node, no nodes.
    let shapes = [
        (60usize, 4usize, 0usize, 37usize, 37usize),
        (40, 3, 500, 5, 33),
        (1, 1, 0, 3, 3),
        (0, 1, 0, 4, 4),
        (200, 6, 0, 64, 70),
    ];
    let mut case = 0u64;
    for &(n, avg, huge, i, o) in &shapes {
        let csr = graph(n, avg, huge, 7 + n as u64);
        let g = DeviceGraph::upload(&csr, &dev).unwrap();
        let values = Tensor::rand(0f64, 1.0, csr.nnz(), &dev).unwrap();
        for (p, reduce, weighted) in [
            (0.5f32, Reduce::Sum, true),
            (0.0, Reduce::Sum, false),
            (0.3, Reduce::Mean, false),
            (0.9, Reduce::Mean, true),
        ] {
            for residual in [false, true] {
                if residual && i != o {
                    continue;
                }
                for h_tracks in [true, false] {
                    case += 1;
                    let what = format!(
                        "n {n}, huge {huge}, {i}->{o}, p {p}, {reduce:?}, weighted {weighted}, \
                         residual {residual}, h tracks {h_tracks}"
                    );
                    let h0 = Tensor::randn(0f64, 1.0, (n, i), &dev).unwrap();
                    let w0 = Tensor::randn(0f64, 0.5, (o, i), &dev).unwrap();
                    let b0 = Tensor::randn(0f64, 0.5, o, &dev).unwrap();
                    let r = Tensor::randn(0f64, 1.0, (n, o), &dev).unwrap();
                    let layer = Layer {
                        g: &g,
                        v: weighted.then_some(&values),
                        reduce,
                        p,
                        residual,
                    };
                    let vars = |t: &Tensor| Var::from_tensor(t).unwrap();
                    let (ha, wa, ba) = (vars(&h0), vars(&w0), vars(&b0));
                    let (hb, wb, bb) = (vars(&h0), vars(&w0), vars(&b0));
                    let pick = |x: &Var| {
                        if h_tracks {
                            x.as_tensor().clone()
                        } else {
                            h0.clone()
                        }
                    };
                    let (ht_a, ht_b) = (pick(&ha), pick(&hb));
                    let ya = layer.fused(&ht_a, wa.as_tensor(), ba.as_tensor());
                    let yb = layer.composed(&ht_b, wb.as_tensor(), bb.as_tensor());
                    assert_close(&ya, &yb, &format!("values, {what}"));
                    let ga = (&ya * &r).unwrap().sum_all().unwrap().backward().unwrap();
                    let gb = (&yb * &r).unwrap().sum_all().unwrap().backward().unwrap();
                    for (a, b, name) in [(&wa, &wb, "dw"), (&ba, &bb, "db")] {
                        assert_close(
                            ga.get(a.as_tensor()).unwrap(),
                            gb.get(b.as_tensor()).unwrap(),
                            &format!("{name}, {what}"),
                        );
                    }
                    if h_tracks {
                        assert_close(
                            ga.get(ha.as_tensor()).unwrap(),
                            gb.get(hb.as_tensor()).unwrap(),
                            &format!("dh, {what}"),
                        );
                    } else {
                        assert!(ga.get(&h0).is_none(), "an untracked input gets no gradient");
                    }
                }
            }
        }
    }
    assert!(case > 40, "{case} cases ran");
}

#[test]
fn aggregate_and_fused_residual_refuse_what_they_cannot_do() {
    let dev = Device::Cpu;
    let csr = graph(10, 3, 0, 1);
    let g = DeviceGraph::upload(&csr, &dev).unwrap();
    let h = Tensor::ones((10, 4), DType::F32, &dev).unwrap();
    // Max/min have no transpose product.
    assert!(Aggregate::new(&g, &h, None, Reduce::Max).is_err());
    assert!(Aggregate::new(&g, &h, None, Reduce::Min).is_err());
    // Edge values that track a gradient would lose it.
    let v = Var::from_tensor(&Tensor::ones(csr.nnz(), DType::F32, &dev).unwrap()).unwrap();
    assert!(Aggregate::new(&g, &h, Some(v.as_tensor()), Reduce::Sum).is_err());
    // Wrong row count for the graph.
    let short = Tensor::ones((9, 4), DType::F32, &dev).unwrap();
    assert!(Aggregate::new(&g, &short, None, Reduce::Sum).is_err());
    // A residual needs the output's shape (in 4, out 3 here).
    let w = Tensor::ones((3, 4), DType::F32, &dev).unwrap();
    let b = Tensor::zeros(3, DType::F32, &dev).unwrap();
    let z = LinearProduct::of_aggregate(Aggregate::new(&g, &h, None, Reduce::Sum).unwrap(), &w)
        .unwrap();
    assert!(z.bias_relu_dropout_residual(&b, 0.5, 0).is_err());
    // The product's width must match the aggregate's.
    let w5 = Tensor::ones((3, 5), DType::F32, &dev).unwrap();
    let a = Aggregate::new(&g, &h, None, Reduce::Sum).unwrap();
    assert_eq!(a.value().dims(), [10, 4]);
    assert!(LinearProduct::of_aggregate(a, &w5).is_err());
}
