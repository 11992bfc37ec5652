//! GAT's whole aggregation on the graph itself: `out[i, h] = sum_j alpha_ij,h xs[j, h]` with
//! `alpha = edge_softmax(LeakyReLU(s_dst[i, h] + s_src[j, h]))` per row and head, attention
//! dropout included. It replaces [`crate::gat_attention`] + dropout + [`crate::spmm_weighted`]
//! over a graph copied once per head (`heads` times the edges, `width`-wide gathers), which
//! stores alpha and its dropout per edge and head; here, as in FlashAttention, only each row's
//! `log sum exp` per head is kept (written by the forward itself, an online softmax) and alpha
//! is recomputed where it is read. Every edge's neighbour row is gathered once per pass with
//! all its heads.
//!
//! Backward, with `D[i, h] = <dout[i, h], out[i, h]>` (the softmax's row term, FlashAttention's
//! trick, which holds with dropout too): a rows pass that computes D from the held output and
//! `ds_dst`, and one over the cached transpose for `dxs` and `ds_src`; no atomics,
//! deterministic.
//!
//! The fused kernels keep a row's columns in one group of lanes: `heads * width <= 256`, heads
//! in {1, 2, 4, 8}, and with several heads a power-of-two number of lanes per head (`layout`).
//! [`gat_aggregate_supports`] says whether a shape fits; callers keep the head-expanded chain
//! for the others.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use crate::ops::dropout::{check_probability, threshold};
use crate::ops::{check_device, check_float_or_half, cpu_slice};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Layout, Shape, Tensor};
use cpu::{Heads, Mask, Saved};
use std::sync::Mutex;

/// The CUDA kernels' lane layout for elements of `bytes` bytes: `(v, lg, l)`, `v` columns per
/// lane (16 bytes, or 32 for f32 rows over 128 columns, halved until a head's width is a
/// multiple), `2^lg` lanes per edge group (the row's columns, rounded up to a power of two; at
/// most the warp) and `l` lanes per head in a group (the whole group with one head; a power of
/// two). `None` for shapes the kernels do not take.
pub(crate) fn layout(heads: usize, width: usize, bytes: usize) -> Option<(usize, u32, usize)> {
    let hf = heads * width;
    if !matches!(heads, 1 | 2 | 4 | 8) || width == 0 || hf > 256 {
        return None;
    }
    let mut v = 16 / bytes;
    if hf > 32 * v {
        v = 8;
    }
    if heads > 1 {
        while !width.is_multiple_of(v) {
            v /= 2;
        }
    }
    let g = hf.div_ceil(v).next_power_of_two();
    let l = if heads == 1 { g } else { width / v };
    (g <= 32 && l.is_power_of_two()).then_some((v, g.trailing_zeros(), l))
}

/// Whether [`gat_aggregate`] runs `heads` heads of width `width` (see the module docs), in every
/// storage type.
pub fn gat_aggregate_supports(heads: usize, width: usize) -> bool {
    layout(heads, width, 4).is_some() && layout(heads, width, 2).is_some()
}

