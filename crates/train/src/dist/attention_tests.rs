//! GAT and the transformer partitioned against one device: every rank exchanges its layers'
//! projected rows into the halo and runs the edge softmax of its own rows on its head-expanded
//! local graph; the losses, gradients, dropout masks (attention dropout included) and trained
//! weights are the single-device run's up to the order of float sums, for 1 to 4 ranks, range
//! and METIS partitions, both exchanges, several initialisation seeds, on Cora and on a
//! directed graph with empty rows in the halo.

use super::tests::{assert_close, flat, metis_renumbered, step};
use super::*;
use crate::trainer::{all_reduce_grads, train};
use gnn_comm::LocalComm;
use gnn_graph::{BuildOptions, Coo, DenseMatrix, Features, Split};
use gnn_models::Activation;
use std::collections::BTreeMap;

use crate::test_cora as cora;

/// A loss and the parameters' gradients, by name.
type Named = (f64, BTreeMap<String, Vec<f32>>);

/// Losses per epoch and the parameters' values, by name.
type Named2 = (Vec<f64>, BTreeMap<String, Vec<f32>>);

/// Nodes of [`directed`] without in-edges: empty rows of the graph as given (the
/// transformer's operand), a self loop alone under GAT's `A + I`. All but the last have
/// out-edges across the id space, so they sit in other ranks' halos.
const NO_IN_EDGES: [u32; 5] = [3, 21, 38, 50, 63];

/// A directed graph of 64 nodes as a file would give it (row = target): random in-edges,
/// a few self loops (the transformer keeps them), the nodes [`NO_IN_EDGES`] with none (63
/// with no edge at all), 12 features, 3 classes, half the nodes for training.
fn directed() -> Dataset {
    let n = 64u32;
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |m: u32| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % m as u64) as u32
    };
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for i in (0..n).filter(|i| !NO_IN_EDGES.contains(i)) {
        for _ in 0..1 + next(5) {
            // Any source but the isolated node.
            src.push(next(n - 1));
            dst.push(i);
        }
        if i % 7 == 0 {
            src.push(i);
            dst.push(i);
        }
    }
    for &u in &NO_IN_EDGES[..NO_IN_EDGES.len() - 1] {
        for k in 1..=3 {
            let v = (u + 17 * k) % n;
            if !NO_IN_EDGES.contains(&v) {
                src.push(u);
                dst.push(v);
            }
        }
    }
    let graph = Coo::new(n as usize, src, dst)
        .unwrap()
        .to_csr(BuildOptions::default())
        .unwrap();
    let (f, c) = (12, 3);
    let data = (0..n as usize * f)
        .map(|_| 0.05 + next(1000) as f32 / 1000.0)
        .collect();
    let labels: Vec<i32> = (0..n).map(|i| ((i * 7 + i / 5) % c) as i32).collect();
    Dataset {
        name: "directed-64".into(),
        graph,
        features: Features::Dense(DenseMatrix::new(n as usize, f, data).unwrap()),
        labels,
        num_classes: c as usize,
        split: Split {
            train: (0..n).filter(|i| i % 2 == 0).collect(),
            val: (0..n).filter(|i| i % 4 == 1).collect(),
            test: (0..n).filter(|i| i % 4 == 3).collect(),
        },
    }
}

/// The attention models: GAT of 3 layers (4 heads of 6 concatenated in the hidden layers, one
/// head in the last, its mean; ELU), with dropout on the input, between layers and on the
/// attention coefficients; and the transformer of 2 layers (3 heads of 8, skip), the same
/// dropouts.
fn configs(ds: &Dataset) -> Vec<(&'static str, ModelConfig)> {
    let (f, c) = (ds.features.cols(), ds.num_classes);
    let mut gat = ModelConfig::new(ConvKind::Gat, f, 24, c, 3, 0.5);
    gat.heads = 4;
    gat.att_dropout = 0.3;
    gat.activation = Activation::Elu;
    let mut transformer = ModelConfig::new(ConvKind::Transformer, f, 24, c, 2, 0.5);
    transformer.heads = 3;
    transformer.att_dropout = 0.3;
    vec![("gat", gat), ("transformer", transformer)]
}

