//! DGL Reddit npz and OGB raw-folder loaders on small fixtures written in those exact formats,
//! plus their error reporting on malformed files.

use flate2::write::GzEncoder;
use gnn_graph::io::npz::{write_npz, NpyArray, NpyData};
use gnn_graph::{load_dgl_reddit, load_ogb_node, BuildOptions, Error, Features};
use std::io::Write;
use std::path::Path;

fn arr(shape: &[usize], data: NpyData) -> NpyArray {
    NpyArray {
        shape: shape.to_vec(),
        data,
    }
}

/// A 5-node Reddit-format fixture: symmetric edges with self loops as DGL stores them.
fn write_reddit(
    dir: &Path,
    compressed: bool,
    tweak: impl FnOnce(&mut Vec<(&'static str, NpyArray)>, &mut Vec<(&'static str, NpyArray)>),
) {
    let n = 5;
    let feature: Vec<f32> = (0..n * 3).map(|v| v as f32 * 0.5).collect();
    let mut data = vec![
        ("feature", arr(&[n, 3], NpyData::F32(feature))),
        ("label", arr(&[n], NpyData::I64(vec![0, 1, 2, 1, 0]))),
        ("node_types", arr(&[n], NpyData::I64(vec![1, 1, 2, 3, 3]))),
        ("node_ids", arr(&[n], NpyData::I64((0..n as i64).collect()))),
    ];
    // edges 0-1, 1-2, 3-4 both directions, plus self loops, plus one duplicate
    let row = vec![0, 1, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0];
    let col = vec![1, 0, 2, 1, 4, 3, 0, 1, 2, 3, 4, 1];
    let m = row.len();
    let mut graph = vec![
        ("row", arr(&[m], NpyData::I64(row))),
        ("col", arr(&[m], NpyData::I64(col))),
        ("data", arr(&[m], NpyData::F32(vec![1.0; m]))),
        ("shape", arr(&[2], NpyData::I64(vec![n as i64, n as i64]))),
    ];
    tweak(&mut data, &mut graph);
    let refs = |v: &Vec<(&'static str, NpyArray)>| -> Vec<(&str, NpyArray)> {
        v.iter().map(|(k, a)| (*k, a.clone())).collect()
    };
    let d = refs(&data);
    let g = refs(&graph);
    write_npz(
        dir.join("reddit_data.npz"),
        &d.iter().map(|(k, a)| (*k, a)).collect::<Vec<_>>(),
        compressed,
    )
    .unwrap();
    write_npz(
        dir.join("reddit_graph.npz"),
        &g.iter().map(|(k, a)| (*k, a)).collect::<Vec<_>>(),
        compressed,
    )
    .unwrap();
}

#[test]
fn reddit_npz_loads_plain_and_compressed() {
    for compressed in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        write_reddit(tmp.path(), compressed, |_, _| {});
        let ds = load_dgl_reddit(tmp.path()).unwrap();
        assert_eq!(ds.num_nodes(), 5);
        assert_eq!(ds.num_classes, 3);
        assert_eq!(
            ds.graph.nnz(),
            11,
            "duplicate edge removed, self loops kept"
        );
        assert_eq!(ds.graph.self_loop_count(), 5);
        assert_eq!(ds.graph.row(1), &[0, 1, 2]);
        assert_eq!(ds.split.train, vec![0, 1]);
        assert_eq!(ds.split.val, vec![2]);
        assert_eq!(ds.split.test, vec![3, 4]);
        let Features::Dense(f) = &ds.features else {
            panic!()
        };
        assert_eq!(f.row(4), &[6.0, 6.5, 7.0]);
    }
}

fn reddit_error(
    tweak: impl FnOnce(&mut Vec<(&'static str, NpyArray)>, &mut Vec<(&'static str, NpyArray)>),
) -> String {
    let tmp = tempfile::tempdir().unwrap();
    write_reddit(tmp.path(), false, tweak);
    let e = load_dgl_reddit(tmp.path()).expect_err("malformed fixture must fail");
    assert!(matches!(e, Error::Format { .. }), "{e}");
    e.to_string()
}