/// GAT's aggregation `[n_rows, heads * width]` of `xs` (`[n_cols, heads * width]`: f32 or f64
/// on the CPU, f32, bf16 or f16 on a GPU) under the per-head node scores `scores` (`[2, m,
/// heads]`, f32 on a GPU, f32 or f64 on the CPU; as [`crate::gat_scores`] gives them): side 0
/// holds every column's source score in its first `n_cols` rows, side 1 row `i`'s
/// destination score at row `dst + i` (on a partitioned graph, the first own column). Also
/// LeakyReLU slope `negative_slope` (positive) and, in training, attention dropout `(p,
/// seed)`: edge `p`, head `h` draws element `p * heads + h` of [`crate::dropout`]'s mask with
/// that seed. Differentiable in `xs` and `scores` (the rows it reads; zeros elsewhere), so
/// the scores' gradient arrives in their own layout, with no copies on the way.
pub fn gat_aggregate(
    g: &DeviceGraph,
    xs: &Tensor,
    scores: &Tensor,
    dst: usize,
    heads: usize,
    negative_slope: f64,
    dropout: Option<(f32, u64)>,
) -> Result<Tensor> {
    const OP: &str = "gat_aggregate";
    let (cols, hf) = xs.dims2().map_err(|_| {
        Error::shape(
            OP,
            format!("xs is {:?}, expected [n_cols, heads * width]", xs.dims()),
        )
    })?;
    if heads == 0 || hf % heads != 0 {
        return Err(Error::shape(
            OP,
            format!("xs has {hf} columns, not a multiple of {heads} heads"),
        ));
    }
    let width = hf / heads;
    if !gat_aggregate_supports(heads, width) {
        return Err(Error::unsupported(
            OP,
            format!(
                "{heads} heads of width {width}: the fused kernels take 1, 2, 4 or 8 heads, at \
                 most 256 columns and a power-of-two lanes per head (gat_aggregate_supports)"
            ),
        ));
    }
    check_device(OP, g, xs)?;
    check_float_or_half(OP, "xs", xs)?;
    if xs.dtype() == DType::F64 && g.device().is_cuda() {
        return Err(Error::dtype(
            OP,
            "xs is F64: the CUDA kernels take f32, bf16 or f16 features",
        ));
    }
    if cols != g.n_cols() {
        return Err(Error::shape(
            OP,
            format!("xs has {cols} rows, the graph {} columns", g.n_cols()),
        ));
    }
    check_device(OP, g, scores)?;
    let (n, m) = (g.n_rows(), scores.dims().get(1).copied().unwrap_or(0));
    if scores.dims() != [2, m, heads] || m < cols || m < dst.saturating_add(n) {
        return Err(Error::shape(
            OP,
            format!(
                "scores are {:?}, expected [2, m, {heads}] with m >= {cols} columns and m >= \
                 dst {dst} + {n} rows",
                scores.dims()
            ),
        ));
    }
    if !crate::ops::is_f32_or_cpu_f64(scores) {
        return Err(Error::dtype(
            OP,
            format!("scores are {:?}: f32 (f64 also on the CPU)", scores.dtype()),
        ));
    }
    if !(negative_slope > 0.0 && negative_slope.is_finite()) {
        return Err(Error::invalid(
            OP,
            format!("negative_slope {negative_slope} must be positive and finite"),
        ));
    }
    if let Some((p, _)) = dropout {
        check_probability(OP, p)?;
    }
    let plan = Heads {
        heads,
        width,
        slope: negative_slope,
        mask: dropout.filter(|&(p, _)| p > 0.0).map(|(p, seed)| Mask {
            seed,
            threshold: threshold(p),
            scale: 1.0 / (1.0 - p as f64),
        }),
    };
    let (xd, sc) = (xs.detach().contiguous()?, scores.detach().contiguous()?);
    let span = Span { m, dst };
    let op = GatOp {
        g: g.clone(),
        plan,
        span,
        lse: Side::default(),
    };
    // One pass: the output (xs's dtype) and each row's log-sum-exp per head (the backward's
    // alpha, the scores' dtype).
    let out = xd.apply_op2_no_bwd(&sc, &op)?;
    let lse = op.lse.take("gat_aggregate")?;
    let saved = out.clone();
    crate::attach_backward(
        out,
        &[xs, scores],
        Box::new(move |_, dy| {
            let _timer = op.g.backward_timer();
            let sdt = sc.dtype();
            let (gt, perm) = op.g.transpose()?;
            let bwd = GatBwdOp {
                g: op.g.clone(),
                gt,
                perm,
                out: saved.clone(),
                lse: lse.clone(),
                plan: op.plan,
                span,
                ds: Side::default(),
            };
            let dxs = xd.apply_op3_no_bwd(&sc, &dy.contiguous()?, &bwd)?;
            let ds = bwd.ds.take("gat_aggregate backward")?;
            Ok(vec![
                Some(dxs),
                Some(ds.reshape((2, span.m, op.plan.heads))?.to_dtype(sdt)?),
            ])
        }),
    )
}

