//! Host side of the CUDA MaxK-GNN kernels (`cuda/maxk.cu`).

use crate::cuda::{elementwise_cfg, f32_view, f32_view_opt, launched, zeros, MAXK_PTX};
use crate::device_graph::DeviceGraph;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{
    CudaSlice, CudaView, LaunchArgs, LaunchConfig, PushKernelArg,
};
use candle_core::{CudaStorage, DType, Layout, Result, Shape};

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
/// sub-rows than occupancy affords, see docs/perf).
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
    let h = f32_view("maxk", s, l)?;
    let st = if d <= 256 {
        let out = zeros::<u8>(&dev, n * k)?;
        launch_select(&dev, &h, IdxOut::U8(&out), None, n, d, k)?;
        CudaStorage::wrap_cuda_slice(out, dev)
    } else {
        let out = zeros::<i16>(&dev, n * k)?;
        launch_select(&dev, &h, IdxOut::I16(&out), None, n, d, k)?;
        CudaStorage::wrap_cuda_slice(out, dev)
    };
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
    let h = f32_view("maxk", s, l)?;
    // SAFETY: the kernel keeps exactly k entries of every row, so all n * k values are written.
    let vals = unsafe { dev.alloc::<f32>((n * k).max(1))? };
    let idx = match index.dtype() {
        DType::U8 if d <= 256 => IdxOut::U8(index.as_cuda_slice::<u8>()?),
        DType::I16 if d > 256 => IdxOut::I16(index.as_cuda_slice::<i16>()?),
        o => candle_core::bail!("maxk: index dtype {o:?} does not fit width {d}"),
    };
    launch_select(&dev, &h, idx, Some(&vals), n, d, k)?;
    Ok((CudaStorage::wrap_cuda_slice(vals, dev), Shape::from((n, k))))
}

/// The index buffer a selection writes.
enum IdxOut<'a> {
    U8(&'a CudaSlice<u8>),
    I16(&'a CudaSlice<i16>),
}

fn launch_select(
    dev: &candle_core::CudaDevice,
    h: &CudaView<'_, f32>,
    idx: IdxOut<'_>,
    vals: Option<&CudaSlice<f32>>,
    n: usize,
    d: usize,
    k: usize,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    // Keys per lane: the power of two with 32 * v >= d.
    let v = d.div_ceil(32).next_power_of_two().max(1);
    let name = match idx {
        IdxOut::U8(_) => format!("maxk_select_u8_v{v}"),
        IdxOut::I16(_) => format!("maxk_select_i16_v{v}"),
    };
    let func = dev.get_or_load_custom_func(&name, "gnn_maxk", MAXK_PTX)?;
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
    // SAFETY: h holds n*d floats, the index (and values) n*k entries; one warp per row,
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
    let src = f32_view("cbsr", s, l)?;
    let out = zeros::<f32>(&dev, n * if scatter { d } else { k })?;
    let total = n * k;
    if total > 0 {
        let iv = IdxView::new(is, il)?;
        let name = format!(
            "cbsr_{}_{}",
            if scatter { "scatter" } else { "gather" },
            iv.suffix()
        );
        let func = dev.get_or_load_custom_func(&name, "gnn_maxk", MAXK_PTX)?;
        let (t, k_i, d_i) = (total as u64, k as i32, d as i32);
        let mut b = func.builder();
        b.arg(&src);
        iv.push(&mut b);
        b.arg(&out).arg(&t).arg(&k_i).arg(&d_i);
        // SAFETY: index entries are columns below d (written by maxk_select); sizes as above.
        launched(unsafe { b.launch(elementwise_cfg(total)) }.map(|_| ()))?;
    }
    let shape = if scatter {
        Shape::from((n, d))
    } else {
        Shape::from((n, k))
    };
    Ok((CudaStorage::wrap_cuda_slice(out, dev), shape))
}

/// SpGEMM (`backward == false`, output `[n_rows, D]`) or SSpMM (`[n_cols, k]`); both walk the
/// forward CSR through its row schedule (crate::schedule), one warp per work item with a
/// `D`-float shared row.
#[allow(clippy::too_many_arguments)]
pub(crate) fn row_kernel(
    g: &DeviceGraph,
    s: &CudaStorage,
    l: &Layout,
    is: &CudaStorage,
    il: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
    bias: Option<(&CudaStorage, &Layout)>,
    k: usize,
    d: usize,
    mean: bool,
    backward: bool,
) -> Result<(CudaStorage, Shape)> {
    let dev = s.device().clone();
    let csr = g.cuda_csr()?;
    let x = f32_view("spgemm", s, l)?;
    let vv = f32_view_opt("spgemm", vals)?;
    let bv = f32_view_opt("spgemm", bias)?;
    let n = g.n_rows();
    let (len, shape) = if backward {
        (g.n_cols() * k, Shape::from((g.n_cols(), k)))
    } else {
        (n * d, Shape::from((n, d)))
    };
    // Pre-filled: empty rows get no work item, and split rows add their groups atomically.
    // Zeros, or the bias in every row when it is fused (SpGEMM only).
    let out = match &bv {
        Some(b) if !backward && len > 0 => {
            // SAFETY: every element is written by bias_fill below before any other use.
            let out = unsafe { dev.alloc::<f32>(len)? };
            let func = dev.get_or_load_custom_func("bias_fill", "gnn_maxk", MAXK_PTX)?;
            let (t, d_i) = (len as u64, d as i32);
            let mut lb = func.builder();
            lb.arg(b).arg(&out).arg(&t).arg(&d_i);
            // SAFETY: bias holds d floats (checked by the caller), out len = n * d.
            launched(unsafe { lb.launch(elementwise_cfg(len)) }.map(|_| ()))?;
            out
        }
        _ => zeros::<f32>(&dev, len)?,
    };
    let (items, n_items, chunk) = g.cuda_schedule()?;
    if n_items > 0 && d > 0 {
        let vec = spgemm_vec(k, l.start_offset(), il.start_offset());
        let iv = IdxView::new(is, il)?;
        let name = if backward {
            format!("sspmm_{}", iv.suffix())
        } else {
            format!("spgemm_{}_v{vec}", iv.suffix())
        };
        let func = dev.get_or_load_custom_func(&name, "gnn_maxk", MAXK_PTX)?;
        let (items_i, chunk_i) = (
            i32_of("work items", n_items)?,
            i32_of("edge-group length", chunk)?,
        );
        let (d_i, k_i) = (d as i32, k as i32);
        let (w_i, m_i) = (vv.is_some() as i32, mean as i32);
        let mut b = func.builder();
        b.arg(&csr.indptr).arg(&csr.indices);
        match &vv {
            Some(v) => b.arg(v),
            None => b.arg(&x), // never read when unweighted
        };
        b.arg(&x);
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
            match &bv {
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
        // operand n_rows*d floats, values nnz floats; the schedule's n_items pairs name rows
        // below n_rows and edge ranges inside them; shared memory is WARPS*floats floats
        // (<= 48 KiB: per is capped by the budget).
        launched(unsafe { b.launch(rows_cfg(n_items, floats)) }.map(|_| ()))?;
    }
    Ok((CudaStorage::wrap_cuda_slice(out, dev), shape))
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
