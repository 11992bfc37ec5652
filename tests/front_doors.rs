//! The library front doors the examples wrap: `run::run` (what train_cora / train_reddit do),
//! `sweep::maxk` and `sweep::inference` (what maxk_sweep / infer do) and the shared flags of
//! `cli`, on bundled Cora and a small generated graph, on the CPU.

use clap::Parser;
use gnn::models::{Aggregation, ConvKind};
use gnn::train::cli::{DataFlags, Recipe, TrainFlags};
use gnn::train::run::{load, run, DataSource, RunConfig, Save};
use gnn::train::sweep::inference::InferSweep;
use gnn::train::sweep::maxk::{Doc, MaxkSweep};
use gnn::train::DeviceData;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    data: DataFlags,
    #[command(flatten)]
    train: TrainFlags,
}

fn parse(args: &[&str]) -> Cli {
    Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied())).unwrap()
}

#[test]
fn flags_resolve_against_the_recipe() {
    let c = parse(&["--hidden", "32", "--input-dropout", "0.1"]);
    let m = c.train.model(ConvKind::SageMean, &Recipe::PLANETOID);
    assert_eq!((m.layers, m.hidden, m.input_dropout), (2, 32, 0.1));
    let t = c.train.train(&Recipe::REDDIT);
    assert_eq!((t.epochs, t.weight_decay, t.eval_every), (60, 0.0, 5));
    // Planetoid's input dropout defaults to the hidden dropout.
    let m = parse(&["--dropout", "0.3"])
        .train
        .model(ConvKind::Gcn, &Recipe::PLANETOID);
    assert_eq!(m.input_dropout, 0.3);
    // Sources: bundled Cora, the generated graph with its overrides, a folder, an error.
    let c = parse(&[]);
    assert!(
        matches!(c.data.source("cora", 0).unwrap(), DataSource::Files { name, .. } if name == "cora")
    );
    let c = parse(&["--dataset", "reddit", "--scale", "0.01", "--signal", "0.5"]);
    match c.data.source("cora", 7).unwrap() {
        DataSource::Synthetic {
            spec, scale, seed, ..
        } => {
            assert_eq!((scale, seed, spec.signal), (Some(0.01), 7, 0.5));
        }
        other => panic!("{other:?}"),
    }
    let e = parse(&["--dataset", "citeseer"])
        .data
        .source("cora", 0)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("--dataset citeseer needs --data-dir"),
        "{e}"
    );
}

