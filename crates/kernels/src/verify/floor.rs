//! Distance to the floor: the least time a sparse product's memory traffic can take on a GPU,
//! and how far a measured time is from it. Plain arithmetic (no CUDA), used beside every
//! timing of the kernel benchmarks (`bench_spmm`, `bench_sddmm`, `bench_graphs`,
//! `bench_maxk`).
//!
//! Two byte counts per product ([`Traffic`]), the formulas of the guide's performance page
//! (`docs/src/performance.md`) and of `bench/floors.py`:
//!
//! - **compulsory bytes**: every byte the product must read or write once from HBM (indices,
//!   edge values, row pointers, the dense operands, the output); floor = bytes / HBM bandwidth;
//! - **gathered bytes**: the logical bytes the product gathers, one feature row per non-zero
//!   (re-reads a real kernel serves from cache included); floor = bytes / L1 bandwidth (the
//!   true floor without de-duplication), and bytes / L2 bandwidth (what a kernel gets whose
//!   gathers miss L1, as ours do today).
//!
//! ```text
//! SpMM  Y = A X        compulsory = idx·nnz + v·nnz + idx·(N + 1) + M·K·s (X) + N·K·s (Y)
//!   (N rows, M cols)   gathered   = nnz·K·s
//! SDDMM e = <A_i, B_j> compulsory = idx·nnz + idx·(N + 1) + N·K·s (A) + M·K·s (B) + 4·nnz (out)
//!                      gathered   = nnz·K·s (B_j per non-zero, A_i resident over its row)
//! MaxK SpGEMM Y = A·X̃  compulsory = idx·nnz + v·nnz + idx·(N + 1) + M·k·(s + i) (CBSR) + N·D·4
//!   (X̃: CBSR, k of D)  gathered   = nnz·k·(s + i)   (k values and their k indices per non-zero)
//! MaxK SSpMM dX̃        compulsory = idx·nnz + v·nnz + idx·(M + 1) + N·D·s (dY) + M·k·(s + i)
//!   (sampled Aᵀ dY)    gathered   = nnz·k·(s + i)   (k values of dY at k kept columns)
//! ```
//! with `idx` = [`INDEX_BYTES`], `v` the bytes of an edge value (0 when none is read), `s` the
//! bytes of a feature element and `i` those of a CBSR column index.
//!
//! The device's rates are a [`DeviceModel`] (named constants: [`DeviceModel::H100_SXM`],
//! [`DeviceModel::H200`]); a benchmark writes the model once per JSON document and, per row,
//! the [`Floors`] and each timing's [`Distance`].
//!
//! ```
//! use gnn_kernels::verify::floor::{DeviceModel, Spmm};
//! // One SpMM on the Reddit-shaped graph at K = 128, f32 features and edge values.
//! let t = Spmm { n_rows: 232_965, n_cols: 232_965, nnz: 114_543_559, k: 128, elem_bytes: 4, value_bytes: 4 }
//!     .traffic();
//! let f = t.floors(&DeviceModel::H100_SXM);
//! assert!((f.hbm_ms - 0.345).abs() < 1e-3 && (f.gather_l1_ms - 1.777).abs() < 1e-3);
//! // An 8.0 ms kernel moves 7.3 TB/s of gathered rows, 4.5x the L1 floor.
//! let d = t.distance(&DeviceModel::H100_SXM, 8.0);
//! assert!((d.gather_tb_s - 7.33).abs() < 0.01 && (d.x_gather_l1 - 4.50).abs() < 0.01);
//! ```

use serde::Serialize;

/// Bytes of a stored index (int32 column indices and row pointers), for every implementation:
/// the floor is the work's, not one storage's.
pub const INDEX_BYTES: usize = 4;

/// H100 SXM HBM3 bandwidth, bytes/s (NVIDIA's figure; about 3.0e12 is reachable).
pub const H100_HBM_BYTES_PER_S: f64 = 3.35e12;
/// H100 L2-to-SM bandwidth, bytes/s, as we measured it: Nsight Compute on GE-SpMM's row kernel
/// at K = 128 in bf16 on the Reddit-shaped graph counted 35.0 GB of L2 traffic in 3.87 ms
/// (9.0e12; f32: 66.7 GB in 8.12 ms, 8.2e12), with L2 hit rates of 66-70 %
/// (`bench/records/counters/h100-2026-11-27/README.md`). A rate the kernel reached, so a lower
/// bound on what L2 gives.
pub const H100_L2_BYTES_PER_S: f64 = 9.0e12;
/// H100 L1 / shared-memory bandwidth summed over the SMs, bytes/s: 128 bytes per clock per SM,
/// 132 SMs, 1.98 GHz.
pub const H100_L1_BYTES_PER_S: f64 = 33e12;
/// H200 HBM3e bandwidth, bytes/s (its SMs, clocks and L2 are the H100's).
pub const H200_HBM_BYTES_PER_S: f64 = 4.8e12;

