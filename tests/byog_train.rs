//! Bring your own graph, end to end: bundled Cora rewritten as a gnn-benchmark `.npz` file and
//! as an edge-list folder, loaded through the detecting front door (`load_auto`, what
//! `train_cora --data-dir` calls) and trained: the graph, features and labels must survive the
//! round trip, and GCN must reach Cora's accuracy band on both.

use candle_core::Device;
use gnn::graph::io::npz::{write_npy, write_npz, NpyArray, NpyData};
use gnn::graph::{load_auto, load_planetoid, Dataset, Format};
use gnn::models::{ConvKind, Gnn, ModelConfig, ModelGraph};
use gnn::train::{train, DeviceData, TrainConfig};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn cora() -> Dataset {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/cora/raw");
    load_planetoid(dir, "cora").unwrap()
}

fn ints(v: impl IntoIterator<Item = i64>) -> NpyArray {
    let v: Vec<i64> = v.into_iter().collect();
    NpyArray {
        shape: vec![v.len()],
        data: NpyData::I64(v),
    }
}

fn write_benchmark(ds: &Dataset, path: &Path) {
    let g = &ds.graph;
    let x = ds.features.to_dense();
    // Attributes as CSR, like the gnn-benchmark files.
    let (mut ptr, mut ind, mut val) = (vec![0i64], Vec::new(), Vec::new());
    for i in 0..x.rows {
        for (j, &v) in x.row(i).iter().enumerate() {
            if v != 0.0 {
                ind.push(j as i64);
                val.push(v);
            }
        }
        ptr.push(ind.len() as i64);
    }
    let n = g.n_rows() as i64;
    let arrays = [
        (
            "adj_data",
            NpyArray {
                shape: vec![g.nnz()],
                data: NpyData::F32(vec![1.0; g.nnz()]),
            },
        ),
        ("adj_indices", ints(g.indices().iter().map(|&v| v as i64))),
        (
            "adj_indptr",
            ints(g.indptr().to_u64().iter().map(|&v| v as i64)),
        ),
        ("adj_shape", ints([n, n])),
        (
            "attr_data",
            NpyArray {
                shape: vec![val.len()],
                data: NpyData::F32(val),
            },
        ),
        ("attr_indices", ints(ind)),
        ("attr_indptr", ints(ptr)),
        ("attr_shape", ints([n, x.cols as i64])),
        ("labels", ints(ds.labels.iter().map(|&l| l.max(0) as i64))),
    ];
    let refs: Vec<(&str, &NpyArray)> = arrays.iter().map(|(k, a)| (*k, a)).collect();
    write_npz(path, &refs, true).unwrap();
}

fn write_edge_list(ds: &Dataset, dir: &Path) {
    let mut text = String::from("source target\n");
    for i in 0..ds.graph.n_rows() {
        for &j in ds.graph.row(i) {
            writeln!(text, "{j} {i}").unwrap();
        }
    }
    std::fs::write(dir.join("edges.txt"), text).unwrap();
    let x = ds.features.to_dense();
    write_npy(
        dir.join("features.npy"),
        &NpyArray {
            shape: vec![x.rows, x.cols],
            data: NpyData::F32(x.data),
        },
    )
    .unwrap();
    write_npy(
        dir.join("labels.npy"),
        &ints(ds.labels.iter().map(|&l| l as i64)),
    )
    .unwrap();
    let n = ds.graph.n_rows();
    for (name, ids) in [
        ("train", &ds.split.train),
        ("val", &ds.split.val),
        ("test", &ds.split.test),
    ] {
        let mut mask = vec![false; n];
        ids.iter().for_each(|&i| mask[i as usize] = true);
        write_npy(
            dir.join(format!("{name}.npy")),
            &NpyArray {
                shape: vec![n],
                data: NpyData::Bool(mask),
            },
        )
        .unwrap();
    }
}

fn gcn_test_accuracy(ds: &Dataset) -> f64 {
    let dev = Device::Cpu;
    let data = DeviceData::new(ds, &dev, true).unwrap();
    let cfg = ModelConfig::new(
        ConvKind::Gcn,
        ds.features.cols(),
        16,
        ds.num_classes,
        2,
        0.5,
    );
    let graph = ModelGraph::new(&ds.graph, ConvKind::Gcn, &dev).unwrap();
    let model = Gnn::new(cfg, &dev, 0).unwrap();
    train(&model, &graph, &data, &TrainConfig::default(), |_| {})
        .unwrap()
        .test_acc
}

