//! Bring-your-own-graph formats: gnn-benchmark `.npz` files, edge-list folders, and the
//! detecting front door. Small generated files; the same error rules as the other loaders
//! (file, field and problem named, no panic).

use gnn_graph::io::npz::{f16_npy_bytes, write_npy, write_npz, NpyArray, NpyData};
use gnn_graph::{detect, load_auto, load_edge_list_dir, load_gnn_benchmark, BuildOptions, Format};
use std::path::Path;

fn i64s(v: &[i64]) -> NpyArray {
    NpyArray {
        shape: vec![v.len()],
        data: NpyData::I64(v.to_vec()),
    }
}
fn i32s(v: &[i64]) -> NpyArray {
    // scipy stores CSR offsets as int32; the loader widens every integer width.
    i64s(v)
}
fn f32s(shape: &[usize], v: &[f32]) -> NpyArray {
    NpyArray {
        shape: shape.to_vec(),
        data: NpyData::F32(v.to_vec()),
    }
}

/// A gnn-benchmark-style file: `classes x per_class` nodes, node `i` in class `i % classes`,
/// a ring of directed edges `i -> i+1` plus one self loop on node 0, sparse attributes with a
/// count of 3 and a negative value.
fn write_benchmark(path: &Path, classes: usize, per_class: usize, dense: bool) {
    let n = classes * per_class;
    let mut indptr = vec![0i64];
    let mut indices = Vec::new();
    for i in 0..n {
        if i == 0 {
            indices.push(0);
        }
        indices.push(((i + 1) % n) as i64);
        indptr.push(indices.len() as i64);
    }
    let adj_data = f32s(&[indices.len()], &vec![1.0; indices.len()]);
    let labels: Vec<i64> = (0..n).map(|i| (i % classes) as i64).collect();
    let (adj_indptr, adj_indices) = (i32s(&indptr), i32s(&indices));
    let adj_shape = i64s(&[n as i64, n as i64]);
    let lab = i64s(&labels);
    // Attributes: node i has feature (i % 4) = 3.0 and feature 4 = -1.0.
    let mut aptr = vec![0i64];
    let mut aind = Vec::new();
    let mut aval = Vec::new();
    for i in 0..n {
        aind.extend([(i % 4) as i64, 4]);
        aval.extend([3.0f32, -1.0]);
        aptr.push(aind.len() as i64);
    }
    let mut dense_m = vec![0f32; n * 5];
    for i in 0..n {
        dense_m[i * 5 + i % 4] = 3.0;
        dense_m[i * 5 + 4] = -1.0;
    }
    let (attr_indptr, attr_indices) = (i32s(&aptr), i32s(&aind));
    let attr_data = f32s(&[aval.len()], &aval);
    let attr_shape = i64s(&[n as i64, 5]);
    let attr_matrix = f32s(&[n, 5], &dense_m);
    let mut arrays: Vec<(&str, &NpyArray)> = vec![
        ("adj_data", &adj_data),
        ("adj_indices", &adj_indices),
        ("adj_indptr", &adj_indptr),
        ("adj_shape", &adj_shape),
        ("labels", &lab),
    ];
    if dense {
        arrays.push(("attr_matrix", &attr_matrix));
    } else {
        arrays.extend([
            ("attr_data", &attr_data),
            ("attr_indices", &attr_indices),
            ("attr_indptr", &attr_indptr),
            ("attr_shape", &attr_shape),
        ]);
    }
    write_npz(path, &arrays, true).unwrap();
}

#[test]
fn gnn_benchmark_reads_like_pyg_with_a_stratified_split() {
    let dir = tempfile::tempdir().unwrap();
    for dense in [false, true] {
        let path = dir
            .path()
            .join(if dense { "dense.npz" } else { "amazon.npz" });
        write_benchmark(&path, 3, 60, dense);
        let ds = load_gnn_benchmark(&path, 7).unwrap();
        assert_eq!(ds.num_nodes(), 180);
        assert_eq!(ds.num_classes, 3);
        // Undirected ring, self loop removed: every node has exactly its two ring neighbours.
        for i in 0..180usize {
            let mut nb: Vec<u32> = ds.graph.row(i).to_vec();
            nb.sort_unstable();
            let mut want = vec![((i + 1) % 180) as u32, ((i + 179) % 180) as u32];
            want.sort_unstable();
            assert_eq!(nb, want, "node {i}");
        }
        // Binarised like PyG's read_npz: 3.0 -> 1.0, -1.0 stays.
        let x = ds.features.to_dense();
        assert_eq!(x.cols, 5);
        assert_eq!(x.row(5), &[0.0, 1.0, 0.0, 0.0, -1.0]);
        // 20 / 30 / rest per class.
        for c in 0..3 {
            let count = |ids: &[u32]| ids.iter().filter(|&&i| i as usize % 3 == c).count();
            assert_eq!(count(&ds.split.train), 20);
            assert_eq!(count(&ds.split.val), 30);
            assert_eq!(count(&ds.split.test), 10);
        }
        assert_eq!(ds.name, if dense { "dense" } else { "amazon" });
    }
    // The seed decides the split, and only the seed.
    let path = dir.path().join("amazon.npz");
    let (a, b, c) = (
        load_gnn_benchmark(&path, 7).unwrap(),
        load_gnn_benchmark(&path, 7).unwrap(),
        load_gnn_benchmark(&path, 8).unwrap(),
    );
    assert_eq!(a.split, b.split);
    assert_ne!(a.split.train, c.split.train);
}

