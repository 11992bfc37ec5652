//! Host side of the CUDA GAT aggregation (`cuda/gat_aggregate.cu`).

use super::cpu::Heads;
use super::{layout, Span};
use crate::cuda::{f32_view, launched, u32_view, zeros, FloatView};
use crate::device_graph::DeviceGraph;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
use candle_core::{CudaStorage, Layout, Result, Shape, Storage, Tensor};

/// Warps per block of the kernels (`GAT_WARPS` in the `.cu`).
const GAT_WARPS: usize = 2;

/// `GatArgs` of the kernels, field for field.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct GatArgs {
    h: i32,
    f: i32,
    hf: i32,
    l: i32,
    lg: i32,
    vh: i32,
    slope: f32,
    drop: i32,
    seed: u64,
    threshold: u64,
    scale: f32,
}

// SAFETY: a plain #[repr(C)] struct of integers and floats, laid out as the kernels' GatArgs.
unsafe impl DeviceRepr for GatArgs {}

/// Whether the per-head score rows load as float4: four-head multiples in a buffer starting on
/// a 16-byte boundary (`offset` in floats; its segments start on multiples of the heads).
fn vector_heads(heads: usize, offset: usize) -> bool {
    heads.is_multiple_of(4) && offset.is_multiple_of(4)
}

/// A launch's kernel-name suffix and arguments for features of `x`'s storage type; `aligned`:
/// the features (and gradients) start on a multiple of the lanes' vector; `scores`: the score
/// buffer's offset.
fn launch_of(
    op: &str,
    p: &Heads,
    x: &FloatView,
    offsets: &[usize],
    scores: usize,
) -> Result<(String, GatArgs)> {
    let bytes = x.dtype().size_in_bytes();
    let Some((v, lg, l)) = layout(p.heads, p.width, bytes) else {
        candle_core::bail!(
            "{op}: no lane layout for {} heads of width {}",
            p.heads,
            p.width
        )
    };
    let hf = p.heads * p.width;
    let aligned = hf.is_multiple_of(v) && offsets.iter().all(|o| o.is_multiple_of(v));
    let (seed, threshold, scale, drop) = match p.mask {
        Some(m) => (m.seed, m.threshold, m.scale as f32, 1),
        None => (0, 0, 1.0, 0),
    };
    let args = GatArgs {
        h: p.heads as i32,
        f: p.width as i32,
        hf: hf as i32,
        l: l as i32,
        lg: lg as i32,
        vh: vector_heads(p.heads, scores) as i32,
        slope: p.slope as f32,
        drop,
        seed,
        threshold,
        scale,
    };
    let suffix = format!("{}v{v}{}", x.prefix(), if aligned { "_a" } else { "" });
    Ok((suffix, args))
}

