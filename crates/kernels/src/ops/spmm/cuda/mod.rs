//! Host side of the CUDA SpMM family (`cuda/spmm.cu`): runs the kernel the graph's policy
//! and the dispatcher pick ([`crate::ops::spmm::dispatch::spmm_choice`]: GE-SpMM's row-scheduled or
//! narrow-row kernel, or HP-SpMM's nnz-balanced one) in its shape for `k`, checks shapes,
//! launches, records the kernel on the graph, and wraps the results as candle storages.

mod arg;
mod group;
mod half;

pub(crate) use arg::{edge_grad_arg, gather_arg, scatter_arg};
use group::spmm_group;
use half::spmm_half;
pub(crate) use half::spmm_half_acc;

use crate::cuda::{elementwise_cfg, f32_view, f32_view_opt, launched, zeros};
use crate::device_graph::DeviceGraph;
use crate::ops::sddmm::cuda::sm_count;
use crate::ops::spmm::dispatch::{spmm_choice_for, SpmmChoice as Choice};
use crate::ops::spmm::Reduce;
use crate::partition::{dtp_workers, HpSpmmShape, HP_WARPS, NPW_CANDIDATES};
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{
    CudaFunction, CudaSlice, CudaView, DeviceRepr, LaunchConfig, PushKernelArg,
};
use candle_core::cuda_backend::CudaDevice;
use candle_core::{CudaStorage, DType, Layout, Result, Shape};

/// `prefix`: "" for f32 storage, "bf16_" / "f16_" for half-precision storage.
fn hp_func(dev: &CudaDevice, shape: HpSpmmShape, prefix: &str) -> Result<CudaFunction> {
    let name = format!("hp_spmm_{prefix}v{}_c{}_u4", shape.v, shape.ch);
    Ok(crate::cuda::kernel(dev, &name, &crate::cuda::SPMM)?.into_cuda_function())
}

/// DTP for an HP-SpMM launch of `shape` over `nnz` edges on `dev`.
fn hp_dtp(dev: &CudaDevice, func: &CudaFunction, shape: HpSpmmShape, nnz: usize) -> Result<u32> {
    let active = func
        .occupancy_max_active_blocks_per_multiprocessor(32 * HP_WARPS, 0, None)
        .map_err(|e| candle_core::Error::Msg(format!("spmm: occupancy: {e:?}")))?;
    Ok(dtp_workers(
        nnz,
        shape.workers_per_block(),
        shape.tiles,
        sm_count(dev)?,
        active as usize,
    ))
}

/// HP-SpMM into the zeroed fp32 `out` (`[n_rows, k]`), sum or mean; `x` stored as f32 or
/// (with `prefix` "bf16_" / "f16_") half precision.
#[allow(clippy::too_many_arguments)]
fn hp_spmm<T: DeviceRepr>(
    g: &DeviceGraph,
    dev: &CudaDevice,
    prefix: &str,
    xv: &CudaView<'_, T>,
    offset: usize,
    k: usize,
    vals: Option<&CudaView<'_, f32>>,
    mean: bool,
    npw: Option<u32>,
    out: &CudaSlice<f32>,
) -> Result<()> {
    let csr = g.cuda_csr()?;
    let nnz = g.nnz();
    let Some(shape) = HpSpmmShape::new(k, offset | 4) else {
        return Ok(());
    };
    g.record("spmm", "hp");
    let func = hp_func(dev, shape, prefix)?;
    let npw = match npw {
        Some(n) if NPW_CANDIDATES.contains(&n) => n,
        _ => hp_dtp(dev, &func, shape, nnz)?,
    };
    let blocks = nnz.div_ceil(npw as usize * shape.workers_per_block());
    let cfg = LaunchConfig {
        grid_dim: (
            u32::try_from(blocks)
                .map_err(|_| candle_core::Error::Msg("spmm: grid too large".into()))?,
            i32_arg("column tiles", shape.tiles)? as u32,
            1,
        ),
        block_dim: (32 * HP_WARPS, 1, 1),
        shared_mem_bytes: 0,
    };
    let (n_i, nnz_u, k_i, lanes, mean_i) = (
        i32_arg("rows", g.n_rows())?,
        u32::try_from(nnz).map_err(|_| candle_core::Error::Msg("spmm: nnz exceeds u32".into()))?,
        i32_arg("k", k)?,
        shape.lanes as i32,
        mean as i32,
    );
    let no_vals = 0u64;
    let stream = dev.cuda_stream();
    let mut b = stream.launch_builder(&func);
    b.arg(&csr.indptr).arg(&csr.indices);
    match vals {
        Some(v) => b.arg(v),
        None => b.arg(&no_vals),
    };
    b.arg(xv)
        .arg(out)
        .arg(&n_i)
        .arg(&nnz_u)
        .arg(&k_i)
        .arg(&npw)
        .arg(&lanes)
        .arg(&mean_i);
    // SAFETY: x is [n_cols, k] (checked by the public functions), out is [n_rows, k] and
    // zeroed (shared rows add into it), vals (if any) has nnz elements; v-wide loads only where
    // `HpSpmmShape` found k and the offset divisible by v; the grid covers nnz edges in groups
    // of npw and the column tiles cover k.
    launched(unsafe { b.launch(cfg) }.map(|_| ()))
}