#[test]
fn small_classes_give_what_they_have() {
    let labels = [0, 0, 0, 1, -1, 1, 1, 1, 1];
    let s = gnn_graph::Split::stratified(&labels, 2, 2, 0);
    assert_eq!(s.train.len(), 4);
    assert_eq!(s.val.len(), 3); // class 0 has one node left for validation
    assert_eq!(s.test.len(), 1);
    assert!(![&s.train, &s.val, &s.test].iter().any(|p| p.contains(&4)));
}

fn expect_err(r: gnn_graph::Result<impl std::fmt::Debug>, parts: &[&str]) {
    let msg = r.expect_err("must fail").to_string();
    for p in parts {
        assert!(msg.contains(p), "`{msg}` should mention `{p}`");
    }
}

#[test]
fn gnn_benchmark_errors_name_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.npz");
    let n = 4;
    let shape = i64s(&[n, n]);
    let ok_ptr = i64s(&[0, 1, 2, 3, 4]);
    let ok_ind = i64s(&[1, 2, 3, 0]);
    let bad_ind = i64s(&[1, 2, 9, 0]);
    let labels = i64s(&[0, 1, 0, 1]);
    let short_labels = i64s(&[0, 1]);
    let attr = f32s(&[4, 2], &[1.0; 8]);
    let nan_attr = f32s(&[4, 2], &[1.0, f32::NAN, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
    type Case<'a> = (Vec<(&'a str, &'a NpyArray)>, Vec<&'a str>);
    let cases: Vec<Case> = vec![
        (
            vec![
                ("adj_indptr", &ok_ptr),
                ("adj_indices", &bad_ind),
                ("adj_shape", &shape),
                ("attr_matrix", &attr),
                ("labels", &labels),
            ],
            vec!["bad.npz", "adj_indices", "entry 2 = 9 is outside 0..4"],
        ),
        (
            vec![
                ("adj_indptr", &ok_ptr),
                ("adj_indices", &ok_ind),
                ("adj_shape", &shape),
                ("attr_matrix", &attr),
                ("labels", &short_labels),
            ],
            vec!["bad.npz", "labels", "expected [4]"],
        ),
        (
            vec![
                ("adj_indptr", &ok_ptr),
                ("adj_indices", &ok_ind),
                ("adj_shape", &shape),
                ("labels", &labels),
            ],
            vec!["bad.npz", "no node attributes"],
        ),
        (
            vec![
                ("adj_indptr", &ok_ptr),
                ("adj_indices", &ok_ind),
                ("adj_shape", &shape),
                ("attr_matrix", &nan_attr),
                ("labels", &labels),
            ],
            vec!["attr_matrix", "entry 1 is NaN"],
        ),
        (
            vec![
                ("adj_indptr", &ok_ind),
                ("adj_indices", &ok_ind),
                ("adj_shape", &shape),
                ("attr_matrix", &attr),
                ("labels", &labels),
            ],
            vec!["bad.npz", "adj_indptr/adj_indices"],
        ),
        (
            vec![
                ("adj_indices", &ok_ind),
                ("adj_shape", &shape),
                ("attr_matrix", &attr),
                ("labels", &labels),
            ],
            vec!["bad.npz", "adj_indptr", "missing"],
        ),
    ];
    for (arrays, parts) in cases {
        write_npz(&path, &arrays, false).unwrap();
        expect_err(load_gnn_benchmark(&path, 0), &parts);
    }
}

/// An edge-list folder: a 6-node path 0-1-2-3-4-5 written one way, with a header, a comment,
/// commas and spaces; two classes.
fn write_edge_folder(dir: &Path, edges: &str) {
    std::fs::write(dir.join("edges.csv"), edges).unwrap();
    let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
    write_npy(dir.join("features.npy"), &f32s(&[6, 2], &x)).unwrap();
    write_npy(dir.join("labels.npy"), &i64s(&[0, 0, 0, 1, 1, 1])).unwrap();
}

