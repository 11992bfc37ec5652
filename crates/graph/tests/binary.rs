//! gnn's binary CSR format: whole datasets round-trip (dense and sparse features, u32 and u64
//! offsets), the front door finds it, and a damaged file is refused with the file, the field
//! and the value named.

use gnn_graph::io::binary::{
    load_binary, write_csr, write_dataset, MappedGraph, OffsetWidth, FILE_NAME,
};
use gnn_graph::{detect, generate, load_auto, load_planetoid, Dataset, Format, SyntheticSpec};
use std::path::{Path, PathBuf};

fn same(a: &Dataset, b: &Dataset) {
    assert_eq!(a.name, b.name);
    assert_eq!(a.graph, b.graph);
    assert_eq!(a.features, b.features);
    assert_eq!(a.labels, b.labels);
    assert_eq!(a.num_classes, b.num_classes);
    assert_eq!(a.split, b.split);
}

fn small() -> Dataset {
    generate(&SyntheticSpec::reddit().scaled(0.003).unwrap(), 2)
        .unwrap()
        .0
}

/// Byte offset of section `name`'s data, read from the section table.
fn section_at(bytes: &[u8], name: &str) -> usize {
    let n = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    (0..n)
        .map(|k| 64 + 48 * k)
        .find(|&e| bytes[e..e + 16].split(|&b| b == 0).next() == Some(name.as_bytes()))
        .map(|e| u64::from_le_bytes(bytes[e + 40..e + 48].try_into().unwrap()) as usize)
        .unwrap()
}

/// Writes `bytes` to a file and returns the error of loading it.
fn load_err(dir: &Path, bytes: &[u8]) -> String {
    let p = dir.join("damaged.gnncsr");
    std::fs::write(&p, bytes).unwrap();
    let e = match load_binary(&p) {
        Ok(_) => panic!("{} bytes loaded", bytes.len()),
        Err(e) => e.to_string(),
    };
    assert!(
        e.starts_with(&p.display().to_string()),
        "names the file: {e}"
    );
    e
}

#[test]
fn a_generated_dataset_round_trips_and_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let ds = small();
    let source = serde_json::json!({"generator": "test", "seed": 2});
    write_dataset(
        dir.path().join(FILE_NAME),
        &ds,
        true,
        source.clone(),
        OffsetWidth::U32,
    )
    .unwrap();
    let file = dir.path().join(FILE_NAME);
    assert_eq!(
        detect(dir.path(), "x").unwrap(),
        Format::Binary(file.clone())
    );
    assert_eq!(detect(&file, "x").unwrap(), Format::Binary(file.clone()));
    let (back, format) = load_auto(dir.path(), "ignored", 0).unwrap();
    assert_eq!(format, Format::Binary(file.clone()));
    same(&ds, &back);
    let (back, meta) = load_binary(&file).unwrap();
    same(&ds, &back);
    assert!(meta.raw_features);
    assert_eq!(
        (meta.name, meta.num_classes, meta.source),
        (ds.name.clone(), 41, source)
    );
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from(FILE_NAME)]);
}

#[test]
fn sparse_features_and_64_bit_offsets_round_trip() {
    let cora = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/cora/raw");
    let ds = load_planetoid(&cora, "cora").unwrap();
    assert!(matches!(ds.features, gnn_graph::Features::Sparse(_)));
    let dir = tempfile::tempdir().unwrap();
    // The graph held with 32- or 64-bit offsets, each written at either width: the file has
    // the width asked for, and every file loads as the same graph, at the narrowest width.
    let mut forced = ds.clone();
    forced.graph = ds
        .graph
        .clone()
        .with_offset_width(OffsetWidth::U64)
        .unwrap();
    for (held, src) in [("narrow", &ds), ("wide", &forced)] {
        for width in [OffsetWidth::U32, OffsetWidth::U64] {
            let p = dir.path().join(format!("cora-{held}-{width}.gnncsr"));
            write_dataset(&p, src, false, serde_json::Value::Null, width).unwrap();
            let m = MappedGraph::open(&p).unwrap();
            assert_eq!((m.n_rows(), m.nnz()), (2708, ds.graph.nnz()));
            let wide = matches!(m.indptr(), gnn_graph::io::binary::Offsets::U64(_));
            assert_eq!(wide, width == OffsetWidth::U64);
            let (back, meta) = m.dataset().unwrap();
            same(&ds, &back);
            assert_eq!(back.graph.offset_width(), OffsetWidth::U32);
            assert!(!meta.raw_features);
        }
    }
}

/// A version-1 file as the format's first writer laid it out, byte by byte: a 3 x 3 graph
/// (row 0 -> 1, row 2 -> 0, 2) with offsets of `width` bytes.
fn version_1_file(width: usize) -> Vec<u8> {
    let mut f = Vec::new();
    let u32s = |f: &mut Vec<u8>, v: &[u32]| v.iter().for_each(|x| f.extend(x.to_le_bytes()));
    let u64s = |f: &mut Vec<u8>, v: &[u64]| v.iter().for_each(|x| f.extend(x.to_le_bytes()));
    f.extend(b"GNNCSR\0\0");
    u32s(&mut f, &[1, 2]); // version, sections
    u64s(&mut f, &[3, 3, 3]); // n_rows, n_cols, nnz
    u32s(&mut f, &[width as u32, 4]);
    f.resize(64, 0);
    // Section table (2 x 48 bytes, padded to 192): indptr at 192, indices at 256.
    let dtype = if width == 8 { 3 } else { 2 };
    for (name, dtype, rows, at) in [("indptr", dtype, 4u64, 192u64), ("indices", 2, 3, 256)] {
        let mut n = [0u8; 16];
        n[..name.len()].copy_from_slice(name.as_bytes());
        f.extend(n);
        u32s(&mut f, &[dtype, 0]);
        u64s(&mut f, &[rows, 1, at]);
    }
    f.resize(192, 0);
    if width == 8 {
        u64s(&mut f, &[0, 1, 1, 3]);
    } else {
        u32s(&mut f, &[0, 1, 1, 3]);
    }
    f.resize(256, 0);
    u32s(&mut f, &[1, 0, 2]);
    f.resize(320, 0);
    f
}

