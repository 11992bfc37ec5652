//! CiteSeer-style padding: test ids with a gap become isolated, zero-feature nodes, exactly as
//! tkipf/gcn's `load_data` builds `tx_extended`. The fixture is written here as Python-2
//! protocol-2 pickles of the same objects the real files hold (scipy CSR matrices, numpy
//! arrays, a `defaultdict(list)`).

use gnn_graph::{load_planetoid, Features};
use std::path::Path;

/// Minimal protocol-2 pickle writer for the fixture.
struct P(Vec<u8>);

impl P {
    fn new() -> Self {
        P(vec![0x80, 2])
    }
    fn global(&mut self, module: &str, name: &str) {
        self.0.push(b'c');
        self.0.extend(format!("{module}\n{name}\n").as_bytes());
    }
    fn int(&mut self, v: i32) {
        self.0.push(b'J');
        self.0.extend(v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.0.push(b'T');
        self.0.extend((b.len() as u32).to_le_bytes());
        self.0.extend(b);
    }
    fn op(&mut self, o: u8) {
        self.0.push(o);
    }
    /// numpy.core.multiarray._reconstruct(ndarray, (0,), 'b') + BUILD state.
    fn ndarray(&mut self, shape: &[i32], dtype: &str, raw: &[u8]) {
        self.global("numpy.core.multiarray", "_reconstruct");
        self.global("numpy", "ndarray");
        self.int(0);
        self.op(0x85); // TUPLE1
        self.bytes(b"b");
        self.op(0x87); // TUPLE3
        self.op(b'R');
        self.op(b'(');
        self.int(1);
        self.op(b'(');
        for &d in shape {
            self.int(d);
        }
        self.op(b't');
        self.global("numpy", "dtype");
        self.bytes(dtype.as_bytes());
        self.int(0);
        self.int(1);
        self.op(0x87);
        self.op(b'R');
        self.op(b'(');
        self.int(3);
        self.bytes(b"<");
        self.op(b'N');
        self.op(b'N');
        self.op(b'N');
        self.int(-1);
        self.int(-1);
        self.int(0);
        self.op(b't');
        self.op(b'b'); // dtype BUILD
        self.op(0x89); // is_fortran = False
        self.bytes(raw);
        self.op(b't');
        self.op(b'b'); // array BUILD
    }
    fn i32s(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    /// scipy.sparse.csr.csr_matrix via NEWOBJ + state dict.
    fn csr(&mut self, rows: usize, cols: usize, entries: &[(usize, i32, f32)]) {
        self.global("scipy.sparse.csr", "csr_matrix");
        self.op(b')');
        self.op(0x81); // NEWOBJ
        self.op(b'}');
        self.op(b'(');
        let mut indptr = vec![0i32];
        let (mut idx, mut val) = (Vec::new(), Vec::new());
        for r in 0..rows {
            for &(er, c, v) in entries.iter().filter(|e| e.0 == r) {
                let _ = er;
                idx.push(c);
                val.push(v);
            }
            indptr.push(idx.len() as i32);
        }
        self.bytes(b"_shape");
        self.int(rows as i32);
        self.int(cols as i32);
        self.op(0x86);
        self.bytes(b"indptr");
        self.ndarray(&[indptr.len() as i32], "i4", &Self::i32s(&indptr));
        self.bytes(b"indices");
        self.ndarray(&[idx.len() as i32], "i4", &Self::i32s(&idx));
        self.bytes(b"data");
        self.ndarray(&[val.len() as i32], "f4", &Self::f32s(&val));
        self.bytes(b"format");
        self.bytes(b"csr");
        self.op(b'u'); // SETITEMS
        self.op(b'b'); // BUILD
    }
    fn onehot(&mut self, labels: &[usize], classes: usize) {
        let mut v = vec![0i32; labels.len() * classes];
        for (i, &l) in labels.iter().enumerate() {
            v[i * classes + l] = 1;
        }
        self.ndarray(
            &[labels.len() as i32, classes as i32],
            "i4",
            &Self::i32s(&v),
        );
    }
    fn save(mut self, path: &Path) {
        self.op(b'.');
        std::fs::write(path, self.0).unwrap();
    }
}

#[test]
fn gap_in_test_ids_is_padded_like_the_reference_code() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (n_all, dim, classes) = (503usize, 5usize, 3usize);
    // allx: row i has feature i % dim = 1 + i; ally: label i % classes.
    let allx: Vec<(usize, i32, f32)> = (0..n_all)
        .map(|i| (i, (i % dim) as i32, 1.0 + i as f32))
        .collect();
    let mut p = P::new();
    p.csr(n_all, dim, &allx);
    p.save(&d.join("ind.toy.allx"));
    let mut p = P::new();
    p.onehot(
        &(0..n_all).map(|i| i % classes).collect::<Vec<_>>(),
        classes,
    );
    p.save(&d.join("ind.toy.ally"));
    let mut p = P::new();
    p.csr(3, dim, &allx[..3]);
    p.save(&d.join("ind.toy.x"));
    let mut p = P::new();
    p.onehot(&[0, 1, 2], classes);
    p.save(&d.join("ind.toy.y"));
    // Test ids in file order 505, 503, 506: id 504 is missing (CiteSeer's situation).
    std::fs::write(d.join("ind.toy.test.index"), "505\n503\n506\n").unwrap();
    let mut p = P::new();
    p.csr(3, dim, &[(0, 0, -1.0), (1, 1, -2.0), (2, 4, -3.0)]);
    p.save(&d.join("ind.toy.tx"));
    let mut p = P::new();
    p.onehot(&[2, 0, 1], classes);
    p.save(&d.join("ind.toy.ty"));
    // Graph: defaultdict(list) {0: [1], 503: [505, 506]}.
    let mut p = P::new();
    p.global("collections", "defaultdict");
    p.global("__builtin__", "list");
    p.op(0x85);
    p.op(b'R');
    p.op(b'(');
    p.int(0);
    p.op(b']');
    p.op(b'(');
    p.int(1);
    p.op(b'e');
    p.int(503);
    p.op(b']');
    p.op(b'(');
    p.int(505);
    p.int(506);
    p.op(b'e');
    p.op(b'u');
    p.save(&d.join("ind.toy.graph"));

    let ds = load_planetoid(d, "toy").unwrap();
    assert_eq!(ds.num_nodes(), 507, "allx rows + the full test id range");
    let f = ds.features.to_dense();
    assert_eq!(
        f.row(505),
        &[-1.0, 0.0, 0.0, 0.0, 0.0],
        "first tx row goes to the first id in file order"
    );
    assert_eq!(f.row(503), &[0.0, -2.0, 0.0, 0.0, 0.0]);
    assert_eq!(f.row(506), &[0.0, 0.0, 0.0, 0.0, -3.0]);
    assert!(
        f.row(504).iter().all(|&v| v == 0.0),
        "padding node has zero features"
    );
    assert_eq!(f.row(7), &[0.0, 0.0, 8.0, 0.0, 0.0]);
    assert_eq!((ds.labels[505], ds.labels[503], ds.labels[506]), (2, 0, 1));
    assert_eq!(
        ds.labels[504], 0,
        "padding node: all-zero one-hot, argmax 0 as in PyG"
    );
    assert_eq!(
        ds.split.test,
        vec![503, 505, 506],
        "test = sorted ids, padding excluded"
    );
    assert_eq!(ds.split.train, vec![0, 1, 2]);
    assert_eq!(ds.split.val, (3..503).collect::<Vec<u32>>());
    assert_eq!(ds.graph.row(504), &[] as &[u32], "padding node is isolated");
    assert_eq!(ds.graph.row(503), &[505, 506]);
    assert_eq!(ds.graph.row(506), &[503], "symmetrised");
    assert!(matches!(ds.features, Features::Sparse(_)));
}
