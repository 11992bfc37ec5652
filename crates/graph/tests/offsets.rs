//! 64-bit row offsets: the width rules at their boundaries (without the 16 GB a graph past
//! 2^32 non-zeros takes), the refusal of a share too big for the kernels naming the rank,
//! and a small graph forced to 64-bit offsets giving exactly what its 32-bit twin gives in
//! every host operation (builds, transposes, permutations, norms, partitions, METIS).

use gnn_graph::csr::{check_kernel_nnz, split_rows_mut};
use gnn_graph::{
    gcn_norm, mean_norm, metis, BuildOptions, Coo, Csr, Dataset, DenseMatrix, Error, Features,
    LocalGraph, MetisOptions, Offset, OffsetWidth, RowPartition, RowPtr, Split, MAX_KERNEL_NNZ,
};
use std::borrow::Cow;

const U32_MAX: usize = u32::MAX as usize;

// The kernels' limit leaves headroom below u32::MAX (a position plus a step never wraps):
// checked when this file compiles.
const _: () = assert!(MAX_KERNEL_NNZ < U32_MAX && U32_MAX - MAX_KERNEL_NNZ >= 1 << 16);

#[test]
fn widths_follow_the_largest_offset() {
    assert_eq!(<u32 as Offset>::WIDTH, OffsetWidth::U32);
    assert_eq!(<u64 as Offset>::WIDTH, OffsetWidth::U64);
    assert_eq!(<u32 as Offset>::MAX, u32::MAX as u64);
    assert_eq!((OffsetWidth::U32.bytes(), OffsetWidth::U64.bytes()), (4, 8));
    assert_eq!(OffsetWidth::for_nnz(0), OffsetWidth::U32);
    assert_eq!(OffsetWidth::for_nnz(U32_MAX), OffsetWidth::U32);
    assert_eq!(OffsetWidth::for_nnz(U32_MAX + 1), OffsetWidth::U64);
    // papers100M at scale 2: 6.7 G non-zeros.
    assert_eq!(OffsetWidth::for_nnz(6_685_000_000), OffsetWidth::U64);

    // A builder starts narrow and widens once, at the first offset past u32::MAX.
    let mut p = RowPtr::with_capacity(OffsetWidth::U32, 4);
    for o in [0, 7, U32_MAX] {
        p.push(o);
    }
    assert_eq!(p.width(), OffsetWidth::U32);
    p.push(U32_MAX + 1);
    assert_eq!(p.width(), OffsetWidth::U64);
    assert_eq!(
        p.as_u64().unwrap(),
        &[0, 7, u32::MAX as u64, u32::MAX as u64 + 1]
    );
    assert_eq!(
        (p.len(), p.last(), p.range(2)),
        (4, U32_MAX + 1, U32_MAX..U32_MAX + 1)
    );
    assert_eq!(p.lens().collect::<Vec<_>>(), [7, U32_MAX - 7, 1]);
    assert_eq!(p.partition_point(|o| o < U32_MAX), 2);
    assert!(p.to_u32().is_none(), "offsets past u32::MAX do not narrow");
    assert!(p.to_width(OffsetWidth::U32).is_none());
    assert_eq!(p.bytes(), 32);

    // The same offsets at either width are equal; narrowing copies only when it must.
    let narrow = RowPtr::from_lens([2, 0, 3]);
    let wide = narrow.to_width(OffsetWidth::U64).unwrap();
    assert_eq!(narrow.as_u32().unwrap(), &[0, 2, 2, 5]);
    assert_eq!(narrow, wide);
    assert_ne!(narrow, RowPtr::U64(vec![0, 2, 2, 6]));
    assert!(matches!(narrow.to_u32(), Some(Cow::Borrowed(_))));
    assert!(matches!(wide.to_u32(), Some(Cow::Owned(_))));
    assert!(matches!(wide.to_u64(), Cow::Borrowed(_)));
    assert_eq!(wide.clone().into_narrowest().width(), OffsetWidth::U32);
    assert_eq!(p.clone().into_narrowest().width(), OffsetWidth::U64);
    assert_eq!(RowPtr::from_lens([U32_MAX, 1]).width(), OffsetWidth::U64);
}

