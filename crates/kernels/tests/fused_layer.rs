//! Hidden layers as one op from their input against the composed ops they replace, values and
//! every gradient: a GCN layer that aggregates first (`Aggregate` +
//! `LinearProduct::of_aggregate` + the bias/ReLU/dropout epilogue, with or without the
//! residual add), and a MaxK-GNN layer (`LinearProduct::maxk` + dropout +
//! `MaxkProduct::aggregate`, with or without the residual).

use candle_core::{DType, Device, Tensor, Var};
use gnn_graph::Csr;
use gnn_kernels::{
    bias_relu_dropout, dropout, matmul_nt, maxk, spgemm_bias, spgemm_bias_residual, spmm,
    spmm_weighted, Aggregate, DeviceGraph, LinearProduct, Reduce,
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

/// The fused ops' gradients are plain tensors: computed from detached operands, they record no
/// op, so they hold none of the backward's intermediates (`dz`, `[N, out]`) alive for as long
/// as the gradient store lives (through the optimiser step).
fn assert_untracked(grads: &candle_core::backprop::GradStore, vars: &[&Var], what: &str) {
    for v in vars {
        if let Some(g) = grads.get(v.as_tensor()) {
            assert!(!g.track_op(), "a gradient records an op, {what}");
        }
    }
}

/// A fused op against the composed ops it replaces, both ways: random `x [n, i]`, `w [o, i]`,
/// `b [o]` as fresh variables for each side (`x` a constant unless `x_tracks`), values, `dw`,
/// `db` and `dx` of `sum(y * r)` within [`assert_close`]'s bound, no gradient for a constant
/// `x`, and the fused side's gradients recording no op.
fn assert_both_ways(
    (n, i, o): (usize, usize, usize),
    x_tracks: bool,
    what: &str,
    fused: impl Fn(&Tensor, &Tensor, &Tensor) -> Tensor,
    composed: impl Fn(&Tensor, &Tensor, &Tensor) -> Tensor,
) {
    let dev = Device::Cpu;
    let x0 = Tensor::randn(0f64, 1.0, (n, i), &dev).unwrap();
    let w0 = Tensor::randn(0f64, 0.5, (o, i), &dev).unwrap();
    let b0 = Tensor::randn(0f64, 0.5, o, &dev).unwrap();
    let r = Tensor::randn(0f64, 1.0, (n, o), &dev).unwrap();
    let vars = |t: &Tensor| Var::from_tensor(t).unwrap();
    let (xa, wa, ba) = (vars(&x0), vars(&w0), vars(&b0));
    let (xb, wb, bb) = (vars(&x0), vars(&w0), vars(&b0));
    let pick = |x: &Var| {
        if x_tracks {
            x.as_tensor().clone()
        } else {
            x0.clone()
        }
    };
    let ya = fused(&pick(&xa), wa.as_tensor(), ba.as_tensor());
    let yb = composed(&pick(&xb), wb.as_tensor(), bb.as_tensor());
    assert_close(&ya, &yb, &format!("values, {what}"));
    let ga = (&ya * &r).unwrap().sum_all().unwrap().backward().unwrap();
    let gb = (&yb * &r).unwrap().sum_all().unwrap().backward().unwrap();
    assert_untracked(&ga, &[&wa, &ba, &xa], what);
    for (a, b, name) in [(&wa, &wb, "dw"), (&ba, &bb, "db")] {
        assert_close(
            ga.get(a.as_tensor()).unwrap(),
            gb.get(b.as_tensor()).unwrap(),
            &format!("{name}, {what}"),
        );
    }
    if x_tracks {
        assert_close(
            ga.get(xa.as_tensor()).unwrap(),
            gb.get(xb.as_tensor()).unwrap(),
            &format!("dx, {what}"),
        );
    } else {
        assert!(ga.get(&x0).is_none(), "an untracked input gets no gradient");
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

/// The `(dropout rate, reduction, weighted)` cases both layer tests run.
const DROPOUT_CASES: [(f32, Reduce, bool); 3] = [
    (0.5, Reduce::Sum, true),
    (0.0, Reduce::Sum, false),
    (0.3, Reduce::Mean, false),
];

/// The layer tests' graph (`graph`'s nodes, average degree and huge row) uploaded to `dev`,
/// and f64 edge values in `[0, 1)`.
fn layer_graph(
    (n, avg, huge): (usize, usize, usize),
    seed: u64,
    dev: &Device,
) -> (DeviceGraph, Tensor) {
    let csr = graph(n, avg, huge, seed);
    let g = DeviceGraph::upload(&csr, dev).unwrap();
    let values = Tensor::rand(0f64, 1.0, csr.nnz(), dev).unwrap();
    (g, values)
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
        let (g, values) = layer_graph((n, avg, huge), 7 + n as u64, &dev);
        for (p, reduce, weighted) in DROPOUT_CASES.into_iter().chain([(0.9, Reduce::Mean, true)]) {
            for_each_variant(i, o, &mut case, |residual, h_tracks| {
                let what = format!(
                    "n {n}, huge {huge}, {i}->{o}, p {p}, {reduce:?}, weighted {weighted}, \
                     residual {residual}, h tracks {h_tracks}"
                );
                let layer = Layer {
                    g: &g,
                    v: weighted.then_some(&values),
                    reduce,
                    p,
                    residual,
                };
                assert_both_ways(
                    (n, i, o),
                    h_tracks,
                    &what,
                    |h, w, b| layer.fused(h, w, b),
                    |h, w, b| layer.composed(h, w, b),
                );
            });
        }
    }
    assert!(case > 40, "{case} cases ran");
}

/// The small graph (10 nodes) of the refusal tests, and its upload.
fn refusal_graph(dev: &Device) -> (Csr, DeviceGraph) {
    let csr = graph(10, 3, 0, 1);
    let g = DeviceGraph::upload(&csr, dev).unwrap();
    (csr, g)
}

#[test]
fn aggregate_and_fused_residual_refuse_what_they_cannot_do() {
    let dev = Device::Cpu;
    let (csr, g) = refusal_graph(&dev);
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

/// A MaxK hidden layer, `Â · dropout(maxk(x wᵀ, k)) + b [+ x]`: as one op (`fused`) or
/// composed from the public ops.
#[allow(clippy::too_many_arguments)]
fn maxk_layer(
    fused: bool,
    g: &DeviceGraph,
    v: Option<&Tensor>,
    reduce: Reduce,
    (k, p, residual): (usize, f32, bool),
    x: &Tensor,
    w: &Tensor,
    b: &Tensor,
) -> Tensor {
    if fused {
        return LinearProduct::new(x, w)
            .unwrap()
            .maxk(k)
            .unwrap()
            .dropout(p, 29)
            .unwrap()
            .aggregate(g, v, reduce, b, residual)
            .unwrap();
    }
    let c = maxk(&matmul_nt(x, w).unwrap(), k).unwrap();
    let c = c.with_data(dropout(c.data(), p, 29).unwrap()).unwrap();
    if residual {
        spgemm_bias_residual(g, &c, v, reduce, b, x).unwrap()
    } else {
        spgemm_bias(g, &c, v, reduce, Some(b)).unwrap()
    }
}

/// Runs `f(residual, tracks)` for every variant of a layer case (a residual only where
/// `i == o`; the input tracking a gradient or not), counting them into `case`.
fn for_each_variant(i: usize, o: usize, case: &mut u64, mut f: impl FnMut(bool, bool)) {
    for residual in [false, true] {
        if residual && i != o {
            continue;
        }
        for tracks in [true, false] {
            *case += 1;
            f(residual, tracks);
        }
    }
}

#[test]
fn maxk_layer_equals_the_composed_ops_both_ways() {
    let dev = Device::Cpu;
    // (nodes, avg degree, huge row, in, out, k): widths and k not multiples of 32, empty rows
    // (every 5th), a single huge row, k = out, one node, no nodes.
    let shapes = [
        (60usize, 4usize, 0usize, 37usize, 37usize, 5usize),
        (40, 3, 500, 5, 70, 33),
        (30, 2, 0, 9, 9, 9),
        (1, 1, 0, 3, 3, 1),
        (0, 1, 0, 4, 4, 2),
    ];
    let mut case = 0u64;
    for &(n, avg, huge, i, o, k) in &shapes {
        let (g, values) = layer_graph((n, avg, huge), 11 + n as u64, &dev);
        for (p, reduce, weighted) in DROPOUT_CASES {
            for_each_variant(i, o, &mut case, |residual, x_tracks| {
                let what = format!(
                    "n {n}, huge {huge}, {i}->{o}, k {k}, p {p}, {reduce:?}, weighted \
                     {weighted}, residual {residual}, x tracks {x_tracks}"
                );
                let v = weighted.then_some(&values);
                let s = (k, p, residual);
                assert_both_ways(
                    (n, i, o),
                    x_tracks,
                    &what,
                    |x, w, b| maxk_layer(true, &g, v, reduce, s, x, w, b),
                    |x, w, b| maxk_layer(false, &g, v, reduce, s, x, w, b),
                );
            });
        }
    }
    assert!(case > 30, "{case} cases ran");
}

#[test]
fn maxk_layer_refuses_what_it_cannot_do() {
    let dev = Device::Cpu;
    let (_, g) = refusal_graph(&dev);
    let x = Tensor::randn(0f32, 1.0, (10, 4), &dev).unwrap();
    let w = Tensor::randn(0f32, 1.0, (6, 4), &dev).unwrap();
    let b = Tensor::zeros(6, DType::F32, &dev).unwrap();
    let m = || LinearProduct::new(&x, &w).unwrap();
    // k out of range.
    assert!(m().maxk(0).is_err());
    assert!(m().maxk(7).is_err());
    // A residual needs the output's shape (in 4, out 6 here).
    let r = m()
        .maxk(2)
        .unwrap()
        .aggregate(&g, None, Reduce::Sum, &b, true);
    assert!(r.is_err());
    // The bias must be [out] in the values' dtype.
    let b5 = Tensor::zeros(5, DType::F32, &dev).unwrap();
    assert!(m()
        .maxk(2)
        .unwrap()
        .aggregate(&g, None, Reduce::Sum, &b5, false)
        .is_err());
    let b64 = Tensor::zeros(6, DType::F64, &dev).unwrap();
    assert!(m()
        .maxk(2)
        .unwrap()
        .aggregate(&g, None, Reduce::Sum, &b64, false)
        .is_err());
    // Max has no CBSR aggregation; a drop rate outside [0, 1) is refused; dropout once.
    assert!(m()
        .maxk(2)
        .unwrap()
        .aggregate(&g, None, Reduce::Max, &b, false)
        .is_err());
    assert!(m().maxk(2).unwrap().dropout(1.0, 0).is_err());
    assert!(m()
        .maxk(2)
        .unwrap()
        .dropout(0.5, 0)
        .unwrap()
        .dropout(0.5, 1)
        .is_err());
    // The graph's columns must be the product's rows.
    let x9 = Tensor::randn(0f32, 1.0, (9, 4), &dev).unwrap();
    let m9 = LinearProduct::new(&x9, &w).unwrap().maxk(2).unwrap();
    assert!(m9.aggregate(&g, None, Reduce::Sum, &b, false).is_err());
    // MaxK of an aggregate's product is not this layer.
    let a = Aggregate::new(&g, &x, None, Reduce::Sum).unwrap();
    assert!(LinearProduct::of_aggregate(a, &w).unwrap().maxk(2).is_err());
}
