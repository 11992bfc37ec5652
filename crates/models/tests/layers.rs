//! Layers against dense formulas, gradients, checkpoints, seeding.

use candle_core::{DType, Device, Tensor};
use gnn_graph::{BuildOptions, Coo, Csr};
use gnn_kernels::Reduce;
use gnn_models::{ConvKind, DropoutRng, Forward, Gnn, ModelConfig, ModelGraph, PassOutput};
use rand::{Rng, SeedableRng};

fn small_graph() -> Csr {
    let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
    let n = 30;
    let src: Vec<u32> = (0..90).map(|_| r.random_range(0..n)).collect();
    let dst: Vec<u32> = (0..90).map(|_| r.random_range(0..n)).collect();
    // node 29 stays isolated
    let (src, dst): (Vec<u32>, Vec<u32>) = src
        .into_iter()
        .zip(dst)
        .filter(|&(s, d)| s != 29 && d != 29)
        .unzip();
    Coo::new(n as usize, src, dst)
        .unwrap()
        .to_csr(BuildOptions::undirected())
        .unwrap()
}

fn mat(t: &Tensor) -> Vec<Vec<f32>> {
    t.to_dtype(DType::F32).unwrap().to_vec2::<f32>().unwrap()
}

fn matmul_t(x: &[Vec<f32>], w: &[Vec<f32>]) -> Vec<Vec<f32>> {
    x.iter()
        .map(|r| {
            w.iter()
                .map(|wr| r.iter().zip(wr).map(|(a, b)| a * b).sum())
                .collect()
        })
        .collect()
}

fn param(m: &Gnn, name: &str) -> Tensor {
    m.named_vars()
        .into_iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no {name}"))
        .1
        .as_tensor()
        .clone()
}

/// `rows + bias` on every row, `bias` the model's parameter `name` (biases start non-zero:
/// PyG's draw for SAGE's and GIN's linears).
fn plus_bias(rows: Vec<Vec<f32>>, m: &Gnn, name: &str) -> Vec<Vec<f32>> {
    let b: Vec<f32> = param(m, name).to_vec1().unwrap();
    assert!(b.iter().any(|&v| v != 0.0), "{name} is all zeros");
    rows.into_iter()
        .map(|r| r.iter().zip(&b).map(|(v, c)| v + c).collect())
        .collect()
}

fn close(a: &[Vec<f32>], b: &[Vec<f32>], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (i, (ra, rb)) in a.iter().zip(b).enumerate() {
        for (j, (x, y)) in ra.iter().zip(rb).enumerate() {
            assert!(
                (x - y).abs() <= tol * (1.0 + y.abs()),
                "[{i}][{j}] {x} vs {y}"
            );
        }
    }
}

/// Dense neighbourhood sums over `csr` rows, optionally weighted.
fn aggregate(csr: &Csr, x: &[Vec<f32>], f: impl Fn(usize, usize) -> f32) -> Vec<Vec<f32>> {
    (0..csr.n_rows())
        .map(|i| {
            let mut acc = vec![0f32; x[0].len()];
            for &j in csr.row(i) {
                let w = f(i, j as usize);
                acc.iter_mut()
                    .zip(&x[j as usize])
                    .for_each(|(a, b)| *a += w * b);
            }
            acc
        })
        .collect()
}

fn run(kind: ConvKind, in_dim: usize, out_dim: usize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>, Gnn) {
    run_cfg(ModelConfig::new(kind, in_dim, 8, out_dim, 1, 0.0))
}

/// One evaluation forward of a model built from `cfg` (seed 3) on random input over
/// [`small_graph`]: `(x, y, model)`.
fn run_cfg(cfg: ModelConfig) -> (Vec<Vec<f32>>, Vec<Vec<f32>>, Gnn) {
    let dev = Device::Cpu;
    let csr = small_graph();
    let (kind, in_dim) = (cfg.kind, cfg.in_dim);
    let model = Gnn::new(cfg, &dev, 3).unwrap();
    let g = ModelGraph::new(&csr, kind, &dev).unwrap();
    let x = Tensor::randn(0f32, 1.0, (30, in_dim), &dev).unwrap();
    let y = model.forward(&g, &x, &mut Forward::eval()).unwrap();
    (mat(&x), mat(&y), model)
}

#[test]
fn gcn_matches_dense_formula_in_both_orders() {
    let csr = small_graph()
        .rebuild(BuildOptions {
            self_loops: gnn_graph::SelfLoops::Add,
            ..Default::default()
        })
        .unwrap();
    for (i, o) in [(12, 5), (4, 9)] {
        let (x, y, m) = run(ConvKind::Gcn, i, o);
        let w = mat(&param(&m, "convs.0.lin.weight"));
        let deg = |v: usize| csr.row_len(v) as f32;
        let agg = aggregate(&csr, &x, |a, b| 1.0 / (deg(a) * deg(b)).sqrt());
        let want = matmul_t(&agg, &w); // bias is zero at init
        close(&y, &want, 1e-5);
    }
}

#[test]
fn sage_mean_and_pool_match_dense_formulas() {
    let csr = small_graph();
    for (i, o) in [(12, 5), (4, 9)] {
        let (x, y, m) = run(ConvKind::SageMean, i, o);
        let (wl, wr) = (
            mat(&param(&m, "convs.0.lin_l.weight")),
            mat(&param(&m, "convs.0.lin_r.weight")),
        );
        let mean = aggregate(&csr, &x, |a, _| 1.0 / csr.row_len(a) as f32);
        let l = matmul_t(&mean, &wl);
        let r = matmul_t(&x, &wr);
        let want: Vec<Vec<f32>> = l
            .iter()
            .zip(&r)
            .map(|(a, b)| a.iter().zip(b).map(|(p, q)| p + q).collect())
            .collect();
        let want = plus_bias(want, &m, "convs.0.lin_l.bias");
        close(&y, &want, 1e-5);
        let root = plus_bias(r, &m, "convs.0.lin_l.bias");
        assert!(
            y[29]
                .iter()
                .zip(&root[29])
                .all(|(a, b)| (a - b).abs() < 1e-6),
            "isolated node keeps its root term (and the bias) only"
        );
    }
    let (x, y, m) = run(ConvKind::SagePool, 6, 4);
    let wp = mat(&param(&m, "convs.0.lin.weight"));
    let p: Vec<Vec<f32>> = plus_bias(matmul_t(&x, &wp), &m, "convs.0.lin.bias")
        .into_iter()
        .map(|r| r.into_iter().map(|v| v.max(0.0)).collect())
        .collect();
    let pooled: Vec<Vec<f32>> = (0..30)
        .map(|i| {
            let row = csr.row(i);
            (0..6)
                .map(|t| {
                    row.iter()
                        .map(|&j| p[j as usize][t])
                        .fold(f32::NEG_INFINITY, f32::max)
                })
                .map(|v| if v.is_finite() { v } else { 0.0 })
                .collect()
        })
        .collect();
    let want: Vec<Vec<f32>> = matmul_t(&pooled, &mat(&param(&m, "convs.0.lin_l.weight")))
        .iter()
        .zip(matmul_t(&x, &mat(&param(&m, "convs.0.lin_r.weight"))))
        .map(|(a, b)| a.iter().zip(b).map(|(p, q)| p + q).collect())
        .collect();
    close(&y, &plus_bias(want, &m, "convs.0.lin_l.bias"), 1e-5);
}

/// A one-layer GIN's output at initialisation (eps 0; with `norm`, LayerNorm of weight 1, bias
/// 0 and eps 1e-5 between the first linear and the ReLU) by the dense formula.
fn gin_dense(csr: &Csr, x: &[Vec<f32>], m: &Gnn, norm: bool) -> Vec<Vec<f32>> {
    let agg = aggregate(csr, x, |_, _| 1.0);
    let z: Vec<Vec<f32>> = agg
        .iter()
        .zip(x)
        .map(|(a, b)| a.iter().zip(b).map(|(p, q)| p + q).collect())
        .collect(); // eps = 0
    let h0 = matmul_t(&z, &mat(&param(m, "convs.0.nn.0.weight")));
    let h: Vec<Vec<f32>> = plus_bias(h0, m, "convs.0.nn.0.bias")
        .into_iter()
        .map(|r| {
            let n = r.len() as f32;
            let mu = r.iter().sum::<f32>() / n;
            let var = r.iter().map(|v| (v - mu) * (v - mu)).sum::<f32>() / n;
            r.iter()
                .map(|v| {
                    if norm {
                        (v - mu) / (var + 1e-5).sqrt()
                    } else {
                        *v
                    }
                })
                .map(|v| v.max(0.0))
                .collect()
        })
        .collect();
    let want = matmul_t(&h, &mat(&param(m, "convs.0.nn.2.weight")));
    plus_bias(want, m, "convs.0.nn.2.bias")
}

#[test]
fn gin_matches_dense_formula_in_both_orders() {
    let csr = small_graph();
    for (i, o) in [(12, 5), (4, 9)] {
        let (x, y, m) = run(ConvKind::Gin, i, o);
        // The MLP is in -> hidden (8) -> out, also in the last layer.
        assert_eq!(mat(&param(&m, "convs.0.nn.0.weight")).len(), 8);
        assert_eq!(mat(&param(&m, "convs.0.nn.2.weight")).len(), o);
        assert_eq!(mat(&param(&m, "convs.0.nn.2.weight"))[0].len(), 8);
        close(&y, &gin_dense(&csr, &x, &m, false), 1e-4);
    }
}