#[test]
fn a_share_too_big_for_the_kernels_is_refused_naming_the_rank() {
    let e = check_kernel_nnz("rank 2's share", 5_100_000_000).unwrap_err();
    assert!(matches!(
        e,
        Error::TooManyNonZeros {
            nnz: 5_100_000_000,
            ..
        }
    ));
    let e = e.to_string();
    assert!(
        e.starts_with(
            "rank 2's share has 5100000000 non-zeros (5.10 G); the kernels take \
             32-bit offsets"
        ) && e.ends_with("use more ranks, so that each rank's share fits"),
        "{e}"
    );
    assert!(check_kernel_nnz("the graph", MAX_KERNEL_NNZ).is_ok());
    assert!(check_kernel_nnz("the graph", MAX_KERNEL_NNZ + 1).is_err());

    // A 6 G-non-zero graph of four 1.5 G rows (row offsets alone: no 24 GB of indices).
    let g = 1_500_000_000u64;
    let offsets = RowPtr::U64(vec![0, g, 2 * g, 3 * g, 4 * g]);
    let four = RowPartition::from_bounds(vec![0, 1, 2, 3, 4], 4).unwrap();
    assert_eq!(four.nnz(&offsets).unwrap(), vec![g as usize; 4]);
    four.check_kernel_shares(&offsets).unwrap();
    // Over two ranks each share is 3 G: fits. Over one rank, or with rank 2 holding three
    // rows, it does not.
    let two = RowPartition::from_bounds(vec![0, 2, 4], 4).unwrap();
    two.check_kernel_shares(&offsets).unwrap();
    let one = RowPartition::from_bounds(vec![0, 4], 4).unwrap();
    let e = one.check_kernel_shares(&offsets).unwrap_err().to_string();
    assert!(
        e.starts_with("rank 0's share has 6000000000 non-zeros (6.00 G)"),
        "{e}"
    );
    let skewed = RowPartition::from_bounds(vec![0, 1, 1, 4, 4], 4).unwrap();
    let e = skewed
        .check_kernel_shares(&offsets)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("rank 2's share has 4500000000 non-zeros (4.50 G)"),
        "{e}"
    );
    assert!(
        four.nnz(&RowPtr::from_lens([1, 2])).is_err(),
        "offsets of another graph"
    );
}

/// A small undirected graph with hubs, empty rows and self loops on some nodes.
fn graph() -> Csr {
    let n = 600u32;
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |m: u32| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % m as u64) as u32
    };
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for _ in 0..5000 {
        let a = if next(5) == 0 { next(4) } else { next(n - 40) };
        src.push(a);
        dst.push(next(n - 40));
    }
    Coo::new(n as usize, src, dst)
        .unwrap()
        .to_csr(BuildOptions::undirected())
        .unwrap()
}

fn twins() -> (Csr, Csr) {
    let narrow = graph();
    let wide = narrow.clone().with_offset_width(OffsetWidth::U64).unwrap();
    assert_eq!(
        (narrow.offset_width(), wide.offset_width()),
        (OffsetWidth::U32, OffsetWidth::U64)
    );
    assert_eq!(
        narrow, wide,
        "equal offsets at either width are the same graph"
    );
    (narrow, wide)
}

#[test]
fn a_graph_forced_to_64_bit_offsets_is_its_32_bit_twin_in_every_host_operation() {
    let (a, b) = twins();
    assert_eq!(b.indptr().as_u64().unwrap().len(), a.n_rows() + 1);
    assert!(matches!(
        b.kernel_indptr("the graph").unwrap(),
        Cow::Owned(_)
    ));
    assert!(matches!(
        a.kernel_indptr("the graph").unwrap(),
        Cow::Borrowed(_)
    ));
    assert_eq!(
        &*b.kernel_indptr("the graph").unwrap(),
        a.indptr().as_u32().unwrap()
    );
    // Rows, degrees, structure tests.
    for i in 0..a.n_rows() {
        assert_eq!((a.row(i), a.row_range(i)), (b.row(i), b.row_range(i)));
    }
    assert_eq!(a.row_degrees(), b.row_degrees());
    assert_eq!(a.inverse_row_degrees(), b.inverse_row_degrees());
    assert_eq!(a.degree_stats(), b.degree_stats());
    assert!(b.is_symmetric() && b.is_sorted_unique());
    assert_eq!(a.self_loop_count(), b.self_loop_count());
    // Transposes (with the edge permutation, and the pattern alone).
    assert_eq!(a.transpose().unwrap(), b.transpose().unwrap());
    assert_eq!(
        a.transpose_pattern().unwrap(),
        b.transpose_pattern().unwrap()
    );
    // Edge lists and rebuilds; a rebuild keeps the 64-bit offsets.
    assert_eq!(a.to_coo(), b.to_coo());
    let opts = BuildOptions::undirected_self_loops();
    let (ra, rb) = (a.rebuild(opts).unwrap(), b.rebuild(opts).unwrap());
    assert_eq!(ra, rb);
    assert_eq!(rb.offset_width(), OffsetWidth::U64);
    // Permutations keep the width.
    let n = a.n_rows() as u32;
    let new_of_old: Vec<u32> = (0..n).map(|i| (i * 7 + 3) % n).collect();
    let (pa, pb) = (
        a.permute(&new_of_old).unwrap(),
        b.permute(&new_of_old).unwrap(),
    );
    assert_eq!(pa, pb);
    assert_eq!(pb.offset_width(), OffsetWidth::U64);
    // Derived patterns and edge values.
    assert_eq!(a.expand_heads(3).unwrap(), b.expand_heads(3).unwrap());
    let vals: Vec<f32> = (0..a.nnz()).map(|p| p as f32).collect();
    let bounds = [0, 100, 350, a.n_cols()];
    assert_eq!(
        a.column_blocks(&bounds, Some(&vals)).unwrap(),
        b.column_blocks(&bounds, Some(&vals)).unwrap()
    );
    assert_eq!(gcn_norm(&ra), gcn_norm(&rb));
    assert_eq!(mean_norm(&a), mean_norm(&b));
    let (mut va, mut vb) = (vals.clone(), vals);
    let la: Vec<usize> = split_rows_mut(&mut va, a.indptr())
        .iter()
        .map(|r| r.len())
        .collect();
    let lb: Vec<usize> = split_rows_mut(&mut vb, b.indptr())
        .iter()
        .map(|r| r.len())
        .collect();
    assert_eq!(la, lb);
    let mut sb = b.clone();
    sb.sort_rows();
    assert_eq!(sb, b);
}

