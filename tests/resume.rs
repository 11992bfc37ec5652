//! Training checkpoints: a run interrupted at epoch k and resumed from its last checkpoint
//! reproduces the uninterrupted run exactly on the CPU (losses, accuracies, selected weights);
//! a non-finite loss or gradient stops training with an error naming the epoch and tensor and
//! leaves the state before that epoch on disk.

use candle_core::Device;
use gnn::graph::{generate, SyntheticSpec};
use gnn::models::{Activation, ConvKind, Gnn, ModelConfig, ModelGraph};
use gnn::train::{
    train, train_from, DeviceData, EpochLog, Error, LrSchedule, TrainConfig, TrainReport,
    TrainState,
};

fn setup(kind: ConvKind, act: Activation) -> (Gnn, ModelGraph, DeviceData) {
    let dev = Device::Cpu;
    let spec = SyntheticSpec::reddit().scaled(0.004).unwrap();
    let (ds, _) = generate(&spec, 5).unwrap();
    let data = DeviceData::new(&ds, &dev, false).unwrap();
    let mut cfg = ModelConfig::new(kind, 602, 32, 41, 3, 0.5);
    cfg.activation = act;
    let graph = ModelGraph::new(&ds.graph, kind, &dev).unwrap();
    (Gnn::new(cfg, &dev, 4).unwrap(), graph, data)
}

fn weights(m: &Gnn) -> Vec<(String, Vec<f32>)> {
    m.named_vars()
        .into_iter()
        .map(|(k, v)| (k, v.as_tensor().flatten_all().unwrap().to_vec1().unwrap()))
        .collect()
}

fn curve(r: &TrainReport) -> Vec<EpochLog> {
    r.history
        .iter()
        .map(|h| EpochLog {
            epoch_ms: 0.0,
            ..h.clone()
        })
        .collect()
}

#[test]
fn resumed_run_equals_uninterrupted_run() {
    for (kind, act) in [
        (ConvKind::Gcn, Activation::Relu),
        (ConvKind::SageMean, Activation::MaxK { k: 8 }),
        (ConvKind::Gin, Activation::Relu),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let stem = tmp.path().join("state");
        let base = TrainConfig {
            epochs: 12,
            eval_every: 2,
            patience: Some(50),
            seed: 9,
            ..TrainConfig::default()
        };
        // Uninterrupted.
        let (m1, g, data) = setup(kind, act);
        let full = train(&m1, &g, &data, &base, |_| {}).unwrap();
        // Interrupted after epoch 7 (the process "dies" in the progress callback), with a
        // checkpoint every 5 epochs: the resumed run restarts from epoch 5.
        let (m2, g2, data2) = setup(kind, act);
        let ck = TrainConfig {
            checkpoint_every: 5,
            checkpoint: Some(stem.clone()),
            ..base.clone()
        };
        let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            train(&m2, &g2, &data2, &ck, |e| {
                assert!(e.epoch < 8, "interrupted");
            })
        }));
        assert!(died.is_err());
        let st = TrainState::load(&stem, &Device::Cpu).unwrap();
        assert_eq!(st.meta.epoch, 5);
        let (m3, g3, data3) = setup(kind, act);
        let resumed = train_from(&m3, &g3, &data3, &ck, Some(&st), |e| {
            assert!(
                e.epoch > 5,
                "resumed epochs continue after the checkpoint's"
            )
        })
        .unwrap();
        assert_eq!(curve(&resumed), curve(&full), "{kind}: loss/accuracy curve");
        assert_eq!(
            (resumed.best_epoch, resumed.best_val_acc, resumed.test_acc),
            (full.best_epoch, full.best_val_acc, full.test_acc)
        );
        assert_eq!(weights(&m3), weights(&m1), "{kind}: selected weights");
    }
}

#[test]
fn resume_refuses_another_recipe_or_model() {
    let tmp = tempfile::tempdir().unwrap();
    let stem = tmp.path().join("state");
    let (m, g, data) = setup(ConvKind::Gcn, Activation::Relu);
    let cfg = TrainConfig {
        epochs: 2,
        checkpoint_every: 1,
        checkpoint: Some(stem.clone()),
        ..TrainConfig::default()
    };
    train(&m, &g, &data, &cfg, |_| {}).unwrap();
    let st = TrainState::load(&stem, &Device::Cpu).unwrap();
    let other_lr = TrainConfig {
        lr: 0.5,
        epochs: 4,
        ..cfg.clone()
    };
    let e = train_from(&m, &g, &data, &other_lr, Some(&st), |_| {}).unwrap_err();
    assert!(e.to_string().contains("cannot resume"), "{e}");
    let (sage, sg, sdata) = setup(ConvKind::SageMean, Activation::Relu);
    let e = train_from(&sage, &sg, &sdata, &cfg, Some(&st), |_| {}).unwrap_err();
    assert!(e.to_string().contains("model"), "{e}");
    // A model checkpoint is not a training checkpoint.
    let (p, _) = m
        .save(tmp.path().join("model"), serde_json::json!({}))
        .unwrap();
    let e = TrainState::load(&p, &Device::Cpu).unwrap_err();
    assert!(e.to_string().contains("training checkpoint"), "{e}");
}

