//! `diag(s) · x`: every row of `x [N, K]` times its factor `s[i]` (`s [N]`, fp32, constant).
//!
//! The diagonal factors of a normalised aggregation, taken out of its edge values: GCN's
//! `D^-1/2 (A + I) D^-1/2 x` runs as `D^-1/2 · spmm(A + I, D^-1/2 · x)`, a mean's backward
//! `Aᵀ D⁻¹ dy` as `spmm(Aᵀ, D⁻¹ · dy)`. The SpMM then streams no fp32 value per edge (4 of
//! its 12 bytes of structure per edge; on an H200, the unweighted K = 48 bf16 SpMM over
//! 109.8 M edges takes 1.66 ms against the weighted one's 1.82) and the two row passes
//! cost about what they move (`2·N·K` elements each).
//!
//! The product is formed in fp32 and rounded to `x`'s dtype (f64 stays f64). Backward:
//! `dx = diag(s) · dy`; `s` must not track a gradient.
//!
//! [`rescale_rows`] does the same into another width with a bias: an aggregation's epilogue
//! on padded columns (GCN's output layer: `D^-1/2`, the bias and the narrowing from the
//! aligned width back to the classes in one pass, where a row scaling, a bias add and a
//! strided copy took 111 µs on an H200 at 233 K x 48 bf16), and its backward's padding.
//! Its untracked form with an optional residual (`rows_epilogue`) is what follows a sum or
//! mean in [`crate::spmm_then`]: after a half-precision SpMM it reads the fp32 accumulation
//! itself, so the SpMM's separate fp32-to-half cast is gone too.

use crate::error::{Error, Result};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, DType, Layout, Shape, Tensor};

/// `diag(s) · x` for `x [N, K]` (f32, f64, bf16, f16) and constant `s [N]` (f32), in `x`'s
/// dtype. Backward: `dx = diag(s) · dy`.
pub fn scale_rows(x: &Tensor, s: &Tensor) -> Result<Tensor> {
    const OP: &str = "scale_rows";
    check_rows(OP, x, s)?;
    Ok(x.contiguous()?.apply_op2(&s.contiguous()?, ScaleRows)?)
}

/// `out[i, j] = (j < K ? s_i · x[i, j] : 0) + b_j` for `j < cols` (`x [N, K]` of f32, f64,
/// bf16 or f16; constant `s [N]` f32; `b [cols]` in `x`'s dtype or none): [`scale_rows`]
/// narrowed or zero-padded to `cols` columns, plus a bias, in one pass (fp32 arithmetic,
/// rounded to `x`'s dtype). Backward: `dx = diag(s) · dy` re-widened to `K` columns (the same op),
/// `db = dy.sum(0)`.
pub fn rescale_rows(x: &Tensor, s: &Tensor, b: Option<&Tensor>, cols: usize) -> Result<Tensor> {
    const OP: &str = "rescale_rows";
    check_rows(OP, x, s)?;
    let op = ReWidth {
        cols,
        to: x.dtype(),
    };
    let (x, s) = (x.contiguous()?, s.contiguous()?);
    Ok(match b {
        Some(b) => x.apply_op3(&s, &checked_bias(OP, &x, b, cols, x.dtype())?, op)?,
        None => x.apply_op2(&s, op)?,
    })
}

/// `b` if it is a `[cols]` vector of `to` on `x`'s device (contiguous).
fn checked_bias(
    op: &'static str,
    x: &Tensor,
    b: &Tensor,
    cols: usize,
    to: DType,
) -> Result<Tensor> {
    crate::ops::check_device_of(op, x, b)?;
    if b.dims() != [cols] {
        return Err(Error::shape(
            op,
            format!("b is {:?}, expected [{cols}]", b.dims()),
        ));
    }
    if b.dtype() != to {
        return Err(Error::dtype(
            op,
            format!("b is {:?}, the result {to:?}", b.dtype()),
        ));
    }
    Ok(b.contiguous()?)
}