/// A GPU's memory rates, the denominators of the floors.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DeviceModel {
    /// What the rates are of.
    pub name: &'static str,
    /// HBM bandwidth, bytes/s (the compulsory floor).
    pub hbm_bytes_per_s: f64,
    /// L2-to-SM bandwidth, bytes/s (the gather floor of a kernel whose gathers miss L1).
    pub l2_bytes_per_s: f64,
    /// L1 / shared-memory bandwidth over all SMs, bytes/s (the gather floor).
    pub l1_bytes_per_s: f64,
    /// Where the figures come from.
    pub source: &'static str,
}

impl DeviceModel {
    /// The H100 SXM (80 GB HBM3), the machine of every benchmark record.
    pub const H100_SXM: Self = Self {
        name: "H100 SXM",
        hbm_bytes_per_s: H100_HBM_BYTES_PER_S,
        l2_bytes_per_s: H100_L2_BYTES_PER_S,
        l1_bytes_per_s: H100_L1_BYTES_PER_S,
        source: "HBM3 3.35 TB/s (NVIDIA); L2 9.0 TB/s measured (ncu, GE-SpMM K=128 bf16, \
                 bench/records/counters/h100-2026-11-27); L1 33 TB/s (128 B/clk/SM x 132 SMs x \
                 1.98 GHz)",
    };

    /// The H200: HBM3e, the H100's SMs and L2.
    pub const H200: Self = Self {
        name: "H200",
        hbm_bytes_per_s: H200_HBM_BYTES_PER_S,
        l2_bytes_per_s: H100_L2_BYTES_PER_S,
        l1_bytes_per_s: H100_L1_BYTES_PER_S,
        source: "HBM3e 4.8 TB/s (NVIDIA); L2 and L1 as the H100 SXM's (same SMs, clocks, L2)",
    };

    /// The model of a GPU by the name its driver gives (`NVIDIA H100 80GB HBM3`,
    /// `NVIDIA H200`), `None` for a GPU without one (the H100 PCIe's HBM2e among them).
    pub fn for_gpu(name: &str) -> Option<Self> {
        if name.contains("H200") {
            Some(Self::H200)
        } else if name.contains("H100") && name.contains("HBM3") {
            Some(Self::H100_SXM)
        } else {
            None
        }
    }
}

/// The model a benchmark's floors use for the GPU it ran on, as its JSON document records it
/// once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FloorModel {
    /// The GPU's name as its driver gives it.
    pub gpu: String,
    /// The rates the floors use.
    pub model: DeviceModel,
    /// True when the GPU has no model of its own ([`DeviceModel::for_gpu`]) and the floors use
    /// the H100 SXM's.
    pub assumed: bool,
}

impl FloorModel {
    /// The model of the GPU named `gpu`, the H100 SXM's when it has none.
    pub fn for_gpu(gpu: &str) -> Self {
        let found = DeviceModel::for_gpu(gpu);
        Self {
            gpu: gpu.into(),
            model: found.unwrap_or(DeviceModel::H100_SXM),
            assumed: found.is_none(),
        }
    }
}

impl std::fmt::Display for FloorModel {
    /// `floors: H100 SXM (HBM 3.35 TB/s, L2 9 TB/s, L1 33 TB/s) for NVIDIA H100 80GB HBM3`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = &self.model;
        write!(
            f,
            "floors: {} (HBM {} TB/s, L2 {} TB/s, L1 {} TB/s) for {}{}",
            m.name,
            m.hbm_bytes_per_s / 1e12,
            m.l2_bytes_per_s / 1e12,
            m.l1_bytes_per_s / 1e12,
            self.gpu,
            if self.assumed {
                " (no model of its own: assumed)"
            } else {
                ""
            }
        )
    }
}