/// A `[30, d]` input drawn uniformly from [-1, 1) with `seed`: the cached-aggregation tests
/// compare two roundings of the same function, and a pre-activation that rounds to either side
/// of 0 would flip a ReLU; a fixed input keeps them deterministic.
fn seeded_x(d: usize, seed: u64) -> Tensor {
    let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let v: Vec<f32> = (0..30 * d).map(|_| r.random_range(-1.0f32..1.0)).collect();
    Tensor::from_vec(v, (30, d), &Device::Cpu).unwrap()
}

/// One training forward (dropout masks from `seed`, the first layer reading `agg` when given)
/// and the backward of the sum of squared outputs: the logits and each parameter's gradient,
/// in `named_vars` order (`None` where a parameter got none).
fn train_pass(
    model: &Gnn,
    g: &ModelGraph,
    x: &Tensor,
    agg: Option<&Tensor>,
    seed: u64,
) -> (Tensor, Vec<(String, Option<Tensor>)>) {
    let mut rng = DropoutRng::new(seed);
    let mut ctx = Forward::train(&mut rng).with_input_aggregate(agg);
    let y = model.forward(g, x, &mut ctx).unwrap();
    let gs = named_grads(model, &y.sqr().unwrap().sum_all().unwrap());
    (y, gs)
}

/// The backward of `loss`: each parameter's gradient, in `named_vars` order (`None` where a
/// parameter got none).
fn named_grads(model: &Gnn, loss: &Tensor) -> Vec<(String, Option<Tensor>)> {
    let grads = loss.backward().unwrap();
    model
        .named_vars()
        .into_iter()
        .map(|(k, v)| (k, grads.get(v.as_tensor()).cloned()))
        .collect()
}

/// One training pass (dropout masks from seed 4, the first layer reading `agg` when given)
/// for the output rows `rows` or over the restricted output graph `out` when either is
/// given, else the whole pass with its rows `ids` taken; then the backward of the logits'
/// sum of squares. The logits and each parameter's gradient (zeros where it got none).
fn pass_on_rows(
    model: &Gnn,
    g: &ModelGraph,
    x: &Tensor,
    agg: Option<&Tensor>,
    rows: Option<&gnn_models::OutputRows>,
    out: Option<&ModelGraph>,
    ids: &Tensor,
) -> (Tensor, Vec<Vec<f32>>) {
    let mut rng = DropoutRng::new(4);
    let mut ctx = Forward::train(&mut rng)
        .with_input_aggregate(agg)
        .with_output_rows(rows)
        .with_output_graph(out);
    let y = model.forward(g, x, &mut ctx).unwrap();
    let y = if rows.is_some() || out.is_some() {
        y
    } else {
        y.index_select(ids, 0).unwrap()
    };
    let grads = y.sqr().unwrap().sum_all().unwrap().backward().unwrap();
    let gs = model
        .named_vars()
        .into_iter()
        .map(|(_, v)| match grads.get(v.as_tensor()) {
            Some(t) => t.flatten_all().unwrap().to_vec1().unwrap(),
            None => vec![0.0; v.elem_count()],
        })
        .collect();
    (y, gs)
}

/// [`pass_on_rows`] for some rows (`got`) against the whole pass's rows (`want`): `got`'s
/// logits `[rows, classes]` within 1e-5 of `want`'s, each gradient within 1e-4 of its
/// parameter's largest.
fn assert_rows_pass(
    model: &Gnn,
    (y1, g1): (Tensor, Vec<Vec<f32>>),
    (y0, g0): (Tensor, Vec<Vec<f32>>),
    classes: usize,
    what: &str,
) {
    assert_eq!(y1.dims(), [y0.dim(0).unwrap(), classes], "{what}");
    if y0.dim(0).unwrap() > 0 {
        close(&mat(&y1), &mat(&y0), 1e-5);
    }
    for ((name, _), (a, b)) in model.named_vars().iter().zip(g1.iter().zip(&g0)) {
        let scale = b.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
        for (p, q) in a.iter().zip(b) {
            assert!((p - q).abs() <= 1e-4 * scale, "{what} {name}: {p} vs {q}");
        }
    }
}

/// Every parameter has a gradient with a non-zero entry.
fn assert_every_gradient_nonzero(grads: &[(String, Option<Tensor>)], what: &str) {
    for (name, gr) in grads {
        let gr = gr
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: no grad for {name}"));
        let norm: f32 = gr.sqr().unwrap().sum_all().unwrap().to_scalar().unwrap();
        assert!(norm > 0.0, "{what}: zero grad for {name}");
    }
}

/// The gradients as flat vectors (each must exist).
fn flat_grads(grads: &[(String, Option<Tensor>)]) -> Vec<Vec<f32>> {
    grads
        .iter()
        .map(|(name, gr)| {
            let gr = gr.as_ref().unwrap_or_else(|| panic!("no grad for {name}"));
            gr.flatten_all().unwrap().to_vec1().unwrap()
        })
        .collect()
}

/// Each parameter's gradient in `got` equals `want`'s within `tol` times that gradient's
/// largest entry (at least 1e-3): the same shape, entry by entry.
fn assert_grads_close(
    model: &Gnn,
    got: &[(String, Option<Tensor>)],
    want: &[(String, Option<Tensor>)],
    tol: f32,
    what: &str,
) {
    let (got, want) = (flat_grads(got), flat_grads(want));
    for ((name, _), (a, b)) in model.named_vars().iter().zip(got.iter().zip(&want)) {
        assert_eq!(a.len(), b.len(), "{what} {name}: gradient shape");
        let scale = b.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
        for (p, q) in a.iter().zip(b) {
            assert!((p - q).abs() <= tol * scale, "{what} {name}: {p} vs {q}");
        }
    }
}

#[test]
fn every_parameter_gets_a_gradient() {
    let dev = Device::Cpu;
    let csr = small_graph();
    for kind in [
        ConvKind::Gcn,
        ConvKind::SageMean,
        ConvKind::SagePool,
        ConvKind::Gin,
        ConvKind::Gat,
        ConvKind::Transformer,
        ConvKind::Mlp,
    ] {
        let mut cfg = ModelConfig::new(kind, 7, 6, 3, 3, 0.5);
        cfg.layer_norm = true;
        cfg.heads = 2;
        cfg.att_dropout = 0.3;
        let model = Gnn::new(cfg, &dev, 1).unwrap();
        let g = ModelGraph::new(&csr, kind, &dev).unwrap();
        let x = Tensor::randn(0f32, 1.0, (30, 7), &dev).unwrap();
        let (y, grads) = train_pass(&model, &g, &x, None, 0);
        assert_eq!(y.dims(), [30, 3]);
        assert_every_gradient_nonzero(&grads, &kind.to_string());
    }
}

#[test]
fn sampled_aggregation_is_refused_in_training() {
    let dev = Device::Cpu;
    let csr = small_graph();
    let model = Gnn::new(ModelConfig::new(ConvKind::Gcn, 7, 6, 3, 2, 0.5), &dev, 1).unwrap();
    let mut g = ModelGraph::new(&csr, ConvKind::Gcn, &dev).unwrap();
    g.aggregation = "aes:32".parse().unwrap();
    let x = Tensor::randn(0f32, 1.0, (30, 7), &dev).unwrap();
    let mut rng = DropoutRng::new(0);
    let e = model
        .forward(&g, &x, &mut Forward::train(&mut rng))
        .unwrap_err();
    assert!(e.to_string().contains("inference only"), "{e}");
    // Evaluation runs, and at a width above every degree it equals the exact forward.
    let y = model.forward(&g, &x, &mut Forward::eval()).unwrap();
    g.aggregation = gnn_models::Aggregation::Exact;
    let z = model.forward(&g, &x, &mut Forward::eval()).unwrap();
    close(&mat(&y), &mat(&z), 1e-5);
}

/// Half precision is a CUDA path: every model (attention and max aggregation included) given
/// bf16 / f16 features on the CPU fails with an error naming the dtype and the device, not
/// a silent f32 run.
#[test]
fn half_precision_models_are_refused_on_the_cpu() {
    let dev = Device::Cpu;
    let csr = small_graph();
    for kind in [ConvKind::SagePool, ConvKind::Gat, ConvKind::Transformer] {
        let model = Gnn::new(ModelConfig::new(kind, 7, 8, 3, 2, 0.0), &dev, 1).unwrap();
        let g = ModelGraph::new(&csr, kind, &dev).unwrap();
        for dt in [DType::BF16, DType::F16] {
            let x = Tensor::ones((30, 7), dt, &dev).unwrap();
            let e = model
                .forward(&g, &x, &mut Forward::eval())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("{dt:?}")) && e.contains("CUDA only"),
                "{kind}: {e}"
            );
        }
    }
}