/// An aggregation's row epilogue, untracked: `out[i, j] = (j < K ? s_i x[i, j] + res[i, j] :
/// 0) + b_j` over `cols` columns of `x [N, K]`, with constant factors `s [N]` (f32; none: 1),
/// a residual `res [N, K]` and a bias `b [cols]` (each optional, in `to`), in `to`: `x`'s
/// dtype, or bf16 / f16 from f32 rows (a half-precision SpMM's fp32 accumulation, rounded
/// once). What [`crate::spmm_then`] applies to the sum or mean it computes.
pub(crate) fn rows_epilogue(
    x: &Tensor,
    s: Option<&Tensor>,
    res: Option<&Tensor>,
    b: Option<&Tensor>,
    cols: usize,
    to: DType,
) -> Result<Tensor> {
    const OP: &str = "rows_epilogue";
    crate::ops::check_float_or_half(OP, "x", x)?;
    let (n, k) = x
        .dims2()
        .map_err(|_| Error::shape(OP, format!("x has shape {:?}, expected [N, K]", x.dims())))?;
    if to != x.dtype() && !(x.dtype() == DType::F32 && matches!(to, DType::BF16 | DType::F16)) {
        return Err(Error::dtype(
            OP,
            format!("{:?} rows into {to:?}: only f32 into bf16 / f16", x.dtype()),
        ));
    }
    if let Some(s) = s {
        check_rows(OP, x, s)?;
    }
    if let Some(r) = res {
        crate::ops::check_device_of(OP, x, r)?;
        if r.dims() != [n, k] {
            return Err(Error::shape(
                OP,
                format!("residual is {:?}, expected [{n}, {k}]", r.dims()),
            ));
        }
        if r.dtype() != to {
            return Err(Error::dtype(
                OP,
                format!("residual is {:?}, the result {to:?}", r.dtype()),
            ));
        }
    }
    let b = b.map(|b| checked_bias(OP, x, b, cols, to)).transpose()?;
    let constant = |t: Option<&Tensor>| -> Result<Option<Tensor>> {
        t.map(|t| Ok(t.detach().contiguous()?)).transpose()
    };
    let op = Finish {
        s: constant(s)?,
        res: constant(res)?,
        b: constant(b.as_ref())?,
        cols,
        to,
    };
    Ok(x.detach().contiguous()?.apply_op1_no_bwd(&op)?)
}

/// [`rows_epilogue`]'s op over `x`; the other operands ride along (read in place).
struct Finish {
    s: Option<Tensor>,
    res: Option<Tensor>,
    b: Option<Tensor>,
    cols: usize,
    to: DType,
}

impl Finish {
    /// The factors', residual's and bias's storages and layouts, read-locked while they live
    /// (while the op's kernel is queued).
    fn held(
        &self,
    ) -> [Option<(
        impl std::ops::Deref<Target = candle_core::Storage> + '_,
        &Layout,
    )>; 3] {
        [&self.s, &self.res, &self.b].map(|t| t.as_ref().map(Tensor::storage_and_layout))
    }
}

/// Each held operand as the device's storage (`pick` takes it out of a [`candle_core::Storage`]),
/// or an error where one lives on another device.
fn on_device<'a, G, S>(
    held: &'a [Option<(G, &'a Layout)>; 3],
    pick: impl Fn(&'a candle_core::Storage) -> Option<&'a S>,
) -> candle_core::Result<[Option<(&'a S, &'a Layout)>; 3]>
where
    G: std::ops::Deref<Target = candle_core::Storage>,
{
    let mut on = [None, None, None];
    for (o, h) in on.iter_mut().zip(held) {
        if let Some((st, l)) = h {
            match pick(st) {
                Some(c) => *o = Some((c, *l)),
                None => candle_core::bail!("rows_epilogue: operands on different devices"),
            }
        }
    }
    Ok(on)
}

impl CustomOp1 for Finish {
    fn name(&self) -> &'static str {
        "rows_epilogue"
    }

    fn cpu_fwd(&self, x: &CpuStorage, xl: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let held = self.held();
        let on = on_device(&held, |st| match st {
            candle_core::Storage::Cpu(c) => Some(c),
            _ => None,
        })?;
        epilogue_cpu(x, xl, on[0], on[1], on[2], (self.cols, self.to))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, x: &CudaStorage, xl: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        let held = self.held();
        let on = on_device(&held, |st| match st {
            candle_core::Storage::Cuda(c) => Some(c),
            _ => None,
        })?;
        rewidth_cuda(x, xl, on[0], on[1], on[2], (self.cols, self.to))
    }
}

/// [`rescale_rows`] to `cols` columns, the result in `to`.
struct ReWidth {
    cols: usize,
    to: DType,
}

