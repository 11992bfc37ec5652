//! CiteSeer-style padding: test ids with a gap become isolated, zero-feature nodes, exactly as
//! tkipf/gcn's `load_data` builds `tx_extended`. The fixture is written here as Python-2
//! protocol-2 pickles of the same objects the real files hold (scipy CSR matrices, numpy
//! arrays, a `defaultdict(list)`).

use gnn_graph::io::pickle::Writer as P;
use gnn_graph::{load_planetoid, Features};

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
    p.save(&d.join("ind.toy.allx")).unwrap();
    let mut p = P::new();
    p.onehot(
        &(0..n_all).map(|i| i % classes).collect::<Vec<_>>(),
        classes,
    );
    p.save(&d.join("ind.toy.ally")).unwrap();
    let mut p = P::new();
    p.csr(3, dim, &allx[..3]);
    p.save(&d.join("ind.toy.x")).unwrap();
    let mut p = P::new();
    p.onehot(&[0, 1, 2], classes);
    p.save(&d.join("ind.toy.y")).unwrap();
    // Test ids in file order 505, 503, 506: id 504 is missing (CiteSeer's situation).
    std::fs::write(d.join("ind.toy.test.index"), "505\n503\n506\n").unwrap();
    let mut p = P::new();
    p.csr(3, dim, &[(0, 0, -1.0), (1, 1, -2.0), (2, 4, -3.0)]);
    p.save(&d.join("ind.toy.tx")).unwrap();
    let mut p = P::new();
    p.onehot(&[2, 0, 1], classes);
    p.save(&d.join("ind.toy.ty")).unwrap();
    // Graph: defaultdict(list) {0: [1], 503: [505, 506]}.
    let mut p = P::new();
    p.adjacency(&[(0, vec![1]), (503, vec![505, 506])]);
    p.save(&d.join("ind.toy.graph")).unwrap();

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
