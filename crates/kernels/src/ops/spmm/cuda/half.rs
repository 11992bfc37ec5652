//! The half-precision (bf16 / f16) SpMM: fp32 accumulation, the result narrowed to `x`'s
//! dtype, through the same dispatcher and kernels' half-precision twins as f32 (the row groups
//! write `x`'s dtype themselves).

use super::{hp_spmm, i32_arg, row_kernel_cfg, spmm_group, spmm_narrow_into, Items, L2_BYTES};
use crate::cuda::{f32_view_opt, launched, narrowed, zeros, FloatView};
use crate::device_graph::DeviceGraph;
use crate::ops::spmm::dispatch::{spmm_choice_for, SpmmChoice as Choice};
use crate::ops::spmm::Reduce;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaView, DeviceRepr, PushKernelArg};
use candle_core::cuda_backend::CudaDevice;
use candle_core::{CudaStorage, Layout, Result, Shape};

/// SpMM of half-precision `x` (bf16 or f16): fp32 accumulation into an fp32 buffer, narrowed
/// to `x`'s dtype at the end (the row groups, [`Choice::Group`], accumulate in registers and
/// write `x`'s dtype directly) (one pass over `n_rows * k`, small beside the `nnz * k` gather
/// that half precision halves). Max/min (with the argmax when `want_arg`) run the row kernel
/// without a schedule, as for f32; the narrowing of their result is exact when unweighted.
pub(super) fn spmm_half(
    g: &DeviceGraph,
    x: &CudaStorage,
    xl: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
    reduce: Reduce,
    want_arg: bool,
) -> Result<(CudaStorage, Option<CudaStorage>, Shape)> {
    let extreme = matches!(reduce, Reduce::Max | Reduce::Min);
    if !extreme {
        let (out, shape) = spmm_half_acc(g, x, xl, vals, reduce)?;
        let out = if out.dtype() == x.dtype() {
            out
        } else {
            out.to_dtype(&Layout::contiguous(&shape), x.dtype())?
        };
        return Ok((out, None, shape));
    }
    let (_, k) = xl.shape().dims2()?;
    let dev = x.device().clone();
    let vv = f32_view_opt("spmm", vals)?;
    let xv = FloatView::of("spmm", x, xl)?;
    let arg = if want_arg {
        Some(zeros::<u32>(&dev, g.n_rows() * k)?)
    } else {
        None
    };
    let off = xl.start_offset();
    let shape = Shape::from((g.n_rows(), k));
    let out = match &xv {
        FloatView::Bf16(v) => spmm_half_into(
            g,
            &dev,
            "bf16",
            v,
            off,
            k,
            vv.as_ref(),
            reduce,
            arg.as_ref(),
        )?,
        FloatView::F16(v) => {
            spmm_half_into(g, &dev, "f16", v, off, k, vv.as_ref(), reduce, arg.as_ref())?
        }
        FloatView::F32(_) => candle_core::bail!("spmm: F32 is not a half-precision dtype"),
    };
    let out = narrowed(out, &dev, &shape, xv.dtype())?;
    let arg = arg.map(|a| CudaStorage::wrap_cuda_slice(a, dev));
    Ok((out, arg, shape))
}

/// The sum or mean SpMM of half-precision `x` as its kernel leaves it: the fp32 accumulation
/// (`[n_rows, k]` f32), or, from the row groups ([`Choice::Group`]), the result already in
/// `x`'s dtype. What [`spmm_half`] narrows, and what an epilogue that rounds once
/// (`crate::spmm_then`) reads instead.
pub(crate) fn spmm_half_acc(
    g: &DeviceGraph,
    x: &CudaStorage,
    xl: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
    reduce: Reduce,
) -> Result<(CudaStorage, Shape)> {
    if matches!(reduce, Reduce::Max | Reduce::Min) {
        candle_core::bail!("spmm: {reduce:?} has no fp32 accumulation to hand out");
    }
    let (_, k) = xl.shape().dims2()?;
    let dev = x.device().clone();
    let vv = f32_view_opt("spmm", vals)?;
    let xv = FloatView::of("spmm", x, xl)?;
    let off = xl.start_offset();
    let shape = Shape::from((g.n_rows(), k));
    if spmm_choice_for(g, k, 2) == Choice::Group {
        let mean = reduce == Reduce::Mean;
        let direct = match &xv {
            FloatView::Bf16(v) => spmm_group(g, &dev, "bf16", v, off, k, vv.as_ref(), mean)?
                .map(|o| CudaStorage::wrap_cuda_slice(o, dev.clone())),
            FloatView::F16(v) => spmm_group(g, &dev, "f16", v, off, k, vv.as_ref(), mean)?
                .map(|o| CudaStorage::wrap_cuda_slice(o, dev.clone())),
            FloatView::F32(_) => None,
        };
        if let Some(out) = direct {
            return Ok((out, shape));
        }
    }
    let out = match &xv {
        FloatView::Bf16(v) => {
            spmm_half_into(g, &dev, "bf16", v, off, k, vv.as_ref(), reduce, None)?
        }
        FloatView::F16(v) => spmm_half_into(g, &dev, "f16", v, off, k, vv.as_ref(), reduce, None)?,
        FloatView::F32(_) => candle_core::bail!("spmm: F32 is not a half-precision dtype"),
    };
    Ok((CudaStorage::wrap_cuda_slice(out, dev), shape))
}

