//! Host side of the CUDA MaxK-GNN kernels (`cuda/maxk.cu`).
//!
//! Values (features, CBSR data, gradients) are f32, bf16 or f16; edge values and the bias are
//! read in f32, and the SpGEMM / SSpMM accumulate in f32 and narrow their output to the
//! values' type once.

use crate::cuda::{elementwise_cfg, f32_view, f32_view_opt, launched, zeros};
use crate::device_graph::DeviceGraph;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{
    CudaSlice, CudaView, DeviceRepr, LaunchArgs, LaunchConfig, PushKernelArg,
};
use candle_core::{CudaStorage, DType, Layout, Result, Shape};

/// Runs `$body` with `$T` the Rust element type of the value dtype `$dt` (f32, bf16, f16).
macro_rules! with_value_type {
    ($op:expr, $dt:expr, |$T:ident| $body:expr) => {
        match $dt {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            DType::F16 => {
                type $T = half::f16;
                $body
            }
            o => candle_core::bail!("{}: the CUDA kernels take f32, bf16 or f16, got {o:?}", $op),
        }
    };
}

/// Kernel-name suffix of a value dtype: "f32", "bf16" or "f16".
fn kernel_dtype(dt: DType) -> &'static str {
    match dt {
        DType::BF16 => "bf16",
        DType::F16 => "f16",
        _ => "f32",
    }
}

/// Kernel-name prefix of a value dtype: "" for f32, "bf16_" / "f16_" for half precision.
fn prefix(dt: DType) -> &'static str {
    match dt {
        DType::BF16 => "bf16_",
        DType::F16 => "f16_",
        _ => "",
    }
}

/// The typed view of a contiguous storage of values from its layout's offset.
fn value_view<'a, T: candle_core::cuda_backend::CudaDType>(
    op: &str,
    s: &'a CudaStorage,
    l: &Layout,
) -> Result<CudaView<'a, T>> {
    if !l.is_contiguous() {
        candle_core::bail!("{op}: CUDA input must be contiguous");
    }
    Ok(s.as_cuda_slice::<T>()?.slice(l.start_offset()..))
}

/// Warps per block of the row kernels.
const WARPS: usize = 4;

/// Shared-memory budget of one block of the row kernels (the default limit, no opt-in).
const SHARED_BYTES: usize = 48 * 1024;
/// At most this many SpGEMM sub-rows per warp (more costs occupancy: 8 rows of D = 256
/// floats are 8 KiB per warp).
const MAX_PER: usize = 8;

/// SpGEMM sub-rows per warp for `vec` slots per lane: edges accumulated side by side, each
/// into its own `D`-float row (`32 / (k / vec)` when an edge needs at most 32 lanes, capped
/// by [`MAX_PER`] and the shared-memory budget).
fn spgemm_per(k: usize, d: usize, vec: usize) -> usize {
    let lanes = k / vec;
    if lanes > 32 || lanes == 0 {
        1
    } else {
        (32 / lanes)
            .min(MAX_PER)
            .min(SHARED_BYTES / (WARPS * d.max(1) * 4))
            .max(1)
    }
}

/// SpGEMM slots per lane: 4 (16-byte loads) from k = 32 on, when k and the operands' offsets
/// allow; below that one (measured on the H100: at k = 8 and 16 the 4-slot lanes need more
/// sub-rows than occupancy affords, see c6f0242:docs/perf).
fn spgemm_vec(k: usize, data_offset: usize, index_offset: usize) -> usize {
    if k >= 32
        && k.is_multiple_of(4)
        && data_offset.is_multiple_of(4)
        && index_offset.is_multiple_of(4)
    {
        4
    } else {
        1
    }
}

fn rows_cfg(n: usize, shared_floats: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(WARPS).max(1) as u32, 1, 1),
        block_dim: (32 * WARPS as u32, 1, 1),
        shared_mem_bytes: (WARPS * shared_floats * 4) as u32,
    }
}