#[test]
fn checkpoint_round_trip_and_errors() {
    let dev = Device::Cpu;
    let csr = small_graph();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = ModelConfig::new(ConvKind::SageMean, 7, 6, 3, 2, 0.5);
    let model = Gnn::new(cfg.clone(), &dev, 9).unwrap();
    let (st, js) = model
        .save(tmp.path().join("m"), serde_json::json!({"dataset": "toy"}))
        .unwrap();
    assert!(st.exists() && js.exists());
    let loaded = Gnn::load(&st, &dev).unwrap();
    assert_eq!(loaded.config(), &cfg);
    let g = ModelGraph::new(&csr, ConvKind::SageMean, &dev).unwrap();
    let x = Tensor::randn(0f32, 1.0, (30, 7), &dev).unwrap();
    let a = mat(&model.forward(&g, &x, &mut Forward::eval()).unwrap());
    let b = mat(&loaded.forward(&g, &x, &mut Forward::eval()).unwrap());
    assert_eq!(a, b);
    // Missing file, garbage file.
    let e = Gnn::load(tmp.path().join("nope"), &dev)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("nope.safetensors"), "{e}");
    std::fs::write(tmp.path().join("bad.safetensors"), b"garbage").unwrap();
    let e = Gnn::load(tmp.path().join("bad"), &dev)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("bad.safetensors") && e.contains("not a safetensors"),
        "{e}"
    );
    // A safetensors file whose tensors do not match the config.
    let other = Gnn::new(ModelConfig::new(ConvKind::Gcn, 7, 6, 3, 2, 0.5), &dev, 0).unwrap();
    let (ost, _) = other
        .save(tmp.path().join("gcn"), serde_json::Value::Null)
        .unwrap();
    let mut bytes = std::fs::read(&ost).unwrap();
    // Same-length edit of the config inside the header: kind gcn -> gin.
    let pat = br#"kind\":\"gcn"#;
    let at = bytes
        .windows(pat.len())
        .position(|w| w == pat)
        .expect("config in header");
    bytes[at + pat.len() - 3..at + pat.len()].copy_from_slice(b"gin");
    std::fs::write(tmp.path().join("mismatch.safetensors"), &bytes).unwrap();
    let e = Gnn::load(tmp.path().join("mismatch"), &dev)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("missing tensor `convs.0.eps`"), "{e}");
}

#[test]
fn init_and_dropout_are_seeded() {
    let dev = Device::Cpu;
    let cfg = ModelConfig::new(ConvKind::Gcn, 20, 16, 4, 2, 0.5);
    let a = Gnn::new(cfg.clone(), &dev, 42).unwrap();
    let b = Gnn::new(cfg.clone(), &dev, 42).unwrap();
    let c = Gnn::new(cfg, &dev, 43).unwrap();
    let w = |m: &Gnn| mat(&param(m, "convs.0.lin.weight"));
    assert_eq!(w(&a), w(&b));
    assert_ne!(w(&a), w(&c));
    let lim = (6.0f32 / 36.0).sqrt();
    assert!(
        w(&a).iter().flatten().all(|v| v.abs() <= lim),
        "glorot bound"
    );
    let x = Tensor::ones((100, 100), DType::F32, &dev).unwrap();
    let d1 = mat(&DropoutRng::new(1).dropout(&x, 0.3).unwrap());
    let d2 = mat(&DropoutRng::new(1).dropout(&x, 0.3).unwrap());
    assert_eq!(d1, d2);
    let kept = d1.iter().flatten().filter(|&&v| v > 0.0).count() as f32 / 1e4;
    assert!((kept - 0.7).abs() < 0.03, "kept {kept}");
    assert!(d1
        .iter()
        .flatten()
        .all(|&v| v == 0.0 || (v - 1.0 / 0.7).abs() < 1e-6));
}

#[test]
fn config_validation_and_parsing() {
    assert!(ModelConfig::new(ConvKind::Gcn, 4, 4, 2, 0, 0.5)
        .validate()
        .is_err());
    assert!(ModelConfig::new(ConvKind::Gcn, 4, 4, 2, 2, 1.0)
        .validate()
        .is_err());
    assert!("sage".parse::<ConvKind>().unwrap() == ConvKind::SageMean);
    assert!("gat".parse::<ConvKind>().unwrap() == ConvKind::Gat);
    assert!("gatv2".parse::<ConvKind>().is_err());
}

/// Keeps the k largest entries of each row (ties to the lower column), zeroes the rest.
fn maxk_dense(x: &[Vec<f32>], k: usize) -> Vec<Vec<f32>> {
    x.iter()
        .map(|r| {
            let mut c: Vec<usize> = (0..r.len()).collect();
            c.sort_by(|&a, &b| r[b].total_cmp(&r[a]).then(a.cmp(&b)));
            let mut out = vec![0f32; r.len()];
            for &j in &c[..k] {
                out[j] = r[j];
            }
            out
        })
        .collect()
}

#[test]
fn maxk_layers_match_dense_formulas() {
    use gnn_models::Activation;
    let dev = Device::Cpu;
    let csr = small_graph();
    let with_loops = csr
        .rebuild(BuildOptions {
            self_loops: gnn_graph::SelfLoops::Add,
            ..Default::default()
        })
        .unwrap();
    let x = Tensor::randn(0f32, 1.0, (30, 6), &dev).unwrap();
    for kind in [ConvKind::Gcn, ConvKind::SageMean, ConvKind::Gin] {
        let mut cfg = ModelConfig::new(kind, 6, 10, 3, 2, 0.0);
        cfg.activation = Activation::MaxK { k: 4 };
        let m = Gnn::new(cfg, &dev, 5).unwrap();
        let g = ModelGraph::new(&csr, kind, &dev).unwrap();
        let y = mat(&m.forward(&g, &x, &mut Forward::eval()).unwrap());
        // Layer 0 by hand: linear, MaxK, aggregation; layer 1 as the ReLU model's last layer.
        let xs = mat(&x);
        let h0 = match kind {
            ConvKind::Gcn => {
                let s = maxk_dense(&matmul_t(&xs, &mat(&param(&m, "convs.0.lin.weight"))), 4);
                let deg = |v: usize| with_loops.row_len(v) as f32;
                aggregate(&with_loops, &s, |a, b| 1.0 / (deg(a) * deg(b)).sqrt())
            }
            ConvKind::SageMean => {
                let s = maxk_dense(&matmul_t(&xs, &mat(&param(&m, "convs.0.lin_l.weight"))), 4);
                let agg = aggregate(&csr, &s, |a, _| 1.0 / csr.row_len(a).max(1) as f32);
                let r = matmul_t(&xs, &mat(&param(&m, "convs.0.lin_r.weight")));
                let sum = agg
                    .iter()
                    .zip(&r)
                    .map(|(a, b)| a.iter().zip(b).map(|(p, q)| p + q).collect())
                    .collect();
                plus_bias(sum, &m, "convs.0.lin_l.bias")
            }
            _ => {
                let s = maxk_dense(&matmul_t(&xs, &mat(&param(&m, "convs.0.nn.0.weight"))), 4);
                let agg = aggregate(&csr, &s, |_, _| 1.0);
                let sum: Vec<Vec<f32>> = agg
                    .iter()
                    .zip(&s)
                    .map(|(a, b)| a.iter().zip(b).map(|(p, q)| p + q).collect())
                    .collect();
                let z: Vec<Vec<f32>> = plus_bias(sum, &m, "convs.0.nn.0.bias")
                    .into_iter()
                    .map(|r| r.into_iter().map(|v| v.max(0.0)).collect())
                    .collect();
                let out = matmul_t(&z, &mat(&param(&m, "convs.0.nn.2.weight")));
                plus_bias(out, &m, "convs.0.nn.2.bias")
            }
        };
        // Feed the hand-computed hidden layer through a ReLU twin's last layer: the last
        // layer of a MaxK model is the ordinary one.
        let relu = {
            let mut c = m.config().clone();
            c.activation = Activation::Relu;
            c.layers = 1;
            c.in_dim = 10;
            Gnn::new(c, &dev, 0).unwrap()
        };
        for (name, v) in relu.named_vars() {
            let src = name.replacen("convs.0.", "convs.1.", 1);
            v.set(&param(&m, &src)).unwrap();
        }
        let h0 = Tensor::new(h0, &dev).unwrap();
        let want = mat(&relu.forward(&g, &h0, &mut Forward::eval()).unwrap());
        close(&y, &want, 1e-4);

        // Training: every parameter gets a gradient through MaxK, dropout and SpGEMM/SSpMM.
        let mut rng = DropoutRng::new(0);
        let mut cfg = m.config().clone();
        cfg.dropout = 0.3;
        cfg.layers = 3;
        let m3 = Gnn::new(cfg, &dev, 5).unwrap();
        let y = m3.forward(&g, &x, &mut Forward::train(&mut rng)).unwrap();
        let grads = y.sqr().unwrap().sum_all().unwrap().backward().unwrap();
        for (name, v) in m3.named_vars() {
            let gr = grads
                .get(v.as_tensor())
                .unwrap_or_else(|| panic!("{kind} {name}"));
            let n = gr
                .sqr()
                .unwrap()
                .sum_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert!(
                n > 0.0 || name.ends_with("eps"),
                "{kind}: zero grad for {name}"
            );
        }
    }
}

#[test]
fn maxk_config_is_validated() {
    use gnn_models::Activation;
    let mut cfg = ModelConfig::new(ConvKind::Gcn, 8, 16, 3, 2, 0.5);
    for (kind, k, ok) in [
        (ConvKind::Gcn, 16, true),
        (ConvKind::Gcn, 17, false),
        (ConvKind::Gcn, 0, false),
        (ConvKind::SagePool, 4, false),
        (ConvKind::Mlp, 4, false),
        (ConvKind::Gin, 4, true),
    ] {
        cfg.kind = kind;
        cfg.activation = Activation::MaxK { k };
        assert_eq!(cfg.validate().is_ok(), ok, "{kind} k={k}");
    }
    let json = serde_json::to_string(&cfg).unwrap();
    assert!(json.contains("\"max_k\":{\"k\":4}"), "{json}");
    let back: ModelConfig = serde_json::from_str(&json).unwrap();
    assert_eq!(back, cfg);
}

