//! The checks [`run`] makes, by operator family, in one fixed order (every input derives from
//! the checker's seeded stream, so the order is part of what a seed replays).

mod attention;
mod dense;
mod graph;
mod layers;
mod maxk;
mod sampled;
mod sddmm;
mod spmm;

use super::{random_graph, Checker};
use crate::error::Result;
use candle_core::{DType, Device, Tensor};

/// A storage type the kernels read, and what narrowing a result to it costs: `unit`, its unit
/// roundoff, and `floor`, half its subnormal spacing (the absolute error of a result below its
/// smallest normal; bf16 shares f32's exponent range, so its subnormals lie below 1e-38). f32
/// results are not narrowed.
#[derive(Debug, Clone, Copy)]
struct Storage {
    dtype: DType,
    unit: f64,
    floor: f64,
}

/// f32 storage: no narrowing.
const F32_STORAGE: Storage = Storage {
    dtype: DType::F32,
    unit: 0.0,
    floor: 0.0,
};

/// bf16 (unit 2^-8) and f16 (unit 2^-11, subnormal half-spacing 2^-25).
const HALF_STORAGE: [Storage; 2] = [
    Storage {
        dtype: DType::BF16,
        unit: 1.0 / 256.0,
        floor: 0.0,
    },
    Storage {
        dtype: DType::F16,
        unit: 1.0 / 2048.0,
        floor: 1.0 / 33_554_432.0,
    },
];

impl Storage {
    /// `t` rounded to this type, as f64 (what the CPU reference computes on).
    fn round(&self, t: &Tensor) -> Result<Tensor> {
        Ok(t.to_dtype(self.dtype)?.to_dtype(DType::F64)?)
    }

    /// The bound on narrowing a result of `magnitude` to this type: one unit roundoff,
    /// doubled as margin, plus `floor`.
    fn narrowing(&self, magnitude: &Tensor) -> Result<Tensor> {
        Ok(((magnitude.to_dtype(DType::F64)? * (2.0 * self.unit))? + self.floor)?)
    }
}