#[test]
fn run_trains_seeds_saves_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&["--epochs", "30"]);
    let mut cfg = RunConfig::new(
        DataSource::bundled_cora(),
        c.train.model(ConvKind::Gcn, &Recipe::PLANETOID),
    );
    cfg.train = c.train.train(&Recipe::PLANETOID);
    cfg.seeds = 2;
    cfg.baseline = true;
    cfg.cpu = true;
    cfg.save = Save::At(dir.path().join("w/gcn"));
    cfg.json = Some(dir.path().join("r/run.json"));
    let out = run(&cfg).unwrap();
    assert_eq!(out.gnn.runs.len(), 2);
    let accs: Vec<f64> = out.gnn.runs.iter().map(|r| r.report.test_acc).collect();
    assert!((out.mean_test_acc - (accs[0] + accs[1]) / 2.0).abs() < 1e-12);
    // The kept seed is the one with the best validation accuracy.
    let best = &out.gnn.runs[out.gnn.best];
    assert!(out
        .gnn
        .runs
        .iter()
        .all(|r| r.report.best_val_acc <= best.report.best_val_acc));
    assert!(out.mean_test_acc > 0.6, "{}", out.mean_test_acc);
    let mlp = out.baseline.as_ref().unwrap();
    assert!(
        mlp.test_acc < out.mean_test_acc,
        "the MLP baseline should trail GCN on Cora"
    );
    // JSON on disk equals the returned report; accuracies as train_cora always wrote them.
    let text = std::fs::read_to_string(dir.path().join("r/run.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v, out.report);
    assert_eq!(v["dataset"], "cora");
    assert!((v["mean_test_acc"].as_f64().unwrap() - 100.0 * out.mean_test_acc).abs() < 1e-9);
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    assert_eq!(v["gnn"]["seed"], best.seed);
    assert!(v["mlp"]["test_acc"].is_number());
    // The policy the run asked for and the kernels it ran.
    assert_eq!(v["kernel_policy"]["spmm"], "auto");
    assert_eq!(v["kernel_policy"]["deterministic"], false);
    assert_eq!(v["kernels_used"]["spmm"], serde_json::json!(["cpu"]));
    // The saved weights are the best seed's and load back.
    let engine = gnn::train::Engine::load(
        dir.path().join("w/gcn"),
        &gnn::graph::load_planetoid(
            env!("CARGO_MANIFEST_DIR").to_string() + "/data/cora/raw",
            "cora",
        )
        .unwrap()
        .graph,
        &candle_core::Device::Cpu,
    )
    .unwrap();
    assert_eq!(engine.model().config().kind, ConvKind::Gcn);
    // A reordered run says what it did and still learns.
    let mut re = cfg.clone();
    re.reorder = gnn::graph::Reorder::Rcm;
    re.seeds = 1;
    re.baseline = false;
    re.save = Save::No;
    re.json = None;
    let out = run(&re).unwrap();
    assert_eq!(out.report["source"]["reorder"]["how"], "rcm");
    assert!(out.mean_test_acc > 0.6, "{}", out.mean_test_acc);
    // Its seconds count in time to accuracy.
    let reorder_s = out.report["reorder_s"].as_f64().unwrap();
    let tta = out.report["gnn"]["report"]["time_to_accuracy"]["train_s"]
        .as_f64()
        .unwrap();
    assert!(reorder_s > 0.0);
    let with = out.report["time_to_accuracy_with_reorder_s"]
        .as_f64()
        .unwrap();
    assert!(
        (with - (tta + reorder_s)).abs() < 1e-9,
        "{with} {tta} {reorder_s}"
    );
    // `auto` keeps Cora's ids (far below a million nodes): no reordering, nothing counted.
    re.reorder = gnn::graph::Reorder::Auto;
    let out = run(&re).unwrap();
    assert!(out.report["source"]["reorder"].is_null());
    assert_eq!(out.report["reorder_s"], 0.0);
    assert!(out.report["time_to_accuracy_with_reorder_s"].is_null());
    // Checkpoints take one seed.
    cfg.train.checkpoint_every = 5;
    cfg.json = None;
    let e = run(&cfg).err().unwrap().to_string();
    assert!(e.contains("one seed"), "{e}");
}

/// GAT with the GAT paper's Cora recipe (8 heads x 8, ELU, dropout 0.6 everywhere, lr 0.005)
/// through the same front door; one seed, 100 epochs.
#[test]
fn gat_trains_on_cora() {
    let c = parse(&[
        "--hidden",
        "64",
        "--dropout",
        "0.6",
        "--lr",
        "0.005",
        "--epochs",
        "100",
    ]);
    let mut cfg = RunConfig::new(
        DataSource::bundled_cora(),
        c.train.model(ConvKind::Gat, &Recipe::PLANETOID),
    );
    assert_eq!((cfg.model.heads, cfg.model.att_dropout), (8, 0.6));
    assert_eq!(cfg.model.activation, gnn::models::Activation::Elu);
    cfg.train = c.train.train(&Recipe::PLANETOID);
    cfg.cpu = true;
    cfg.save = Save::No;
    let out = run(&cfg).unwrap();
    assert!(
        out.mean_test_acc > 0.78,
        "GAT on Cora: {}",
        out.mean_test_acc
    );
}

#[test]
fn maxk_sweep_writes_rows_tables_and_charts() {
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&["--epochs", "10", "--layers", "2", "--hidden", "32"]);
    let recipe = Recipe {
        input_dropout: Some(0.5),
        eval_every: 5,
        ..Recipe::PLANETOID
    };
    let sweep = MaxkSweep {
        dataset: "cora".into(),
        models: vec![ConvKind::Gcn],
        ks: vec![8],
        model: c.train.model(ConvKind::Gcn, &recipe),
        train: c.train.train(&recipe),
        seeds: 1,
        profile_epochs: 4,
        pyg: None,
        kernels: Default::default(),
    };
    let device = candle_core::Device::Cpu;
    let ds = load(&DataSource::bundled_cora(), true).unwrap().dataset;
    let data = DeviceData::new(&ds, &device, true).unwrap();
    let mut doc = Doc::default();
    sweep.run(&ds, &data, &device, &mut doc).unwrap();
    assert_eq!(doc.rows.len(), 2);
    assert_eq!(
        (doc.rows[0].activation.as_str(), doc.rows[1].k),
        ("relu", Some(8))
    );
    assert!(doc
        .rows
        .iter()
        .all(|r| r.epoch_ms > 0.0 && r.breakdown.len() == 7));
    // Time to accuracy per seed: an evaluated epoch (every 5) and no more training time
    // than all 10 epochs took.
    for r in &doc.rows {
        assert_eq!((r.tta_epoch_seeds.len(), r.tta_s_seeds.len()), (1, 1));
        assert!(
            [5, 10].contains(&r.tta_epoch_seeds[0]),
            "{:?}",
            r.tta_epoch_seeds
        );
        assert!(r.tta_s_seeds[0] > 0.0 && r.tta_s_seeds[0] < 10.0 * 10.0 * r.epoch_ms / 1e3);
    }
    doc.write(dir.path()).unwrap();
    for f in [
        "sweep.json",
        "sweep.md",
        "accuracy_time.svg",
        "breakdown.svg",
    ] {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
    let md = std::fs::read_to_string(dir.path().join("sweep.md")).unwrap();
    assert!(md.contains("| cora | gcn | maxk:8 |"), "{md}");
    assert!(md.contains("time to accuracy s (epoch), per seed"), "{md}");
    let back = Doc::load(&dir.path().join("sweep.json")).unwrap();
    assert_eq!(back.rows.len(), 2);
    // k above the hidden width is refused before anything trains.
    let bad = MaxkSweep {
        ks: vec![33],
        ..sweep
    };
    let e = bad
        .run(&ds, &data, &device, &mut doc)
        .unwrap_err()
        .to_string();
    assert!(e.contains("1..=32"), "{e}");
}

#[test]
fn inference_sweep_measures_every_setting() {
    let dir = tempfile::tempdir().unwrap();
    let device = candle_core::Device::Cpu;
    let ds = load(&DataSource::bundled_cora(), true).unwrap().dataset;
    let weights = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("weights/gcn-cora");
    let sweep = InferSweep {
        weights: vec![weights],
        aggregation: Aggregation::Exact,
        int8: false,
        sweep: true,
        widths: vec![4, 16],
        strategies: vec!["bucket".into(), "aes".into()],
        reps: 1,
        row_normalize: true,
        features: None,
        save_features: None,
        out: dir.path().to_path_buf(),
        predictions: None,
        new_of_old: None,
        precision: Default::default(),
        kernels: Default::default(),
    };
    let doc = sweep.run(&ds, &device).unwrap();
    // The report names the policy and the kernels that ran (the CPU's).
    assert_eq!(doc["kernel_policy"]["spmm"], "auto");
    assert_eq!(doc["kernels_used"]["spmm"], serde_json::json!(["cpu"]));
    // exact x 2 encodings + 2 strategies x 2 widths x 2 encodings.
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 10);
    let exact = rows[0]["test_acc"].as_f64().unwrap();
    assert!(exact > 0.79, "{exact}");
    assert_eq!(rows[0]["acc_loss_pts"].as_f64().unwrap(), 0.0);
    for f in ["sweep.json", "sweep.md", "sweep.svg"] {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
    // INT8 codes from a file are refused in a sweep.
    let codes = dir.path().join("codes.safetensors");
    let one = InferSweep {
        sweep: false,
        int8: true,
        save_features: Some(codes.clone()),
        ..sweep.clone()
    };
    one.run(&ds, &device).unwrap();
    let bad = InferSweep {
        features: Some(codes),
        ..sweep
    };
    let e = bad.run(&ds, &device).unwrap_err().to_string();
    assert!(e.contains("INT8 codes"), "{e}");
}

/// `infer --reorder X --predictions F` writes rows in the file's node order: the same model on
/// the same graph gives the same per-node logits whether or not (and however often) the nodes
/// were renumbered first.
#[test]
fn predictions_map_back_to_the_file_order() {
    use gnn::graph::io::npz::{NpyData, NpzArchive};
    use gnn::graph::Reorder;
    let dir = tempfile::tempdir().unwrap();
    let device = candle_core::Device::Cpu;
    let weights = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("weights/gcn-cora");
    let read = |path: &std::path::Path| {
        let mut z = NpzArchive::open(path).unwrap();
        let (NpyData::I64(pred), NpyData::F32(logits)) =
            (z.read("pred").unwrap().data, z.read("logits").unwrap().data)
        else {
            panic!("unexpected dtypes in {}", path.display());
        };
        (pred, logits)
    };
    let base = InferSweep {
        weights: vec![weights.clone()],
        aggregation: Aggregation::Exact,
        int8: false,
        sweep: false,
        widths: vec![],
        strategies: vec![],
        reps: 1,
        row_normalize: true,
        features: None,
        save_features: None,
        out: dir.path().to_path_buf(),
        predictions: None,
        new_of_old: None,
        precision: Default::default(),
        kernels: Default::default(),
    };
    let mut outs = Vec::new();
    for (tag, orders) in [
        ("none", vec![]),
        ("louvain", vec![Reorder::Louvain]),
        ("rcm-then-degree", vec![Reorder::Rcm, Reorder::Degree]),
    ] {
        let mut loaded = load(&DataSource::bundled_cora(), true).unwrap();
        for how in orders {
            gnn::train::run::reorder(&mut loaded, how).unwrap();
        }
        let path = dir.path().join(format!("pred-{tag}.npz"));
        let one = InferSweep {
            out: dir.path().join(tag),
            predictions: Some(path.clone()),
            new_of_old: loaded.new_of_old.clone(),
            ..base.clone()
        };
        one.run(&loaded.dataset, &device).unwrap();
        outs.push((tag, read(&path)));
    }
    let (_, (pred0, logits0)) = &outs[0];
    assert_eq!(pred0.len(), 2708);
    assert_eq!(logits0.len(), 2708 * 7);
    for (tag, (pred, logits)) in &outs[1..] {
        // Renumbering changes only the order of each row's sum.
        let worst = logits0
            .iter()
            .zip(logits)
            .map(|(a, b)| (a - b).abs() / a.abs().max(1.0))
            .fold(0f32, f32::max);
        assert!(worst < 1e-4, "{tag}: logits differ by {worst}");
        let same = pred0.iter().zip(pred).filter(|(a, b)| a == b).count();
        assert!(same >= 2706, "{tag}: {same} of 2708 predictions agree");
    }
    // Several models, or a sweep, have no one set of predictions.
    let bad = InferSweep {
        weights: vec![weights.clone(), weights],
        out: dir.path().join("bad"),
        predictions: Some(dir.path().join("x.npz")),
        ..base
    };
    let ds = load(&DataSource::bundled_cora(), true).unwrap().dataset;
    let e = bad.run(&ds, &device).unwrap_err().to_string();
    assert!(e.contains("one model"), "{e}");
}
