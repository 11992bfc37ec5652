//! PyG interop on Cora, both directions, against fixtures made by PyG 2.8 itself
//! (`scripts/pyg_interop.py`, run on the GPU machine where PyG is installed; its log and JSON
//! are in `tests/fixtures/pyg/`):
//! - PyG GCN / GraphSAGE / GIN / GAT / TransformerConv state_dicts saved with
//!   `safetensors.torch` load with `Gnn::load_pyg` (`load_pyg_with` and the head count for
//!   TransformerConv) and give PyG's logits within 1e-5;
//! - our checkpoints, loaded into the same PyG classes with `load_state_dict(strict=True)`,
//!   gave PyG logits that ours match within 1e-5.

use candle_core::{DType, Device, Tensor};
use gnn::graph::load_planetoid;
use gnn::models::{ConvKind, Gnn, PygLayout};
use gnn::train::{DeviceData, Engine};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures/pyg").join(name)
}

fn logits_of(path: &Path) -> Tensor {
    let t = candle_core::safetensors::load(path, &Device::Cpu).unwrap();
    t["logits"].clone()
}

/// max |a - b| / max |b|.
fn rel_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.dims(), b.dims());
    let d = (a - b).unwrap().abs().unwrap().max_all().unwrap();
    let s = b.abs().unwrap().max_all().unwrap();
    let d = d.to_dtype(DType::F64).unwrap().to_scalar::<f64>().unwrap();
    let s = s.to_dtype(DType::F64).unwrap().to_scalar::<f64>().unwrap();
    d / s
}

const KINDS: [(&str, ConvKind); 5] = [
    ("gcn", ConvKind::Gcn),
    ("sage", ConvKind::SageMean),
    ("gin", ConvKind::Gin),
    ("gat", ConvKind::Gat),
    ("transformer", ConvKind::Transformer),
];

/// The fixtures' attention models have 4 hidden heads (`scripts/pyg_interop.py --heads`).
const HEADS: usize = 4;

#[test]
fn pyg_state_dicts_give_pyg_logits() {
    let ds = load_planetoid(root().join("data/cora/raw"), "cora").unwrap();
    let dev = Device::Cpu;
    let data = DeviceData::new(&ds, &dev, true).unwrap();
    for (name, kind) in KINDS {
        let path = fixture(&format!("pyg_{name}.safetensors"));
        let model = match kind {
            // The one layer type whose head count no tensor holds.
            ConvKind::Transformer => {
                let layout = PygLayout {
                    heads: Some(HEADS),
                    ..Default::default()
                };
                Gnn::load_pyg_with(&path, kind, layout, &dev)
            }
            _ => Gnn::load_pyg(&path, kind, &dev),
        }
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(model.config().layers, 2);
        assert_eq!(model.config().hidden, 16);
        if matches!(kind, ConvKind::Gat | ConvKind::Transformer) {
            assert_eq!(model.config().heads, HEADS, "{name}");
        }
        let engine = Engine::new(model, &ds.graph, &dev).unwrap();
        let ours = engine.predict(&data.x).unwrap();
        let pyg = logits_of(&fixture(&format!("pyg_{name}_logits.safetensors")));
        let e = rel_diff(&ours, &pyg);
        println!("{name}: relative logit difference {e:.2e}");
        assert!(e <= 1e-5, "{name}: relative logit difference {e:.2e}");
    }
}

#[test]
fn our_checkpoints_give_the_logits_pyg_computes_from_them() {
    let ds = load_planetoid(root().join("data/cora/raw"), "cora").unwrap();
    let dev = Device::Cpu;
    let data = DeviceData::new(&ds, &dev, true).unwrap();
    for (name, file) in [
        ("gcn", root().join("weights/gcn-cora")),
        ("sage", root().join("weights/sage-cora-h16")),
        ("gin", fixture("ours_gin")),
        ("gat", fixture("ours_gat")),
        ("transformer", fixture("ours_transformer")),
    ] {
        let engine = Engine::load(&file, &ds.graph, &dev).unwrap();
        let ours = engine.predict(&data.x).unwrap();
        let pyg = logits_of(&fixture(&format!("ours_{name}_logits_by_pyg.safetensors")));
        let e = rel_diff(&ours, &pyg);
        println!("{name}: relative logit difference {e:.2e}");
        assert!(e <= 1e-5, "{name}: relative logit difference {e:.2e}");
    }
}

#[test]
fn load_pyg_refuses_what_it_cannot_represent() {
    let dev = Device::Cpu;
    let err = |r: gnn::models::Result<Gnn>| r.err().expect("must fail").to_string();
    // A SAGE state_dict read as GCN: its tensors are named for another layer type.
    let e = err(Gnn::load_pyg(
        fixture("pyg_sage.safetensors"),
        ConvKind::Gcn,
        &dev,
    ));
    assert!(
        e.contains("pyg_sage.safetensors") && e.contains("convs.0.lin.weight"),
        "{e}"
    );
    // An extra module (a BatchNorm) would change the model: named, not ignored.
    let tmp = tempfile::tempdir().unwrap();
    let mut t = candle_core::safetensors::load(fixture("pyg_gcn.safetensors"), &dev).unwrap();
    t.insert(
        "bns.0.weight".into(),
        Tensor::ones(16, DType::F32, &dev).unwrap(),
    );
    let path = tmp.path().join("gcn_bn.safetensors");
    candle_core::safetensors::save(&t, &path).unwrap();
    let e = err(Gnn::load_pyg(&path, ConvKind::Gcn, &dev));
    assert!(
        e.contains("bns.0.weight") && e.contains("does not use"),
        "{e}"
    );
    // TransformerConv without its head count; GAT with a head count its tensors contradict.
    let e = err(Gnn::load_pyg(
        fixture("pyg_transformer.safetensors"),
        ConvKind::Transformer,
        &dev,
    ));
    assert!(e.contains("head count"), "{e}");
    let wrong = PygLayout {
        heads: Some(8),
        ..Default::default()
    };
    let e = err(Gnn::load_pyg_with(
        fixture("pyg_gat.safetensors"),
        ConvKind::Gat,
        wrong,
        &dev,
    ));
    assert!(e.contains("4 heads") && e.contains("says 8"), "{e}");
    // Not a PyG conv stack at all.
    let mut t2 = std::collections::HashMap::new();
    t2.insert(
        "lin.weight".to_string(),
        Tensor::ones((2, 2), DType::F32, &dev).unwrap(),
    );
    let path = tmp.path().join("plain.safetensors");
    candle_core::safetensors::save(&t2, &path).unwrap();
    let e = err(Gnn::load_pyg(&path, ConvKind::Gcn, &dev));
    assert!(e.contains("convs"), "{e}");
}