/// Runs the whole suite on `gpu` (seeded by `c`): SpMM sum/mean/max/min forward and backward,
/// sampled SpMM, SDDMM, the dense matmul, MaxK selection/SpGEMM/SSpMM, dropout,
/// dequantisation, and (when `reddit_scale > 0`) the Reddit-shaped graph generated from
/// `seed` at that scale.
pub fn run(c: &mut Checker, gpu: &Device, reddit_scale: f64, seed: u64) -> Result<()> {
    println!(
        "{:<22} {:<34} {:>5} {:>11} {:>8}  result",
        "graph", "op", "K", "rel err", "bound"
    );
    let g1 = random_graph(c, 3000, 2500, 8, 50_000, 1)?;
    let g2 = random_graph(c, 700, 900, 3, 0, 2)?;
    for (i, k) in [1usize, 7, 16, 32, 33, 64, 100, 128, 256, 602]
        .into_iter()
        .enumerate()
    {
        spmm::check_spmm(c, "random+50K-row", &g1, k, gpu, 10 + i as u64, true)?;
        spmm::check_spmm(c, "random-rect", &g2, k, gpu, 20 + i as u64, k <= 128)?;
    }
    spmm::check_spmm_then(c, gpu, [("random+50K-row", &g1), ("random-rect", &g2)])?;
    if gpu.is_cuda() && !c.policy.deterministic {
        spmm::check_column_blocked(c, &g1, &g2, gpu)?;
    }
    dense::check_matmul(c, gpu)?;
    // MaxK-GNN: selection (exact, ties included), CBSR SpGEMM/SSpMM and the gradient chain.
    for (gname, csr) in [("random+50K-row", &g1), ("random-rect", &g2)] {
        for (d, k) in [
            (16usize, 1usize),
            (40, 7),
            (256, 32),
            (256, 33),
            (256, 256),
            (300, 17),
            (1024, 64),
        ] {
            maxk::check_maxk(c, gname, csr, d, k, gpu, (d * 7 + k) as u64)?;
        }
    }
    dense::check_dropout(c, gpu)?;
    dense::check_relu_dropout(c, gpu)?;
    dense::check_elu_dropout(c, gpu)?;
    dense::check_linear_bias_relu_dropout(c, gpu)?;
    dense::check_add_bias_relu_dropout(c, gpu)?;
    dense::check_layer_norm(c, gpu)?;
    dense::check_xent(c, gpu)?;
    dense::check_sums(c, gpu)?;
    dense::check_column_sum(c, gpu)?;
    dense::check_cast_pad(c, gpu)?;
    dense::check_adam(c, gpu)?;
    dense::check_dequantize(c, gpu)?;
    if reddit_scale > 0.0 {
        spmm::check_reddit(c, gpu, reddit_scale, seed)?;
    }
    // Edge softmax (attention) forward and backward.
    for (gname, csr, scale) in [("random+50K-row", &g1, 4.0), ("random-rect", &g2, 300.0)] {
        attention::check_edge_softmax(c, gname, csr, gpu, scale)?;
        // GAT scores are O(1..10) in practice; at x300 ds_dst (a row sum that cancels to ~0:
        // sum alpha (dalpha - t) = 0 but for the slope) has a bound ~1e8 times its largest
        // value, a check that cannot fail (H100 seed 1,
        // c6f0242:docs/perf/h100-2026-11-24-hp-spmm), so the fused op is checked at x4 and x30.
        attention::check_gat_attention(c, gname, csr, gpu, scale.min(30.0))?;
    }
    // GAT's fused aggregation: every kernel the lane layouts pick (columns per lane 1, 2, 4, 8;
    // lanes per head 1 to 32; one head of 41, of 48 and 24 (the padded output layer's aligned
    // walks, several edges per warp step, idle lanes) and of 200), xs aligned and one element
    // in (no vector loads), each storage type, with and without attention dropout.
    let gat_shapes = [
        (8usize, 8usize, false),
        (1, 41, false),
        (1, 48, false),
        (1, 24, false),
        (2, 16, false),
        (4, 16, false),
        (8, 32, false),
        (8, 4, false),
        (4, 2, false),
        (8, 1, false),
        (2, 1, false),
        (1, 200, false),
        (2, 16, true),
        (4, 16, true),
        (8, 32, true),
        (8, 8, true),
    ];
    for (gname, csr) in [("random+50K-row", &g1), ("random-rect", &g2)] {
        for (i, &(heads, width, offset)) in gat_shapes.iter().enumerate() {
            // Half storage runs on CUDA only (with the CPU standing in, f32 alone).
            let dts: &[DType] = if gpu.is_cuda() {
                &[DType::F32, DType::BF16, DType::F16]
            } else {
                &[DType::F32]
            };
            for (k, &dt) in dts.iter().enumerate() {
                let p = if (i + k) % 2 == 0 { 0.0 } else { 0.5 };
                attention::check_gat_aggregate(c, gname, csr, gpu, (heads, width, dt, p, offset))?;
            }
        }
    }
    // HP-SpMM and GE-SpMM, each forced, against the CPU: sum and mean, edge values or not,
    // forward and dx (the transposed SpMM runs the same kernel), aligned and misaligned x.
    let g3 = random_graph(c, 2000, 2000, 2, 0, 3)?;
    for (i, k) in [1usize, 4, 7, 16, 32, 33, 41, 64, 100, 128, 256, 602]
        .into_iter()
        .enumerate()
    {
        spmm::check_hp_spmm(c, "random+50K-row", &g1, k, gpu, i % 2 == 1)?;
        spmm::check_hp_spmm(c, "random-rect", &g2, k, gpu, i % 2 == 0)?;
        spmm::check_hp_spmm(c, "sparse-empty-rows", &g3, k, gpu, i % 3 == 0)?;
    }
    graph::check_structures(c, (&g2, &g3), gpu, seed)?;
    // HP-SDDMM against the CPU at every partition, and the row kernel; K up to 1024, a start
    // one element into its buffer (no vector loads), the 50 K-edge row.
    for (i, k) in [1usize, 7, 16, 32, 33, 128, 602, 1023, 1024]
        .into_iter()
        .enumerate()
    {
        sddmm::check_sddmm(c, "random+50K-row", &g1, k, gpu, i % 3 == 1)?;
        sddmm::check_sddmm(c, "random-rect", &g2, k, gpu, i % 3 == 2)?;
    }
    // GAT's node scores and the output layers' bias add (last, so the checks above keep the
    // inputs a seed gave them before).
    attention::check_gat_scores(c, gpu)?;
    dense::check_bias_add(c, gpu)?;
    dense::check_scale_rows(c, gpu)?;
    dense::check_rescale_rows(c, gpu)?;
    Ok(())
}
