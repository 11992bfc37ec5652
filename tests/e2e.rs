//! End to end: real Cora training reaches the paper's accuracy band, a GNN beats the MLP on
//! the synthetic Reddit-shaped graph, and a saved model predicts identically after loading.

use candle_core::Device;
use gnn::graph::{generate, load_planetoid, SyntheticSpec};
use gnn::models::{ConvKind, Gnn, ModelConfig, ModelGraph};
use gnn::train::{predict, train, DeviceData, TrainConfig};
use std::path::PathBuf;

fn cora_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/cora/raw")
}

#[test]
fn gcn_on_cora_reaches_paper_accuracy() {
    let dev = Device::Cpu;
    let ds = load_planetoid(cora_dir(), "cora").unwrap();
    let data = DeviceData::new(&ds, &dev, true).unwrap();
    let cfg = ModelConfig::new(ConvKind::Gcn, 1433, 16, 7, 2, 0.5);
    let graph = ModelGraph::new(&ds.graph, ConvKind::Gcn, &dev).unwrap();
    let model = Gnn::new(cfg, &dev, 0).unwrap();
    let rep = train(&model, &graph, &data, &TrainConfig::default(), |_| {}).unwrap();
    // Kipf & Welling report 81.5 %; one seed varies by about ±1 point.
    assert!(rep.test_acc >= 0.79, "test accuracy {}", rep.test_acc);
    assert!(
        rep.history
            .windows(2)
            .filter(|w| w[1].loss < w[0].loss)
            .count()
            > 100,
        "loss mostly decreases"
    );
}

#[test]
fn gnn_beats_mlp_on_synthetic_reddit() {
    let dev = Device::Cpu;
    let spec = SyntheticSpec::reddit().scaled(0.01).unwrap();
    let (ds, _) = generate(&spec, 1).unwrap();
    let data = DeviceData::new(&ds, &dev, false).unwrap();
    let tc = TrainConfig {
        epochs: 40,
        weight_decay: 0.0,
        eval_every: 5,
        ..TrainConfig::default()
    };
    let mut acc = Vec::new();
    for kind in [ConvKind::Gcn, ConvKind::SageMean, ConvKind::Mlp] {
        let cfg = ModelConfig::new(kind, 602, 64, 41, 2, 0.5);
        let graph = ModelGraph::new(&ds.graph, kind, &dev).unwrap();
        let model = Gnn::new(cfg, &dev, 0).unwrap();
        acc.push(train(&model, &graph, &data, &tc, |_| {}).unwrap().test_acc);
    }
    assert!(acc[0] > acc[2] + 0.15, "gcn {} vs mlp {}", acc[0], acc[2]);
    assert!(acc[1] > acc[2] + 0.10, "sage {} vs mlp {}", acc[1], acc[2]);
}

#[test]
fn saved_model_predicts_identically() {
    let dev = Device::Cpu;
    let ds = load_planetoid(cora_dir(), "cora").unwrap();
    let data = DeviceData::new(&ds, &dev, true).unwrap();
    let cfg = ModelConfig::new(ConvKind::Gin, 1433, 16, 7, 2, 0.5);
    let graph = ModelGraph::new(&ds.graph, ConvKind::Gin, &dev).unwrap();
    let model = Gnn::new(cfg, &dev, 3).unwrap();
    let tc = TrainConfig {
        epochs: 5,
        ..TrainConfig::default()
    };
    train(&model, &graph, &data, &tc, |_| {}).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (st, _) = model
        .save(tmp.path().join("gin-cora"), serde_json::json!({}))
        .unwrap();
    let loaded = Gnn::load(&st, &dev).unwrap();
    let a = predict(&model, &graph, &data.x)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    let b = predict(&loaded, &graph, &data.x)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    assert_eq!(a, b);
}