/// One GAT layer (2 heads, averaged) against the dense formula over `N(i) ∪ {i}`, and the
/// 2-layer model's PyG parameter names and shapes (8 x 8 hidden heads, one output head).
#[test]
fn gat_matches_dense_formula_and_pyg_names() {
    let dev = Device::Cpu;
    let csr = small_graph();
    let (n, in_dim, out) = (30, 5, 4);
    let mut cfg = ModelConfig::new(ConvKind::Gat, in_dim, 8, out, 1, 0.0);
    cfg.heads = 2;
    let model = Gnn::new(cfg, &dev, 3).unwrap();
    let g = ModelGraph::new(&csr, ConvKind::Gat, &dev).unwrap();
    let x = Tensor::randn(0f32, 1.0, (n, in_dim), &dev).unwrap();
    let y = model.forward(&g, &x, &mut Forward::eval()).unwrap();
    // The last layer has one head of width `out`, averaged (PyG's concat=False).
    let w = mat(&param(&model, "convs.0.lin.weight"));
    let a_src = param(&model, "convs.0.att_src")
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let a_dst = param(&model, "convs.0.att_dst")
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let xw = matmul_t(&mat(&x), &w);
    let dot = |v: &[f32], a: &[f32]| -> f32 { v.iter().zip(a).map(|(p, q)| p * q).sum() };
    let want: Vec<Vec<f32>> = (0..n)
        .map(|i| {
            let mut nb: Vec<usize> = csr
                .row(i)
                .iter()
                .map(|&j| j as usize)
                .filter(|&j| j != i)
                .collect();
            nb.push(i);
            let e: Vec<f32> = nb
                .iter()
                .map(|&j| {
                    let v = dot(&xw[i], &a_dst) + dot(&xw[j], &a_src);
                    if v > 0.0 {
                        v
                    } else {
                        0.2 * v
                    }
                })
                .collect();
            let m = e.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let z: f32 = e.iter().map(|v| (v - m).exp()).sum();
            let mut acc = vec![0f32; out];
            for (q, &j) in nb.iter().enumerate() {
                let a = (e[q] - m).exp() / z;
                acc.iter_mut().zip(&xw[j]).for_each(|(s, v)| *s += a * v);
            }
            acc
        })
        .collect();
    close(&mat(&y), &want, 1e-5);
    // PyG's Cora GAT: GATConv(1433, 8, heads=8) -> GATConv(64, 7, heads=1, concat=False).
    let mut cfg = ModelConfig::new(ConvKind::Gat, 1433, 64, 7, 2, 0.6);
    cfg.heads = 8;
    let m = Gnn::new(cfg, &dev, 0).unwrap();
    let shapes: Vec<(String, Vec<usize>)> = m
        .named_vars()
        .into_iter()
        .map(|(k, v)| (k, v.dims().to_vec()))
        .collect();
    let want = [
        ("convs.0.att_dst", vec![1, 8, 8]),
        ("convs.0.att_src", vec![1, 8, 8]),
        ("convs.0.bias", vec![64]),
        ("convs.0.lin.weight", vec![64, 1433]),
        ("convs.1.att_dst", vec![1, 1, 7]),
        ("convs.1.att_src", vec![1, 1, 7]),
        ("convs.1.bias", vec![7]),
        ("convs.1.lin.weight", vec![7, 64]),
    ];
    let want: Vec<(String, Vec<usize>)> =
        want.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    assert_eq!(shapes, want);
    assert_eq!(m.num_params(), 92_373, "PyG's count for this model");
    // Sampled aggregation has no GAT counterpart: refused, not silently exact.
    let mut gs = ModelGraph::new(&csr, ConvKind::Gat, &dev).unwrap();
    gs.aggregation = "aes:4".parse().unwrap();
    let e = model
        .forward(&gs, &x, &mut Forward::eval())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("no GAT counterpart"), "{e}");
    // Heads must divide the hidden width.
    let mut bad = ModelConfig::new(ConvKind::Gat, 5, 10, 3, 2, 0.0);
    bad.heads = 3;
    assert!(Gnn::new(bad, &dev, 0).is_err());
}

/// One transformer layer (2 heads, averaged) against the dense formula over `N(i)` (no self
/// loops) plus the skip, and PyG's parameter names and count for the Cora shape.
#[test]
fn transformer_matches_dense_formula_and_pyg_names() {
    let dev = Device::Cpu;
    let csr = small_graph();
    let (n, in_dim, out) = (30, 5, 4);
    let mut cfg = ModelConfig::new(ConvKind::Transformer, in_dim, 8, out, 1, 0.0);
    cfg.heads = 2;
    let model = Gnn::new(cfg, &dev, 3).unwrap();
    let g = ModelGraph::new(&csr, ConvKind::Transformer, &dev).unwrap();
    let x = Tensor::randn(0f32, 1.0, (n, in_dim), &dev).unwrap();
    let y = model.forward(&g, &x, &mut Forward::eval()).unwrap();
    let lin = |name: &str| -> Vec<Vec<f32>> {
        let w = mat(&param(&model, &format!("convs.0.{name}.weight")));
        let b = param(&model, &format!("convs.0.{name}.bias"))
            .to_vec1::<f32>()
            .unwrap();
        matmul_t(&mat(&x), &w)
            .into_iter()
            .map(|r| r.iter().zip(&b).map(|(v, c)| v + c).collect())
            .collect()
    };
    let (q, k, v, skip) = (
        lin("lin_query"),
        lin("lin_key"),
        lin("lin_value"),
        lin("lin_skip"),
    );
    let want: Vec<Vec<f32>> = (0..n)
        .map(|i| {
            let nb: Vec<usize> = csr
                .row(i)
                .iter()
                .map(|&j| j as usize)
                .filter(|&j| j != i)
                .collect();
            let mut acc = skip[i].clone();
            if nb.is_empty() {
                return acc;
            }
            let e: Vec<f32> = nb
                .iter()
                .map(|&j| {
                    q[i].iter().zip(&k[j]).map(|(a, b)| a * b).sum::<f32>() / (out as f32).sqrt()
                })
                .collect();
            let m = e.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let z: f32 = e.iter().map(|v| (v - m).exp()).sum();
            for (qq, &j) in nb.iter().enumerate() {
                let a = (e[qq] - m).exp() / z;
                acc.iter_mut().zip(&v[j]).for_each(|(s, x)| *s += a * x);
            }
            acc
        })
        .collect();
    close(&mat(&y), &want, 1e-5);
    // PyG: TransformerConv(1433, 8, heads=8) -> TransformerConv(64, 7, heads=1, concat=False).
    let mut cfg = ModelConfig::new(ConvKind::Transformer, 1433, 64, 7, 2, 0.6);
    cfg.heads = 8;
    let m = Gnn::new(cfg, &dev, 0).unwrap();
    assert_eq!(m.num_params(), 368_924, "PyG's count for this model");
    let names: Vec<String> = m.named_vars().into_iter().map(|(k, _)| k).collect();
    for want in [
        "convs.0.lin_query.weight",
        "convs.0.lin_key.bias",
        "convs.1.lin_skip.weight",
    ] {
        assert!(
            names.iter().any(|k| k == want),
            "{want} missing from {names:?}"
        );
    }
}

/// `Lin -> LayerNorm -> ReLU -> Lin` inside GIN (`mlp_norm`), in both product orders.
#[test]
fn gin_mlp_norm_matches_dense_formula_in_both_orders() {
    let csr = small_graph();
    for (i, o) in [(12, 5), (4, 9)] {
        let mut cfg = ModelConfig::new(ConvKind::Gin, i, 8, o, 1, 0.0);
        cfg.mlp_norm = true;
        let (x, y, m) = run_cfg(cfg);
        close(&y, &gin_dense(&csr, &x, &m, true), 1e-4);
    }
}

#[test]
fn gin_mlp_norm_trains_every_parameter_and_is_gin_only() {
    let dev = Device::Cpu;
    let csr = small_graph();
    for maxk in [None, Some(3)] {
        let mut cfg = ModelConfig::new(ConvKind::Gin, 7, 6, 3, 3, 0.5);
        cfg.mlp_norm = true;
        if let Some(k) = maxk {
            cfg.activation = gnn_models::Activation::MaxK { k };
        }
        let model = Gnn::new(cfg, &dev, 1).unwrap();
        let names: Vec<String> = model.named_vars().into_iter().map(|(k, _)| k).collect();
        assert!(
            names.iter().any(|n| n == "convs.1.norm.weight"),
            "{names:?}"
        );
        let g = ModelGraph::new(&csr, ConvKind::Gin, &dev).unwrap();
        let x = Tensor::randn(0f32, 1.0, (30, 7), &dev).unwrap();
        let (_, grads) = train_pass(&model, &g, &x, None, 0);
        assert_every_gradient_nonzero(&grads, &format!("{maxk:?}"));
    }
    let mut cfg = ModelConfig::new(ConvKind::Gcn, 7, 6, 3, 2, 0.5);
    cfg.mlp_norm = true;
    let e = Gnn::new(cfg, &dev, 1).err().expect("refused").to_string();
    assert!(
        e.contains("GIN") && e.contains("gcn") && !e.contains("--gin-norm"),
        "{e}"
    );
}

