//! CSR/COO invariants, building options, transpose, permutation, normalisation, generator.

use gnn_graph::{generate, BuildOptions, Coo, Csr, Normalization, SelfLoops, SyntheticSpec};
use rand::{Rng, SeedableRng};

#[test]
fn new_checked_rejects_each_broken_invariant() {
    type Case = (usize, usize, Vec<u32>, Vec<u32>, &'static str);
    let cases: Vec<Case> = vec![
        (2, 2, vec![0, 1], vec![0], "indptr has 2 entries"),
        (2, 2, vec![1, 1, 1], vec![0], "indptr[0] = 1"),
        (2, 2, vec![0, 2, 1], vec![0, 1], "decreases at row 1"),
        (2, 2, vec![0, 1, 3], vec![0, 1], "3 but there are 2"),
        (2, 2, vec![0, 1, 2], vec![0, 2], "column index 2"),
    ];
    for (r, c, p, i, want) in cases {
        let e = Csr::new_checked(r, c, p, i).unwrap_err().to_string();
        assert!(e.contains(want), "{e} should contain {want}");
    }
    assert!(Csr::new_checked(3, 4, vec![0, 2, 2, 3], vec![3, 0, 1]).is_ok());
}

#[test]
fn group_by_key_lists_each_keys_positions_in_order() {
    let g = Csr::group_by_key(4, &[2, 0, 2, 3, 0, 2]).unwrap();
    assert_eq!((g.n_rows(), g.n_cols()), (4, 6));
    assert_eq!(g.row(0), &[1, 4]);
    assert!(g.row(1).is_empty());
    assert_eq!(g.row(2), &[0, 2, 5]);
    assert_eq!(g.row(3), &[3]);
    assert!(Csr::group_by_key(3, &[0, 3]).is_err());
}

#[test]
fn build_options_dedup_symmetrize_self_loops() {
    let coo = Coo::new(4, vec![0, 0, 1, 2, 2], vec![1, 1, 2, 2, 0]).unwrap();
    let plain = coo.to_csr(BuildOptions::default()).unwrap();
    // row = target: row 1 <- {0}, row 2 <- {1, 2}, row 0 <- {2}
    assert_eq!(plain.row(0), &[2]);
    assert_eq!(plain.row(1), &[0]);
    assert_eq!(plain.row(2), &[1, 2]);
    assert_eq!(plain.nnz(), 4);
    let und = coo.to_csr(BuildOptions::undirected()).unwrap();
    assert_eq!(und.row(0), &[1, 2]);
    assert_eq!(und.row(2), &[0, 1]);
    assert_eq!(und.self_loop_count(), 0);
    assert!(und.is_symmetric());
    // Directed, sorted and unique (the copy-free check) and with a duplicate (the general one).
    assert!(plain.is_sorted_unique() && !plain.is_symmetric());
    let dup = Csr::new_checked(2, 2, vec![0, 2, 3], vec![1, 1, 0]).unwrap();
    assert!(!dup.is_sorted_unique() && !dup.is_symmetric());
    let dup_both = Csr::new_checked(2, 2, vec![0, 2, 4], vec![1, 1, 0, 0]).unwrap();
    assert!(dup_both.is_symmetric());
    let with = und
        .rebuild(BuildOptions {
            self_loops: SelfLoops::Add,
            ..BuildOptions::default()
        })
        .unwrap();
    assert_eq!(with.self_loop_count(), 4);
    assert_eq!(with.row(3), &[3], "isolated node gets its loop");
    assert_eq!(with.nnz(), und.nnz() + 4);
    let again = with
        .rebuild(BuildOptions {
            self_loops: SelfLoops::Add,
            ..BuildOptions::default()
        })
        .unwrap();
    assert_eq!(again, with, "adding loops twice adds nothing");
    assert!(Coo::new(3, vec![0, 5], vec![1, 1]).is_err());
    assert!(Coo::new(3, vec![0], vec![1, 1]).is_err());
}

fn random_csr(n: usize, m: usize, seed: u64) -> Csr {
    let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let src = (0..m).map(|_| r.random_range(0..n as u32)).collect();
    let dst = (0..m).map(|_| r.random_range(0..n as u32)).collect();
    Coo::new(n, src, dst)
        .unwrap()
        .to_csr(BuildOptions::default())
        .unwrap()
}

#[test]
fn transpose_and_its_permutation() {
    let a = random_csr(50, 400, 1);
    let (t, perm) = a.transpose().unwrap();
    assert!(t.is_sorted_unique());
    let vals: Vec<f32> = (0..a.nnz()).map(|p| p as f32).collect();
    for j in 0..t.n_rows() {
        for p in t.row_range(j) {
            let orig = perm[p] as usize;
            let i = t.indices()[p] as usize;
            assert!(a.row_range(i).contains(&orig));
            assert_eq!(a.indices()[orig] as usize, j);
            assert_eq!(vals[orig], orig as f32);
        }
    }
    let (tt, _) = t.transpose().unwrap();
    assert_eq!(tt, a);
}

#[test]
fn permute_relabels_consistently() {
    let a = random_csr(30, 200, 2);
    let mut perm: Vec<u32> = (0..30).collect();
    perm.reverse();
    let b = a.permute(&perm).unwrap();
    for i in 0..30 {
        let mut mapped: Vec<u32> = a.row(i).iter().map(|&j| perm[j as usize]).collect();
        mapped.sort_unstable();
        assert_eq!(b.row(perm[i] as usize), mapped.as_slice());
    }
    assert!(a.permute(&[0, 0, 1]).is_err());
}

#[test]
fn normalisations() {
    let g = Coo::new(3, vec![0, 1, 1], vec![1, 0, 2])
        .unwrap()
        .to_csr(BuildOptions::undirected())
        .unwrap();
    let g = g
        .rebuild(BuildOptions {
            self_loops: SelfLoops::Add,
            ..BuildOptions::default()
        })
        .unwrap();
    // degrees with loops: 0:2, 1:3, 2:2
    let v = Normalization::GcnSymmetric.edge_values(&g);
    let want = |i: usize, j: usize| 1.0 / ((g.row_len(i) * g.row_len(j)) as f32).sqrt();
    for i in 0..3 {
        for p in g.row_range(i) {
            assert!((v[p] - want(i, g.indices()[p] as usize)).abs() < 1e-7);
        }
    }
    let m = Normalization::Mean.edge_values(&g);
    for i in 0..3 {
        let s: f32 = g.row_range(i).map(|p| m[p]).sum();
        assert!((s - 1.0).abs() < 1e-6);
    }
    assert!(Normalization::Sum.edge_values(&g).iter().all(|&x| x == 1.0));
}

#[test]
fn synthetic_is_seeded_and_shaped() {
    let spec = SyntheticSpec::reddit().scaled(0.01).unwrap();
    let (a, rep) = generate(&spec, 7).unwrap();
    let (b, _) = generate(&spec, 7).unwrap();
    let (c, _) = generate(&spec, 8).unwrap();
    assert_eq!(a.graph, b.graph);
    assert_eq!(a.features, b.features);
    assert_eq!(a.labels, b.labels);
    assert_ne!(a.graph, c.graph);
    assert_eq!(a.num_nodes(), 2330);
    assert_eq!(a.features.cols(), 602);
    assert_eq!(a.num_classes, 41);
    assert!(a.graph.is_symmetric() && a.graph.is_sorted_unique());
    assert_eq!(a.graph.self_loop_count(), a.num_nodes());
    let target = spec.avg_degree * spec.nodes as f64;
    let got = a.graph.nnz() as f64;
    assert!(
        (got / target - 1.0).abs() < 0.05,
        "nnz {got} vs target {target}"
    );
    assert!(
        rep.degrees.max as f64 > 4.0 * rep.degrees.mean,
        "heavy tail: {}",
        rep.degrees
    );
    // random pairing would give sum_k p_k^2 ~ 0.04; de-duplication thins dense communities
    assert!(rep.edge_homophily > 0.25, "{}", rep.edge_homophily);
    let n = a.num_nodes() as f64;
    assert!((a.split.train.len() as f64 / n - 0.66).abs() < 0.01);
    assert!((a.split.val.len() as f64 / n - 0.10).abs() < 0.01);
    assert!(SyntheticSpec::reddit().scaled(0.0).is_err());
    assert!(SyntheticSpec::preset("nope").is_err());
}

#[test]
fn community_order_relabels_the_same_graph() {
    let spec = SyntheticSpec::reddit().scaled(0.01).unwrap();
    let (a, _) = generate(&spec, 7).unwrap();
    let mut ordered = spec.clone();
    ordered.community_order = true;
    let (b, _) = generate(&ordered, 7).unwrap();
    assert!(b.name.ends_with("+community-order"));
    assert_eq!(a.graph.nnz(), b.graph.nnz());
    let mut da = a.graph.row_degrees();
    let mut db = b.graph.row_degrees();
    da.sort_unstable();
    db.sort_unstable();
    assert_eq!(da, db);
    assert_eq!(a.split.test.len(), b.split.test.len());
    // Labels follow communities up to the 5 % noise, so the ordered labels mostly ascend.
    let ascents = b.labels.windows(2).filter(|w| w[0] <= w[1]).count();
    assert!(ascents as f64 > 0.85 * b.num_nodes() as f64, "{ascents}");
    let random = a.labels.windows(2).filter(|w| w[0] <= w[1]).count();
    assert!((random as f64) < 0.7 * a.num_nodes() as f64, "{random}");
}

#[test]
fn dataset_permutation_round_trips() {
    let spec = SyntheticSpec::reddit().scaled(0.005).unwrap();
    let (a, _) = generate(&spec, 3).unwrap();
    let n = a.num_nodes() as u32;
    let p: Vec<u32> = (0..n).map(|i| (i * 7 + 3) % n).collect(); // n is not a multiple of 7
    let mut inv = vec![0u32; n as usize];
    for (i, &j) in p.iter().enumerate() {
        inv[j as usize] = i as u32;
    }
    let b = a.permute(&p).unwrap();
    assert_ne!(b.graph, a.graph);
    let (f, g) = (a.features.to_dense(), b.features.to_dense());
    assert_eq!(f.row(5), g.row(p[5] as usize));
    assert_eq!(a.labels[5], b.labels[p[5] as usize]);
    let c = b.permute(&inv).unwrap();
    assert_eq!(c.graph, a.graph);
    assert_eq!(c.features, a.features);
    assert_eq!(c.labels, a.labels);
    assert_eq!(c.split.test, a.split.test);
    assert!(a.permute(&p[1..]).is_err());
}

/// Soundness: an edge list can only be built through `Coo::new`, which range-checks every
/// endpoint, so `to_csr` (which skips the CSR checks) never sees column 7 in a 2-node graph.
#[test]
fn coo_refuses_out_of_range_endpoints_and_keeps_its_invariant() {
    for (n, src, dst, want) in [
        (2usize, vec![7u32], vec![0u32], "endpoint 7"),
        (2, vec![0], vec![2], "endpoint 2"),
        (0, vec![0], vec![0], "endpoint 0"),
        (3, vec![0, 1], vec![1], "1 targets"),
        (u32::MAX as usize, vec![], vec![], "32-bit"),
    ] {
        let e = Coo::new(n, src, dst).unwrap_err().to_string();
        assert!(e.contains(want), "{e} should contain {want}");
    }
    // What can be built converts to a CSR that passes the full check.
    let coo = Coo::new(3, vec![0, 2, 1], vec![1, 1, 0]).unwrap();
    let rev = coo.clone().reversed();
    assert_eq!((rev.src(), rev.dst()), (coo.dst(), coo.src()));
    for c in [coo, rev] {
        let csr = c.to_csr(BuildOptions::default()).unwrap();
        let (p, i) = csr.clone().into_parts();
        assert_eq!(Csr::from_row_ptr(3, 3, p, i).unwrap(), csr);
    }
}

#[test]
fn empty_csr_checks_its_shape() {
    assert_eq!(Csr::empty(3, 0).unwrap().nnz(), 0);
    let e = Csr::empty(u32::MAX as usize, 1).unwrap_err().to_string();
    assert!(e.contains("32-bit"), "{e}");
}

#[test]
fn expand_heads_repeats_each_row_per_head() {
    // 3 x 3: row 0 -> {1, 2}, row 1 empty, row 2 -> {0}.
    let csr = Csr::new_checked(3, 3, vec![0, 2, 2, 3], vec![1, 2, 0]).unwrap();
    let e = csr.expand_heads(2).unwrap();
    assert_eq!((e.n_rows(), e.n_cols(), e.nnz()), (6, 6, 6));
    assert_eq!(e.indptr().as_u32().unwrap(), &[0, 2, 4, 4, 4, 5, 6]);
    // Row (i, h) holds the columns (j, h).
    assert_eq!(e.indices(), &[2, 4, 3, 5, 0, 1]);
    assert_eq!(csr.expand_heads(1).unwrap(), csr);
    assert!(csr.expand_heads(0).is_err());
    let e = csr.expand_heads(usize::MAX / 2).unwrap_err().to_string();
    assert!(e.contains("exceed u32"), "{e}");
}