impl ReWidth {
    fn cpu(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        s: &CpuStorage,
        sl: &Layout,
        b: Option<(&CpuStorage, &Layout)>,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        epilogue_cpu(x, xl, Some((s, sl)), None, b, (self.cols, self.to))
    }

    /// `dx` (re-widened to `x`'s columns) and `db` for `dy`.
    fn grads(
        &self,
        x: &Tensor,
        s: &Tensor,
        b: Option<&Tensor>,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let msg = |e: Error| candle_core::Error::Msg(e.to_string());
        let dx = if x.track_op() {
            Some(rescale_rows(dy, &s.detach(), None, x.dim(1)?).map_err(msg)?)
        } else {
            None
        };
        let db = match b {
            Some(b) if b.track_op() => Some(crate::ops::column_sum(dy)?),
            _ => None,
        };
        Ok((dx, db))
    }
}

/// The CPU body of [`rescale_rows`] and [`rows_epilogue`]: `out[i, j] = (j < K ? s_i x[i, j] +
/// res[i, j] : 0) + b_j` over `cols` columns (no `s`: factor 1; `res` and `b` in `to`), in
/// f64 for f64 rows, else f32 products rounded once to `to` (`x`'s dtype, or bf16 / f16 from
/// f32 rows).
fn epilogue_cpu(
    x: &CpuStorage,
    xl: &Layout,
    s: Option<(&CpuStorage, &Layout)>,
    res: Option<(&CpuStorage, &Layout)>,
    b: Option<(&CpuStorage, &Layout)>,
    (cols, to): (usize, DType),
) -> candle_core::Result<(CpuStorage, Shape)> {
    const OP: &str = "rescale_rows";
    let (n, k) = xl.shape().dims2()?;
    let f = match s {
        Some((s, sl)) => Some(crate::ops::cpu_slice::<f32>(OP, s, sl)?),
        None => None,
    };
    fn run<T: candle_core::WithDType>(
        x: &[T],
        f: Option<&[f32]>,
        res: Option<&[T]>,
        b: Option<&[T]>,
        (n, k, cols): (usize, usize, usize),
        mul: impl Fn(T, f32) -> T + Sync,
    ) -> Vec<T> {
        use rayon::prelude::*;
        let mut out = vec![T::zero(); n * cols];
        if cols > 0 {
            out.par_chunks_mut(cols).enumerate().for_each(|(i, row)| {
                for (j, o) in row.iter_mut().enumerate() {
                    let mut v = T::zero();
                    if j < k {
                        let xv = x[i * k + j];
                        v = f.map_or(xv, |f| mul(xv, f[i]));
                        if let Some(r) = res {
                            v += r[i * k + j];
                        }
                    }
                    *o = match b {
                        Some(b) => v + b[j],
                        None => v,
                    };
                }
            });
        }
        out
    }
    let dims = (n, k, cols);
    let out = match x {
        CpuStorage::F32(_) if to != DType::F32 => {
            // Into half precision: the f32 result (bias and residual widened), rounded once.
            let xs = crate::ops::cpu_slice::<f32>(OP, x, xl)?;
            let widen =
                |t: Option<(&CpuStorage, &Layout)>| -> candle_core::Result<Option<Vec<f32>>> {
                    Ok(match t {
                        Some((t, tl)) => match t.to_dtype(tl, DType::F32)? {
                            CpuStorage::F32(v) => Some(v),
                            _ => candle_core::bail!("{OP}: an operand did not widen to f32"),
                        },
                        None => None,
                    })
                };
            let (rs, bs) = (widen(res)?, widen(b)?);
            let out = run(xs, f, rs.as_deref(), bs.as_deref(), dims, |v, s| {
                (v as f64 * s as f64) as f32
            });
            CpuStorage::F32(out).to_dtype(&Layout::contiguous((n, cols)), to)?
        }
        CpuStorage::F32(_) => {
            let xs = crate::ops::cpu_slice::<f32>(OP, x, xl)?;
            let rs = crate::ops::cpu_slice_opt::<f32>(OP, res)?;
            let bs = crate::ops::cpu_slice_opt::<f32>(OP, b)?;
            CpuStorage::F32(run(xs, f, rs, bs, dims, |v, s| {
                (v as f64 * s as f64) as f32
            }))
        }
        CpuStorage::F64(_) => {
            let xs = crate::ops::cpu_slice::<f64>(OP, x, xl)?;
            let rs = crate::ops::cpu_slice_opt::<f64>(OP, res)?;
            let bs = crate::ops::cpu_slice_opt::<f64>(OP, b)?;
            CpuStorage::F64(run(xs, f, rs, bs, dims, |v, s| v * s as f64))
        }
        o => candle_core::bail!("{OP}: unsupported dtype {:?} on the CPU", o.dtype()),
    };
    Ok((out, Shape::from((n, cols))))
}