/// The first layer reading its aggregation of the input precomputed gives the same logits and
/// the same gradient for every parameter as recomputing it (training mode, dropout between
/// layers, both product orders of the first layer).
#[test]
fn cached_input_aggregate_matches_recomputing() {
    let dev = Device::Cpu;
    let csr = small_graph();
    for kind in [ConvKind::Gcn, ConvKind::SageMean, ConvKind::Gin] {
        for (in_dim, gin_norm) in [(12, false), (4, false), (12, true)] {
            if gin_norm && kind != ConvKind::Gin {
                continue;
            }
            let mut cfg = ModelConfig::new(kind, in_dim, 6, 3, 3, 0.5);
            cfg.input_dropout = 0.0;
            cfg.mlp_norm = gin_norm;
            let model = Gnn::new(cfg, &dev, 4).unwrap();
            let g = ModelGraph::new(&csr, kind, &dev).unwrap();
            let x = seeded_x(in_dim, 11);
            let agg = model.input_aggregate(&g, &x).unwrap();
            assert!(agg.is_some(), "{kind}: no input aggregate");
            let (y0, g0) = train_pass(&model, &g, &x, None, 9);
            let (y1, g1) = train_pass(&model, &g, &x, agg.as_ref(), 9);
            close(&mat(&y1), &mat(&y0), 1e-4);
            assert_grads_close(&model, &g1, &g0, 1e-4, &kind.to_string());
        }
    }
}

#[test]
fn input_aggregate_is_none_where_it_would_change_the_model() {
    let dev = Device::Cpu;
    let csr = small_graph();
    let x = Tensor::randn(0f32, 1.0, (30, 7), &dev).unwrap();
    let cases: [(ConvKind, f32, bool); 5] = [
        (ConvKind::Gcn, 0.5, false),      // input dropout: a new mask every epoch
        (ConvKind::Gcn, 0.0, true),       // MaxK selects before aggregating
        (ConvKind::SagePool, 0.0, false), // non-linear before aggregating
        (ConvKind::Gat, 0.0, false),
        (ConvKind::Mlp, 0.0, false),
    ];
    for (kind, input_dropout, maxk) in cases {
        let mut cfg = ModelConfig::new(kind, 7, 6, 3, 2, 0.5);
        cfg.input_dropout = input_dropout;
        if maxk {
            cfg.activation = gnn_models::Activation::MaxK { k: 2 };
        }
        let model = Gnn::new(cfg, &dev, 1).unwrap();
        let g = ModelGraph::new(&csr, kind, &dev).unwrap();
        assert!(model.input_aggregate(&g, &x).unwrap().is_none(), "{kind}");
    }
}

/// MaxK after the first layer: the first layer is the ReLU model's (so its input aggregation
/// can be cached, with identical logits and gradients), the hidden layers after it select, and
/// the flag needs MaxK.
#[test]
fn maxk_after_first_runs_the_first_layer_as_relu() {
    let dev = Device::Cpu;
    let csr = small_graph();
    for kind in [ConvKind::Gcn, ConvKind::SageMean, ConvKind::Gin] {
        let mut cfg = ModelConfig::new(kind, 7, 6, 3, 3, 0.5);
        cfg.input_dropout = 0.0;
        cfg.activation = gnn_models::Activation::MaxK { k: 2 };
        cfg.maxk_after_first = true;
        let model = Gnn::new(cfg.clone(), &dev, 2).unwrap();
        let g = ModelGraph::new(&csr, kind, &dev).unwrap();
        let x = seeded_x(7, 12);
        let agg = model.input_aggregate(&g, &x).unwrap();
        assert!(agg.is_some(), "{kind}");
        let sq_norms = |grads: Vec<Vec<f32>>| -> Vec<f32> {
            grads
                .iter()
                .map(|g| g.iter().map(|v| v * v).sum())
                .collect()
        };
        let (y0, g0) = train_pass(&model, &g, &x, None, 3);
        let (y1, g1) = train_pass(&model, &g, &x, agg.as_ref(), 3);
        close(&mat(&y1), &mat(&y0), 1e-4);
        let (g0, g1) = (sq_norms(flat_grads(&g0)), sq_norms(flat_grads(&g1)));
        for (a, b) in g1.iter().zip(&g0) {
            assert!(*b > 0.0 && (a - b).abs() <= 1e-3 * b, "{kind}: {a} vs {b}");
        }
        // Two layers: the only hidden layer is the first, so the model is the ReLU model
        // (same seed, same parameters), and differs from plain MaxK.
        let two = |maxk: bool, after_first: bool| {
            let mut c = ModelConfig::new(kind, 7, 6, 3, 2, 0.0);
            if maxk {
                c.activation = gnn_models::Activation::MaxK { k: 2 };
            }
            c.maxk_after_first = after_first;
            let m = Gnn::new(c, &dev, 5).unwrap();
            mat(&m.forward(&g, &x, &mut Forward::eval()).unwrap())
        };
        let relu = two(false, false);
        close(&two(true, true), &relu, 1e-6);
        let maxk = two(true, false);
        let diff = maxk
            .iter()
            .flatten()
            .zip(relu.iter().flatten())
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(diff > 1e-3, "{kind}: plain MaxK equals ReLU ({diff})");
        // Without MaxK the flag is refused.
        let mut bad = ModelConfig::new(kind, 7, 6, 3, 3, 0.5);
        bad.maxk_after_first = true;
        let e = Gnn::new(bad, &dev, 1).err().expect("refused").to_string();
        assert!(
            e.contains("maxk_after_first") && e.contains("MaxK activation") && !e.contains("--"),
            "{e}"
        );
    }
}

/// GCN's hidden layers fold bias, ReLU and dropout into the product when it comes last
/// (`LinearProduct`), and into the aggregation's output otherwise: a 3-layer training pass
/// (widths 12 -> 5 -> 5 -> 3: the product first, last, first) equals the same model composed
/// from the public ops with the same dropout stream, values and every gradient.
#[test]
fn gcn_hidden_layers_equal_the_composed_ops() {
    // 12 -> 5 -> 5 -> 3: layer 0 multiplies first, layer 1 aggregates first (one op from its
    // input: aggregation, product, bias, ReLU, dropout).
    gcn_hidden_layers_vs_composed(3, false);
    // 12 -> 5 -> 5 -> 5 -> 3 with skips: layers 1 and 2 also fuse the residual add.
    gcn_hidden_layers_vs_composed(4, true);
}

fn gcn_hidden_layers_vs_composed(layers: usize, residual: bool) {
    use gnn_kernels::{matmul_nt, Reduce};
    let dev = Device::Cpu;
    let csr = small_graph();
    let mut cfg = ModelConfig::new(ConvKind::Gcn, 12, 5, 3, layers, 0.5);
    cfg.input_dropout = 0.0;
    cfg.residual = residual;
    let model = Gnn::new(cfg, &dev, 4).unwrap();
    // Non-zero biases (GCN's start at zero), so that their adds are seen; seeded and mostly
    // positive, so that no layer's ReLU is dead on every node (its gradients all zero).
    for (i, (name, v)) in model.named_vars().into_iter().enumerate() {
        if name.ends_with("bias") {
            let b = (seeded_x(v.elem_count(), 50 + i as u64).get(0).unwrap() + 0.5).unwrap();
            v.set(&b.reshape(v.dims()).unwrap()).unwrap();
        }
    }
    let g = ModelGraph::new(&csr, ConvKind::Gcn, &dev).unwrap();
    let x = seeded_x(12, 8);
    let (y, grads) = train_pass(&model, &g, &x, None, 21);
    // Composed: the same parameters and masks (the stream draws one seed per hidden layer).
    let mut rng = DropoutRng::new(21);
    let mut h = x.clone();
    for l in 0..layers {
        let w = param(&model, &format!("convs.{l}.lin.weight"));
        let b = param(&model, &format!("convs.{l}.bias"));
        let (o, i) = w.dims2().unwrap();
        let z = if o >= i {
            matmul_nt(&g.aggregate(&h, Reduce::Sum).unwrap(), &w).unwrap()
        } else {
            g.aggregate(&matmul_nt(&h, &w).unwrap(), Reduce::Sum)
                .unwrap()
        };
        h = if l + 1 < layers {
            let y = rng.bias_relu_dropout(&z, &b, 0.5).unwrap();
            if residual && l > 0 {
                (y + &h).unwrap()
            } else {
                y
            }
        } else {
            z.broadcast_add(&b).unwrap()
        };
    }
    let what = format!("{layers} layers, residual {residual}");
    // The fused residual adds in the epilogue's pass: the same sums, bit for bit.
    assert_eq!(mat(&y), mat(&h), "values, {what}");
    let want = h.sqr().unwrap().sum_all().unwrap().backward().unwrap();
    for (name, gr) in &grads {
        let a: Vec<f32> = gr
            .as_ref()
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let b: Vec<f32> = want
            .get(&param(&model, name))
            .unwrap_or_else(|| panic!("composed: no grad for {name}"))
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        assert!(a.iter().any(|&u| u != 0.0), "{name}: all zero");
        for (u, v) in a.iter().zip(&b) {
            assert!(
                (u - v).abs() <= 1e-5 * (1.0 + v.abs()),
                "{name}: {u} vs {v}, {what}"
            );
        }
    }
    // An evaluation's logits are outside the graph (each layer is detached as it finishes).
    let e = model.forward(&g, &x, &mut Forward::eval()).unwrap();
    assert!(!e.track_op(), "evaluation logits keep no graph");
    assert!(y.track_op());
}

