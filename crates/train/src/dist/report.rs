//! What a distributed run prints and writes: the partition's halo statistics for every rank
//! count up to the run's, the summary and per-rank table after training, and the JSON report
//! (the records read its fields; keep their names and meaning).

use super::{DistPlan, RankOutcome};
use crate::device::gib;
use crate::error::Result;
use gnn_graph::{imbalance, Csr, Exchange, MetisReport, NodeParts, Partitioner};
use gnn_models::{ConvKind, ModelConfig};
use serde_json::{json, Value};

/// Prints the communication volume of `plan`'s operands split into `1..=ranks` parts (rows
/// received per exchange, one exchange per layer forward and one back; the point-to-point
/// volume, every rank's halo rows summed, against the all-gather's, `(P - 1)` x the longest
/// range per rank; its bytes for a hidden layer of width `hidden` with `elem`-byte values,
/// [`exchange_width`] wide; and what the choice by volume picks) and returns the same as
/// JSON rows.
pub fn halo_table(plan: &DistPlan, ranks: usize, hidden: usize, elem: u64) -> Result<Vec<Value>> {
    let width = exchange_width(plan.kind, hidden);
    println!(
        "{:>5} {:>10} {:>14} {:>16} {:>16} {:>15}  halo rows per rank",
        "parts", "nnz imbal.", "halo rows", "all-gather rows", "MB/exchange@hid", "auto picks"
    );
    let mut stats = Vec::new();
    for p in 1..=ranks {
        let s = plan.halo_stats(p)?;
        let gather = s.all_gather_rows();
        let pick = s.exchange();
        let rows = match pick {
            Exchange::PointToPoint => s.total_halo(),
            Exchange::AllGather => gather,
        };
        let mb = (rows as u64 * width as u64 * elem) as f64 / 1e6;
        println!(
            "{p:>5} {:>10.3} {:>14} {:>16} {:>16.1} {:>15}  {:?}",
            s.nnz_imbalance(),
            s.total_halo(),
            gather,
            mb,
            pick.to_string(),
            s.halo
        );
        stats.push(json!({"parts": p, "stats": s, "all_gather_rows": gather,
            "auto_exchange": pick, "mb_per_exchange_at_hidden": mb}));
    }
    Ok(stats)
}

/// The columns a hidden layer of width `hidden` of `kind` exchanges per halo row: its
/// width, twice that for the transformer (its keys and values; GAT exchanges its projected
/// rows and takes their attention scores from them).
pub fn exchange_width(kind: ConvKind, hidden: usize) -> usize {
    match kind {
        ConvKind::Transformer => 2 * hidden,
        _ => hidden,
    }
}

/// One partition's measures over the model's operands: what [`partition_line`] prints and
/// the report's `partition.compared` holds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PartitionRow {
    /// How the nodes were split.
    pub method: Partitioner,
    /// Number of parts.
    pub parts: usize,
    /// Nodes per part.
    pub rows: Vec<usize>,
    /// Non-zeros per part.
    pub nnz: Vec<usize>,
    /// Largest non-zero share over the mean (1.0 = perfect balance).
    pub nnz_imbalance: f64,
    /// Halo rows per part (received per exchange).
    pub halo: Vec<usize>,
    /// Halo rows of all parts (the point-to-point volume of one exchange).
    pub total_halo: usize,
    /// Non-zeros whose row and column lie in different parts (both directions of an
    /// undirected edge count).
    pub edge_cut: usize,
    /// `edge_cut` over all non-zeros.
    pub edge_cut_share: f64,
    /// Seconds the partitioner took (0 for ranges).
    pub seconds: f64,
    /// What METIS was given, for a METIS partition.
    pub metis: Option<MetisReport>,
}

impl PartitionRow {
    /// The measures of `parts` over `csr`, with its `halo` sizes already computed.
    pub fn of(
        method: Partitioner,
        parts: &NodeParts,
        csr: &Csr,
        halo: Vec<usize>,
        seconds: f64,
        metis: Option<MetisReport>,
    ) -> gnn_graph::Result<Self> {
        let nnz = parts.nnz(csr)?;
        let edge_cut = parts.edge_cut(csr)?;
        Ok(Self {
            method,
            parts: parts.parts(),
            rows: parts.sizes(),
            nnz_imbalance: imbalance(&nnz),
            nnz,
            total_halo: halo.iter().sum(),
            halo,
            edge_cut,
            edge_cut_share: edge_cut as f64 / csr.nnz().max(1) as f64,
            seconds,
            metis,
        })
    }
}

impl PartitionRow {
    /// [`Self::of`] for contiguous ranges (what [`NodeParts::from_ranges`] makes of them),
    /// from the ranges themselves: the same measures without a part per node to look up for
    /// every edge.
    pub fn of_ranges(
        range: &gnn_graph::RowPartition,
        csr: &Csr,
        halo: Vec<usize>,
    ) -> gnn_graph::Result<Self> {
        let nnz = range.nnz(csr.indptr())?;
        let edge_cut = range.edge_cut(csr)?;
        Ok(Self {
            method: Partitioner::Range,
            parts: range.parts(),
            rows: (0..range.parts()).map(|p| range.range(p).len()).collect(),
            nnz_imbalance: imbalance(&nnz),
            nnz,
            total_halo: halo.iter().sum(),
            halo,
            edge_cut,
            edge_cut_share: edge_cut as f64 / csr.nnz().max(1) as f64,
            seconds: 0.0,
            metis: None,
        })
    }
}