#[test]
fn reddit_errors_name_file_field_and_problem() {
    let m = reddit_error(|d, _| d[2].1 = arr(&[5], NpyData::I64(vec![1, 1, 4, 3, 3])));
    assert!(
        m.contains("reddit_data.npz") && m.contains("node_types") && m.contains("type 4"),
        "{m}"
    );
    let m = reddit_error(|d, _| d[1].1 = arr(&[4], NpyData::I64(vec![0, 1, 2, 1])));
    assert!(
        m.contains("reddit_data.npz") && m.contains("`label`") && m.contains("[4]"),
        "{m}"
    );
    let m = reddit_error(|d, _| {
        d.remove(0);
    });
    assert!(m.contains("`feature`") && m.contains("missing"), "{m}");
    let m = reddit_error(|_, g| {
        g[1].1 = arr(
            &[12],
            NpyData::I64(vec![1, 0, 2, 1, 4, 3, 0, 1, 2, 3, 9, 1]),
        )
    });
    assert!(
        m.contains("reddit_graph.npz") && m.contains("`col`") && m.contains("9 is outside"),
        "{m}"
    );
    let m = reddit_error(|_, g| g[3].1 = arr(&[2], NpyData::I64(vec![6, 6])));
    assert!(
        m.contains("reddit_graph.npz") && m.contains("`shape`"),
        "{m}"
    );
    let m = reddit_error(|d, _| d[1].1 = arr(&[5], NpyData::F32(vec![0.0, 1.5, 2.0, 1.0, 0.0])));
    assert!(
        m.contains("`label`") && m.contains("entry 1 is not an integer"),
        "{m}"
    );
}

#[test]
fn non_zip_file_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    write_reddit(tmp.path(), false, |_, _| {});
    std::fs::write(tmp.path().join("reddit_graph.npz"), b"not a zip at all").unwrap();
    let m = load_dgl_reddit(tmp.path()).unwrap_err().to_string();
    assert!(
        m.contains("reddit_graph.npz") && m.contains("not a valid npz"),
        "{m}"
    );
}

fn gz(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut e = GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::default(),
    );
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap();
}

fn write_ogb(root: &Path, feat: &str, edges: &str) {
    gz(&root.join("raw/edge.csv.gz"), edges);
    gz(&root.join("raw/node-feat.csv.gz"), feat);
    gz(&root.join("raw/node-label.csv.gz"), "0\n1\n1\n2\n");
    gz(&root.join("raw/num-node-list.csv.gz"), "4\n");
    gz(&root.join("split/time/train.csv.gz"), "0\n1\n");
    gz(&root.join("split/time/valid.csv.gz"), "2\n");
    gz(&root.join("split/time/test.csv.gz"), "3\n");
}

#[test]
fn ogb_raw_folder_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ogbn_tiny");
    write_ogb(&root, "0.5,1\n1,2\n-1,0.25\n3,3\n", "0,1\n1,2\n2,3\n3,3\n");
    let ds = load_ogb_node(&root, None, BuildOptions::undirected()).unwrap();
    assert_eq!(ds.name, "ogbn_tiny");
    assert_eq!(ds.num_nodes(), 4);
    assert_eq!(ds.num_classes, 3);
    assert_eq!(ds.graph.nnz(), 6, "3 undirected edges, self loop dropped");
    assert_eq!(ds.graph.row(1), &[0, 2]);
    assert_eq!(ds.split.test, vec![3]);
    assert_eq!(ds.features.to_dense().row(2), &[-1.0, 0.25]);
    let directed = load_ogb_node(&root, Some("time"), BuildOptions::default()).unwrap();
    assert_eq!(directed.graph.nnz(), 4);
}

/// Asserts that loading the OGB folder `root` fails with a message naming every one of `parts`.
fn ogb_refused(root: &Path, parts: &[&str]) {
    let m = load_ogb_node(root, None, BuildOptions::undirected())
        .unwrap_err()
        .to_string();
    assert!(parts.iter().all(|p| m.contains(p)), "{m}");
}

#[test]
fn ogb_errors_name_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("bad");
    write_ogb(&root, "0.5,1\n1,2\n-1,oops\n3,3\n", "0,1\n");
    ogb_refused(&root, &["node-feat.csv.gz", "line 3", "oops"]);

    write_ogb(&root, "0.5,1\n1,2\n-1,0\n3,3\n", "0,1\n1,7\n");
    ogb_refused(&root, &["edge.csv.gz", "line 2", "7 is outside"]);

    write_ogb(&root, "0.5,1\n1,2\n-1\n3,3\n", "0,1\n");
    ogb_refused(&root, &["node-feat.csv.gz", "line 3", "1 values"]);

    write_ogb(&root, "0.5,1\n1,2\n-1,0\n3,3\n", "0,1\n");
    std::fs::write(root.join("raw/edge.csv.gz"), b"plain text, not gzip").unwrap();
    ogb_refused(&root, &["edge.csv.gz", "decompress"]);
}