fn recipe<'a>(model: &'a ModelConfig, train: &'a TrainConfig, seed: u64) -> Recipe<'a> {
    Recipe {
        model,
        train,
        seed,
        row_normalize: true,
        kernels: KernelPolicy::default(),
        widths: Widths::Auto,
    }
}

/// Where the reference and the ranks run: one device for the single-device run, and a
/// device per rank (the CPU; or each rank its own stream of one GPU, as `train_dist` without
/// `--nccl` runs them).
struct On<'a> {
    whole: Device,
    rank: &'a (dyn Fn() -> Device + Sync),
}

/// The single-device graph and data on `dev` in the layout the ranks take there
/// ([`Widths::Auto`]: aligned features and, for GAT, the output layer on aligned columns on
/// CUDA; the logical widths on the CPU), so that the comparison is the partition's alone.
fn whole_inputs(
    ds: &Dataset,
    cfg: &ModelConfig,
    precision: crate::Precision,
    dev: &Device,
) -> (ModelGraph, DeviceData) {
    let graph = ModelGraph::new(&ds.graph, cfg.kind, dev).unwrap();
    let data = DeviceData::new(ds, dev, true).unwrap();
    Widths::Auto
        .lay_out(cfg.kind, precision, graph, data)
        .unwrap()
}

/// One training step's loss and gradients on one device, parameters from `seed`.
fn whole(ds: &Dataset, cfg: &ModelConfig, seed: u64, dev: &Device) -> Named {
    let model = Gnn::new(cfg.clone(), dev, seed).unwrap();
    let (graph, data) = whole_inputs(ds, cfg, TrainConfig::default().precision, dev);
    let (loss, grads) = step(&model, &graph, &data, false);
    (
        loss.to_scalar::<f32>().unwrap() as f64,
        flat(&model, &grads),
    )
}

/// The same step on every rank of `plan` (gradients all-reduced), rank by rank.
fn ranks_of(plan: &DistPlan, ds: &Dataset, cfg: &ModelConfig, seed: u64, on: &On) -> Vec<Named> {
    ranks_on(plan, ds, cfg, seed, on, Widths::Auto)
}

/// [`ranks_of`] on `widths`.
fn ranks_on(
    plan: &DistPlan,
    ds: &Dataset,
    cfg: &ModelConfig,
    seed: u64,
    on: &On,
    widths: Widths,
) -> Vec<Named> {
    let train = TrainConfig::default();
    LocalComm::run_group(plan.partition.parts(), |c| {
        let comm: Arc<dyn Communicator> = Arc::new(c);
        let recipe = Recipe {
            widths,
            ..recipe(cfg, &train, seed)
        };
        let device = (on.rank)();
        let r = Rank::new(plan, ds, recipe, comm.clone(), &device).unwrap();
        let (_, pads) = widths.on(cfg.kind, train.precision, &device);
        assert_eq!(r.graph.pads_outputs(), pads);
        let (loss, mut grads) = step(&r.model, &r.graph, &r.data, false);
        let vars = r.model.named_vars();
        let loss = all_reduce_grads(comm.as_ref(), &vars, &mut grads, &loss)
            .and_then(|l| Ok(l.to_vec1::<f32>()?[0] as f64))
            .unwrap();
        (loss, flat(&r.model, &grads))
    })
}