/// The header of [`partition_line`]'s table.
pub fn partition_header() -> String {
    format!(
        "{:>9} {:>5} {:>14} {:>9} {:>14} {:>10} {:>8}  halo rows per rank",
        "partition", "parts", "edge cut", "cut share", "halo rows", "nnz imbal.", "seconds"
    )
}

/// One partition's line: its edge cut, halo rows (all parts and per part), non-zero balance
/// and the partitioner's seconds.
pub fn partition_line(r: &PartitionRow) -> String {
    format!(
        "{:>9} {:>5} {:>14} {:>8.1}% {:>14} {:>10.3} {:>8.2}  {:?}",
        r.method.to_string(),
        r.parts,
        r.edge_cut,
        100.0 * r.edge_cut_share,
        r.total_halo,
        r.nnz_imbalance,
        r.seconds,
        r.halo
    )
}

/// The line naming `plan`'s exchange (`forced` or chosen by volume) and how its aggregations
/// run (`split`: the fused op turned off by the caller).
pub fn exchange_line(plan: &DistPlan, forced: bool, split: bool) -> String {
    format!(
        "exchange: {} ({}); aggregation: {}",
        plan.exchange,
        if forced { "forced" } else { "by volume" },
        if fused(plan) {
            "one op (symmetric operand: no local transpose, no gathered rows kept; column \
             slices of --gather-slice-rows where the model has only sum/mean aggregations, \
             unless 3+ ranks gather a small operand: then whole)"
        } else if super::is_attention(plan.kind) {
            "exchange + attention (GAT: one op per layer on the local graph, alpha \
             recomputed, never stored; TransformerConv and GAT shapes outside it: scores, edge \
             softmax and weighted SpMM on the head-expanded local graph; the halo rows' \
             gradients go home)"
        } else if split {
            "exchange + SpMM (--split-aggregation)"
        } else {
            "exchange + SpMM"
        }
    )
}

/// Whether `plan`'s dense aggregations run as the one fused op (a symmetric operand under
/// the all-gather).
pub fn fused(plan: &DistPlan) -> bool {
    plan.symmetric && plan.exchange == Exchange::AllGather
}

/// Prints the run's result (rank 0's accuracies, `wall` seconds in all), one row per rank
/// (rows, halo, epoch time, communication per epoch, peak memory) and rank 0's per-phase
/// breakdown.
pub fn print_results(
    model: &ModelConfig,
    plan: &DistPlan,
    ranks: usize,
    outcomes: &[RankOutcome],
    wall: f64,
) {
    let r0 = &outcomes[0].report;
    println!(
        "{} {}x{} on {} ranks ({} exchange): test {:.2} % (val {:.2} % at epoch {}), {:.1} s in all",
        model.kind,
        model.layers,
        model.hidden,
        ranks,
        plan.exchange,
        100.0 * r0.test_acc,
        100.0 * r0.best_val_acc,
        r0.best_epoch,
        wall
    );
    if let Some(tta) = &r0.time_to_accuracy {
        println!("time to accuracy: {tta:?}");
    }
    println!(
        "rank  rows        halo      ms/epoch  comm ms  comm MB/epoch  peak allocated  peak in use"
    );
    for o in outcomes {
        let b = &o.report.breakdown;
        let n = b.epochs.max(1) as f64;
        println!(
            "{:>4}  {:>10}  {:>8}  {:>8.2}  {:>7.2}  {:>13.1}  {:>14}  {}",
            o.rank,
            o.rows.len(),
            o.halo,
            o.report.epoch_ms_median,
            b.communication.as_secs_f64() * 1e3 / n,
            b.comm_bytes as f64 / n / 1e6,
            o.report.peak_allocated_bytes.map_or("-".to_string(), gib),
            o.report.peak_device_bytes.map_or("-".to_string(), gib)
        );
    }
    println!("rank 0 breakdown:\n{}", r0.breakdown.table());
}

/// Every rank's row of the JSON report: its nodes, halo, epoch time, per-phase breakdown,
/// communication bytes per epoch and peak memory.
pub fn rank_rows(outcomes: &[RankOutcome]) -> Vec<Value> {
    outcomes
        .iter()
        .map(|o| {
            json!({
                "rank": o.rank, "rows": [o.rows.start, o.rows.end], "halo": o.halo,
                "epoch_ms_median": o.report.epoch_ms_median,
                "breakdown": o.report.breakdown.rows(),
                "comm_bytes_per_epoch": o.report.breakdown.comm_bytes as f64
                    / o.report.breakdown.epochs.max(1) as f64,
                "peak_allocated_bytes": o.report.peak_allocated_bytes,
                "peak_device_bytes": o.report.peak_device_bytes,
                "kernels_used": o.kernels_used,
            })
        })
        .collect()
}

/// `gather_slice_rows` as the report writes it: `null` for the whole local graph, `"per rank
/// block"` for one slice per rank's block, else the row count.
pub fn slice_rows_json(slice_rows: Option<usize>) -> Value {
    match slice_rows {
        Some(usize::MAX) => json!("per rank block"),
        other => json!(other),
    }
}