/// The bytes one product moves: what it must move once, and what it gathers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Traffic {
    /// Compulsory HBM bytes: every byte of the inputs read once and the output written once.
    pub compulsory_bytes: u64,
    /// Logical gathered bytes: the feature bytes the non-zeros read, re-reads included.
    pub gathered_bytes: u64,
}

/// Floor times of a [`Traffic`] on a [`DeviceModel`], ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Floors {
    /// Compulsory bytes (as [`Traffic`]).
    pub compulsory_bytes: u64,
    /// Gathered bytes (as [`Traffic`]).
    pub gathered_bytes: u64,
    /// Compulsory bytes at the HBM bandwidth.
    pub hbm_ms: f64,
    /// Gathered bytes at the L1 bandwidth (the gather floor).
    pub gather_l1_ms: f64,
    /// Gathered bytes at the L2 bandwidth.
    pub gather_l2_ms: f64,
}

/// How far one measured time is from the floors: the gathered bytes' rate and time / floor
/// (1.0 = at the floor).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Distance {
    /// Gathered bytes over the time, TB/s (decimal).
    pub gather_tb_s: f64,
    /// Time over the gather floor at L1.
    pub x_gather_l1: f64,
    /// Time over the gather floor at L2.
    pub x_gather_l2: f64,
    /// Time over the compulsory floor at HBM.
    pub x_hbm: f64,
}

impl Traffic {
    /// The floor times on `m`.
    pub fn floors(&self, m: &DeviceModel) -> Floors {
        let at = |bytes: u64, rate: f64| bytes as f64 / rate * 1e3;
        Floors {
            compulsory_bytes: self.compulsory_bytes,
            gathered_bytes: self.gathered_bytes,
            hbm_ms: at(self.compulsory_bytes, m.hbm_bytes_per_s),
            gather_l1_ms: at(self.gathered_bytes, m.l1_bytes_per_s),
            gather_l2_ms: at(self.gathered_bytes, m.l2_bytes_per_s),
        }
    }

    /// The gathered bytes' rate over `ms` milliseconds, TB/s.
    pub fn gather_tb_s(&self, ms: f64) -> f64 {
        self.gathered_bytes as f64 / (ms * 1e-3) / 1e12
    }

    /// How far `ms` milliseconds are from the floors on `m`.
    pub fn distance(&self, m: &DeviceModel, ms: f64) -> Distance {
        let f = self.floors(m);
        Distance {
            gather_tb_s: self.gather_tb_s(ms),
            x_gather_l1: ms / f.gather_l1_ms,
            x_gather_l2: ms / f.gather_l2_ms,
            x_hbm: ms / f.hbm_ms,
        }
    }
}

/// The bytes of a CSR structure: column indices, edge values and row pointers.
fn csr_bytes(rows: usize, nnz: usize, value_bytes: usize) -> u64 {
    (INDEX_BYTES * nnz + value_bytes * nnz + INDEX_BYTES * (rows + 1)) as u64
}

/// One SpMM `Y = A X` over a CSR `A` (`n_rows x n_cols`, `nnz` non-zeros) and a row-major `X`
/// (`n_cols x k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spmm {
    /// Rows of `A` and `Y`.
    pub n_rows: usize,
    /// Columns of `A`, rows of `X`.
    pub n_cols: usize,
    /// Stored non-zeros of `A`.
    pub nnz: usize,
    /// Feature width.
    pub k: usize,
    /// Bytes of an element of `X` and `Y` (4 f32, 2 bf16 / f16).
    pub elem_bytes: usize,
    /// Bytes of an edge value; 0 when none is read (an unweighted sum, or a mean).
    pub value_bytes: usize,
}

impl Spmm {
    /// The product's [`Traffic`].
    pub fn traffic(&self) -> Traffic {
        let s = self.elem_bytes as u64;
        let k = self.k as u64;
        Traffic {
            compulsory_bytes: csr_bytes(self.n_rows, self.nnz, self.value_bytes)
                + (self.n_cols as u64 + self.n_rows as u64) * k * s,
            gathered_bytes: self.nnz as u64 * k * s,
        }
    }
}