/// Every rank's loss and gradients against one device's, and bit for bit the same on every
/// rank. The GCN equivalence's tolerances, as the partition changes only the order of float
/// sums (a halo row's gradient is summed over ranks, the loss and parameter gradients are
/// all-reduced): 1e-5 (measured: up to 1.2e-6 of the largest entry), and 3e-4 for a bias
/// under METIS (its gradient sums the output gradient over the train nodes, which METIS
/// spreads over ranks whose partial sums cancel; measured up to 7.5e-5), and 5e-5 for a bias
/// on a GPU (`on_gpu`: its reduction order varies between runs; measured 1.05e-5).
fn check_step(got: &[Named], want: &Named, metis: bool, on_gpu: bool, what: &str) {
    let (loss, grads) = want;
    let largest = |g: &[f32]| g.iter().fold(0f32, |m, v| m.max(v.abs()));
    let scale = grads.values().map(|g| largest(g)).fold(0f32, f32::max);
    for (r, (l, g)) in got.iter().enumerate() {
        let what = format!("{what} rank {r}");
        assert!(
            ((l - loss) / loss).abs() < 1e-5,
            "{what}: loss {l} vs {loss}"
        );
        assert_eq!(g.len(), grads.len(), "{what}");
        for (k, want) in grads {
            if k.ends_with("lin_key.bias") {
                // Zero but for rounding: the key bias adds q_i . b_k to every score of row i,
                // which the softmax cancels. Its noise (~1e-11) has no scale of its own.
                for v in [&g[k], want] {
                    assert!(largest(v) <= 1e-6 * scale, "{what} d{k}: {v:?}");
                }
                continue;
            }
            // A bias gradient is a column sum whose terms cancel (the output bias's largest
            // entry 3.6e-4 at Cora), so the ranks' order of summation moves it by more than
            // the other gradients: on one H200 the P = 4 ranges all-gather step of GAT seed 3
            // came 1.05e-5 of it apart in one run and within 1e-5 in another (the GPU's
            // reduction order varies between runs).
            let tol = match (k.ends_with("bias"), metis, on_gpu) {
                (true, true, _) => 3e-4,
                (true, false, true) => 5e-5,
                _ => 1e-5,
            };
            assert_close(&g[k], want, tol, &format!("{what} d{k}"));
        }
        assert_eq!(g, &got[0].1, "{what}");
    }
}

/// Ranks on aligned widths (the CUDA layout: Cora's 1,433 features padded to 1,440; GAT's
/// one-head output layer of 7 classes on 8 columns, its fused kernels' vector walks) give the
/// single-device step of the logical widths.
#[test]
fn attention_on_aligned_widths_gives_the_logical_step() {
    let ds = cora();
    let on = On {
        whole: Device::Cpu,
        rank: &|| Device::Cpu,
    };
    for (name, cfg) in configs(&ds) {
        let want = whole(&ds, &cfg, 5, &on.whole);
        for (parts, ex) in [(2, Exchange::PointToPoint), (3, Exchange::AllGather)] {
            let plan = DistPlan::new(&ds, cfg.kind, parts, Some(ex)).unwrap();
            let got = ranks_on(&plan, &ds, &cfg, 5, &on, Widths::Aligned);
            check_step(
                &got,
                &want,
                false,
                false,
                &format!("{name} P={parts} {ex} aligned"),
            );
        }
    }
}

/// Whether some rank's halo under `plan` (of `ds`) holds a node without in-edges: an empty
/// row of the graph as given (the transformer's operand; GAT's `A + I` gives it its self
/// loop alone).
fn empty_row_in_a_halo(plan: &DistPlan, ds: &Dataset) -> bool {
    let lonely = |v: u32| ds.graph.row(v as usize).is_empty();
    (0..plan.partition.parts()).any(|r| plan.local(r).unwrap().halo.into_iter().any(lonely))
}