/// [`gat_aggregate`]'s scores from separate source (`[n_cols, heads]`) and destination
/// (`[n_rows, heads]`) scores, for `dst = 0`: both sides padded with zero rows to the longer
/// one and stacked (a copy, differentiable; [`crate::gat_scores`] gives the packed form
/// directly).
pub fn gat_score_pair(s_src: &Tensor, s_dst: &Tensor) -> Result<Tensor> {
    let (cols, rows) = (s_src.dim(0)?, s_dst.dim(0)?);
    let m = cols.max(rows);
    Ok(Tensor::stack(
        &[
            &s_src.pad_with_zeros(0, 0, m - cols)?,
            &s_dst.pad_with_zeros(0, 0, m - rows)?,
        ],
        0,
    )?)
}

/// Where the two score sides sit in the `[2, m, heads]` scores: side 0 (sources) from row 0,
/// side 1 (destinations) from row `dst`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    m: usize,
    dst: usize,
}

impl Span {
    /// Element ranges of the sources (`cols` rows) and the destinations (`rows` rows) in the
    /// flat scores, `heads` per row.
    pub(crate) fn ranges(
        &self,
        cols: usize,
        rows: usize,
        heads: usize,
    ) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let d0 = (self.m + self.dst) * heads;
        (0..cols * heads, d0..d0 + rows * heads)
    }

    /// Elements of the whole scores tensor.
    pub(crate) fn len(&self, heads: usize) -> usize {
        2 * self.m * heads
    }
}

/// A second result of an op (candle's custom ops return one storage): set by the op's
/// forward, taken by its caller right after.
#[derive(Default)]
struct Side(Mutex<Option<Tensor>>);

impl Side {
    fn put(&self, t: Tensor) -> candle_core::Result<()> {
        *self
            .0
            .lock()
            .map_err(|_| candle_core::Error::Msg("gat_aggregate: lock poisoned".into()))? = Some(t);
        Ok(())
    }

    fn take(&self, op: &'static str) -> Result<Tensor> {
        self.0
            .lock()
            .map_err(|_| Error::invalid(op, "lock poisoned"))?
            .take()
            .ok_or_else(|| Error::invalid(op, "the op's second result was not set"))
    }
}

/// `storage` (`len` elements) as a tensor outside the autograd graph.
fn side_tensor(storage: candle_core::Storage, len: usize) -> Tensor {
    Tensor::from_storage(storage, len, candle_core::op::BackpropOp::none(), false)
}

/// The forward: the output `[n_rows, heads * width]` (xs's dtype) from xs and the scores
/// (`[2, m, heads]`, [`Span`]), and `lse` (`n_rows * heads`, the scores' dtype) in its side
/// result.
struct GatOp {
    g: DeviceGraph,
    plan: Heads,
    span: Span,
    lse: Side,
}

/// A CPU storage's contiguous values as f64.
pub(crate) fn f64s(op: &'static str, s: &CpuStorage, l: &Layout) -> candle_core::Result<Vec<f64>> {
    Ok(match s {
        CpuStorage::F32(_) => cpu_slice::<f32>(op, s, l)?
            .iter()
            .map(|&v| v as f64)
            .collect(),
        CpuStorage::F64(_) => cpu_slice::<f64>(op, s, l)?.to_vec(),
        o => candle_core::bail!("{op}: unsupported dtype {:?} on the CPU", o.dtype()),
    })
}

/// The CPU passes' result dtype for features `x` and scores `s`: f64 where either is, else
/// the scores' (f32).
fn wider(x: &CpuStorage, s: &CpuStorage) -> DType {
    if x.dtype() == DType::F64 {
        DType::F64
    } else {
        s.dtype()
    }
}

/// `v` as a CPU storage of `dtype` (f32 or f64).
pub(crate) fn storage(v: Vec<f64>, dtype: DType) -> CpuStorage {
    match dtype {
        DType::F32 => CpuStorage::F32(v.into_iter().map(|x| x as f32).collect()),
        _ => CpuStorage::F64(v),
    }
}