/// A forward for `rows` only equals the whole forward's rows, and the gradients of a loss
/// over those rows are the same: every kind, both GCN/GraphSAGE orders, with and without
/// the cached input aggregation, one layer and three, no rows at all.
#[test]
fn output_rows_equal_the_whole_outputs_rows() {
    use gnn_models::OutputRows;
    let dev = Device::Cpu;
    let csr = small_graph();
    let picks: [&[u32]; 3] = [&[0, 3, 4, 17, 29], &[], &[5]];
    for kind in [
        ConvKind::Gcn,
        ConvKind::SageMean,
        ConvKind::SagePool,
        ConvKind::Gin,
        ConvKind::Gat,
        ConvKind::Transformer,
        ConvKind::Mlp,
    ] {
        // (in, hidden, classes, layers): the output layer aggregating first (6 -> 9) and
        // multiplying first (6 -> 3), and a single layer over the input.
        // The last, one layer narrowing (7 -> 3) with the cached input: GraphSAGE's
        // aggregate-first form on selected rows where it would multiply first (the form its
        // output layer takes past the element limit).
        for (in_dim, hidden, classes, layers) in
            [(7, 6, 9, 3), (7, 6, 3, 3), (4, 6, 9, 1), (7, 6, 3, 1)]
        {
            let mut cfg = ModelConfig::new(kind, in_dim, hidden, classes, layers, 0.5);
            cfg.heads = 2;
            cfg.input_dropout = 0.0;
            let model = Gnn::new(cfg, &dev, 3).unwrap();
            let g = ModelGraph::new(&csr, kind, &dev).unwrap();
            let x = seeded_x(in_dim, 21);
            let cached = model.input_aggregate(&g, &x).unwrap();
            for agg in [None, cached.as_ref()] {
                for rows in picks {
                    let what = format!(
                        "{kind} {in_dim}->{hidden}->{classes} x{layers} rows {rows:?} cached {}",
                        agg.is_some()
                    );
                    let sel = OutputRows::new(rows, 30, &dev).unwrap();
                    let ids = Tensor::new(rows, &dev).unwrap();
                    let got = pass_on_rows(&model, &g, &x, agg, Some(&sel), None, &ids);
                    let want = pass_on_rows(&model, &g, &x, agg, None, None, &ids);
                    assert_rows_pass(&model, got, want, classes, &what);
                }
            }
        }
    }
}

/// A GCN whose output layer runs over the graph restricted to some rows
/// ([`ModelGraph::restricted_to_rows`], [`Forward::with_output_graph`]) gives the whole
/// forward's rows, and a loss over them the same gradients: undirected and directed graphs,
/// both product orders of the output layer, two and three layers, composed and lean layers,
/// the row-scaled sum, padded outputs, the cached input aggregation, MaxK, no rows at all.
/// Other kinds, one layer, and output rows beside the graph are refused.
#[test]
fn a_restricted_output_graph_gives_the_whole_outputs_rows() {
    use gnn_models::Activation;
    let dev = Device::Cpu;
    let directed = {
        let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let src: Vec<u32> = (0..90).map(|_| r.random_range(0..30)).collect();
        let dst: Vec<u32> = (0..90).map(|_| r.random_range(0..30)).collect();
        let opts = BuildOptions {
            symmetrize: false,
            ..BuildOptions::undirected()
        };
        Coo::new(30, src, dst).unwrap().to_csr(opts).unwrap()
    };
    let picks: [&[u32]; 3] = [&[0, 3, 4, 17, 29], &[], &[5]];
    // (in, hidden, classes, layers, MaxK): the output layer multiplying first (6 -> 3) and
    // aggregating first (6 -> 9, the hidden layer's lean form fused with it).
    let shapes = [
        (7, 6, 3, 3, false),
        (7, 6, 9, 3, false),
        (13, 16, 3, 2, false),
        (5, 12, 10, 2, false),
        (7, 8, 3, 3, true),
    ];
    for csr in [small_graph(), directed] {
        for (in_dim, hidden, classes, layers, maxk) in shapes {
            let mut cfg = ModelConfig::new(ConvKind::Gcn, in_dim, hidden, classes, layers, 0.5);
            if maxk {
                cfg.activation = Activation::MaxK { k: 4 };
            }
            let model = Gnn::new(cfg, &dev, 3).unwrap();
            assert!(model.computes_output_on_restricted_graph());
            let x = seeded_x(in_dim, 21);
            // (lean, scaled, padded)
            for (lean, scaled, pad) in [
                (false, false, false),
                (true, false, false),
                (true, true, false),
                (true, true, true),
            ] {
                let g = ModelGraph::new(&csr, ConvKind::Gcn, &dev)
                    .unwrap()
                    .with_lean_layers(lean)
                    .with_scaled_normalisation(scaled)
                    .with_padded_outputs(pad);
                let cached = model.input_aggregate(&g, &x).unwrap();
                for agg in [None, cached.as_ref()] {
                    for rows in picks {
                        let what = format!(
                            "symmetric {} {in_dim}->{hidden}->{classes} x{layers} maxk {maxk} \
                             lean {lean} scaled {scaled} pad {pad} rows {rows:?} cached {}",
                            csr.is_symmetric(),
                            agg.is_some()
                        );
                        let out = g.restricted_to_rows(rows).unwrap();
                        assert_eq!((out.graph.n_rows(), out.graph.n_cols()), (rows.len(), 30));
                        let ids = Tensor::new(rows, &dev).unwrap();
                        let got = pass_on_rows(&model, &g, &x, agg, None, Some(&out), &ids);
                        let want = pass_on_rows(&model, &g, &x, agg, None, None, &ids);
                        assert_rows_pass(&model, got, want, classes, &what);
                        // The row-scaled sum ran where it was asked for (the record is the
                        // whole graph's, which the restricted one shares).
                        if scaled && !rows.is_empty() {
                            assert!(g.graph.kernels_used().contains("spmm", "row-scaled"));
                        }
                    }
                }
            }
        }
    }
    // Refusals: other kinds and a one-layer GCN; rows beside the graph; bad rows.
    let csr = small_graph();
    let x = seeded_x(7, 21);
    for (kind, layers) in [
        (ConvKind::Transformer, 2),
        (ConvKind::Gat, 2),
        (ConvKind::Gcn, 1),
    ] {
        let model = Gnn::new(ModelConfig::new(kind, 7, 6, 3, layers, 0.5), &dev, 3).unwrap();
        assert!(!model.computes_output_on_restricted_graph());
        let g = ModelGraph::new(&csr, kind, &dev).unwrap();
        let out = g.restricted_to_rows(&[1, 2]).unwrap();
        let mut rng = DropoutRng::new(4);
        let mut ctx = Forward::train(&mut rng).with_output_graph(Some(&out));
        let e = model.forward(&g, &x, &mut ctx).unwrap_err().to_string();
        assert!(e.contains("cannot compute its output layer"), "{e}");
    }
    let model = Gnn::new(ModelConfig::new(ConvKind::Gcn, 7, 6, 3, 2, 0.5), &dev, 3).unwrap();
    let g = ModelGraph::new(&csr, ConvKind::Gcn, &dev).unwrap();
    let out = g.restricted_to_rows(&[1, 2]).unwrap();
    let sel = gnn_models::OutputRows::new(&[1, 2], 30, &dev).unwrap();
    let mut rng = DropoutRng::new(4);
    let mut ctx = Forward::train(&mut rng)
        .with_output_graph(Some(&out))
        .with_output_rows(Some(&sel));
    let e = model.forward(&g, &x, &mut ctx).unwrap_err().to_string();
    assert!(e.contains("not both"), "{e}");
    let e = g.restricted_to_rows(&[2, 1]).err().unwrap().to_string();
    assert!(e.contains("ascending and distinct"), "{e}");
    let e = g.restricted_to_rows(&[1, 30]).err().unwrap().to_string();
    assert!(e.contains("row 30 is out of range"), "{e}");
}

