//! The synthetic generators: the Reddit-shaped graph is the one the sequential generator made
//! (the training baselines depend on it), no result depends on the thread count, and the
//! papers100M-shaped graph has the shape it claims.

use gnn_graph::{generate, Dataset, Features, SyntheticSpec};

/// FNV-1a over every array of a dataset (graph, feature bits, labels, split).
fn fingerprint(ds: &Dataset) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |w: u32| {
        for b in w.to_le_bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    // The generated graphs hold u32 offsets (they fit): the fingerprints predate u64 ones.
    let indptr = ds.graph.indptr().as_u32().expect("u32 offsets");
    indptr.iter().for_each(|&v| eat(v));
    ds.graph.indices().iter().for_each(|&v| eat(v));
    match &ds.features {
        Features::Dense(d) => d.data.iter().for_each(|v| eat(v.to_bits())),
        Features::Sparse(s) => s.values.iter().for_each(|v| eat(v.to_bits())),
    }
    ds.labels.iter().for_each(|&v| eat(v as u32));
    let s = &ds.split;
    s.train
        .iter()
        .chain(&s.val)
        .chain(&s.test)
        .for_each(|&v| eat(v));
    h
}

fn in_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

#[test]
fn the_reddit_shaped_graph_is_the_sequential_generators() {
    // Scale 0.01, seed 0, as generated before the parallel builder (main at c6f0242, whose
    // CPU training losses are the baseline): the same graph, features, labels and split.
    let (ds, _) = generate(&SyntheticSpec::reddit().scaled(0.01).unwrap(), 0).unwrap();
    assert_eq!(fingerprint(&ds), 0x9139_3dd4_7c3d_f34d);
}

#[test]
fn generated_graphs_do_not_depend_on_the_thread_count() {
    let specs = [
        SyntheticSpec::reddit().scaled(0.01).unwrap(),
        SyntheticSpec::papers100m().scaled(0.0005).unwrap(),
    ];
    for spec in specs {
        let (one, _) = in_pool(1, || generate(&spec, 3)).unwrap();
        let (four, _) = in_pool(4, || generate(&spec, 3)).unwrap();
        assert_eq!(one.graph, four.graph, "{}", spec.name);
        assert_eq!(one.features, four.features, "{}", spec.name);
        assert_eq!(one.labels, four.labels, "{}", spec.name);
        assert_eq!(one.split, four.split, "{}", spec.name);
    }
}

#[test]
fn the_papers100m_shaped_graph() {
    let full = SyntheticSpec::papers100m();
    assert_eq!(
        (full.nodes, full.features, full.classes),
        (111_059_956, 128, 172)
    );
    // ~3.23 G non-zeros plus a self loop per node: fits 32-bit offsets at scale 1.
    assert!(
        (full.expected_nnz() / 3.3425e9 - 1.0).abs() < 1e-3,
        "{}",
        full.expected_nnz()
    );
    assert!(full.scaled(1.0).is_ok());
    // Past 2^32 non-zeros the offsets go 64-bit: scale 2 (6.7 G) is a valid spec, bounded by
    // memory alone (its features dominate: 4 bytes x 128 per node).
    let two = full.scaled(2.0).unwrap();
    assert!(two.expected_nnz() > 1.5 * u32::MAX as f64);
    let gb = |s: &SyntheticSpec| s.peak_bytes() as f64 / 1e9;
    assert!((gb(&full) / 73.2 - 1.0).abs() < 0.01, "{}", gb(&full));
    assert!((gb(&two) / 146.3 - 1.0).abs() < 0.01, "{}", gb(&two));
    assert!(two.check_memory(150_000_000_000).is_ok());
    let e = two.check_memory(64_000_000_000).unwrap_err().to_string();
    assert!(
        e.contains("146.3 GB at generation's peak, 64.0 GB of memory is available")
            && e.contains("about 0.43 of these nodes fit"),
        "{e}"
    );
    assert!(full.scaled(17.0).is_err());
    assert_eq!(SyntheticSpec::preset("papers100m").unwrap(), full);

    let spec = full.scaled(0.0005).unwrap();
    assert_eq!((spec.nodes, spec.avg_degree), (55_530, full.avg_degree));
    let (ds, rep) = generate(&spec, 1).unwrap();
    println!("{rep}");
    let (n, g) = (ds.num_nodes(), &ds.graph);
    assert_eq!((ds.features.cols(), ds.num_classes), (128, 172));
    assert!(g.is_symmetric() && g.is_sorted_unique() && g.self_loop_count() == n);
    let mean = g.nnz() as f64 / n as f64;
    assert!((mean / 30.1 - 1.0).abs() < 0.05, "mean row length {mean}");
    // Power law: the complementary CDF falls as k^-1.5 (tail exponent 2.5), 4^1.5 = 8 times
    // from twice to eight times the mean degree; a log-normal tail falls far faster.
    let deg = g.row_degrees();
    let ccdf = |k: f64| deg.iter().filter(|&&d| d as f64 > k).count() as f64;
    let fall = ccdf(2.0 * mean) / ccdf(8.0 * mean);
    assert!((5.0..16.0).contains(&fall), "ccdf falls {fall}x");
    assert!(rep.degrees.max as f64 > 50.0 * mean, "{}", rep.degrees);
    assert!(rep.edge_homophily > 0.5, "{}", rep.edge_homophily);
    // papers100M's split: ~1.09 / 0.11 / 0.19 % of the nodes, the others in no set.
    let frac = |ids: &[u32]| ids.len() as f64 / n as f64;
    let s = &ds.split;
    assert!(
        (frac(&s.train) / 0.01087 - 1.0).abs() < 0.15,
        "{}",
        frac(&s.train)
    );
    assert!(
        (frac(&s.val) / 0.001128 - 1.0).abs() < 0.4,
        "{}",
        frac(&s.val)
    );
    assert!(
        (frac(&s.test) / 0.00193 - 1.0).abs() < 0.35,
        "{}",
        frac(&s.test)
    );
    let mut seen = [false; 172];
    ds.labels.iter().for_each(|&l| seen[l as usize] = true);
    assert!(seen.iter().all(|&x| x), "every class occurs");
}