const WARPS_PER_BLOCK: u32 = 8;

/// The work items a sum/mean row-kernel launch walks: the graph's column-blocked schedule
/// when it is wider than a block ([`crate::schedule::ColumnBlockedSchedule`]: the gathered
/// rows of `x` come from one L2-sized block at a time), else its row schedule.
enum Items<'a> {
    Rows(&'a CudaSlice<u32>, usize, usize),
    Blocked(std::sync::Arc<crate::device_graph::Schedule>),
}

impl Items<'_> {
    fn of(g: &DeviceGraph) -> Result<Items<'_>> {
        Ok(
            match g.cuda_blocked_schedule(g.policy().column_block.width())? {
                Some(s) => Items::Blocked(s),
                None => {
                    let (b, n, c) = g.cuda_schedule()?;
                    Items::Rows(b, n, c)
                }
            },
        )
    }

    /// The row kernel's name in the graph's kernel record: `ge-blocked` over a
    /// column-blocked schedule, `ge` otherwise.
    fn kernel_name(items: Option<&Self>) -> &'static str {
        match items {
            Some(Items::Blocked(_)) => "ge-blocked",
            _ => "ge",
        }
    }

    fn buf(&self) -> &CudaSlice<u32> {
        match self {
            Items::Rows(b, _, _) => b,
            Items::Blocked(s) => &s.0,
        }
    }

    fn len(&self) -> usize {
        match self {
            Items::Rows(_, n, _) => *n,
            Items::Blocked(s) => s.1,
        }
    }

    /// The kernels' `chunk` argument: negative marks blocked items (`item_of` in common.cuh).
    fn chunk_arg(&self) -> Result<i32> {
        match self {
            Items::Rows(_, _, c) => i32_arg("edge-group length", *c),
            Items::Blocked(_) => Ok(-1),
        }
    }
}

/// Edges per unrolled step of the built-in shape.
const UNROLL: usize = 8;

/// Whether sum/mean launches walk the row schedule by default.
const SCHEDULE: bool = true;

/// Bytes of the gathered operand above which tiles run tile-major (about the H100/H200 L2).
const L2_BYTES: usize = 48 << 20;

