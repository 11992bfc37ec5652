//! Planetoid loader on the bundled real Cora, checked against independently decoded binaries.

use gnn_graph::{load_planetoid, Error, Features};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cora")
}

fn read_u32(name: &str) -> Vec<u32> {
    let b = std::fs::read(root().join("plain").join(name)).unwrap();
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn cora_matches_decoded_binaries() {
    let ds = load_planetoid(root().join("raw"), "cora").unwrap();
    assert_eq!(ds.num_nodes(), 2708);
    assert_eq!(ds.features.cols(), 1433);
    assert_eq!(ds.num_classes, 7);
    // Split (tkipf/gcn rule).
    assert_eq!(ds.split.train, read_u32("train.u32"));
    assert_eq!(ds.split.val, read_u32("val.u32"));
    assert_eq!(ds.split.test, read_u32("test.u32"));
    // Labels.
    let labels: Vec<i32> = read_u32("labels.i32")
        .into_iter()
        .map(|x| x as i32)
        .collect();
    assert_eq!(ds.labels, labels);
    let mut counts = [0usize; 7];
    ds.labels.iter().for_each(|&l| counts[l as usize] += 1);
    assert_eq!(counts, [351, 217, 418, 818, 426, 298, 180]);
    // Features (raw, binary bag of words).
    let Features::Sparse(f) = &ds.features else {
        panic!("cora features should stay sparse")
    };
    assert_eq!(
        f.pattern.indptr().as_u32().unwrap(),
        read_u32("feat_indptr.u32").as_slice()
    );
    assert_eq!(f.pattern.indices(), read_u32("feat_indices.u32").as_slice());
    assert_eq!(f.values.len(), 49216);
    assert!(f.values.iter().all(|&v| v == 1.0));
    // Graph: symmetrised, de-duplicated, no self loops.
    let sym = read_u32("edges_sym.u32");
    assert_eq!(ds.graph.nnz(), 10556);
    assert_eq!(ds.graph.self_loop_count(), 0);
    assert!(ds.graph.is_symmetric());
    assert!(ds.graph.is_sorted_unique());
    let mut ours: Vec<(u32, u32)> = Vec::new();
    for i in 0..ds.num_nodes() {
        for &j in ds.graph.row(i) {
            ours.push((j, i as u32));
        }
    }
    ours.sort_unstable();
    let theirs: Vec<(u32, u32)> = sym.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    assert_eq!(ours, theirs);
    assert_eq!(ds.graph.degree_stats().empty, 0);
}

#[test]
fn row_normalised_features_sum_to_one() {
    let mut ds = load_planetoid(root().join("raw"), "cora").unwrap();
    ds.features.row_normalize();
    let d = ds.features.to_dense();
    for i in 0..d.rows {
        let s: f32 = d.row(i).iter().sum();
        assert!((s - 1.0).abs() < 1e-5, "row {i} sums to {s}");
    }
}

/// Asserts that `err`'s message names every one of `parts`.
fn mentions(err: &Error, parts: &[&str]) {
    let msg = err.to_string();
    assert!(parts.iter().all(|p| msg.contains(p)), "{msg}");
}

/// Copies the raw folder into a temp dir, lets `f` damage it, and returns the load error.
fn load_damaged(f: impl FnOnce(&Path)) -> Error {
    let tmp = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(root().join("raw")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), tmp.path().join(e.file_name())).unwrap();
    }
    f(tmp.path());
    load_planetoid(tmp.path(), "cora").expect_err("damaged files must not load")
}

#[test]
fn truncated_pickle_names_file_and_problem() {
    let err = load_damaged(|d| {
        let p = d.join("ind.cora.allx");
        let b = std::fs::read(&p).unwrap();
        std::fs::write(&p, &b[..b.len() / 2]).unwrap();
    });
    let msg = err.to_string();
    assert!(matches!(err, Error::Format { .. }), "{msg}");
    assert!(
        msg.contains("ind.cora.allx") && msg.contains("truncated"),
        "{msg}"
    );
}