/// One SDDMM `e_p = <A_i, B_j>` for every non-zero `p = (i, j)` of a CSR pattern
/// (`n_rows x n_cols`), `A` and `B` row-major and `k` wide, f32 scores out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sddmm {
    /// Rows of the pattern and of `A`.
    pub n_rows: usize,
    /// Columns of the pattern, rows of `B`.
    pub n_cols: usize,
    /// Stored non-zeros (scores written).
    pub nnz: usize,
    /// Feature width.
    pub k: usize,
    /// Bytes of an element of `A` and `B`.
    pub elem_bytes: usize,
}

/// Bytes of one SDDMM score (f32, whatever the operands' type).
pub const SCORE_BYTES: usize = 4;

impl Sddmm {
    /// The product's [`Traffic`]; the gathered bytes count `B_j` once per non-zero and `A_i`
    /// once per row (a kernel keeps it resident while it walks the row).
    pub fn traffic(&self) -> Traffic {
        let s = self.elem_bytes as u64;
        let k = self.k as u64;
        Traffic {
            compulsory_bytes: csr_bytes(self.n_rows, self.nnz, 0)
                + (self.n_rows as u64 + self.n_cols as u64) * k * s
                + (SCORE_BYTES * self.nnz) as u64,
            gathered_bytes: self.nnz as u64 * k * s,
        }
    }
}

/// MaxK-GNN's aggregations over a CBSR matrix (per row `k` kept values of `elem_bytes` and
/// their `k` column indices of `index_bytes`, out of `dim` columns) and a CSR `A`
/// (`n_rows x n_cols`, `nnz` non-zeros, edge values of `value_bytes`, 0 for none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maxk {
    /// Rows of `A` (output rows of the SpGEMM).
    pub n_rows: usize,
    /// Columns of `A`: rows of the CBSR matrix.
    pub n_cols: usize,
    /// Stored non-zeros of `A`.
    pub nnz: usize,
    /// Dense width `D` the CBSR rows are drawn from.
    pub dim: usize,
    /// Entries kept per row.
    pub k: usize,
    /// Bytes of a kept value (and of an element of the SSpMM's dense `dY`).
    pub elem_bytes: usize,
    /// Bytes of a CBSR column index (1 for `D <= 256`, else 2).
    pub index_bytes: usize,
    /// Bytes of an edge value; 0 when none is read.
    pub value_bytes: usize,
}

/// Bytes of an element of the SpGEMM's dense output (f32 accumulation, written once).
pub const MAXK_OUT_BYTES: usize = 4;

impl Maxk {
    /// Bytes of one CBSR row: `k` values and `k` indices.
    fn cbsr_row(&self) -> u64 {
        (self.k * (self.elem_bytes + self.index_bytes)) as u64
    }

    /// The forward SpGEMM `Y = A · dense(X̃)`: reads the CBSR rows (each non-zero gathers
    /// one), writes `Y` (`n_rows x dim`, f32).
    pub fn spgemm(&self) -> Traffic {
        Traffic {
            compulsory_bytes: csr_bytes(self.n_rows, self.nnz, self.value_bytes)
                + self.n_cols as u64 * self.cbsr_row()
                + (self.n_rows * self.dim * MAXK_OUT_BYTES) as u64,
            gathered_bytes: self.nnz as u64 * self.cbsr_row(),
        }
    }

    /// The backward SSpMM `dX̃ = (Aᵀ dY)` sampled at the CBSR's kept columns: walks `Aᵀ`
    /// (`n_cols` rows), reads `dY` (`n_rows x dim`, `elem_bytes`) and, per non-zero, `k`
    /// values of it at the row's `k` kept columns; writes `k` values and reads `k` indices per
    /// CBSR row.
    pub fn sspmm(&self) -> Traffic {
        Traffic {
            compulsory_bytes: csr_bytes(self.n_cols, self.nnz, self.value_bytes)
                + (self.n_rows * self.dim * self.elem_bytes) as u64
                + self.n_cols as u64 * self.cbsr_row(),
            gathered_bytes: self.nnz as u64 * self.cbsr_row(),
        }
    }
}

/// `v` as a distance in a table cell: `4.5x`, `12x` (two significant figures from 10 up).
pub fn fmt_x(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v >= 10.0 {
        format!("{v:.0}x")
    } else {
        format!("{v:.1}x")
    }
}