#[test]
fn edge_list_folder_with_and_without_a_split() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_edge_folder(
        d,
        "src,dst\n# a comment\n0,1\n1 2\n2, 3\n\n3\t4\n4,5\n5,5\n",
    );
    let ds = load_edge_list_dir(d, BuildOptions::undirected(), 0).unwrap();
    assert_eq!(ds.num_nodes(), 6);
    assert_eq!(ds.graph.nnz(), 10); // 5 undirected edges, the self loop removed
    assert_eq!(ds.graph.row(2), &[1, 3]);
    assert_eq!(ds.features.to_dense().row(3), &[6.0, 7.0]);
    // No split files: stratified (each class has 3 nodes, all go to training).
    assert_eq!(ds.split.train, vec![0, 1, 2, 3, 4, 5]);
    // Masks (PyG's train_mask style) and id lists both work.
    let mask = |v: [bool; 6]| NpyArray {
        shape: vec![6],
        data: NpyData::Bool(v.to_vec()),
    };
    write_npy(
        d.join("train.npy"),
        &mask([true, false, false, true, false, false]),
    )
    .unwrap();
    write_npy(d.join("val.npy"), &i64s(&[1, 4])).unwrap();
    write_npy(d.join("test.npy"), &i64s(&[2, 5])).unwrap();
    let ds = load_edge_list_dir(d, BuildOptions::undirected(), 0).unwrap();
    assert_eq!(ds.split.train, vec![0, 3]);
    assert_eq!(ds.split.val, vec![1, 4]);
    assert_eq!(ds.split.test, vec![2, 5]);
    // Kept directed when asked.
    let directed = load_edge_list_dir(d, BuildOptions::default(), 0).unwrap();
    assert_eq!(directed.graph.nnz(), 6);
}

#[test]
fn edge_list_errors_name_file_line_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_edge_folder(d, "0,1\n1,7\n");
    expect_err(
        load_edge_list_dir(d, BuildOptions::undirected(), 0),
        &["edges.csv", "line 2", "`7` is not a node id in 0..6"],
    );
    write_edge_folder(d, "0,1\n1\n");
    expect_err(
        load_edge_list_dir(d, BuildOptions::undirected(), 0),
        &["edges.csv", "line 2", "no target id"],
    );
    write_edge_folder(d, "0,1,0.5\n");
    expect_err(
        load_edge_list_dir(d, BuildOptions::undirected(), 0),
        &["line 1", "third column"],
    );
    write_edge_folder(d, "0,1\n-1,2\n");
    expect_err(
        load_edge_list_dir(d, BuildOptions::undirected(), 0),
        &["line 2", "`-1`"],
    );
    write_edge_folder(d, "0,1\n");
    write_npy(d.join("labels.npy"), &i64s(&[0, 0, 0, 1, 1])).unwrap();
    expect_err(
        load_edge_list_dir(d, BuildOptions::undirected(), 0),
        &["labels.npy", "expected [6]"],
    );
    write_edge_folder(d, "0,1\n");
    write_npy(d.join("train.npy"), &i64s(&[0])).unwrap();
    expect_err(
        load_edge_list_dir(d, BuildOptions::undirected(), 0),
        &["val.npy", "all of train.npy, val.npy and test.npy"],
    );
    std::fs::remove_file(d.join("train.npy")).unwrap();
    std::fs::write(d.join("features.npy"), b"not an npy").unwrap();
    expect_err(
        load_edge_list_dir(d, BuildOptions::undirected(), 0),
        &["features.npy", "header"],
    );
}

