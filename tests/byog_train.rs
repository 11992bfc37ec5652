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
        ("adj_indptr", ints(g.indptr().iter().map(|&v| v as i64))),
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