/// A rate in TB/s in a table cell: `7.33`, `0.41`, `0.002`.
pub fn fmt_tb_s(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Reddit-shaped graph of ../shared/FLOORS.md: rows and non-zeros of A + I.
    const N: usize = 232_965;
    const NNZ: usize = 114_500_000;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn spmm_bytes_by_hand() {
        // 3 rows, 5 non-zeros, K = 2, f32: indices 20 + values 20 + row pointers 16 + X 24 +
        // Y 24 = 104 (bench/floors.py's figure); without values 84; gathered 5 * 2 * 4 = 40.
        let s = Spmm {
            n_rows: 3,
            n_cols: 3,
            nnz: 5,
            k: 2,
            elem_bytes: 4,
            value_bytes: 4,
        };
        assert_eq!(
            s.traffic(),
            Traffic {
                compulsory_bytes: 104,
                gathered_bytes: 40
            }
        );
        let t = Spmm {
            value_bytes: 0,
            ..s
        }
        .traffic();
        assert_eq!((t.compulsory_bytes, t.gathered_bytes), (84, 40));
        // A rectangular A: X has n_cols rows, Y n_rows.
        let r = Spmm {
            n_rows: 2,
            n_cols: 7,
            ..s
        };
        assert_eq!(r.traffic().compulsory_bytes, 20 + 20 + 12 + 7 * 8 + 2 * 8);
    }

    #[test]
    fn spmm_reddit_figures() {
        // FLOORS.md at K = 128: 1.16 GB f32 with values (0.35 ms at 3.35 TB/s), 0.70 GB
        // without (0.21 ms), 0.58 GB bf16 without (0.17 ms); gathered nnz K s = 58.6 GB f32,
        // 29.3 GB bf16: 1.78 / 0.89 ms at 33 TB/s.
        let h = DeviceModel::H100_SXM;
        let at = |s, v| {
            Spmm {
                n_rows: N,
                n_cols: N,
                nnz: NNZ,
                k: 128,
                elem_bytes: s,
                value_bytes: v,
            }
            .traffic()
        };
        let f32v = at(4, 4).floors(&h);
        assert!(close(f32v.compulsory_bytes as f64 / 1e9, 1.155, 0.001));
        assert!(close(f32v.hbm_ms, 0.345, 0.001));
        assert_eq!(f32v.gathered_bytes, 58_624_000_000);
        assert!(close(f32v.gather_l1_ms, 1.776, 0.001));
        assert!(close(f32v.gather_l2_ms, 6.514, 0.001));
        let f32n = at(4, 0).floors(&h);
        assert!(close(f32n.compulsory_bytes as f64 / 1e9, 0.697, 0.001));
        assert!(close(f32n.hbm_ms, 0.208, 0.001));
        let bf16n = at(2, 0).floors(&h);
        assert!(close(bf16n.compulsory_bytes as f64 / 1e9, 0.578, 0.001));
        assert!(close(bf16n.hbm_ms, 0.173, 0.001));
        assert!(close(bf16n.gather_l1_ms, 0.888, 0.001));
        // The issue's K = 128 kernels: 8.0 ms f32, 4.05 ms bf16: ~7.3 TB/s of gathered rows,
        // 4.5x the L1 floor (the ncu record's L2-bound reading).
        let d = at(4, 4).distance(&h, 8.0);
        assert!(close(d.gather_tb_s, 7.328, 0.001));
        assert!(close(d.x_gather_l1, 4.503, 0.001));
        assert!(close(d.x_gather_l2, 1.228, 0.001));
        assert!(close(d.x_hbm, 23.19, 0.01));
        let d = at(2, 4).distance(&h, 4.05);
        assert!(close(d.gather_tb_s, 7.237, 0.001));
    }

    #[test]
    fn sddmm_bytes() {
        // 3 x 3 pattern, 5 non-zeros, K = 2, f32: indices 20 + row pointers 16 + A 24 + B 24 +
        // scores 20 = 104; gathered B_j per non-zero 5 * 2 * 4 = 40.
        let t = Sddmm {
            n_rows: 3,
            n_cols: 3,
            nnz: 5,
            k: 2,
            elem_bytes: 4,
        }
        .traffic();
        assert_eq!((t.compulsory_bytes, t.gathered_bytes), (104, 40));
        // Reddit-shaped, K = 128, f32: 58.6 GB gathered, 1.78 ms at L1; compulsory 0.46 GB of
        // indices + 0.46 GB of scores + 0.24 GB of operands.
        let t = Sddmm {
            n_rows: N,
            n_cols: N,
            nnz: NNZ,
            k: 128,
            elem_bytes: 4,
        }
        .traffic();
        assert_eq!(t.gathered_bytes, 58_624_000_000);
        assert!(close(t.compulsory_bytes as f64 / 1e9, 1.155, 0.001));
    }

    #[test]
    fn maxk_bytes() {
        // 3 x 3, 5 non-zeros with f32 values, D = 8, k = 2, f32 values and u8 indices: a CBSR
        // row is 2 * (4 + 1) = 10 bytes.
        let m = Maxk {
            n_rows: 3,
            n_cols: 3,
            nnz: 5,
            dim: 8,
            k: 2,
            elem_bytes: 4,
            index_bytes: 1,
            value_bytes: 4,
        };
        // indices 20 + values 20 + row pointers 16 + CBSR 3 * 10 + Y 3 * 8 * 4.
        assert_eq!(
            m.spgemm(),
            Traffic {
                compulsory_bytes: 56 + 30 + 96,
                gathered_bytes: 50
            }
        );
        // The same structure + dY 3 * 8 * 4 + CBSR 30.
        assert_eq!(
            m.sspmm(),
            Traffic {
                compulsory_bytes: 56 + 96 + 30,
                gathered_bytes: 50
            }
        );
        // MaxK-32 of 256 on the Reddit-shaped graph, bf16 values: gathers 32 * 3 = 96 bytes
        // per non-zero against the dense bf16 SpMM's 512 at K = 256: 1/5.3 (k / D = 1/8 of
        // the values, plus the indices).
        let r = Maxk {
            n_rows: N,
            n_cols: N,
            nnz: NNZ,
            dim: 256,
            k: 32,
            elem_bytes: 2,
            index_bytes: 1,
            value_bytes: 4,
        };
        let dense = Spmm {
            n_rows: N,
            n_cols: N,
            nnz: NNZ,
            k: 256,
            elem_bytes: 2,
            value_bytes: 4,
        };
        assert_eq!(r.spgemm().gathered_bytes, NNZ as u64 * 96);
        assert!(close(
            dense.traffic().gathered_bytes as f64 / r.spgemm().gathered_bytes as f64,
            5.333,
            0.001
        ));
    }

    #[test]
    fn models() {
        assert_eq!(
            DeviceModel::for_gpu("NVIDIA H100 80GB HBM3"),
            Some(DeviceModel::H100_SXM)
        );
        assert_eq!(DeviceModel::for_gpu("NVIDIA H200"), Some(DeviceModel::H200));
        assert_eq!(DeviceModel::for_gpu("NVIDIA H100 PCIe"), None);
        assert_eq!(DeviceModel::for_gpu("NVIDIA A100-SXM4-80GB"), None);
        let known = FloorModel::for_gpu("NVIDIA H100 80GB HBM3");
        assert!(!known.assumed);
        assert_eq!(
            known.to_string(),
            "floors: H100 SXM (HBM 3.35 TB/s, L2 9 TB/s, L1 33 TB/s) for NVIDIA H100 80GB HBM3"
        );
        let other = FloorModel::for_gpu("NVIDIA A100-SXM4-80GB");
        assert!(other.assumed && other.model == DeviceModel::H100_SXM);
        assert!(other
            .to_string()
            .ends_with("(no model of its own: assumed)"));
        // The H200 differs only in HBM: the gather floors are the H100's.
        let t = Spmm {
            n_rows: N,
            n_cols: N,
            nnz: NNZ,
            k: 64,
            elem_bytes: 2,
            value_bytes: 0,
        }
        .traffic();
        let (a, b) = (
            t.floors(&DeviceModel::H100_SXM),
            t.floors(&DeviceModel::H200),
        );
        assert_eq!(a.gather_l1_ms, b.gather_l1_ms);
        assert!(close(a.hbm_ms / b.hbm_ms, 4.8 / 3.35, 1e-12));
    }

    #[test]
    fn cells() {
        assert_eq!(fmt_x(4.503), "4.5x");
        assert_eq!(fmt_x(23.19), "23x");
        assert_eq!(fmt_x(f64::INFINITY), "-");
        assert_eq!(fmt_tb_s(7.328), "7.33");
        assert_eq!(fmt_tb_s(0.0412), "0.041");
        assert_eq!(fmt_tb_s(f64::NAN), "-");
    }
}