#[test]
fn the_front_door_detects_each_format() {
    let cora = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cora/raw");
    assert_eq!(detect(&cora, "cora").unwrap(), Format::Planetoid);
    let (ds, _) = load_auto(&cora, "cora", 0).unwrap();
    assert_eq!(ds.num_nodes(), 2708);

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    expect_err(detect(d, "x"), &["no dataset found", "edges.txt"]);
    write_benchmark(&d.join("computers.npz"), 2, 60, false);
    let f = detect(d, "anything").unwrap();
    assert_eq!(f, Format::GnnBenchmark(d.join("computers.npz")));
    assert_eq!(
        detect(&d.join("computers.npz"), "x").unwrap(),
        Format::GnnBenchmark(d.join("computers.npz"))
    );
    write_benchmark(&d.join("photo.npz"), 2, 60, false);
    expect_err(
        detect(d, "anything"),
        &["2 gnn-benchmark files", "name one of them"],
    );
    let msg = detect(d, "anything").unwrap_err().to_string();
    assert!(!msg.contains("--"), "no flag advice in the library: {msg}");
    assert_eq!(
        detect(d, "photo").unwrap(),
        Format::GnnBenchmark(d.join("photo.npz"))
    );
    let (ds, f) = load_auto(d, "photo", 3).unwrap();
    assert_eq!((ds.name.as_str(), ds.num_nodes()), ("photo", 120));
    assert_eq!(f.dataset_name(d, "cora"), "photo");

    let e = tempfile::tempdir().unwrap();
    write_edge_folder(e.path(), "0 1\n");
    assert_eq!(detect(e.path(), "x").unwrap(), Format::EdgeList);
    // An edge-list folder is named after the folder, whatever Planetoid prefix is passed.
    let folder = e.path().file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(Format::EdgeList.dataset_name(e.path(), "cora"), folder);
    let (ds, _) = load_auto(e.path(), "cora", 0).unwrap();
    assert_eq!(ds.name, folder);
    assert_eq!(Format::Planetoid.dataset_name(&cora, "cora"), "cora");
    assert_eq!(Format::DglReddit.dataset_name(d, "cora"), "reddit");
    expect_err(
        detect(&e.path().join("nope"), "x"),
        &["nope", "no such file"],
    );
}

#[test]
fn half_precision_features_are_read_as_f32() {
    // 0, 1, -2, 0.5, 65504 (f16's largest), 2^-24 (its smallest subnormal), 1/3 rounded to
    // f16 (0x3555 = 1365/4096), then the rest of a 6 x 2 matrix.
    let bits = [
        0x0000, 0x3C00, 0xC000, 0x3800, 0x7BFF, 0x0001, 0x3555, 0x4000, 0x4200, 0x4400, 0x4500,
        0x4600,
    ];
    let want = [
        0.0,
        1.0,
        -2.0,
        0.5,
        65504.0,
        2f32.powi(-24),
        1365.0 / 4096.0,
        2.0,
        3.0,
        4.0,
        5.0,
        6.0,
    ];
    for big_endian in [false, true] {
        let a = gnn_graph::io::npz::parse_npy(&f16_npy_bytes(&[6, 2], &bits, big_endian)).unwrap();
        assert_eq!(a.shape, vec![6, 2]);
        assert_eq!(
            a.data,
            NpyData::F32(want.to_vec()),
            "big endian: {big_endian}"
        );
    }
    // Through an edge-list folder, as `np.save("features.npy", x.astype(np.float16))` leaves it.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_edge_folder(d, "0 1\n1 2\n");
    std::fs::write(d.join("features.npy"), f16_npy_bytes(&[6, 2], &bits, false)).unwrap();
    let ds = load_edge_list_dir(d, BuildOptions::undirected(), 0).unwrap();
    assert_eq!(ds.features.to_dense().data, want.to_vec());
    // A truncated file is refused, naming the file.
    let mut short = f16_npy_bytes(&[6, 2], &bits, false);
    short.truncate(short.len() - 2);
    std::fs::write(d.join("features.npy"), short).unwrap();
    expect_err(
        load_edge_list_dir(d, BuildOptions::undirected(), 0),
        &["features.npy"],
    );
}

#[test]
fn label_errors_give_the_real_class_range() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_edge_folder(d, "0 1\n");
    // Classes come from the largest label (4: five classes); -1 is outside them.
    write_npy(d.join("labels.npy"), &i64s(&[0, 0, 0, -1, 1, 4])).unwrap();
    expect_err(
        load_edge_list_dir(d, BuildOptions::undirected(), 0),
        &[
            "labels.npy",
            "label -1 at node 3 outside 0..5 (5 classes, from the largest label 4)",
        ],
    );
    // A label that would give more classes than nodes.
    write_npy(d.join("labels.npy"), &i64s(&[0, 0, 7, 1, 1, 1])).unwrap();
    expect_err(
        load_edge_list_dir(d, BuildOptions::undirected(), 0),
        &["label 7 at node 2 would make 8 classes for 6 nodes"],
    );
    // A dataset built in code, checked against its own class count.
    let ds = gnn_graph::Dataset {
        name: "mine".into(),
        graph: gnn_graph::Csr::empty(13, 13).unwrap(),
        features: gnn_graph::Features::Dense(
            gnn_graph::DenseMatrix::new(13, 1, vec![0.0; 13]).unwrap(),
        ),
        labels: [vec![0; 12], vec![7]].concat(),
        num_classes: 5,
        split: gnn_graph::Split::default(),
    };
    expect_err(
        ds.validate(),
        &[
            "dataset `mine`",
            "label 7 at node 12 outside 0..5 (5 classes",
        ],
    );
}