#[test]
fn cora_as_gnn_benchmark_and_as_edge_list_trains_like_cora() {
    let ds = cora();
    let tmp = tempfile::tempdir().unwrap();
    // GNN_BYOG_OUT=DIR keeps the two fixtures there (to try `train_cora --data-dir` on them).
    if let Some(out) = std::env::var_os("GNN_BYOG_OUT").map(PathBuf::from) {
        std::fs::create_dir_all(out.join("cora_edges")).unwrap();
        write_benchmark(&ds, &out.join("cora_bench.npz"));
        write_edge_list(&ds, &out.join("cora_edges"));
    }

    let npz = tmp.path().join("cora_bench.npz");
    write_benchmark(&ds, &npz);
    let (bench, format) = load_auto(&npz, "cora_bench", 0).unwrap();
    assert_eq!(format, Format::GnnBenchmark(npz.clone()));
    // Cora's Planetoid graph is already undirected without self loops: identical CSR.
    assert_eq!(bench.graph, ds.graph);
    assert_eq!(bench.features.to_dense(), ds.features.to_dense());
    assert_eq!(bench.num_classes, 7);
    assert_eq!((bench.split.train.len(), bench.split.val.len()), (140, 210));
    let acc = gcn_test_accuracy(&bench);
    // GCN on Cora with 20 per class: ~79-82 % (Shchur et al. report 81.5 % for random splits).
    assert!(acc >= 0.76, "gnn-benchmark Cora: test accuracy {acc}");

    let folder = tmp.path().join("cora_edges");
    std::fs::create_dir(&folder).unwrap();
    write_edge_list(&ds, &folder);
    let (edges, format) = load_auto(&folder, "ignored", 0).unwrap();
    assert_eq!(format, Format::EdgeList);
    assert_eq!(edges.graph, ds.graph);
    assert_eq!(edges.split, ds.split);
    let acc = gcn_test_accuracy(&edges);
    assert!(
        acc >= 0.79,
        "edge-list Cora (Planetoid split): test accuracy {acc}"
    );
}

/// `features.npy` as `np.save(f, x.astype(np.float16))` writes it, for 0/1 features (Cora's
/// bag of words): f16 0x0000 and 0x3C00.
fn write_binary_features_f16(x: &gnn::graph::DenseMatrix, path: &Path) {
    let bits: Vec<u16> = (x.data.iter())
        .map(|&v| {
            assert!(v == 0.0 || v == 1.0, "Cora's raw features are 0/1");
            if v == 1.0 {
                0x3C00
            } else {
                0
            }
        })
        .collect();
    let bytes = gnn::graph::io::npz::f16_npy_bytes(&[x.rows, x.cols], &bits, false);
    std::fs::write(path, bytes).unwrap();
}

/// Cora as a two-class edge-list folder (class 3, 30 % of the nodes, against the rest) with
/// f16 features, through `run` as `train_cora --data-dir` runs it: ROC-AUC beside accuracy in
/// the report, and load errors naming the folder's dataset rather than the default `cora`.
#[test]
fn a_two_class_folder_reports_roc_auc() {
    use gnn::train::run::{run, DataSource, ModelSpec, RunConfig, Save};
    let ds = cora();
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("cora_binary");
    std::fs::create_dir(&folder).unwrap();
    write_edge_list(&ds, &folder);
    // No split files: the stratified 20 / 30 per class split.
    for part in ["train", "val", "test"] {
        std::fs::remove_file(folder.join(format!("{part}.npy"))).unwrap();
    }
    write_binary_features_f16(&ds.features.to_dense(), &folder.join("features.npy"));
    let binary = |labels: &[i32]| ints(labels.iter().map(|&l| (l == 3) as i64));
    write_npy(folder.join("labels.npy"), &binary(&ds.labels)).unwrap();

    let source = DataSource::Files {
        path: folder.clone(),
        name: "cora".into(),
        split_seed: 0,
    };
    let mut cfg = RunConfig::new(source, ModelSpec::new(ConvKind::Gcn, 2, 16));
    cfg.train.epochs = 60;
    cfg.seeds = 2;
    cfg.baseline = true;
    cfg.cpu = true;
    cfg.save = Save::No;
    cfg.json = Some(tmp.path().join("r.json"));
    let out = run(&cfg).unwrap();
    let v = &out.report;
    assert_eq!(v["dataset"], "cora_binary");
    assert_eq!(v["dataset_summary"]["classes"], 2);
    for r in &out.gnn.runs {
        let auc = r.roc_auc.expect("two classes: an AUC per seed");
        assert!(auc.test.unwrap() > 0.8, "{auc}");
    }
    let runs = v["runs"].as_array().unwrap();
    assert!(runs.iter().all(|r| r["roc_auc"]["test"].is_number()));
    let mean = v["mean_test_roc_auc"].as_f64().unwrap();
    assert!(mean > 0.8 && mean <= 1.0, "{mean}");
    assert!(v["std_test_roc_auc"].as_f64().unwrap() >= 0.0);
    assert_eq!(
        v["gnn"]["roc_auc"]["test"].as_f64(),
        out.gnn.runs[out.gnn.best].roc_auc.unwrap().test
    );
    assert!(v["mlp"]["roc_auc"]["test"].as_f64().unwrap() > 0.5);

    // A bad label: the error names the folder's dataset and the class range.
    let mut bad = binary(&ds.labels);
    if let NpyData::I64(v) = &mut bad.data {
        v[12] = -1;
    }
    write_npy(folder.join("labels.npy"), &bad).unwrap();
    let e = run(&cfg).err().expect("label -1").to_string();
    assert!(
        e.contains("loading cora_binary (edge list) from")
            && e.contains("label -1 at node 12 outside 0..2 (2 classes"),
        "{e}"
    );
}