#[test]
fn training_rejects_mismatched_model() {
    let dev = Device::Cpu;
    let ds = load_planetoid(cora_dir(), "cora").unwrap();
    let data = DeviceData::new(&ds, &dev, true).unwrap();
    let graph = ModelGraph::new(&ds.graph, ConvKind::Gcn, &dev).unwrap();
    let wrong = Gnn::new(
        ModelConfig::new(ConvKind::Gcn, 1433, 16, 5, 2, 0.5),
        &dev,
        0,
    )
    .unwrap();
    let e = train(&wrong, &graph, &data, &TrainConfig::default(), |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("5 outputs") && e.contains("7 classes"), "{e}");
}

#[test]
fn early_stopping_stops_and_restores_best_weights() {
    let dev = Device::Cpu;
    let ds = load_planetoid(cora_dir(), "cora").unwrap();
    let data = DeviceData::new(&ds, &dev, true).unwrap();
    let graph = ModelGraph::new(&ds.graph, ConvKind::Gcn, &dev).unwrap();
    let model = Gnn::new(
        ModelConfig::new(ConvKind::Gcn, 1433, 16, 7, 2, 0.5),
        &dev,
        0,
    )
    .unwrap();
    // A learning rate this high diverges quickly, so validation stops improving.
    let tc = TrainConfig {
        epochs: 200,
        lr: 5.0,
        patience: Some(5),
        ..TrainConfig::default()
    };
    let rep = train(&model, &graph, &data, &tc, |_| {}).unwrap();
    assert!(rep.epochs_run < 200, "ran all {} epochs", rep.epochs_run);
    assert_eq!(
        rep.epochs_run,
        rep.best_epoch + 5,
        "stops 5 evaluations after the best"
    );
    // The restored weights reproduce the best epoch's validation accuracy.
    let logits = predict(&model, &graph, &data.x).unwrap();
    let val = gnn::train::accuracy(&logits, &data.labels, &data.val).unwrap();
    assert!(
        (val - rep.best_val_acc).abs() < 1e-9,
        "{val} vs {}",
        rep.best_val_acc
    );
}

/// `residual` adds each hidden layer's input to its output: for a 3-layer MLP the residual
/// output minus the plain one (same seed, same parameters) is `relu(x W0^T + b0) W2^T`, the
/// first hidden representation carried past layer 1 into the output layer.
#[test]
fn residual_adds_the_hidden_input_past_each_hidden_layer() {
    use candle_core::{Tensor, D};
    use gnn::models::Forward;
    let dev = Device::Cpu;
    let ds = load_planetoid(cora_dir(), "cora").unwrap();
    let graph = ModelGraph::new(&ds.graph, ConvKind::Mlp, &dev).unwrap();
    let x = Tensor::randn(0f32, 1.0, (ds.num_nodes(), 1433), &dev).unwrap();
    let mut cfg = ModelConfig::new(ConvKind::Mlp, 1433, 16, 7, 3, 0.5);
    let plain = Gnn::new(cfg.clone(), &dev, 3).unwrap();
    cfg.residual = true;
    let res = Gnn::new(cfg, &dev, 3).unwrap();
    let yp = plain.forward(&graph, &x, &mut Forward::eval()).unwrap();
    let yr = res.forward(&graph, &x, &mut Forward::eval()).unwrap();
    let var = |name: &str| -> Tensor {
        res.named_vars()
            .into_iter()
            .find(|(k, _)| k == name)
            .unwrap()
            .1
            .as_tensor()
            .clone()
    };
    let h1 = x
        .matmul(&var("convs.0.weight").t().unwrap())
        .unwrap()
        .broadcast_add(&var("convs.0.bias"))
        .unwrap()
        .relu()
        .unwrap();
    let want = h1.matmul(&var("convs.2.weight").t().unwrap()).unwrap();
    let err = ((yr - yp).unwrap() - &want)
        .unwrap()
        .abs()
        .unwrap()
        .max(D::Minus1)
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    let scale = want.abs().unwrap().max(D::Minus1).unwrap().max(0).unwrap();
    assert!(
        err <= 1e-4 * scale.to_scalar::<f32>().unwrap().max(1.0),
        "{err}"
    );
}