/// A CBSR index on the device, of either index type, as a kernel argument.
enum IdxView<'a> {
    U8(CudaView<'a, u8>),
    I16(CudaView<'a, i16>),
}

impl<'a> IdxView<'a> {
    fn new(s: &'a CudaStorage, l: &Layout) -> Result<Self> {
        if !l.is_contiguous() {
            candle_core::bail!("maxk: CBSR index must be contiguous");
        }
        let from = l.start_offset()..;
        Ok(match s.dtype() {
            DType::U8 => Self::U8(s.as_cuda_slice::<u8>()?.slice(from)),
            DType::I16 => Self::I16(s.as_cuda_slice::<i16>()?.slice(from)),
            o => candle_core::bail!("maxk: index dtype {o:?} (u8 or i16 expected)"),
        })
    }

    /// Kernel-name suffix of the index type.
    fn suffix(&self) -> &'static str {
        match self {
            Self::U8(_) => "u8",
            Self::I16(_) => "i16",
        }
    }

    fn push<'b>(&'b self, b: &mut LaunchArgs<'b>) {
        match self {
            Self::U8(v) => b.arg(v),
            Self::I16(v) => b.arg(v),
        };
    }
}

fn i32_of(what: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| candle_core::Error::Msg(format!("maxk: {what} = {v} too large")))
}

/// MaxK selection: CBSR index `[N, k]`.
pub(crate) fn select(s: &CudaStorage, l: &Layout, k: usize) -> Result<(CudaStorage, Shape)> {
    let (n, d) = l.shape().dims2()?;
    let dev = s.device().clone();
    let st = with_value_type!("maxk", s.dtype(), |T| {
        let h = value_view::<T>("maxk", s, l)?;
        let none: Option<&CudaSlice<T>> = None;
        if d <= 256 {
            let out = zeros::<u8>(&dev, n * k)?;
            launch_select(&dev, s.dtype(), &h, IdxOut::U8(&out), none, n, d, k)?;
            CudaStorage::wrap_cuda_slice(out, dev)
        } else {
            let out = zeros::<i16>(&dev, n * k)?;
            launch_select(&dev, s.dtype(), &h, IdxOut::I16(&out), none, n, d, k)?;
            CudaStorage::wrap_cuda_slice(out, dev)
        }
    });
    Ok((st, Shape::from((n, k))))
}

/// MaxK selection with the CBSR gather fused: writes the columns into `index` (a fresh
/// `[N, k]` buffer of the index dtype, owned by the caller's op) and returns the values
/// `[N, k]`. One pass over `h` instead of a selection pass plus a gather that reads `h` again.
pub(crate) fn select_fused(
    s: &CudaStorage,
    l: &Layout,
    index: &CudaStorage,
    il: &Layout,
    k: usize,
) -> Result<(CudaStorage, Shape)> {
    let (n, d) = l.shape().dims2()?;
    if il.shape().dims() != [n, k] || !il.is_contiguous() || il.start_offset() != 0 {
        candle_core::bail!(
            "maxk: index buffer {:?} must be a whole contiguous [{n}, {k}]",
            il.shape().dims()
        );
    }
    let dev = s.device().clone();
    let idx = match index.dtype() {
        DType::U8 if d <= 256 => IdxOut::U8(index.as_cuda_slice::<u8>()?),
        DType::I16 if d > 256 => IdxOut::I16(index.as_cuda_slice::<i16>()?),
        o => candle_core::bail!("maxk: index dtype {o:?} does not fit width {d}"),
    };
    let st = with_value_type!("maxk", s.dtype(), |T| {
        let h = value_view::<T>("maxk", s, l)?;
        // SAFETY: the kernel keeps exactly k entries of every row, so all n * k values are
        // written.
        let vals = unsafe { dev.alloc::<T>((n * k).max(1))? };
        launch_select(&dev, s.dtype(), &h, idx, Some(&vals), n, d, k)?;
        CudaStorage::wrap_cuda_slice(vals, dev)
    });
    Ok((st, Shape::from((n, k))))
}