#[test]
fn partitions_of_a_64_bit_graph_are_those_of_its_32_bit_twin() {
    let (a, b) = twins();
    for parts in 1..=4 {
        let (p, q) = (
            RowPartition::balanced_by_nnz(&a, parts).unwrap(),
            RowPartition::balanced_by_nnz(&b, parts).unwrap(),
        );
        assert_eq!(p, q);
        assert_eq!(p.halo_sizes(&a).unwrap(), q.halo_sizes(&b).unwrap());
        assert_eq!(p.nnz(a.indptr()).unwrap(), q.nnz(b.indptr()).unwrap());
        q.check_kernel_shares(b.indptr()).unwrap();
        for r in 0..parts {
            let (la, lb) = (
                LocalGraph::build(&a, &p, r).unwrap(),
                LocalGraph::build(&b, &q, r).unwrap(),
            );
            // A share takes the narrowest width for its own non-zeros.
            assert_eq!(lb.csr.offset_width(), OffsetWidth::U32);
            assert_eq!(la.csr, lb.csr);
            assert_eq!(
                (&la.halo, &la.send, &la.recv_counts),
                (&lb.halo, &lb.send, &lb.recv_counts)
            );
            assert_eq!(
                (la.rows.clone(), la.edges.clone()),
                (lb.rows.clone(), lb.edges.clone())
            );
            assert_eq!(
                la.gathered_columns(&p).unwrap(),
                lb.gathered_columns(&q).unwrap()
            );
        }
    }
    // METIS sees the same adjacency, so the same parts.
    let (ma, _) = metis(&a, 3, &MetisOptions::default()).unwrap();
    let (mb, _) = metis(&b, 3, &MetisOptions::default()).unwrap();
    assert_eq!(ma, mb);
    assert_eq!(ma.edge_cut(&a).unwrap(), mb.edge_cut(&b).unwrap());
    assert_eq!(ma.halo_sizes(&a).unwrap(), mb.halo_sizes(&b).unwrap());
    assert_eq!(ma.nnz(&a).unwrap(), mb.nnz(&b).unwrap());
}

#[test]
fn a_dataset_of_64_bit_offsets_permutes_as_its_32_bit_twin() {
    let (a, b) = twins();
    let n = a.n_rows();
    let ds = |graph: Csr| Dataset {
        name: "twin".into(),
        graph,
        features: Features::Dense(
            DenseMatrix::new(n, 2, (0..2 * n).map(|v| v as f32).collect()).unwrap(),
        ),
        labels: (0..n).map(|i| (i % 3) as i32).collect(),
        num_classes: 3,
        split: Split {
            train: (0..10).collect(),
            val: (10..20).collect(),
            test: (20..30).collect(),
        },
    };
    let (da, db) = (ds(a), ds(b));
    db.validate().unwrap();
    let new_of_old: Vec<u32> = (0..n as u32).rev().collect();
    let (pa, pb) = (
        da.permute(&new_of_old).unwrap(),
        db.permute(&new_of_old).unwrap(),
    );
    assert_eq!(pa.graph, pb.graph);
    assert_eq!(pb.graph.offset_width(), OffsetWidth::U64);
    assert_eq!(
        (pa.features, pa.labels, pa.split),
        (pb.features, pb.labels, pb.split)
    );
}
