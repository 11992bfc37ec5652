//! The task partition of the HP kernels (HP-SDDMM and HP-SpMM, Fan, Wang, Chu, IPDPS'23),
//! decided on the host: the launch shape for a width K (HVMA's feature vector width) and the
//! edges per warp or lane group (DTP). Plain arithmetic, tested without a GPU.

/// The paper's candidate edges-per-warp values; all multiples of 8, so a warp's first edge is
/// 32-byte aligned in the index array for the int2 / int4 tile loads.
pub const NPW_CANDIDATES: [u32; 6] = [512, 256, 128, 64, 32, 8];

/// DTP's scale factor: the grid must hold at least this many full waves of blocks.
pub const DTP_WAVES: f64 = 2.0;

/// Warps per block of the HP kernels (`HP_WARPS` in `cuda/sddmm.cu`, 256 threads in
/// `cuda/spmm.cu`).
pub const HP_WARPS: u32 = 8;

/// HVMA's feature vector width for `k` at operands aligned to `aligned_to` elements (the
/// widest of 4, 2, 1 dividing both), and the lanes sharing an edge (the smallest power of two
/// covering `k / v`, at most a warp): the part both HP kernels' shapes share.
fn vector_and_lanes(k: usize, aligned_to: usize) -> (usize, usize) {
    let v = [4, 2, 1]
        .into_iter()
        .find(|&v| k & (v - 1) == 0 && aligned_to & (v - 1) == 0)
        .unwrap_or(1);
    (v, k.div_ceil(v).next_power_of_two().min(32))
}

/// The HP-SDDMM launch shape for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HpShape {
    /// Feature vector width (1, 2, 4).
    pub v: usize,
    /// Feature vectors per lane held in registers.
    pub ch: usize,
    /// Lanes per edge (power of two, <= 32).
    pub lanes: usize,
}

impl HpShape {
    /// The shape for width `k` whose operands start at element offsets allowing `v`-wide
    /// loads; `None` for K > 1024 or K = 0.
    pub fn new(k: usize, aligned_to: usize) -> Option<Self> {
        if k == 0 || k > 1024 {
            return None;
        }
        let (v, lanes) = vector_and_lanes(k, aligned_to);
        let ch = k.div_ceil(v * lanes).next_power_of_two();
        Some(Self { v, ch, lanes })
    }

    /// Edges a group of lanes takes per round (their b rows requested together): 4 while a
    /// lane holds at most 2 feature vectors, else 1 (register pressure).
    pub fn unroll(&self) -> usize {
        if self.ch <= 2 {
            4
        } else {
            1
        }
    }
}

/// DTP: the largest candidate edges-per-warp whose grid still fills `DTP_WAVES` full waves
/// (`sms x active_blocks_per_sm` blocks of `HP_WARPS` warps), the smallest candidate when none
/// does (small graphs: as many warps as there are edges to share).
pub fn dynamic_task_partition(nnz: usize, sms: usize, active_blocks_per_sm: usize) -> u32 {
    dtp_workers(nnz, HP_WARPS as usize, 1, sms, active_blocks_per_sm)
}

/// DTP for kernels whose blocks hold `workers_per_block` independent edge ranges (HP-SpMM's
/// lane groups) and whose grid repeats over `tiles` column tiles: the largest candidate edges
/// per worker that still gives `DTP_WAVES` full waves of blocks, else the smallest.
pub fn dtp_workers(
    nnz: usize,
    workers_per_block: usize,
    tiles: usize,
    sms: usize,
    active_blocks_per_sm: usize,
) -> u32 {
    let full_wave = (sms * active_blocks_per_sm.max(1)) as f64;
    NPW_CANDIDATES
        .into_iter()
        .find(|&npw| {
            let blocks = nnz.div_ceil(npw as usize * workers_per_block.max(1)) * tiles.max(1);
            blocks as f64 >= DTP_WAVES * full_wave
        })
        .unwrap_or(NPW_CANDIDATES[NPW_CANDIDATES.len() - 1])
}

/// The HP-SpMM launch shape for one call: each lane keeps `ch` vectors of `v` floats of the
/// current row (at most 8 accumulators), `lanes` lanes share an edge, and the grid repeats
/// over `tiles` column tiles of `lanes * ch * v` columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HpSpmmShape {
    /// Feature vector width (1, 2, 4).
    pub v: usize,
    /// Feature vectors per lane (`ch * v <= 8`).
    pub ch: usize,
    /// Lanes per edge (power of two, <= 32).
    pub lanes: usize,
    /// Column tiles.
    pub tiles: usize,
}

impl HpSpmmShape {
    /// The shape for width `k > 0` whose input starts at an element offset allowing `v`-wide
    /// loads (`None` for K = 0).
    pub fn new(k: usize, aligned_to: usize) -> Option<Self> {
        if k == 0 {
            return None;
        }
        let (v, lanes) = vector_and_lanes(k, aligned_to);
        let ch = k.div_ceil(v * lanes).next_power_of_two().min(8 / v);
        let tiles = k.div_ceil(lanes * ch * v);
        Some(Self {
            v,
            ch,
            lanes,
            tiles,
        })
    }