/// The index buffer a selection writes.
enum IdxOut<'a> {
    U8(&'a CudaSlice<u8>),
    I16(&'a CudaSlice<i16>),
}

#[allow(clippy::too_many_arguments)]
fn launch_select<T: DeviceRepr>(
    dev: &candle_core::CudaDevice,
    dt: DType,
    h: &CudaView<'_, T>,
    idx: IdxOut<'_>,
    vals: Option<&CudaSlice<T>>,
    n: usize,
    d: usize,
    k: usize,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    // Keys per lane: the power of two with 32 * v >= d.
    let v = d.div_ceil(32).next_power_of_two().max(1);
    let ix = match idx {
        IdxOut::U8(_) => "u8",
        IdxOut::I16(_) => "i16",
    };
    let name = format!("maxk_select_{}{ix}_v{v}", prefix(dt));
    let func = crate::cuda::kernel(dev, &name, &crate::cuda::MAXK)?;
    let (n_i, d_i, k_i) = (i32_of("rows", n)?, d as i32, k as i32);
    let mut b = func.builder();
    b.arg(h);
    match &idx {
        IdxOut::U8(o) => b.arg(*o),
        IdxOut::I16(o) => b.arg(*o),
    };
    match vals {
        Some(o) => b.arg(o),
        None => b.arg(&0u64), // null: indices only
    };
    b.arg(&n_i).arg(&d_i).arg(&k_i);
    // SAFETY: h holds n*d values, the index (and values) n*k entries; one warp per row,
    // k <= d <= 1024 (checked by maxk()).
    launched(unsafe { b.launch(rows_cfg(n, 0)) }.map(|_| ()))
}

/// Gather (`scatter == false`: `[N, k]` from `[N, D]`) or scatter (`[N, D]` from `[N, k]`).
pub(crate) fn move_entries(
    s: &CudaStorage,
    l: &Layout,
    is: &CudaStorage,
    il: &Layout,
    k: usize,
    d: usize,
    scatter: bool,
) -> Result<(CudaStorage, Shape)> {
    let (n, _) = l.shape().dims2()?;
    let dev = s.device().clone();
    let dt = s.dtype();
    with_value_type!("cbsr", dt, |T| {
        let src = value_view::<T>("cbsr", s, l)?;
        let out = zeros::<T>(&dev, n * if scatter { d } else { k })?;
        move_into(&dev, dt, &src, &out, is, il, (n, k, d), scatter)?;
        let shape = if scatter {
            Shape::from((n, d))
        } else {
            Shape::from((n, k))
        };
        Ok((CudaStorage::wrap_cuda_slice(out, dev), shape))
    })
}

/// Launches the gather or scatter kernel of [`move_entries`] into `out`.
#[allow(clippy::too_many_arguments)]
fn move_into<T: DeviceRepr>(
    dev: &candle_core::CudaDevice,
    dt: DType,
    src: &CudaView<'_, T>,
    out: &CudaSlice<T>,
    is: &CudaStorage,
    il: &Layout,
    (n, k, d): (usize, usize, usize),
    scatter: bool,
) -> Result<()> {
    let total = n * k;
    if total > 0 {
        let iv = IdxView::new(is, il)?;
        let name = format!(
            "cbsr_{}_{}{}",
            if scatter { "scatter" } else { "gather" },
            prefix(dt),
            iv.suffix()
        );
        let func = crate::cuda::kernel(dev, &name, &crate::cuda::MAXK)?;
        let (t, k_i, d_i) = (total as u64, k as i32, d as i32);
        let mut b = func.builder();
        b.arg(src);
        iv.push(&mut b);
        b.arg(out).arg(&t).arg(&k_i).arg(&d_i);
        // SAFETY: index entries are columns below d (written by maxk_select); src and out
        // hold n*k and n*d values (gather) or the reverse (scatter).
        launched(unsafe { b.launch(elementwise_cfg(total)) }.map(|_| ()))?;
    }
    Ok(())
}

/// SpGEMM (`backward == false`, output `[n_rows, D]`) or SSpMM (`[n_cols, k]`); both walk the
/// forward CSR through its row schedule (crate::schedule), one warp per work item with a
/// `D`-float shared row. `s` (CBSR data, or the dense gradient) holds f32, bf16 or f16 values;
/// edge values and the bias are f32 (a half-precision bias is widened here, `D` values). The
/// kernels accumulate into an f32 output, narrowed to `s`'s dtype at the end.
#[allow(clippy::too_many_arguments)]
pub(crate) fn row_kernel(
    g: &DeviceGraph,
    s: &CudaStorage,
    l: &Layout,
    is: &CudaStorage,
    il: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
    bias: Option<(&CudaStorage, &Layout)>,
    residual: Option<(&CudaStorage, &Layout)>,
    k: usize,
    d: usize,
    mean: bool,
    backward: bool,
) -> Result<(CudaStorage, Shape)> {
    let dev = s.device().clone();
    let dt = s.dtype();
    let op = if backward { "sspmm" } else { "spgemm" };
    if residual.is_some() && (backward || bias.is_none()) {
        candle_core::bail!("{op}: a fused residual needs the SpGEMM with a fused bias");
    }
    let vv = f32_view_opt(op, vals)?;
    let wide_bias = match bias {
        Some((b, bl)) if b.dtype() != DType::F32 => {
            if !bl.is_contiguous() {
                candle_core::bail!("{op}: CUDA input must be contiguous");
            }
            Some(b.to_dtype(bl, DType::F32)?)
        }
        _ => None,
    };
    let bv = match (&wide_bias, bias) {
        (Some(w), _) => Some(f32_view(op, w, &Layout::contiguous(d))?),
        (None, b) => f32_view_opt(op, b)?,
    };
    let shape = if backward {
        Shape::from((g.n_cols(), k))
    } else {
        Shape::from((g.n_rows(), d))
    };
    let out = with_value_type!(op, dt, |T| {
        let x = value_view::<T>(op, s, l)?;
        let shapes = RowShapes {
            k,
            d,
            data_offset: l.start_offset(),
            mean,
            backward,
        };
        let rv = match residual {
            Some((r, rl)) => Some(value_view::<T>(op, r, rl)?),
            None => None,
        };
        row_kernel_into(
            g,
            &dev,
            dt,
            &x,
            is,
            il,
            vv.as_ref(),
            bv.as_ref(),
            rv.as_ref(),
            shapes,
        )?
    });
    let out = CudaStorage::wrap_cuda_slice(out, dev);
    if dt == DType::F32 {
        Ok((out, shape))
    } else {
        Ok((out.to_dtype(&Layout::contiguous(&shape), dt)?, shape))
    }
}

/// Sizes and mode of one [`row_kernel`] launch.
struct RowShapes {
    k: usize,
    d: usize,
    data_offset: usize,
    mean: bool,
    backward: bool,
}

/// Runs the SpGEMM or SSpMM kernel for values of type `T` (`dt`) into a new f32 buffer.
#[allow(clippy::too_many_arguments)]
fn row_kernel_into<T: DeviceRepr>(
    g: &DeviceGraph,
    dev: &candle_core::CudaDevice,
    dt: DType,
    x: &CudaView<'_, T>,
    is: &CudaStorage,
    il: &Layout,
    vv: Option<&CudaView<'_, f32>>,
    bv: Option<&CudaView<'_, f32>>,
    rv: Option<&CudaView<'_, T>>,
    RowShapes {
        k,
        d,
        data_offset,
        mean,
        backward,
    }: RowShapes,
) -> Result<CudaSlice<f32>> {
    let csr = g.cuda_csr()?;
    let n = g.n_rows();
    let len = if backward { g.n_cols() * k } else { n * d };
    // Pre-filled: empty rows get no work item, and split rows add their groups atomically.
    // Zeros, or the bias in every row when it is fused (SpGEMM only; with a fused residual,
    // bias + residual). Unsplit rows add onto the pre-filled value at the write-back.
    let out = match bv {
        Some(b) if !backward && len > 0 => {
            // SAFETY: every element is written by the fill below before any other use.
            let out = unsafe { dev.alloc::<f32>(len)? };
            let (t, d_i) = (len as u64, d as i32);
            match rv {
                Some(r) => {
                    let name = format!("bias_residual_fill_{}", kernel_dtype(dt));
                    let func = crate::cuda::kernel(dev, &name, &crate::cuda::MAXK)?;
                    let mut lb = func.builder();
                    lb.arg(b).arg(r).arg(&out).arg(&t).arg(&d_i);
                    // SAFETY: bias holds d floats, the residual n * d values (checked by the
                    // caller), out len = n * d.
                    launched(unsafe { lb.launch(elementwise_cfg(len)) }.map(|_| ()))?;
                }
                None => {
                    let func = crate::cuda::kernel(dev, "bias_fill", &crate::cuda::MAXK)?;
                    let mut lb = func.builder();
                    lb.arg(b).arg(&out).arg(&t).arg(&d_i);
                    // SAFETY: bias holds d floats (checked by the caller), out len = n * d.
                    launched(unsafe { lb.launch(elementwise_cfg(len)) }.map(|_| ()))?;
                }
            }
            out
        }
        _ => zeros::<f32>(dev, len)?,
    };
    let (items, n_items, chunk) = g.cuda_schedule()?;
    if n_items > 0 && d > 0 {
        let vec = spgemm_vec(k, data_offset, il.start_offset());
        let iv = IdxView::new(is, il)?;
        let name = if backward {
            format!("sspmm_{}{}", prefix(dt), iv.suffix())
        } else {
            format!("spgemm_{}{}_v{vec}", prefix(dt), iv.suffix())
        };
        let func = crate::cuda::kernel(dev, &name, &crate::cuda::MAXK)?;
        let (items_i, chunk_i) = (
            i32_of("work items", n_items)?,
            i32_of("edge-group length", chunk)?,
        );
        let (d_i, k_i) = (d as i32, k as i32);
        let (w_i, m_i) = (vv.is_some() as i32, mean as i32);
        let mut b = func.builder();
        b.arg(&csr.indptr).arg(&csr.indices);
        match vv {
            Some(v) => b.arg(v),
            None => b.arg(&out), // never read when unweighted
        };
        b.arg(x);
        iv.push(&mut b);
        // SSpMM: 4-slot vector atomics when aligned; SpGEMM: sub-rows per warp.
        let extra = if backward {
            (k.is_multiple_of(4) && il.start_offset().is_multiple_of(4)) as i32
        } else {
            spgemm_per(k, d, vec) as i32
        };
        let floats = if backward { d } else { extra as usize * d };
        b.arg(&out);
        if !backward {
            match bv {
                Some(bias) => b.arg(bias),
                None => b.arg(&0u64), // null: no bias
            };
        }
        b.arg(items)
            .arg(&items_i)
            .arg(&chunk_i)
            .arg(&d_i)
            .arg(&k_i)
            .arg(&extra)
            .arg(&w_i)
            .arg(&m_i);
        // SAFETY: CBSR data/index hold n_cols*k entries with columns below d, the dense
        // operand n_rows*d values, edge values nnz floats; the schedule's n_items pairs name
        // rows below n_rows and edge ranges inside them; shared memory is WARPS*floats floats
        // (<= 48 KiB: per is capped by the budget).
        launched(unsafe { b.launch(rows_cfg(n_items, floats)) }.map(|_| ()))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{spgemm_per, spgemm_vec, MAX_PER, SHARED_BYTES, WARPS};

    #[test]
    fn spgemm_sub_rows_fit_shared_memory() {
        for d in 1usize..=1024 {
            for k in 1..=d.min(200) {
                let vec = spgemm_vec(k, 0, 0);
                assert!(k.is_multiple_of(vec));
                let per = spgemm_per(k, d, vec);
                let lanes = (k / vec).min(32);
                assert!(per >= 1 && per * lanes <= 32, "d {d} k {k}");
                assert!(
                    WARPS * per * d * 4 <= SHARED_BYTES && per <= MAX_PER,
                    "d {d} k {k}"
                );
            }
        }
        assert_eq!((spgemm_vec(8, 0, 0), spgemm_per(8, 256, 1)), (1, 4));
        assert_eq!((spgemm_vec(32, 0, 0), spgemm_per(32, 256, 4)), (4, 4));
        assert_eq!(spgemm_vec(32, 2, 0), 1);
        assert_eq!(spgemm_per(1, 1024, 1), 3);
    }
}