#[test]
fn the_test_graph_has_empty_rows_and_attention_partitions_refuse_nothing() {
    let ds = directed();
    for v in NO_IN_EDGES {
        assert!(ds.graph.row(v as usize).is_empty(), "row {v}");
    }
    assert!(!ds.graph.is_symmetric() && ds.graph.self_loop_count() > 0);
    for (_, cfg) in configs(&ds) {
        let plan = DistPlan::new(&ds, cfg.kind, 3, None).unwrap();
        // Attention weighs each edge by its own coefficient: never the symmetric op, never
        // column slices, and the report says so.
        assert!(!plan.symmetric && !report::fused(&plan));
        assert_eq!(plan.slice_rows_for(&cfg, crate::Precision::F32), None);
        let line = report::exchange_line(&plan, false, false);
        assert!(line.contains("attention"), "{line}");
    }
    let cora = cora();
    let plan = DistPlan::new(&cora, ConvKind::Gat, 2, Some(Exchange::AllGather)).unwrap();
    assert!(plan.operands.csr.is_symmetric() && !plan.symmetric);
    assert_eq!(
        report::exchange_width(ConvKind::Transformer, 24),
        2 * report::exchange_width(ConvKind::Gat, 24)
    );
}

#[test]
fn attention_partitions_give_the_single_device_losses_and_gradients() {
    let on = On {
        whole: Device::Cpu,
        rank: &|| Device::Cpu,
    };
    check_steps(&on, &[3, 11], 4);
}

/// One step on 1 to `max_parts` ranks against one device, range and METIS partitions, both
/// exchanges, initialisation `seeds`, both models, both graphs.
fn check_steps(on: &On, seeds: &[u64], max_parts: usize) {
    for ds in [directed(), cora()] {
        for (name, cfg) in configs(&ds) {
            for &seed in seeds {
                let want = whole(&ds, &cfg, seed, &on.whole);
                for (parts, ex) in (1..=max_parts)
                    .flat_map(|p| [Exchange::PointToPoint, Exchange::AllGather].map(|e| (p, e)))
                {
                    let plan = DistPlan::new(&ds, cfg.kind, parts, Some(ex)).unwrap();
                    if parts > 1 && ds.name == "directed-64" {
                        assert!(empty_row_in_a_halo(&plan, &ds), "{name} P={parts}");
                    }
                    let what = format!("{} {name} seed {seed} P={parts} {ex}", ds.name);
                    check_step(
                        &ranks_of(&plan, &ds, &cfg, seed, on),
                        &want,
                        false,
                        on.whole.is_cuda(),
                        &what,
                    );
                }
                for parts in 2..=max_parts {
                    // Dropout masks follow the node ids: the single-device run to match is the
                    // one on the renumbered graph.
                    let (renumbered, ranges) = metis_renumbered(&ds, cfg.kind, parts);
                    let want = whole(&renumbered, &cfg, seed, &on.whole);
                    for ex in [Exchange::PointToPoint, Exchange::AllGather] {
                        let plan = DistPlan::with_partition(
                            &renumbered,
                            cfg.kind,
                            |_| Ok(ranges.clone()),
                            Some(ex),
                        )
                        .unwrap();
                        if ds.name == "directed-64" {
                            assert!(
                                empty_row_in_a_halo(&plan, &renumbered),
                                "{name} metis P={parts}"
                            );
                        }
                        let what = format!("{} {name} seed {seed} metis P={parts} {ex}", ds.name);
                        check_step(
                            &ranks_of(&plan, &renumbered, &cfg, seed, on),
                            &want,
                            true,
                            on.whole.is_cuda(),
                            &what,
                        );
                    }
                }
            }
        }
    }
}

/// The per-epoch losses of `epochs` epochs of training and the weights after them (one
/// evaluation, at the end, so the selected weights are the last), on one device.
fn trained_whole(
    ds: &Dataset,
    cfg: &ModelConfig,
    train_cfg: &TrainConfig,
    seed: u64,
    dev: &Device,
) -> Named2 {
    let model = Gnn::new(cfg.clone(), dev, seed).unwrap();
    let (graph, data) = whole_inputs(ds, cfg, train_cfg.precision, dev);
    let report = train(&model, &graph, &data, train_cfg, |_| {}).unwrap();
    (losses(&report), values(&model))
}

fn losses(r: &TrainReport) -> Vec<f64> {
    r.history.iter().map(|h| h.loss).collect()
}