/// The built-in kernel shape for `k` columns at input `offset` over `n_cols` source rows:
/// `(vec, cf, n_tiles, tile_major)`, always with an 8-edge unroll.
///
/// From the H100 sweeps in `c6f0242:docs/perf/` (`bench_spmm --sweep`, Reddit shape): one 32-lane
/// chunk per warp and 8 edges in flight win at every width; float2 loads beat float4 and
/// scalar ones for k >= 64 (K=128: 10.46 ms vs 11.44 float4 / 11.04 scalar); scalar loads for
/// k <= 32 or odd k; tile-major order once the gathered slice of x (`n_cols * k * 4` bytes)
/// outgrows L2, node-major otherwise. Rechecked over the row schedule
/// (`maxk/select-bisect-bias-schedule/first-run`): K=256 float2 tile-major 15.86 ms vs 16.39
/// float4 / 18.08 scalar; K=41 (38 MB) node-major 4.20 ms vs 4.53 tile-major.
pub(crate) fn tile_shape(k: usize, offset: usize, n_cols: usize) -> (usize, usize, usize, bool) {
    let vec: usize = if k > 32 && k.is_multiple_of(2) && offset.is_multiple_of(2) {
        2
    } else {
        1
    };
    let n_tiles = k.div_ceil(32 * vec).max(1);
    let tile_major = n_tiles > 1 && n_cols * k * 4 > L2_BYTES;
    (vec, 1, n_tiles, tile_major)
}

/// The launch of GE-SpMM's row kernel: one warp per work item (a row, or an item of the row
/// schedule) per column tile, `WARPS_PER_BLOCK` warps per block.
fn row_kernel_cfg(n_work: usize, n_tiles: usize) -> Result<LaunchConfig> {
    let row_blocks = n_work.div_ceil(WARPS_PER_BLOCK as usize).max(1);
    let blocks = u32::try_from(row_blocks * n_tiles)
        .map_err(|_| candle_core::Error::Msg("spmm: grid too large".into()))?;
    Ok(LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (32 * WARPS_PER_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    })
}

fn i32_arg(what: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| {
        candle_core::Error::Msg(format!(
            "spmm: {what} = {v} exceeds the kernel's 32-bit range"
        ))
    })
}

/// Runs the narrow kernel (`name` "f32" / "bf16" / "f16") into `out` (`n_rows * k` fp32,
/// zeroed: split rows of the schedule add into it). `x` (`n_cols` rows of `k` from `offset`
/// elements into its buffer) is first copied to rows of `kp` (zero-padded, 16-byte aligned)
/// unless it already has that layout.
#[allow(clippy::too_many_arguments)]
fn spmm_narrow_into<T: DeviceRepr>(
    g: &DeviceGraph,
    dev: &CudaDevice,
    name: &str,
    xv: &CudaView<'_, T>,
    offset: usize,
    (k, kp): (usize, usize),
    vv: Option<&CudaView<'_, f32>>,
    mean: bool,
    out: &CudaSlice<f32>,
) -> Result<()> {
    g.record("spmm", "narrow");
    let n = g.n_rows();
    let elem = std::mem::size_of::<T>();
    let vec = 16 / elem;
    let padded = if kp != k || !offset.is_multiple_of(vec) {
        let m = g.n_cols();
        // SAFETY: left uninitialised; pad_rows writes all m * kp elements below (nothing is
        // read when m = 0: no column names a row).
        let buf = unsafe { dev.alloc::<T>((m * kp).max(1))? };
        if m > 0 {
            let pad = crate::cuda::kernel(
                dev,
                if elem == 2 {
                    "pad_rows_b16"
                } else {
                    "pad_rows_b32"
                },
                &crate::cuda::SPMM,
            )?;
            let (m_i, k_i, kp_i) = (
                i32_arg("rows", m)?,
                i32_arg("k", k)?,
                i32_arg("padded k", kp)?,
            );
            let mut b = pad.builder();
            b.arg(xv).arg(&buf).arg(&m_i).arg(&k_i).arg(&kp_i);
            // SAFETY: x holds m * k elements of `elem` bytes (checked by the public functions),
            // buf m * kp of the same size; the kernel copies raw 2- or 4-byte words.
            launched(unsafe { b.launch(elementwise_cfg(m * kp)) }.map(|_| ()))?;
        }
        Some(buf)
    } else {
        None
    };
    let csr = g.cuda_csr()?;
    let (buf, items, chunk) = g.cuda_schedule()?;
    let func = crate::cuda::kernel(dev, &format!("spmm_narrow_{name}"), &crate::cuda::SPMM)?;
    let cfg = row_kernel_cfg(items, 1)?;
    let (n_i, k_i, kp_i) = (
        i32_arg("rows", n)?,
        i32_arg("k", k)?,
        i32_arg("padded k", kp)?,
    );
    let (weighted, mean_i) = (vv.is_some() as i32, mean as i32);
    let (items_i, chunk_i) = (
        i32_arg("work items", items)?,
        i32_arg("edge-group length", chunk)?,
    );
    let mut b = func.builder();
    b.arg(&csr.indptr).arg(&csr.indices);
    match vv {
        Some(v) => b.arg(v),
        None => b.arg(&csr.indptr), // never read when `weighted` is 0
    };
    match &padded {
        Some(p) => b.arg(p),
        None => b.arg(xv),
    };
    b.arg(out)
        .arg(&n_i)
        .arg(&k_i)
        .arg(&kp_i)
        .arg(&weighted)
        .arg(&mean_i)
        .arg(buf)
        .arg(&items_i)
        .arg(&chunk_i);
    // SAFETY: x (or its padded copy) has n_cols rows of kp elements, 16-byte aligned (kp and
    // the offset are multiples of 16 / elem bytes, or the copy is fresh), and the kernel reads
    // 16 bytes per lane at row * kp + lane-group column < kp; out has n * k fp32 (zeroed) and
    // only columns < k are written; the schedule covers this CSR's rows.
    launched(unsafe { b.launch(cfg) }.map(|_| ()))?;
    Ok(())
}