/// The built-in GE-SpMM shape for half-precision `x`: `(vec, n_tiles, tile_major)`. Eight
/// bytes per lane per load as for f32 (`vec` 4 halves, where f32 takes float2) from k >= 64,
/// a whole 32-lane chunk of columns in one tile at k = 128; tile-major once the gathered
/// slice (`n_cols * k * 2` bytes) outgrows L2.
pub(crate) fn half_tile_shape(k: usize, offset: usize, n_cols: usize) -> (usize, usize, bool) {
    let fits = |v: usize| k.is_multiple_of(v) && offset.is_multiple_of(v);
    let vec = if k >= 64 && fits(4) {
        4
    } else if k > 32 && fits(2) {
        2
    } else {
        1
    };
    let n_tiles = k.div_ceil(32 * vec).max(1);
    (vec, n_tiles, n_tiles > 1 && n_cols * k * 2 > L2_BYTES)
}

/// Runs the half-precision kernel (`name` "bf16" / "f16") of `reduce` into a new fp32 buffer;
/// max/min write the argmax positions into `arg` when given.
#[allow(clippy::too_many_arguments)]
fn spmm_half_into<T: DeviceRepr>(
    g: &DeviceGraph,
    dev: &CudaDevice,
    name: &str,
    xv: &CudaView<'_, T>,
    offset: usize,
    k: usize,
    vv: Option<&CudaView<'_, f32>>,
    reduce: Reduce,
    arg: Option<&CudaSlice<u32>>,
) -> Result<CudaSlice<f32>> {
    let n = g.n_rows();
    let out = zeros::<f32>(dev, n * k)?;
    if n == 0 || k == 0 {
        return Ok(out);
    }
    let mean = reduce == Reduce::Mean;
    let extreme = matches!(reduce, Reduce::Max | Reduce::Min);
    let forced_tiling = g.policy().spmm_tiling;
    let pick = if extreme {
        Choice::Row
    } else {
        spmm_choice_for(g, k, 2)
    };
    match pick {
        Choice::Hp(npw) => {
            let prefix = format!("{name}_");
            hp_spmm(g, dev, &prefix, xv, offset, k, vv, mean, npw, &out)?;
            return Ok(out);
        }
        Choice::Narrow(kp) => {
            spmm_narrow_into(g, dev, name, xv, offset, (k, kp), vv, mean, &out)?;
            return Ok(out);
        }
        // Group (here only where its shape refused k) runs the row kernel.
        Choice::Row | Choice::Group => {}
    }
    let (vec, n_tiles, tile_major) = match forced_tiling {
        Some(t)
            if matches!(t.vec, 1 | 2 | 4 | 8)
                && k.is_multiple_of(t.vec)
                && offset.is_multiple_of(t.vec) =>
        {
            (t.vec, k.div_ceil(32 * t.vec), t.tile_major)
        }
        _ => half_tile_shape(k, offset, g.n_cols()),
    };
    let csr = g.cuda_csr()?;
    // Split rows meet through atomic adds, which only a sum (or mean) can take: max/min run
    // one warp per row (a null `items` pointer).
    let sched = if extreme { None } else { Some(Items::of(g)?) };
    g.record("spmm", Items::kernel_name(sched.as_ref()));
    let items = sched.as_ref().map_or(0, Items::len);
    let mode = match (extreme, arg.is_some()) {
        (false, _) => 0,
        (true, false) => 1,
        (true, true) => 2,
    };
    let func = crate::cuda::kernel(
        dev,
        &format!("spmm_{name}_v{vec}_m{mode}"),
        &crate::cuda::SPMM,
    )?;
    let cfg = row_kernel_cfg(sched.as_ref().map_or(n, Items::len), n_tiles)?;
    let (n_i, k_i, t_i) = (
        i32_arg("rows", n)?,
        i32_arg("k", k)?,
        i32_arg("tiles", n_tiles)?,
    );
    let sign: f32 = if reduce == Reduce::Min { -1.0 } else { 1.0 };
    let (weighted, mean_i, tm) = (vv.is_some() as i32, mean as i32, tile_major as i32);
    let (items_i, chunk_i) = (
        i32_arg("work items", items)?,
        sched.as_ref().map_or(Ok(1), Items::chunk_arg)?,
    );
    let mut b = func.builder();
    b.arg(&csr.indptr).arg(&csr.indices);
    match vv {
        Some(v) => b.arg(v),
        None => b.arg(&csr.indptr), // never read when `weighted` is 0
    };
    b.arg(xv).arg(&out);
    match arg {
        Some(a) => b.arg(a),
        None => b.arg(&csr.indptr), // never written unless mode 2
    };
    b.arg(&n_i)
        .arg(&k_i)
        .arg(&t_i)
        .arg(&weighted)
        .arg(&mean_i)
        .arg(&sign)
        .arg(&tm);
    match &sched {
        Some(items) => b.arg(items.buf()),
        None => b.arg(&0u64),
    };
    b.arg(&items_i).arg(&chunk_i);
    // SAFETY: as in `spmm_fwd`: x has n_cols * k halves (checked by the public functions),
    // vec-wide loads only where k and the offset are multiples of vec; out (and arg) have
    // n * k elements (out zeroed: split rows add into it); the schedule covers this CSR's rows.
    launched(unsafe { b.launch(cfg) }.map(|_| ()))?;
    Ok(out)
}