#[test]
fn version_1_files_of_either_width_still_load() {
    let dir = tempfile::tempdir().unwrap();
    let want = gnn_graph::Csr::new_checked(3, 3, vec![0, 1, 1, 3], vec![1, 0, 2]).unwrap();
    for width in [4, 8] {
        let p = dir.path().join(format!("v1-{width}.gnncsr"));
        std::fs::write(&p, version_1_file(width)).unwrap();
        let g = MappedGraph::open(&p).unwrap().csr().unwrap();
        assert_eq!(g, want);
        assert_eq!(g.offset_width(), OffsetWidth::U32);
        // This build writes the same bytes.
        let q = dir.path().join(format!("now-{width}.gnncsr"));
        let w = if width == 8 {
            OffsetWidth::U64
        } else {
            OffsetWidth::U32
        };
        write_csr(&q, &want, w).unwrap();
        assert_eq!(std::fs::read(&q).unwrap(), version_1_file(width));
    }
}

#[test]
fn a_graph_alone_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let g = small().graph;
    let p = dir.path().join("g.gnncsr");
    write_csr(&p, &g, OffsetWidth::U64).unwrap();
    let m = MappedGraph::open(&p).unwrap();
    assert!(!m.has_dataset());
    assert_eq!(m.indices(), g.indices());
    assert_eq!(m.csr().unwrap(), g);
    let e = m.dataset().unwrap_err().to_string();
    assert!(
        e.contains("field `meta`: missing from the section table"),
        "{e}"
    );
}

#[test]
fn damaged_files_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let ds = small();
    let p = dir.path().join(FILE_NAME);
    write_dataset(&p, &ds, true, serde_json::Value::Null, OffsetWidth::U32).unwrap();
    let good = std::fs::read(&p).unwrap();

    // Truncated: inside the header, inside the table, inside the data.
    let e = load_err(dir.path(), &good[..40]);
    assert!(
        e.contains("field `header`") && e.contains("truncated"),
        "{e}"
    );
    let e = load_err(dir.path(), &good[..100]);
    assert!(
        e.contains("field `section table`") && e.contains("truncated"),
        "{e}"
    );
    let e = load_err(dir.path(), &good[..section_at(&good, "meta") + 1]);
    assert!(e.contains("field `meta`") && e.contains("truncated"), "{e}");
    let at = section_at(&good, "indices");
    let e = load_err(dir.path(), &good[..at + 8]);
    assert!(e.contains("truncated"), "{e}");

    let mut bad = good.clone();
    bad[..8].copy_from_slice(b"PK\x03\x04abcd");
    let e = load_err(dir.path(), &bad);
    assert!(
        e.contains("field `magic`") && e.contains("not a gnn binary CSR file"),
        "{e}"
    );

    let mut bad = good.clone();
    bad[8..12].copy_from_slice(&2u32.to_le_bytes());
    let e = load_err(dir.path(), &bad);
    assert!(
        e.contains("field `version`: 2, this build reads version 1"),
        "{e}"
    );

    let mut bad = good.clone();
    bad[40..44].copy_from_slice(&6u32.to_le_bytes());
    let e = load_err(dir.path(), &bad);
    assert!(e.contains("field `offset width`: 6 bytes"), "{e}");

    // A column index out of range, at position 5.
    let n = ds.num_nodes() as u32;
    let mut bad = good.clone();
    let q = section_at(&good, "indices") + 4 * 5;
    bad[q..q + 4].copy_from_slice(&(n + 3).to_le_bytes());
    let e = load_err(dir.path(), &bad);
    let want = format!(
        "field `indices`: column {} at position 5 is out of range (n_cols = {n})",
        n + 3
    );
    assert!(e.contains(&want), "{e}");

    // Row offsets that decrease at row 7.
    let mut bad = good.clone();
    let q = section_at(&good, "indptr") + 4 * 8;
    bad[q..q + 4].copy_from_slice(&0u32.to_le_bytes());
    let e = load_err(dir.path(), &bad);
    assert!(e.contains("field `indptr`: decreases at row 7"), "{e}");

    // The last offset disagrees with nnz.
    let mut bad = good.clone();
    let q = section_at(&good, "indptr") + 4 * n as usize;
    bad[q..q + 4].copy_from_slice(&1u32.to_le_bytes());
    let e = load_err(dir.path(), &bad);
    assert!(e.contains(&format!("indptr[{n}] = 1, expected nnz")), "{e}");

    // A label outside the classes: the dataset check, with the file named.
    let mut bad = good.clone();
    let q = section_at(&good, "labels");
    bad[q..q + 4].copy_from_slice(&99i32.to_le_bytes());
    let e = load_err(dir.path(), &bad);
    assert!(
        e.contains("field `dataset`") && e.contains("label 99 at node 0"),
        "{e}"
    );

    // The undamaged bytes still load.
    let (back, _) = {
        std::fs::write(dir.path().join("ok.gnncsr"), &good).unwrap();
        load_binary(dir.path().join("ok.gnncsr")).unwrap()
    };
    same(&ds, &back);
}