#[test]
fn wrong_object_in_file_is_reported() {
    let err = load_damaged(|d| {
        std::fs::copy(d.join("ind.cora.x"), d.join("ind.cora.ty")).unwrap();
    });
    mentions(&err, &["ind.cora.ty", "expected a numpy array"]);
}

#[test]
fn bad_test_index_line_is_reported() {
    let err = load_damaged(|d| {
        let p = d.join("ind.cora.test.index");
        let mut t = std::fs::read_to_string(&p).unwrap();
        t = t.replacen("2692", "26x2", 1);
        std::fs::write(&p, t).unwrap();
    });
    mentions(&err, &["ind.cora.test.index", "line 1", "26x2"]);
}

#[test]
fn inconsistent_test_index_is_reported() {
    let err = load_damaged(|d| {
        let p = d.join("ind.cora.test.index");
        let t = std::fs::read_to_string(&p).unwrap();
        let short: String = t.lines().skip(1).map(|l| format!("{l}\n")).collect();
        std::fs::write(&p, short).unwrap();
    });
    mentions(&err, &["test.index", "999 test ids"]);
}

#[test]
fn missing_file_is_an_io_error_with_path() {
    let err = load_damaged(|d| std::fs::remove_file(d.join("ind.cora.graph")).unwrap());
    assert!(matches!(err, Error::Io { .. }));
    assert!(err.to_string().contains("ind.cora.graph"));
}

#[test]
fn garbage_pickle_opcode_is_reported() {
    let err =
        load_damaged(|d| std::fs::write(d.join("ind.cora.graph"), b"\x80\x02\xff\xff").unwrap());
    mentions(&err, &["ind.cora.graph", "opcode 0xff"]);
}

/// The last test id of Cora replaced by a huge value used to panic (u64::MAX: index out of
/// bounds) or abort on a 64 GB allocation (4e9): the node count now has to be explained by
/// the test ids.
#[test]
fn huge_last_test_id_is_refused_not_allocated() {
    for huge in ["18446744073709551615", "4000000000", "3709"] {
        let err = load_damaged(|d| {
            let p = d.join("ind.cora.test.index");
            let t = std::fs::read_to_string(&p).unwrap();
            let mut lines: Vec<&str> = t.lines().collect();
            let k = lines
                .iter()
                .position(|&l| l == "2707")
                .unwrap_or(lines.len() - 1);
            lines[k] = huge;
            std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        });
        mentions(
            &err,
            &["ind.cora.test.index", &format!("largest test id {huge}")],
        );
    }
}

/// A scipy CSR whose `indptr` decreases (or does not end at nnz) is refused by the pickle
/// reader instead of panicking while rows are sliced.
#[test]
fn bad_csr_indptr_in_pickle_is_refused() {
    use gnn_graph::io::pickle::Writer;
    for (what, patch) in [("decreases", [0i32, 2, 1, 2]), ("ends at 5", [0, 1, 2, 5])] {
        let err = load_damaged(|d| {
            let mut w = Writer::new();
            w.csr(3, 1433, &[(0, 1, 1.0), (1, 2, 1.0)]);
            let mut b = w.finish();
            // Overwrite the indptr array's raw bytes (3 + 1 little-endian i4 values).
            let raw: Vec<u8> = [0i32, 1, 2, 2]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            let at = b.windows(raw.len()).position(|w| w == raw).unwrap();
            let new: Vec<u8> = patch.iter().flat_map(|v| v.to_le_bytes()).collect();
            b[at..at + raw.len()].copy_from_slice(&new);
            std::fs::write(d.join("ind.cora.x"), b).unwrap();
        });
        let msg = err.to_string();
        assert!(msg.contains("ind.cora.x") && msg.contains(what), "{msg}");
    }
}