impl CustomOp2 for ReWidth {
    fn name(&self) -> &'static str {
        "rescale_rows"
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        s: &CpuStorage,
        sl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.cpu(x, xl, s, sl, None)
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        s: &CudaStorage,
        sl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        rewidth_cuda(x, xl, Some((s, sl)), None, None, (self.cols, self.to))
    }

    fn bwd(
        &self,
        x: &Tensor,
        s: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        Ok((self.grads(x, s, None, grad)?.0, None))
    }
}

impl CustomOp3 for ReWidth {
    fn name(&self) -> &'static str {
        "rescale_rows_bias"
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        s: &CpuStorage,
        sl: &Layout,
        b: &CpuStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.cpu(x, xl, s, sl, Some((b, bl)))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        s: &CudaStorage,
        sl: &Layout,
        b: &CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        rewidth_cuda(
            x,
            xl,
            Some((s, sl)),
            None,
            Some((b, bl)),
            (self.cols, self.to),
        )
    }

    fn bwd(
        &self,
        x: &Tensor,
        s: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (dx, db) = self.grads(x, s, Some(b), grad)?;
        Ok((dx, None, db))
    }
}

#[cfg(feature = "cuda")]
fn rewidth_cuda(
    x: &CudaStorage,
    xl: &Layout,
    s: Option<(&CudaStorage, &Layout)>,
    res: Option<(&CudaStorage, &Layout)>,
    b: Option<(&CudaStorage, &Layout)>,
    (cols, to): (usize, DType),
) -> candle_core::Result<(CudaStorage, Shape)> {
    use crate::cuda::launched;
    use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
    /// Elements a thread of the half and f32 kernels takes (`RESCALE_UNROLL`).
    const RESCALE_UNROLL: usize = 8;
    let contiguous = |t: Option<(&CudaStorage, &Layout)>| t.is_none_or(|(_, l)| l.is_contiguous());
    if !xl.is_contiguous() || !contiguous(s) || !contiguous(res) || !contiguous(b) {
        candle_core::bail!("rescale_rows: operands must be contiguous");
    }
    let (n, k) = xl.shape().dims2()?;
    if n.checked_mul(cols).is_none_or(|t| t > i64::MAX as usize) {
        candle_core::bail!(
            "rescale_rows: {n} rows of {cols} columns overflow the kernel's indices"
        );
    }
    // From an fp32 accumulation (`rescale_rows_acc_*`) into half storage, or within a dtype.
    let acc = x.dtype() == DType::F32 && to != DType::F32;
    if !acc && to != x.dtype() {
        candle_core::bail!("rescale_rows: {:?} rows into {to:?}", x.dtype());
    }
    if acc && !matches!(to, DType::BF16 | DType::F16) {
        candle_core::bail!("rescale_rows: f32 rows into {to:?}");
    }
    let dev = x.device().clone();
    let sv = match s {
        Some((s, sl)) => Some(s.as_cuda_slice::<f32>()?.slice(sl.start_offset()..)),
        None => None,
    };
    let (kin, kout, n64) = (k as i64, cols as i64, n as i64);
    // x's elements as $X, b's and the output's as $T.
    macro_rules! launch {
        ($X:ty, $T:ty, $family:expr, $suffix:expr) => {{
            let xv = x.as_cuda_slice::<$X>()?.slice(xl.start_offset()..);
            // Without a factor, residual or bias the kernel is handed a null pointer and
            // reads none.
            let bv = match b {
                Some((b, bl)) => Some(b.as_cuda_slice::<$T>()?.slice(bl.start_offset()..)),
                None => None,
            };
            let rv = match res {
                Some((r, rl)) => Some(r.as_cuda_slice::<$T>()?.slice(rl.start_offset()..)),
                None => None,
            };
            // SAFETY: the kernel writes all n * cols elements.
            let out = unsafe { dev.alloc::<$T>((n * cols).max(1))? };
            if n * cols > 0 {
                // RESCALE_UNROLL elements a thread, a block's span apart (the f64 kernel
                // strides by the grid's threads over the same grid). 32-bit indices where
                // every one fits, the grid's stride past the last element included; f64
                // keeps its one kernel.
                let span = 256 * RESCALE_UNROLL;
                let blocks = (n * cols).div_ceil(span).clamp(1, 1 << 16);
                let cfg = LaunchConfig {
                    grid_dim: (blocks as u32, 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                };
                let narrow_ix = $suffix != "f64"
                    && n.checked_mul(cols.max(k))
                        .and_then(|t| t.checked_add(blocks * span))
                        .is_some_and(|t| t < i32::MAX as usize);
                let i32_ix = if narrow_ix { "i32_" } else { "" };
                let name = format!("{}_{i32_ix}{}", $family, $suffix);
                let func = crate::cuda::kernel(&dev, &name, &crate::cuda::DROPOUT)?;
                let null = 0u64;
                let mut a = func.builder();
                a.arg(&xv).arg(&kin);
                match &sv {
                    Some(sv) => a.arg(sv),
                    None => a.arg(&null),
                };
                match &rv {
                    Some(rv) => a.arg(rv),
                    None => a.arg(&null),
                };
                match &bv {
                    Some(bv) => a.arg(bv),
                    None => a.arg(&null),
                };
                a.arg(&out).arg(&n64).arg(&kout);
                // SAFETY: x (and res, when given) hold n rows of k, s (when given) n factors,
                // b (when given) cols, out n rows of cols; the kernel reads x and res only at
                // columns below k; the grid strides over n * cols.
                launched(unsafe { a.launch(cfg) }.map(|_| ()))?;
            }
            CudaStorage::wrap_cuda_slice(out, dev)
        }};
    }
    macro_rules! run {
        ($T:ty, $S:ty, $suffix:expr) => {
            launch!($T, $T, "rescale_rows", $suffix)
        };
    }
    macro_rules! run_acc {
        ($T:ty, $S:ty, $suffix:expr) => {
            launch!(f32, $T, "rescale_rows_acc", $suffix)
        };
    }
    let out = if acc {
        crate::ops::dropout::cuda::per_dtype!(to, "rescale_rows", run_acc)
    } else {
        crate::ops::dropout::cuda::per_dtype!(to, "rescale_rows", run)
    };
    Ok((out, Shape::from((n, cols))))
}

/// Checks `x [N, K]` (a float or half dtype) and its constant row factors `s [N]` (f32, on
/// `x`'s device): the inputs [`scale_rows`] and [`rescale_rows`] share.
fn check_rows(op: &'static str, x: &Tensor, s: &Tensor) -> Result<()> {
    crate::ops::check_float_or_half(op, "x", x)?;
    crate::ops::check_device_of(op, x, s)?;
    let dims = x.dims();
    if dims.len() != 2 || s.dims() != [dims[0]] {
        return Err(Error::shape(
            op,
            format!("x {dims:?} and s {:?} must be [N, K] and [N]", s.dims()),
        ));
    }
    if s.dtype() != DType::F32 {
        return Err(Error::dtype(
            op,
            format!("s is {:?}, expected F32", s.dtype()),
        ));
    }
    if s.track_op() {
        return Err(Error::unsupported(
            op,
            "row factors that track a gradient are not supported (constant only)",
        ));
    }
    Ok(())
}

struct ScaleRows;

impl CustomOp2 for ScaleRows {
    fn name(&self) -> &'static str {
        "scale_rows"
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        s: &CpuStorage,
        sl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (_, k) = xl.shape().dims2()?;
        let f = crate::ops::cpu_slice::<f32>("scale_rows", s, sl)?;
        let out = match x {
            CpuStorage::F32(_) => {
                let xs = crate::ops::cpu_slice::<f32>("scale_rows", x, xl)?;
                CpuStorage::F32(cpu_scale(xs, f, k, |v, s| (v as f64 * s as f64) as f32))
            }
            CpuStorage::F64(_) => {
                let xs = crate::ops::cpu_slice::<f64>("scale_rows", x, xl)?;
                CpuStorage::F64(cpu_scale(xs, f, k, |v, s| v * s as f64))
            }
            o => candle_core::bail!("scale_rows: unsupported dtype {:?} on the CPU", o.dtype()),
        };
        Ok((out, xl.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        s: &CudaStorage,
        sl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda_fwd(x, xl, s, sl)
    }

    fn bwd(
        &self,
        x: &Tensor,
        s: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let dx = if x.track_op() {
            Some(
                scale_rows(grad, &s.detach())
                    .map_err(|e| candle_core::Error::Msg(e.to_string()))?,
            )
        } else {
            None
        };
        Ok((dx, None))
    }
}

/// Row `i` of `x` (rows of `k`) mapped through `mul(value, s[i])`.
fn cpu_scale<T: Copy + Send + Sync>(
    x: &[T],
    s: &[f32],
    k: usize,
    mul: impl Fn(T, f32) -> T + Sync,
) -> Vec<T> {
    use rayon::prelude::*;
    let mut out = x.to_vec();
    if k > 0 {
        out.par_chunks_mut(k)
            .zip(s.par_iter())
            .for_each(|(row, &f)| row.iter_mut().for_each(|v| *v = mul(*v, f)));
    }
    out
}

#[cfg(feature = "cuda")]
fn cuda_fwd(
    x: &CudaStorage,
    xl: &Layout,
    s: &CudaStorage,
    sl: &Layout,
) -> candle_core::Result<(CudaStorage, Shape)> {
    use crate::cuda::{elementwise_cfg, launched};
    use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
    if !xl.is_contiguous() || !sl.is_contiguous() {
        candle_core::bail!("scale_rows: operands must be contiguous");
    }
    let (n, k) = xl.shape().dims2()?;
    let dev = x.device().clone();
    let sv = s.as_cuda_slice::<f32>()?.slice(sl.start_offset()..);
    macro_rules! run {
        ($T:ty, $S:ty, $suffix:expr) => {{
            let xv = x.as_cuda_slice::<$T>()?.slice(xl.start_offset()..);
            // SAFETY: the kernel writes all n * k elements.
            let out = unsafe { dev.alloc::<$T>((n * k).max(1))? };
            if n * k > 0 {
                // 16-byte steps where a row is whole steps and x starts on a 16-byte boundary
                // (CUDA allocations are at least 256-byte aligned, so the offset decides;
                // `out` is fresh); f64 runs element by element.
                let size = std::mem::size_of::<$T>();
                let per = 16 / size;
                let vec = $suffix != "f64"
                    && (k * size).is_multiple_of(16)
                    && (xl.start_offset() * size).is_multiple_of(16);
                let (name, per_row) = if vec {
                    (format!("scale_rows_v_{}", $suffix), k / per)
                } else {
                    (format!("scale_rows_{}", $suffix), k)
                };
                let steps = (n * per_row) as i64;
                let per_row = per_row as i64;
                let func = crate::cuda::kernel(&dev, &name, &crate::cuda::DROPOUT)?;
                let mut a = func.builder();
                a.arg(&xv).arg(&sv).arg(&out).arg(&steps).arg(&per_row);
                // SAFETY: x and out hold n * k elements, s holds n; a step reads and writes
                // per_row-th parts of one row (16 bytes, aligned, when vectorised); the grid
                // strides over the steps.
                launched(unsafe { a.launch(elementwise_cfg(steps as usize)) }.map(|_| ()))?;
            }
            CudaStorage::wrap_cuda_slice(out, dev)
        }};
    }
    let out = crate::ops::dropout::cuda::per_dtype!(x.dtype(), "scale_rows", run);
    Ok((out, xl.shape().clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// Values and the gradient against candle's broadcast multiply in f64 and f32 (one
    /// rounding each), over an empty, a one-row, a one-column and a 41-column shape; bad
    /// shapes, dtypes and a tracked `s` are refused.
    #[test]
    fn scale_rows_equals_the_broadcast_multiply_both_ways() {
        let dev = Device::Cpu;
        for dt in [DType::F64, DType::F32] {
            for (n, k) in [(100usize, 41usize), (1, 9), (257, 1), (0, 5), (6, 0)] {
                let x0 = Tensor::randn(0f32, 1.0, (n, k), &dev)
                    .unwrap()
                    .to_dtype(dt)
                    .unwrap();
                let s = Tensor::rand(0.01f32, 2.0, n, &dev).unwrap();
                let w = Tensor::randn(0f32, 1.0, (n, k), &dev)
                    .unwrap()
                    .to_dtype(dt)
                    .unwrap();
                let xv = Var::from_tensor(&x0).unwrap();
                let y = scale_rows(xv.as_tensor(), &s).unwrap();
                let want = x0
                    .broadcast_mul(&s.to_dtype(dt).unwrap().reshape((n, 1)).unwrap())
                    .unwrap();
                let flat = |t: &Tensor| {
                    t.to_dtype(DType::F64)
                        .unwrap()
                        .flatten_all()
                        .unwrap()
                        .to_vec1::<f64>()
                        .unwrap()
                };
                assert_eq!(flat(&y), flat(&want), "{dt:?} {n}x{k}");
                let g = (&y * &w).unwrap().sum_all().unwrap().backward().unwrap();
                let dx = g.get(xv.as_tensor()).expect("x's gradient");
                let want_dx = w
                    .broadcast_mul(&s.to_dtype(dt).unwrap().reshape((n, 1)).unwrap())
                    .unwrap();
                assert_eq!(flat(dx), flat(&want_dx), "{dt:?} {n}x{k} dx");
            }
        }
        let x = Tensor::ones((4, 3), DType::F32, &dev).unwrap();
        let s = Tensor::ones(4, DType::F32, &dev).unwrap();
        assert!(scale_rows(&x, &Tensor::ones(3, DType::F32, &dev).unwrap()).is_err());
        assert!(rescale_rows(&x, &s, Some(&s), 3).is_err());
        assert!(rescale_rows(&x, &s.to_dtype(DType::F64).unwrap(), None, 3).is_err());
        assert!(scale_rows(&x, &s.to_dtype(DType::F64).unwrap()).is_err());
        let tracked = Var::from_tensor(&s).unwrap();
        assert!(scale_rows(&x, tracked.as_tensor()).is_err());
        assert!(!scale_rows(&x, &s).unwrap().track_op());
    }

    /// f32 rows into bf16 / f16 ([`rows_epilogue`], the epilogue of a half-precision SpMM's
    /// fp32 accumulation) round once: the f32 result (residual and bias widened) converted;
    /// other pairs of dtypes and operands of the wrong dtype or shape are refused, and the
    /// result is untracked.
    #[test]
    fn rows_epilogue_into_half_rounds_the_f32_result_once() {
        let dev = Device::Cpu;
        let (n, k, cols) = (33usize, 48usize, 41usize);
        let x = Tensor::randn(0f32, 1.0, (n, k), &dev).unwrap();
        let s = Tensor::rand(0.01f32, 2.0, n, &dev).unwrap();
        let b = Tensor::randn(0f32, 1.0, cols, &dev).unwrap();
        let r = Tensor::randn(0f32, 1.0, (n, k), &dev).unwrap();
        let flat = |t: &Tensor| {
            t.to_dtype(DType::F32)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        };
        for to in [DType::BF16, DType::F16] {
            let (bh, rh) = (b.to_dtype(to).unwrap(), r.to_dtype(to).unwrap());
            let got = rows_epilogue(&x, Some(&s), Some(&rh), Some(&bh), cols, to).unwrap();
            assert_eq!(got.dtype(), to);
            let scaled = x
                .broadcast_mul(&s.reshape((n, 1)).unwrap())
                .unwrap()
                .add(&rh.to_dtype(DType::F32).unwrap())
                .unwrap()
                .narrow(1, 0, cols)
                .unwrap()
                .broadcast_add(&bh.to_dtype(DType::F32).unwrap())
                .unwrap();
            // One rounding of the f32 value (the f32 reference's own roundings are far below
            // half precision's): equal but for values on a rounding boundary.
            let (g, w) = (flat(&got), flat(&scaled.to_dtype(to).unwrap()));
            let off = g.iter().zip(&w).filter(|(a, b)| a != b).count();
            assert!(off <= g.len() / 100, "{to:?}: {off} of {} differ", g.len());
            assert!(
                rows_epilogue(&x, Some(&s), None, Some(&b), cols, to).is_err(),
                "f32 bias"
            );
            assert!(
                rows_epilogue(&x, None, Some(&r), None, cols, to).is_err(),
                "f32 residual"
            );
        }
        let x64 = x.to_dtype(DType::F64).unwrap();
        assert!(rows_epilogue(&x64, None, None, None, cols, DType::BF16).is_err());
        let short = Tensor::zeros((n, 3), DType::F32, &dev).unwrap();
        assert!(rows_epilogue(&x, None, Some(&short), None, cols, DType::F32).is_err());
        let xv = Var::from_tensor(&x).unwrap();
        let y = rows_epilogue(xv.as_tensor(), None, None, None, cols, DType::F32).unwrap();
        assert!(!y.track_op());
        assert_eq!(flat(&y), flat(&x.narrow(1, 0, cols).unwrap()));
    }

    /// [`rescale_rows`] against the composition it replaces (the row scaling, then a zero pad
    /// or a narrowing, then the bias) in f64 and f32: values and the gradients of `x` and `b`,
    /// narrower, wider and equal widths, with and without a bias, and no rows.
    #[test]
    fn rescale_rows_equals_scale_narrow_or_pad_and_bias() {
        let dev = Device::Cpu;
        for dt in [DType::F64, DType::F32] {
            for (n, k, cols) in [
                (50usize, 48usize, 41usize),
                (7, 41, 48),
                (9, 5, 5),
                (0, 8, 3),
            ] {
                for bias in [false, true] {
                    let rnd = |shape: (usize, usize)| {
                        Tensor::randn(0f32, 1.0, shape, &dev)
                            .unwrap()
                            .to_dtype(dt)
                            .unwrap()
                    };
                    let x0 = rnd((n, k));
                    let b0 = rnd((1, cols)).reshape(cols).unwrap();
                    let w = rnd((n, cols));
                    let s = Tensor::rand(0.01f32, 2.0, n, &dev).unwrap();
                    let (xv, bv) = (
                        Var::from_tensor(&x0).unwrap(),
                        Var::from_tensor(&b0).unwrap(),
                    );
                    let b = bias.then(|| bv.as_tensor());
                    let y = rescale_rows(xv.as_tensor(), &s, b, cols).unwrap();
                    let (xw, bw) = (
                        Var::from_tensor(&x0).unwrap(),
                        Var::from_tensor(&b0).unwrap(),
                    );
                    let scaled = xw
                        .as_tensor()
                        .broadcast_mul(&s.to_dtype(dt).unwrap().reshape((n, 1)).unwrap())
                        .unwrap();
                    let fitted = if cols <= k {
                        scaled.narrow(1, 0, cols).unwrap()
                    } else {
                        scaled.pad_with_zeros(1, 0, cols - k).unwrap()
                    };
                    let want = if bias {
                        fitted.broadcast_add(bw.as_tensor()).unwrap()
                    } else {
                        fitted
                    };
                    let flat = |t: &Tensor| {
                        t.to_dtype(DType::F64)
                            .unwrap()
                            .flatten_all()
                            .unwrap()
                            .to_vec1::<f64>()
                            .unwrap()
                    };
                    let what = format!("{dt:?} {n}x{k} -> {cols}, bias {bias}");
                    assert_eq!(y.dims(), [n, cols], "{what}");
                    assert_eq!(flat(&y), flat(&want), "{what}");
                    let g = (&y * &w).unwrap().sum_all().unwrap().backward().unwrap();
                    let gw = (&want * &w).unwrap().sum_all().unwrap().backward().unwrap();
                    let dx = g.get(xv.as_tensor()).expect("dx");
                    assert_eq!(flat(dx), flat(gw.get(xw.as_tensor()).unwrap()), "{what} dx");
                    if bias && n == 0 {
                        // candle's composition hands the bias no gradient through no rows.
                        let db = flat(g.get(bv.as_tensor()).expect("db"));
                        assert!(db.iter().all(|&v| v == 0.0), "{what} db: {db:?}");
                    } else if bias {
                        let (p, q) = (
                            flat(g.get(bv.as_tensor()).unwrap()),
                            flat(gw.get(bw.as_tensor()).expect(&what)),
                        );
                        for (u, v) in p.iter().zip(&q) {
                            assert!(
                                (u - v).abs() <= 1e-5 * (1.0 + v.abs()),
                                "{what} db: {u} vs {v}"
                            );
                        }
                    } else {
                        assert!(g.get(bv.as_tensor()).is_none());
                    }
                }
            }
        }
    }
}