fn values(model: &Gnn) -> BTreeMap<String, Vec<f32>> {
    model
        .named_vars()
        .into_iter()
        .map(|(k, v)| (k, v.flatten_all().unwrap().to_vec1::<f32>().unwrap()))
        .collect()
}

/// [`trained_whole`] on every rank of `plan` (what [`train_rank`] runs).
fn trained_ranks(
    plan: &DistPlan,
    ds: &Dataset,
    cfg: &ModelConfig,
    train_cfg: &TrainConfig,
    seed: u64,
    on: &On,
) -> Vec<Named2> {
    LocalComm::run_group(plan.partition.parts(), |c| {
        let comm: Arc<dyn Communicator> = Arc::new(c);
        let r = Rank::new(plan, ds, recipe(cfg, train_cfg, seed), comm, &(on.rank)()).unwrap();
        let report = train(&r.model, &r.graph, &r.data, train_cfg, |_| {}).unwrap();
        (losses(&report), values(&r.model))
    })
}

#[test]
fn attention_training_follows_the_single_device_run() {
    let on = On {
        whole: Device::Cpu,
        rank: &|| Device::Cpu,
    };
    check_training(&on, &[(2, false), (3, true), (4, false), (4, true)]);
}

/// 6 epochs of training on `(ranks, METIS or ranges)` against one device: every epoch's
/// loss and the weights after them.
fn check_training(on: &On, cases: &[(usize, bool)]) {
    let train_cfg = TrainConfig {
        epochs: 6,
        eval_every: 6,
        ..TrainConfig::default()
    };
    for ds in [directed(), cora()] {
        for (name, cfg) in configs(&ds) {
            for &(parts, metis) in cases {
                let (ds, plan) = if metis {
                    let (renumbered, ranges) = metis_renumbered(&ds, cfg.kind, parts);
                    let plan =
                        DistPlan::with_partition(&renumbered, cfg.kind, |_| Ok(ranges), None)
                            .unwrap();
                    (renumbered, plan)
                } else {
                    let plan = DistPlan::new(&ds, cfg.kind, parts, None).unwrap();
                    (ds.clone(), plan)
                };
                let seed = 5;
                let (want_loss, want_w) = trained_whole(&ds, &cfg, &train_cfg, seed, &on.whole);
                let got = trained_ranks(&plan, &ds, &cfg, &train_cfg, seed, on);
                for (r, (l, w)) in got.iter().enumerate() {
                    let what = format!("{} {name} P={parts} metis={metis} rank {r}", ds.name);
                    assert_eq!(l.len(), want_loss.len(), "{what}");
                    for (e, (a, b)) in l.iter().zip(&want_loss).enumerate() {
                        assert!(
                            ((a - b) / b).abs() < 1e-4,
                            "{what} epoch {}: loss {a} vs {b}",
                            e + 1
                        );
                    }
                    // Adam divides each step by the gradient's own magnitude, so the
                    // gradients' relative rounding differences (1e-6) become the steps': after
                    // 6 steps up to 2.2e-5 of the largest weight apart (measured). 1e-4: the
                    // GCN training equivalence's tolerance on the losses.
                    for (k, want) in &want_w {
                        assert_close(&w[k], want, 1e-4, &format!("{what} {k}"));
                    }
                    // The weights are replicated, bit for bit.
                    assert_eq!(w, &got[0].1, "{what}");
                }
            }
        }
    }
}

/// The same checks on one GPU, every rank on its own stream of GPU 0 (the GPU path of every
/// op the partitioned layers run: exchange, scores, edge softmax, SpMM and their backward);
/// skipped without a GPU.
#[cfg(feature = "cuda")]
#[test]
fn attention_partitions_match_one_gpu() {
    let Ok(gpu) = Device::new_cuda(0) else {
        eprintln!("no CUDA device: skipped");
        return;
    };
    let on = On {
        whole: gpu,
        rank: &|| Device::new_cuda_with_stream(0).unwrap(),
    };
    check_steps(&on, &[3], 4);
    check_training(&on, &[(2, false), (4, true)]);
}