/// GraphSAGE (mean and pool) and GIN over a restricted output graph give the whole
/// forward's rows and the same gradients: the root term (GIN's `(1 + eps) x`) on the
/// restricted rows of its input, both product orders of the output layer, two to four
/// layers, composed and lean layers, padded outputs, the cached input aggregation, MaxK, no
/// rows at all; with residual hidden layers and LayerNorm (GraphSAGE, GCN, GIN).
#[test]
fn a_restricted_output_graph_gives_graphsages_and_gins_rows() {
    use gnn_models::Activation;
    let dev = Device::Cpu;
    let csr = small_graph();
    let picks: [&[u32]; 3] = [&[0, 3, 4, 17, 29], &[], &[5]];
    // (kind, in, hidden, classes, layers, MaxK, residual, LayerNorm); the last rows: GCN too.
    let shapes = [
        (ConvKind::SageMean, 7, 6, 3, 3, false, false, false),
        (ConvKind::SageMean, 7, 6, 9, 3, false, false, false),
        (ConvKind::SageMean, 13, 16, 3, 2, false, false, false),
        (ConvKind::SageMean, 7, 8, 3, 3, true, false, false),
        (ConvKind::SagePool, 7, 6, 3, 2, false, false, false),
        (ConvKind::SagePool, 7, 6, 9, 3, false, false, false),
        (ConvKind::SageMean, 7, 8, 3, 4, false, true, false),
        (ConvKind::SageMean, 7, 8, 3, 3, false, false, true),
        (ConvKind::Gcn, 7, 8, 3, 4, false, true, false),
        (ConvKind::Gcn, 7, 8, 9, 3, false, false, true),
        (ConvKind::Gin, 7, 6, 3, 3, false, false, false),
        (ConvKind::Gin, 7, 6, 9, 2, false, false, false),
        (ConvKind::Gin, 7, 8, 3, 3, true, false, false),
        (ConvKind::Gin, 7, 8, 3, 4, false, true, true),
    ];
    for (kind, in_dim, hidden, classes, layers, maxk, residual, norm) in shapes {
        let mut cfg = ModelConfig::new(kind, in_dim, hidden, classes, layers, 0.5);
        if maxk {
            cfg.activation = Activation::MaxK { k: 4 };
        }
        (cfg.residual, cfg.layer_norm) = (residual, norm);
        let model = Gnn::new(cfg, &dev, 3).unwrap();
        assert!(model.computes_output_on_restricted_graph());
        let x = seeded_x(in_dim, 21);
        for (lean, pad) in [(false, false), (true, false), (true, true)] {
            let g = ModelGraph::new(&csr, kind, &dev)
                .unwrap()
                .with_lean_layers(lean)
                .with_padded_outputs(pad);
            let cached = model.input_aggregate(&g, &x).unwrap();
            for agg in [None, cached.as_ref()] {
                for rows in picks {
                    let what = format!(
                        "{kind} {in_dim}->{hidden}->{classes} x{layers} maxk {maxk} residual \
                         {residual} norm {norm} lean {lean} pad {pad} rows {rows:?} cached {}",
                        agg.is_some()
                    );
                    let out = g.restricted_to_rows(rows).unwrap();
                    let ids = Tensor::new(rows, &dev).unwrap();
                    let got = pass_on_rows(&model, &g, &x, agg, None, Some(&out), &ids);
                    let want = pass_on_rows(&model, &g, &x, agg, None, None, &ids);
                    assert_rows_pass(&model, got, want, classes, &what);
                }
            }
        }
    }
}

/// Features padded with zero columns to [`gnn_models::aligned_width`] (the trainer does it on
/// CUDA) give every model kind the logits and parameter gradients of the unpadded features,
/// in both product orders, with the cached input aggregation, MaxK, LayerNorm and dropout;
/// other widths are refused with the widths named.
#[test]
fn padded_features_give_the_unpadded_model() {
    use gnn_models::{aligned_width, Activation};
    let dev = Device::Cpu;
    let csr = small_graph();
    let check = |cfg: ModelConfig, what: &str| {
        let in_dim = cfg.in_dim;
        let model = Gnn::new(cfg.clone(), &dev, 3).unwrap();
        let g = ModelGraph::new(&csr, cfg.kind, &dev).unwrap();
        let x = seeded_x(in_dim, 21);
        let padded = x
            .pad_with_zeros(1, 0, aligned_width(in_dim) - in_dim)
            .unwrap();
        assert_eq!(padded.dim(1).unwrap(), aligned_width(in_dim));
        let agg = model.input_aggregate(&g, &x).unwrap();
        let agg_p = model.input_aggregate(&g, &padded).unwrap();
        let (y0, g0) = train_pass(&model, &g, &x, agg.as_ref(), 7);
        let (y1, g1) = train_pass(&model, &g, &padded, agg_p.as_ref(), 7);
        close(&mat(&y1), &mat(&y0), 1e-5);
        assert_grads_close(&model, &g1, &g0, 1e-5, what);
        // Neither the logical width plus one nor the padded width plus one is taken.
        for bad in [in_dim + 1, aligned_width(in_dim) + 1] {
            if bad == aligned_width(in_dim) {
                continue;
            }
            let e = model
                .forward(&g, &seeded_x(bad, 1), &mut Forward::eval())
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("{bad} wide")), "{what}: {e}");
        }
    };
    for kind in [
        ConvKind::Gcn,
        ConvKind::SageMean,
        ConvKind::SagePool,
        ConvKind::Gin,
        ConvKind::Gat,
        ConvKind::Transformer,
        ConvKind::Mlp,
    ] {
        // 13 -> 16 columns; hidden 6 (the first layer multiplies first) and 20 (it
        // aggregates first, or reads the cached aggregation).
        for hidden in [6, 20] {
            for input_dropout in [0.0, 0.3] {
                let mut cfg = ModelConfig::new(kind, 13, hidden, 3, 3, 0.5);
                cfg.input_dropout = input_dropout;
                cfg.heads = 2;
                cfg.layer_norm = hidden == 20;
                check(cfg, &format!("{kind} hidden {hidden} p_in {input_dropout}"));
            }
        }
    }
    for kind in [ConvKind::Gcn, ConvKind::SageMean, ConvKind::Gin] {
        let mut cfg = ModelConfig::new(kind, 13, 10, 3, 2, 0.0);
        cfg.activation = Activation::MaxK { k: 4 };
        check(cfg, &format!("{kind} maxk"));
    }
}

/// A whole graph whose layers run their lean forms ([`ModelGraph::with_lean_layers`]) gives
/// the composed forms' logits and parameter gradients up to rounding: GraphSAGE-mean and GCN,
/// each product order, with dropout, deep and shallow.
#[test]
fn lean_layers_on_a_whole_graph_equal_the_composed_ones() {
    let dev = Device::Cpu;
    let csr = small_graph();
    for kind in [ConvKind::SageMean, ConvKind::Gcn] {
        for (in_dim, hidden, layers) in [(13, 6, 2), (5, 12, 3), (13, 20, 3), (9, 9, 1)] {
            let cfg = ModelConfig::new(kind, in_dim, hidden, 3, layers, 0.5);
            let model = Gnn::new(cfg, &dev, 2).unwrap();
            let composed = ModelGraph::new(&csr, kind, &dev).unwrap();
            let lean = ModelGraph::new(&csr, kind, &dev)
                .unwrap()
                .with_lean_layers(true);
            assert!(lean.lean_layers() && !composed.lean_layers());
            let x = seeded_x(in_dim, 5);
            // Without and with the cached aggregation of the input: a two-layer GraphSAGE
            // reading it runs its hidden and output layers as one op.
            for cached in [false, true] {
                // Fresh graphs: the record of the forms that ran is the graph's, cumulative.
                let composed = ModelGraph::new(&csr, kind, &dev).unwrap();
                let lean = ModelGraph::new(&csr, kind, &dev)
                    .unwrap()
                    .with_lean_layers(true);
                let agg = |g: &ModelGraph| {
                    cached
                        .then(|| model.input_aggregate(g, &x).unwrap())
                        .flatten()
                };
                let (a0, a1) = (agg(&composed), agg(&lean));
                let what = format!("{kind} {in_dim}-{hidden} x{layers}, cached {cached}");
                let (y0, g0) = train_pass(&model, &composed, &x, a0.as_ref(), 3);
                let (y1, g1) = train_pass(&model, &lean, &x, a1.as_ref(), 3);
                close(&mat(&y1), &mat(&y0), 1e-5);
                assert_grads_close(&model, &g1, &g0, 1e-5, &what);
                let one_op = kind == ConvKind::SageMean && layers == 2 && a1.is_some();
                let used = |g: &ModelGraph| {
                    g.graph
                        .kernels_used()
                        .contains("layer", "sage hidden+output")
                };
                assert_eq!(used(&lean), one_op, "{what}");
                assert!(!used(&composed), "{what}");
            }
            let e0 = mat(&model.forward(&composed, &x, &mut Forward::eval()).unwrap());
            let e1 = mat(&model.forward(&lean, &x, &mut Forward::eval()).unwrap());
            close(&e1, &e0, 1e-5);
        }
    }
}