impl CustomOp2 for GatOp {
    fn name(&self) -> &'static str {
        "gat_aggregate"
    }
    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        s: &CpuStorage,
        sl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        const OP: &str = "gat_aggregate";
        let (xs, sc) = (f64s(OP, x, xl)?, f64s(OP, s, sl)?);
        let (n, m, h) = (self.g.n_rows(), self.g.n_cols(), self.plan.heads);
        let (src, dst) = self.span.ranges(m, n, h);
        let (s_dst, s_src) = (&sc[dst], &sc[src]);
        let lse = cpu::lse(self.g.csr(), s_dst, s_src, &self.plan);
        let out = cpu::forward(self.g.csr(), &xs, (s_dst, s_src, &lse), &self.plan);
        let len = lse.len();
        let lse = candle_core::Storage::Cpu(storage(lse, s.dtype()));
        self.lse.put(side_tensor(lse, len))?;
        Ok((
            storage(out, x.dtype()),
            Shape::from((n, self.plan.heads * self.plan.width)),
        ))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        s: &CudaStorage,
        sl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (out, shape, lse) = cuda::forward(&self.g, (x, xl), (s, sl), self.span, &self.plan)?;
        let len = self.g.n_rows() * self.plan.heads;
        self.lse
            .put(side_tensor(candle_core::Storage::Cuda(lse), len))?;
        Ok((out, shape))
    }
}

/// The backward's two passes: `dxs` (xs's dtype) from xs, the scores and dout (and the
/// forward's `lse`), and the scores' gradient (f32; on the CPU f64 where xs or the scores
/// are; `[2, m, heads]` flat, zeros in the rows no row or column reads) in its side result. The softmax's row term `D = <dout, out>` per row and head
/// comes from the forward's output `out`, held here (the rows pass computes it on the GPU).
struct GatBwdOp {
    g: DeviceGraph,
    gt: DeviceGraph,
    perm: Tensor,
    out: Tensor,
    lse: Tensor,
    plan: Heads,
    span: Span,
    /// The scores' gradient, the side result.
    ds: Side,
}

impl CustomOp3 for GatBwdOp {
    fn name(&self) -> &'static str {
        "gat_aggregate_backward"
    }
    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        s: &CpuStorage,
        sl: &Layout,
        d: &CpuStorage,
        dl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        const OP: &str = "gat_aggregate backward";
        let (xs, sc, dout) = (f64s(OP, x, xl)?, f64s(OP, s, sl)?, f64s(OP, d, dl)?);
        let (n, m, h) = (self.g.n_rows(), self.g.n_cols(), self.plan.heads);
        let fwd_out: Vec<f64> = self.out.to_dtype(DType::F64)?.flatten_all()?.to_vec1()?;
        let dterm = cpu::row_term(&dout, &fwd_out, &self.plan);
        let lse: Vec<f64> = self.lse.to_dtype(DType::F64)?.to_vec1()?;
        let (src, dst) = self.span.ranges(m, n, h);
        let saved = Saved {
            xs: &xs,
            s_dst: &sc[dst.clone()],
            s_src: &sc[src.clone()],
            lse: &lse,
            dterm: &dterm,
            dout: &dout,
        };
        let k = self.plan;
        let pos: Vec<u32> = self.perm.to_vec1()?;
        let ds_dst = cpu::backward_rows(self.g.csr(), &saved, &k);
        let (dxs, ds_src) = cpu::backward_cols(self.gt.csr(), &pos, &saved, &k);
        // Each side's gradient in its rows of the scores, zeros elsewhere.
        let len = self.span.len(h);
        let mut ds = vec![0.0; len];
        ds[src].copy_from_slice(&ds_src);
        ds[dst].copy_from_slice(&ds_dst);
        // The caller narrows the score gradients to the scores' dtype.
        let ds = candle_core::Storage::Cpu(storage(ds, wider(x, s)));
        self.ds.put(side_tensor(ds, len))?;
        Ok((storage(dxs, x.dtype()), Shape::from((m, h * k.width))))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        s: &CudaStorage,
        sl: &Layout,
        d: &CudaStorage,
        dl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (dxs, shape, ds) = cuda::backward(
            (&self.g, &self.gt, &self.perm, &self.out, &self.lse),
            (x, xl),
            (s, sl),
            (d, dl),
            (self.span, &self.plan),
        )?;
        let len = self.span.len(self.plan.heads);
        self.ds
            .put(side_tensor(candle_core::Storage::Cuda(ds), len))?;
        Ok((dxs, shape))
    }
}