/// One warp per row, [`GAT_WARPS`] warps per block (their batch stages are static shared
/// memory).
fn cfg(rows: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows.div_ceil(GAT_WARPS) as u32, 1, 1),
        block_dim: (32 * GAT_WARPS as u32, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A zeroed buffer of `len` elements of the storage type of `$view` (a [`FloatView`]) bound to
/// `$buf` while `$body` runs; the body's value is the buffer as a storage.
macro_rules! with_buffer {
    ($view:expr, $dev:expr, $len:expr, |$buf:ident| $body:block) => {{
        macro_rules! go {
            ($T:ty) => {{
                #[allow(unused_mut)]
                let mut $buf = zeros::<$T>(&$dev, $len)?;
                $body;
                CudaStorage::wrap_cuda_slice($buf, $dev.clone())
            }};
        }
        match $view {
            FloatView::F32(_) => go!(f32),
            FloatView::Bf16(_) => go!(half::bf16),
            FloatView::F16(_) => go!(half::f16),
        }
    }};
}

/// The kernels take row and column ids, and the launch's warp count, as `int`: graphs of more
/// rows or columns than `i32::MAX` are refused here, not wrapped.
fn check_int_ids(op: &str, ids: usize) -> Result<()> {
    if ids > i32::MAX as usize {
        candle_core::bail!(
            "{op}: {ids} rows or columns; the GAT kernels take at most {}",
            i32::MAX
        );
    }
    Ok(())
}

/// The output `[n_rows, heads * width]` in xs's storage type, and `lse` (`n_rows x heads`,
/// f32), from xs and the scores (`[2, m, heads]`, sides where `span` says).
pub(super) fn forward(
    g: &DeviceGraph,
    (x, xl): (&CudaStorage, &Layout),
    (s, sl): (&CudaStorage, &Layout),
    span: Span,
    p: &Heads,
) -> Result<(CudaStorage, Shape, CudaStorage)> {
    const OP: &str = "gat_aggregate";
    let dev = x.device().clone();
    let csr = g.cuda_csr()?;
    let (n, h, hf) = (g.n_rows(), p.heads, p.heads * p.width);
    check_int_ids(OP, g.n_rows().max(g.n_cols()))?;
    let xv = FloatView::of(OP, x, xl)?;
    let sv = f32_view(OP, s, sl)?;
    let mut lse = zeros::<f32>(&dev, n * h)?;
    // The non-empty rows, longest first (their outputs start zeroed: empty rows get no warp).
    let (order, items) = g.cuda_rows_longest_first()?;
    let out = with_buffer!(&xv, dev, n * hf, |out| {
        if items > 0 {
            let (suffix, args) = launch_of(OP, p, &xv, &[xl.start_offset()], sl.start_offset())?;
            let func = crate::cuda::kernel(
                &dev,
                &format!("gat_fwd_{suffix}"),
                &crate::cuda::GAT_AGGREGATE,
            )?;
            let (src, dst) = span.ranges(g.n_cols(), n, h);
            let (s_dst, s_src) = (sv.slice(dst), sv.slice(src));
            let items_i = items as i32;
            let mut b = func.builder();
            b.arg(&csr.indptr).arg(&csr.indices);
            xv.push(&mut b);
            b.arg(&s_dst)
                .arg(&s_src)
                .arg(&mut out)
                .arg(&mut lse)
                .arg(order)
                .arg(&items_i)
                .arg(&args);
            // SAFETY: xs holds n_cols * heads * width elements, the scores n_rows * heads +
            // n_cols * heads floats (built by `gat_aggregate`); columns < n_cols (validated on
            // upload); out and lse n_rows * heads * width and n_rows * heads; the order holds
            // `items` distinct rows < n_rows.
            launched(unsafe { b.launch(cfg(items)) }.map(|_| ()))?;
        }
    });
    Ok((
        out,
        Shape::from((n, hf)),
        CudaStorage::wrap_cuda_slice(lse, dev),
    ))
}

/// `dxs` (`[n_cols, heads * width]`, xs's storage type) and the scores' gradient (f32, the
/// scores' `[2, m, heads]` layout, zeros in the rows no pass writes), from xs, the scores,
/// dout, the forward's `lse` and output `out` (the rows pass takes D = <dout, out> from it);
/// `gt`/`perm` the graph's transpose.
pub(super) fn backward(
    (g, gt, perm, out_t, lse_t): (&DeviceGraph, &DeviceGraph, &Tensor, &Tensor, &Tensor),
    (x, xl): (&CudaStorage, &Layout),
    (s, sl): (&CudaStorage, &Layout),
    (d, dl): (&CudaStorage, &Layout),
    (span, p): (Span, &Heads),
) -> Result<(CudaStorage, Shape, CudaStorage)> {
    const OP: &str = "gat_aggregate backward";
    let dev = x.device().clone();
    let (csr, tcsr) = (g.cuda_csr()?, gt.cuda_csr()?);
    let (n, m, h, hf) = (g.n_rows(), g.n_cols(), p.heads, p.heads * p.width);
    check_int_ids(OP, n.max(m))?;
    let xv = FloatView::of(OP, x, xl)?;
    let dv = FloatView::of(OP, d, dl)?;
    if xv.dtype() != dv.dtype() {
        candle_core::bail!("{OP}: xs is {:?}, dout is {:?}", xv.dtype(), dv.dtype());
    }
    let sv = f32_view(OP, s, sl)?;
    let (os, ol) = out_t.storage_and_layout();
    let ov = match &*os {
        Storage::Cuda(os) => FloatView::of(OP, os, ol)?,
        _ => candle_core::bail!("{OP}: the forward's output is not on the GPU"),
    };
    if ov.dtype() != xv.dtype() || ol.shape().elem_count() != n * hf {
        candle_core::bail!(
            "{OP}: the output is {:?} {:?}, xs {:?} with {n} x {hf} outputs",
            ov.dtype(),
            ol.shape(),
            xv.dtype()
        );
    }
    let (ps, pl) = perm.storage_and_layout();
    let pv = match &*ps {
        Storage::Cuda(ps) => u32_view(OP, ps, pl)?,
        _ => candle_core::bail!("{OP}: the transpose's permutation is not on the GPU"),
    };
    let (ls, ll) = lse_t.storage_and_layout();
    let lse = match &*ls {
        Storage::Cuda(ls) => f32_view(OP, ls, ll)?,
        _ => candle_core::bail!("{OP}: the forward's lse is not on the GPU"),
    };
    if ll.shape().elem_count() != n * h {
        candle_core::bail!("{OP}: lse has {:?}, expected {n} x {h}", ll.shape());
    }
    let (src, dst) = span.ranges(m, n, h);
    let mut ds = zeros::<f32>(&dev, span.len(h))?;
    let (s_dst, s_src) = (sv.slice(dst.clone()), sv.slice(src.clone()));
    // D per row and head: written by the rows pass, read by the columns pass.
    let mut dterm = zeros::<f32>(&dev, n * h)?;
    let (suffix, args) = launch_of(
        OP,
        p,
        &xv,
        &[xl.start_offset(), dl.start_offset(), ol.start_offset()],
        // The score rows (and lse, its own buffer) load as float4 only where both start on a
        // 16-byte boundary.
        if ll.start_offset() % 4 == 0 {
            sl.start_offset()
        } else {
            1
        },
    )?;
    let dxs = with_buffer!(&xv, dev, m * hf, |dxs| {
        // The sources' rows come first (src.end <= m * h <= dst.start).
        let (mut lo, mut hi) = ds.split_at_mut(dst.start);
        let (mut ds_src, _) = lo.split_at_mut(src.end);
        let (mut ds_dst, _) = hi.split_at_mut(n * h);
        let (order, items) = g.cuda_rows_longest_first()?;
        if items > 0 {
            let f = crate::cuda::kernel(
                &dev,
                &format!("gat_bwd_rows_{suffix}"),
                &crate::cuda::GAT_AGGREGATE,
            )?;
            let items_i = items as i32;
            let mut b = f.builder();
            b.arg(&csr.indptr).arg(&csr.indices);
            xv.push(&mut b);
            b.arg(&s_dst).arg(&s_src).arg(&lse);
            ov.push(&mut b);
            b.arg(&mut dterm);
            dv.push(&mut b);
            b.arg(&mut ds_dst).arg(order).arg(&items_i).arg(&args);
            // SAFETY: as the forward's, plus out and dout n_rows * heads * width elements
            // (checked above and by `gat_aggregate`), dterm and ds_dst n_rows * heads. An
            // empty row's dterm stays zero: no edge reads it.
            launched(unsafe { b.launch(cfg(items)) }.map(|_| ()))?;
        }
        let (t_order, t_items) = gt.cuda_rows_longest_first()?;
        if t_items > 0 {
            let f = crate::cuda::kernel(
                &dev,
                &format!("gat_bwd_cols_{suffix}"),
                &crate::cuda::GAT_AGGREGATE,
            )?;
            let t_items_i = t_items as i32;
            let mut b = f.builder();
            b.arg(&tcsr.indptr).arg(&tcsr.indices).arg(&pv);
            xv.push(&mut b);
            b.arg(&s_dst).arg(&s_src).arg(&lse).arg(&dterm);
            dv.push(&mut b);
            b.arg(&mut dxs)
                .arg(&mut ds_src)
                .arg(t_order)
                .arg(&t_items_i)
                .arg(&args);
            // SAFETY: the transpose has n_cols rows whose entries name rows < n_rows and
            // positions < nnz (built from the graph); dxs holds n_cols * heads * width elements,
            // ds_src n_cols * heads; the order holds `t_items` distinct columns < n_cols.
            launched(unsafe { b.launch(cfg(t_items)) }.map(|_| ()))?;
        }
    });
    Ok((
        dxs,
        Shape::from((m, hf)),
        CudaStorage::wrap_cuda_slice(ds, dev),
    ))
}