/// A whole graph's lean GCN whose fused sum runs unweighted between two `D^-1/2` row
/// scalings ([`ModelGraph::with_scaled_normalisation`]) gives the weighted SpMM's logits and
/// gradients up to rounding, on an undirected and a directed graph, with and without padded
/// outputs, in training and evaluation; the
/// scaling is off on the CPU by default, for f16 and for a mean.
#[test]
fn scaled_normalisation_gives_the_weighted_gcn() {
    let dev = Device::Cpu;
    // The undirected graph, and a directed one (its backward needs the transpose: `Aᵀ`, not
    // `A`).
    let directed = {
        let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let src: Vec<u32> = (0..90).map(|_| r.random_range(0..30)).collect();
        let dst: Vec<u32> = (0..90).map(|_| r.random_range(0..30)).collect();
        let opts = BuildOptions {
            symmetrize: false,
            ..BuildOptions::undirected()
        };
        let g = Coo::new(30, src, dst).unwrap().to_csr(opts).unwrap();
        assert!(
            !g.is_symmetric(),
            "the directed test graph came out symmetric"
        );
        g
    };
    for (csr, pad) in [
        (small_graph(), false),
        (small_graph(), true),
        (directed.clone(), false),
        (directed, true),
    ] {
        for (in_dim, hidden, classes, layers) in [(13, 16, 3, 2), (5, 12, 10, 3), (9, 4, 3, 2)] {
            let cfg = ModelConfig::new(ConvKind::Gcn, in_dim, hidden, classes, layers, 0.5);
            let model = Gnn::new(cfg, &dev, 2).unwrap();
            let lean = || {
                ModelGraph::new(&csr, ConvKind::Gcn, &dev)
                    .unwrap()
                    .with_lean_layers(true)
                    .with_padded_outputs(pad)
            };
            let (weighted, scaled) = (lean(), lean().with_scaled_normalisation(true));
            let fused = |g: &ModelGraph, r, dt| g.fused_aggregation(r, dt).unwrap().is_scaled();
            assert!(!fused(&weighted, Reduce::Sum, DType::F32));
            assert!(fused(&scaled, Reduce::Sum, DType::F32));
            assert!(!fused(&scaled, Reduce::Sum, DType::F16));
            assert!(!fused(&scaled, Reduce::Mean, DType::F32));
            let x = seeded_x(in_dim, 5);
            let what = format!(
                "pad {pad}, symmetric {}, {in_dim}-{hidden}-{classes} x{layers}",
                csr.is_symmetric()
            );
            // Without and with the cached aggregation of the input. A two-layer training pass
            // whose hidden product comes last on a constant input runs the hidden and output
            // layers as one op over the scaled sum (never over the weighted one).
            for cached in [false, true] {
                // Fresh graphs: the record of the forms that ran is the graph's, cumulative.
                let (weighted, scaled) = (lean(), lean().with_scaled_normalisation(true));
                let agg = |g: &ModelGraph| {
                    cached
                        .then(|| model.input_aggregate(g, &x).unwrap())
                        .flatten()
                };
                let (a0, a1) = (agg(&weighted), agg(&scaled));
                let (y0, g0) = train_pass(&model, &weighted, &x, a0.as_ref(), 3);
                let (y1, g1) = train_pass(&model, &scaled, &x, a1.as_ref(), 3);
                let what = format!("{what}, cached {cached}");
                close(&mat(&y1), &mat(&y0), 1e-5);
                assert_grads_close(&model, &g1, &g0, 1e-5, &what);
                let one_op = layers == 2 && (a1.is_some() || hidden >= in_dim);
                let used = |g: &ModelGraph| {
                    g.graph
                        .kernels_used()
                        .contains("layer", "gcn hidden+output")
                };
                assert_eq!(used(&scaled), one_op, "{what}");
                assert!(!used(&weighted), "{what}");
            }
            let e0 = mat(&model.forward(&weighted, &x, &mut Forward::eval()).unwrap());
            let e1 = mat(&model.forward(&scaled, &x, &mut Forward::eval()).unwrap());
            close(&e1, &e0, 1e-5);
            // The report says which form ran.
            assert!(scaled.graph.kernels_used().contains("spmm", "row-scaled"));
            assert!(!weighted.graph.kernels_used().contains("spmm", "row-scaled"));
        }
    }
}

/// Lean GCN and GraphSAGE-mean output layers and GAT's one-head output layer on aligned
/// columns ([`ModelGraph::with_padded_outputs`]: zero weight rows, attention entries and bias,
/// the logits narrowed back)
/// give the unpadded layers' logits and gradients: 3 and 10 classes (padded to 8 and 16), the
/// output layer multiplying first (hidden wider than the classes) or not, with dropout, in
/// training and evaluation.
#[test]
fn padded_outputs_give_the_unpadded_model() {
    let dev = Device::Cpu;
    let csr = small_graph();
    for (kind, classes) in [
        (ConvKind::Gcn, 3usize),
        (ConvKind::Gcn, 10),
        (ConvKind::SageMean, 3),
        (ConvKind::SageMean, 10),
        (ConvKind::Gat, 3),
        (ConvKind::Gat, 10),
    ] {
        for (in_dim, hidden, layers) in [(13, 16, 2), (5, 12, 3), (13, 20, 1), (9, 2, 2)] {
            let mut cfg = ModelConfig::new(kind, in_dim, hidden, classes, layers, 0.5);
            if kind == ConvKind::Gat {
                // Two hidden heads, attention dropout: the output layer's one head is padded.
                cfg.heads = 2;
                cfg.att_dropout = 0.3;
            }
            let model = Gnn::new(cfg, &dev, 2).unwrap();
            let lean = || {
                ModelGraph::new(&csr, kind, &dev)
                    .unwrap()
                    .with_lean_layers(true)
            };
            let (plain, padded) = (lean(), lean().with_padded_outputs(true));
            assert!(padded.pads_outputs() && !plain.pads_outputs());
            let x = seeded_x(in_dim, 5);
            let what = format!("{kind} {classes} classes, {in_dim}-{hidden} x{layers}");
            let (y0, g0) = train_pass(&model, &plain, &x, None, 3);
            let (y1, g1) = train_pass(&model, &padded, &x, None, 3);
            assert_eq!(y1.dims(), y0.dims(), "{what}");
            close(&mat(&y1), &mat(&y0), 1e-6);
            assert_grads_close(&model, &g1, &g0, 1e-6, &what);
            let e0 = mat(&model.forward(&plain, &x, &mut Forward::eval()).unwrap());
            let e1 = mat(&model.forward(&padded, &x, &mut Forward::eval()).unwrap());
            close(&e1, &e0, 1e-6);
        }
    }
}

/// A loss offered to the pass ([`Gnn::forward_offering_loss`]) is taken by the op that runs a
/// lean GCN's or GraphSAGE-mean's last hidden layer and output layer together, and gives the
/// loss and parameter gradients of the logits' masked cross-entropy taken after the pass,
/// bit for bit, for the loss's gradient 1 and 3 (as f16 loss scaling gives), over the whole
/// graph and over a restricted output graph (the trainer's train rows); a pass without that
/// op returns its logits (composed layers, three layers, an output layer that does not
/// multiply first).
#[test]
fn an_offered_loss_is_taken_by_the_output_op_and_changes_nothing() {
    let dev = Device::Cpu;
    let csr = small_graph();
    // Every third node's row, for the restricted output graph.
    let rows: Vec<u32> = (0..30).step_by(3).collect();
    for kind in [ConvKind::Gcn, ConvKind::SageMean] {
        for (hidden, layers, lean, pad) in [
            (6, 2, true, false),
            (16, 2, true, false),
            (16, 2, true, true),
            (16, 3, true, false),
            (2, 2, true, false),
            (16, 2, false, false),
        ] {
            let mut cfg = ModelConfig::new(kind, 13, hidden, 3, layers, 0.5);
            // The cached input aggregation (GraphSAGE's op reads it).
            cfg.input_dropout = 0.0;
            let model = Gnn::new(cfg, &dev, 2).unwrap();
            let graph = || {
                ModelGraph::new(&csr, kind, &dev)
                    .unwrap()
                    .with_lean_layers(lean)
                    .with_padded_outputs(pad)
                    .with_scaled_normalisation(kind == ConvKind::Gcn)
            };
            let x = seeded_x(13, 5);
            let agg = model.input_aggregate(&graph(), &x).unwrap();
            assert!(agg.is_some(), "no cached aggregation");
            for (restricted, scale) in [(false, 1.0), (true, 1.0), (false, 3.0), (true, 3.0)] {
                let what = format!(
                    "{kind} 13-{hidden} x{layers}, lean {lean}, pad {pad}, restricted \
                     {restricted}, scale {scale}"
                );
                let (g0, g1) = (graph(), graph());
                let (o0, o1) = (
                    g0.restricted_to_rows(&rows).unwrap(),
                    g1.restricted_to_rows(&rows).unwrap(),
                );
                let n = if restricted { rows.len() } else { 30 };
                let labels: Vec<u32> = (0..n as u32).map(|i| i % 3).collect();
                let labels = Tensor::from_vec(labels, n, &dev).unwrap();
                let weight: Vec<f32> = (0..n).map(|i| if i % 4 == 0 { 0.0 } else { 0.1 }).collect();
                let weight = Tensor::from_vec(weight, n, &dev).unwrap();
                // After the pass.
                let mut rng = DropoutRng::new(9);
                let ctx = Forward::train(&mut rng).with_input_aggregate(agg.as_ref());
                let mut ctx = ctx.with_output_graph(restricted.then_some(&o0));
                let logits = model.forward(&g0, &x, &mut ctx).unwrap();
                let want = gnn_kernels::masked_cross_entropy(&logits, &labels, &weight).unwrap();
                let want_grads = named_grads(&model, &(&want * scale).unwrap());
                // Offered.
                let mut rng = DropoutRng::new(9);
                let ctx = Forward::train(&mut rng).with_input_aggregate(agg.as_ref());
                let mut ctx = ctx.with_output_graph(restricted.then_some(&o1));
                let out = model
                    .forward_offering_loss(&g1, &x, &mut ctx, &labels, &weight)
                    .unwrap();
                let taken = lean && layers == 2 && hidden > 3;
                let got = match out {
                    PassOutput::Loss(l) => {
                        assert!(taken, "{what}: the loss was taken");
                        l
                    }
                    PassOutput::Logits(y) => {
                        assert!(!taken, "{what}: the loss was not taken");
                        gnn_kernels::masked_cross_entropy(&y, &labels, &weight).unwrap()
                    }
                };
                assert_eq!(got.dims(), want.dims(), "{what}");
                assert_eq!(
                    got.to_scalar::<f32>().unwrap(),
                    want.to_scalar::<f32>().unwrap(),
                    "{what}: loss"
                );
                let got_grads = named_grads(&model, &(&got * scale).unwrap());
                assert_grads_close(&model, &got_grads, &want_grads, 0.0, &what);
            }
        }
    }
}