#[test]
fn non_finite_loss_stops_with_epoch_tensor_and_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let stem = tmp.path().join("last-good");
    let (m, g, data) = setup(ConvKind::Gcn, Activation::Relu);
    // A learning rate this large overflows the weights after a few steps.
    let cfg = TrainConfig {
        epochs: 50,
        lr: 1e30,
        weight_decay: 0.0,
        checkpoint: Some(stem.clone()),
        ..TrainConfig::default()
    };
    let mut seen = 0;
    let e = train(&m, &g, &data, &cfg, |l| seen = l.epoch).unwrap_err();
    let Error::NonFinite {
        epoch,
        tensor,
        checkpoint,
        ..
    } = &e
    else {
        panic!("expected a non-finite error, got {e}");
    };
    assert_eq!(*epoch, seen + 1, "{e}");
    assert!(
        tensor.contains("loss") || tensor.contains("gradient of `"),
        "{e}"
    );
    assert!(
        checkpoint.is_some() && e.to_string().contains("last-good"),
        "{e}"
    );
    let st = TrainState::load(&stem, &Device::Cpu).unwrap();
    assert_eq!(
        st.meta.epoch,
        epoch - 1,
        "the saved state is the one before the bad epoch"
    );
    // The bad epoch's update was queued, gated off on the device, and its count taken back.
    assert_eq!(st.meta.adam_steps as usize, epoch - 1, "{e}");
    assert!(st.params.values().all(|t| t
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
        .iter()
        .all(|v| v.is_finite())));
}

/// f16's loss scale travels with the checkpoint (so a resumed f16 run continues with it), and a
/// checkpoint written before it was saved still loads, with none.
#[test]
fn loss_scale_is_kept_in_checkpoints() {
    let tmp = tempfile::tempdir().unwrap();
    let stem = tmp.path().join("state");
    let (m, g, data) = setup(ConvKind::Gcn, Activation::Relu);
    let cfg = TrainConfig {
        epochs: 2,
        eval_every: 1,
        checkpoint_every: 2,
        checkpoint: Some(stem.clone()),
        ..TrainConfig::default()
    };
    train(&m, &g, &data, &cfg, |_| {}).unwrap();
    let mut st = TrainState::load(&stem, &Device::Cpu).unwrap();
    assert_eq!(st.meta.loss_scale, None, "f32 has no loss scale");
    let scale = gnn::train::LossScale {
        scale: 512.0,
        clean: 7,
        skipped: 3,
    };
    st.meta.loss_scale = Some(scale);
    let other = tmp.path().join("scaled");
    st.save(&other).unwrap();
    let back = TrainState::load(&other, &Device::Cpu).unwrap();
    assert_eq!(back.meta.loss_scale, Some(scale));
    let mut old = serde_json::to_value(&back.meta).unwrap();
    old.as_object_mut().unwrap().remove("loss_scale");
    let old: gnn::train::checkpoint::StateMeta = serde_json::from_value(old).unwrap();
    assert_eq!(old.loss_scale, None);
}

#[test]
fn cosine_schedule_changes_the_steps_after_the_first() {
    let base = TrainConfig {
        epochs: 6,
        eval_every: 2,
        seed: 9,
        ..TrainConfig::default()
    };
    let cosine = TrainConfig {
        lr_schedule: LrSchedule::Cosine,
        ..base.clone()
    };
    let (m1, g, data) = setup(ConvKind::Gcn, Activation::Relu);
    let a = train(&m1, &g, &data, &base, |_| {}).unwrap();
    let (m2, _, _) = setup(ConvKind::Gcn, Activation::Relu);
    let b = train(&m2, &g, &data, &cosine, |_| {}).unwrap();
    // Epoch 1 steps at the full rate under both; epoch 2 at 0.93x under cosine, so the
    // losses agree through epoch 2 (computed before its step) and part from epoch 3.
    let loss = |r: &TrainReport, e: usize| r.history[e - 1].loss;
    assert_eq!((loss(&a, 1), loss(&a, 2)), (loss(&b, 1), loss(&b, 2)));
    assert_ne!(loss(&a, 3), loss(&b, 3));
}