/// Forward SpMM; with `want_arg` (max/min only) also the argmax positions.
pub(crate) fn spmm_fwd(
    g: &DeviceGraph,
    x: &CudaStorage,
    xl: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
    reduce: Reduce,
    want_arg: bool,
) -> Result<(CudaStorage, Option<CudaStorage>, Shape)> {
    if matches!(x.dtype(), DType::BF16 | DType::F16) {
        return spmm_half(g, x, xl, vals, reduce, want_arg);
    }
    let (_, k) = xl.shape().dims2()?;
    let dev = x.device().clone();
    let csr = g.cuda_csr()?;
    let n = g.n_rows();
    let xv = f32_view("spmm", x, xl)?;
    let vv = f32_view_opt("spmm", vals)?;
    let extreme = matches!(reduce, Reduce::Max | Reduce::Min);
    if !extreme && spmm_choice_for(g, k, 4) == Choice::Group {
        let mean = reduce == Reduce::Mean;
        let off = xl.start_offset();
        if let Some(out) = spmm_group(g, &dev, "f32", &xv, off, k, vv.as_ref(), mean)? {
            return Ok((
                CudaStorage::wrap_cuda_slice(out, dev),
                None,
                Shape::from((n, k)),
            ));
        }
    }
    let out = zeros::<f32>(&dev, n * k)?;
    let arg = if want_arg && extreme {
        Some(zeros::<u32>(&dev, n * k)?)
    } else {
        None
    };
    let forced_tiling = g.policy().spmm_tiling;
    let choice = if extreme {
        Choice::Row
    } else {
        spmm_choice_for(g, k, 4)
    };
    if let (Choice::Hp(npw), true) = (choice, n > 0 && k > 0) {
        hp_spmm(
            g,
            &dev,
            "",
            &xv,
            xl.start_offset(),
            k,
            vv.as_ref(),
            reduce == Reduce::Mean,
            npw,
            &out,
        )?;
    } else if let (Choice::Narrow(kp), true) = (choice, n > 0) {
        spmm_narrow_into(
            g,
            &dev,
            "f32",
            &xv,
            xl.start_offset(),
            (k, kp),
            vv.as_ref(),
            reduce == Reduce::Mean,
            &out,
        )?;
    } else if n > 0 && k > 0 {
        let (vec, cf, n_tiles, tile_major, unroll, schedule) = match forced_tiling {
            Some(t) if t.valid(k, xl.start_offset()) => (
                t.vec,
                t.cf,
                k.div_ceil(32 * t.vec * t.cf),
                t.tile_major,
                t.unroll,
                t.schedule,
            ),
            _ => {
                let (v, c, t, m) = tile_shape(k, xl.start_offset(), g.n_cols());
                (v, c, t, m, UNROLL, SCHEDULE)
            }
        };
        // Split rows meet through atomic adds, which only a sum (or mean) can take.
        let sched = if schedule && !extreme {
            Some(Items::of(g)?)
        } else {
            None
        };
        g.record("spmm", Items::kernel_name(sched.as_ref()));
        let mode = match (extreme, arg.is_some()) {
            (false, _) => 0,
            (true, false) => 1,
            (true, true) => 2,
        };
        let suffix = if unroll == 8 { "_u8" } else { "" };
        let name = format!("spmm_v{vec}_c{cf}_m{mode}{suffix}");
        let func = crate::cuda::kernel(&dev, &name, &crate::cuda::SPMM)?;
        let cfg = row_kernel_cfg(sched.as_ref().map_or(n, Items::len), n_tiles)?;
        let (n_i, k_i, t_i) = (
            i32_arg("rows", n)?,
            i32_arg("k", k)?,
            i32_arg("tiles", n_tiles)?,
        );
        let weighted = vv.is_some() as i32;
        let mean = (reduce == Reduce::Mean) as i32;
        let sign: f32 = if reduce == Reduce::Min { -1.0 } else { 1.0 };
        let mut b = func.builder();
        b.arg(&csr.indptr);
        b.arg(&csr.indices);
        match &vv {
            Some(v) => b.arg(v),
            None => b.arg(&xv), // never read when `weighted` is 0
        };
        b.arg(&xv);
        b.arg(&out);
        match &arg {
            Some(a) => b.arg(a),
            None => b.arg(&csr.indptr), // never written unless mode 2
        };
        let tm = tile_major as i32;
        b.arg(&n_i)
            .arg(&k_i)
            .arg(&t_i)
            .arg(&weighted)
            .arg(&mean)
            .arg(&sign)
            .arg(&tm);
        let (items_i, chunk_i) = (
            i32_arg("work items", sched.as_ref().map_or(0, Items::len))?,
            sched.as_ref().map_or(Ok(1), Items::chunk_arg)?,
        );
        match &sched {
            // A null `items` pointer selects one warp per row.
            Some(items) => b.arg(items.buf()),
            None => b.arg(&0u64),
        };
        b.arg(&items_i).arg(&chunk_i);
        // SAFETY: buffers match the kernel signature; the CSR was validated on upload, x has
        // n_cols * k elements (checked by the public functions), out/arg have n * k (zeroed,
        // as split rows of the schedule add into it); the schedule covers this CSR's rows.
        launched(unsafe { b.launch(cfg) }.map(|_| ()))?;
    }
    let arg = arg.map(|a| CudaStorage::wrap_cuda_slice(a, dev.clone()));
    Ok((
        CudaStorage::wrap_cuda_slice(out, dev),
        arg,
        Shape::from((n, k)),
    ))
}

#[cfg(test)]
mod tests {
    use super::tile_shape;

    #[test]
    fn tile_shapes_cover_k_with_compiled_factors() {
        for k in 1..=1100 {
            for off in [0, 1, 2, 4] {
                let (vec, cf, tiles, _) = tile_shape(k, off, 1000);
                assert!(tiles * cf * 32 * vec >= k, "k {k}");
                assert!(
                    k.is_multiple_of(vec) && off.is_multiple_of(vec),
                    "k {k} vec {vec}"
                );
                assert!(
                    crate::ops::spmm::dispatch::CFS[vec.trailing_zeros() as usize].contains(&cf)
                );
            }
        }
        let reddit = 232_965;
        assert_eq!(tile_shape(16, 0, reddit), (1, 1, 1, false));
        assert_eq!(tile_shape(41, 0, reddit), (1, 1, 2, false));
        assert_eq!(tile_shape(64, 0, reddit), (2, 1, 1, false));
        assert_eq!(tile_shape(128, 0, reddit), (2, 1, 2, true));
        assert_eq!(tile_shape(256, 0, reddit), (2, 1, 4, true));
        assert_eq!(tile_shape(602, 0, reddit), (2, 1, 10, true));
    }
}