    /// Independent lane groups (edge ranges) per 256-thread block.
    pub fn workers_per_block(&self) -> usize {
        HP_WARPS as usize * (32 / self.lanes)
    }
}

/// HVMA's index-tile load width for `npw` edges per warp: int4 from 128, int2 at 64.
pub fn index_vector_width(npw: u32) -> i32 {
    match npw {
        n if n >= 128 => 4,
        64 => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_cover_k_with_aligned_vectors() {
        for k in 1..=1024 {
            for align in [1, 2, 4] {
                let s = HpShape::new(k, align).unwrap();
                assert!(
                    k % s.v == 0 && align % s.v == 0,
                    "k {k} align {align}: {s:?}"
                );
                assert!(s.lanes.is_power_of_two() && s.lanes <= 32);
                assert!(s.v * s.lanes * s.ch >= k, "k {k}: {s:?} does not cover it");
                // The compiled kernels: v1 up to 32 vectors per lane, v2 16, v4 8.
                assert!(s.ch.is_power_of_two() && s.ch <= 32 / s.v, "k {k}: {s:?}");
            }
        }
        assert_eq!(
            HpShape::new(16, 4),
            Some(HpShape {
                v: 4,
                ch: 1,
                lanes: 4
            })
        );
        assert_eq!(
            HpShape::new(602, 4),
            Some(HpShape {
                v: 2,
                ch: 16,
                lanes: 32
            })
        );
        assert_eq!(
            HpShape::new(128, 1),
            Some(HpShape {
                v: 1,
                ch: 4,
                lanes: 32
            })
        );
        assert_eq!(HpShape::new(0, 4), None);
        assert_eq!(HpShape::new(1025, 4), None);
    }

    #[test]
    fn partition_fills_the_waves_it_can() {
        // H100: 132 SMs, 8 blocks of 256 threads each.
        let (sms, active) = (132, 8);
        let wave = (sms * active) as f64;
        // Reddit (114.5 M edges): the largest candidate still makes 26 waves.
        assert_eq!(dynamic_task_partition(114_543_559, sms, active), 512);
        // Cora (13 K edges): not even one wave at 8 per warp, so the smallest.
        assert_eq!(dynamic_task_partition(13_264, sms, active), 8);
        // In between: the largest npw with at least DTP_WAVES waves, and the next larger fails.
        let nnz = 5_000_000;
        let npw = dynamic_task_partition(nnz, sms, active);
        let blocks = |n: u32| nnz.div_ceil(n as usize * HP_WARPS as usize) as f64;
        assert!(blocks(npw) >= DTP_WAVES * wave);
        assert!(blocks(npw * 2) < DTP_WAVES * wave, "npw {npw}");
        assert_eq!(
            (
                index_vector_width(512),
                index_vector_width(64),
                index_vector_width(32)
            ),
            (4, 2, 1)
        );
    }

    #[test]
    fn spmm_shapes_cover_k_within_the_compiled_set() {
        for k in 1..=1100 {
            for align in [1, 2, 4] {
                let s = HpSpmmShape::new(k, align).unwrap();
                assert!(k % s.v == 0 && align % s.v == 0, "k {k}: {s:?}");
                assert!(s.lanes.is_power_of_two() && s.lanes <= 32);
                assert!(s.ch.is_power_of_two() && s.ch * s.v <= 8, "k {k}: {s:?}");
                assert!(s.tiles * s.lanes * s.ch * s.v >= k, "k {k}: {s:?}");
                // No tile entirely past K.
                assert!((s.tiles - 1) * s.lanes * s.ch * s.v < k, "k {k}: {s:?}");
            }
        }
        let s = HpSpmmShape::new(16, 4).unwrap();
        assert_eq!((s.v, s.ch, s.lanes, s.tiles), (4, 1, 4, 1));
        assert_eq!(s.workers_per_block(), 64);
        let s = HpSpmmShape::new(256, 4).unwrap();
        assert_eq!((s.v, s.ch, s.lanes, s.tiles), (4, 2, 32, 1));
        let s = HpSpmmShape::new(602, 2).unwrap();
        assert_eq!((s.v, s.ch, s.lanes, s.tiles), (2, 4, 32, 3));
        assert_eq!(HpSpmmShape::new(0, 4), None);
    }

    #[test]
    fn worker_partition_counts_groups_and_tiles() {
        let (sms, active) = (132, 8);
        // The warp form is the worker form with HP_WARPS workers and one tile.
        for nnz in [13_264, 5_000_000, 114_543_559] {
            assert_eq!(
                dynamic_task_partition(nnz, sms, active),
                dtp_workers(nnz, HP_WARPS as usize, 1, sms, active)
            );
        }
        // More workers per block or more tiles never asks for fewer edges per worker.
        let nnz = 5_000_000;
        let base = dtp_workers(nnz, 8, 1, sms, active);
        assert!(dtp_workers(nnz, 8, 4, sms, active) >= base);
        assert!(dtp_workers(nnz, 64, 1, sms, active) <= base);
    }
}
