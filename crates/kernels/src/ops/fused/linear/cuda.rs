//! Host side of the CUDA bias + ReLU + dropout writing its mask as bits, and the backward
//! from those bits (`cuda/dropout.cu`).

use crate::cuda::{elementwise_cfg, launched, Kernel};
use crate::ops::dropout::cuda::per_dtype;
use crate::ops::dropout::threshold;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
use candle_core::cuda_backend::CudaDevice;
use candle_core::{CudaStorage, DType, Layout, Result, Shape};

/// The `cuda/dropout.cu` kernel `{op}_{suffix}`.
fn dropout_kernel(dev: &CudaDevice, op: &str, suffix: &str) -> Result<Kernel> {
    crate::cuda::kernel(dev, &format!("{op}_{suffix}"), &crate::cuda::DROPOUT)
}

/// Bias + ReLU + dropout that also writes its mask as bits (`bias_relu_dropout_bits_*`), plus
/// the residual `r` (`x`'s shape) when given: `x [N, D]`, `b [D]`, all contiguous. Returns the
/// output and the mask, `ceil(N * D / 32)` u32 words (bit `i % 32` of word `i / 32`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn bias_relu_dropout_bits(
    x: &CudaStorage,
    xl: &Layout,
    b: &CudaStorage,
    bl: &Layout,
    r: Option<(&CudaStorage, &Layout)>,
    pre: bool,
    p: f32,
    seed: u64,
) -> Result<(CudaStorage, CudaStorage, Shape)> {
    const OP: &str = "bias_relu_dropout_bits";
    if !xl.is_contiguous() || !bl.is_contiguous() || r.is_some_and(|(_, rl)| !rl.is_contiguous()) {
        candle_core::bail!("{OP}: operands must be contiguous");
    }
    let (_, d) = xl.shape().dims2()?;
    if bl.shape().elem_count() != d {
        candle_core::bail!("{OP}: bias {:?} for rows of {d}", bl.shape());
    }
    if let Some((rs, rl)) = r {
        if rl.shape() != xl.shape() || rs.dtype() != x.dtype() {
            candle_core::bail!(
                "{OP}: residual {:?} {:?} for x {:?}",
                rl.shape(),
                rs.dtype(),
                xl.shape()
            );
        }
    }
    let n = xl.shape().elem_count();
    let d = u32::try_from(d.max(1))
        .map_err(|_| candle_core::Error::Msg(format!("{OP}: {d} columns")))?;
    let dev = x.device().clone();
    // SAFETY: the kernel writes every word: each 32-element group below `n` is one warp's,
    // whose ballot writes the group's word.
    let words = unsafe { dev.alloc::<u32>(n.div_ceil(32).max(1))? };
    let (t, n_u, pre_i) = (threshold(p), n as u64, pre as i32);
    let scale = 1.0 / (1.0 - p as f64);
    macro_rules! run {
        ($T:ty, $S:ty, $suffix:expr) => {{
            let xv = x.as_cuda_slice::<$T>()?.slice(xl.start_offset()..);
            let bv = b.as_cuda_slice::<$T>()?.slice(bl.start_offset()..);
            let rv = match r {
                Some((rs, rl)) => Some(rs.as_cuda_slice::<$T>()?.slice(rl.start_offset()..)),
                None => None,
            };
            // SAFETY: `alloc` leaves the buffer uninitialised, and the kernel writes all `n`
            // elements (the warps' strided loop visits every 32-element group below `n`).
            let out = unsafe { dev.alloc::<$T>(n.max(1))? };
            if n > 0 {
                // 8 elements a thread where chunks stay in a row, mask words are whole and
                // the operands 16-byte aligned (`cuda/dropout.cu`, `*_v8`).
                let v8 = x.dtype() != DType::F64
                    && d % 8 == 0
                    && n % 32 == 0
                    && xl.start_offset() % 8 == 0
                    && bl.start_offset() % 8 == 0
                    && r.is_none_or(|(_, rl)| rl.start_offset() % 8 == 0);
                let (name, count) = if v8 {
                    ("bias_relu_dropout_bits_v8", n_u / 8)
                } else {
                    (OP, n_u)
                };
                let func = dropout_kernel(&dev, name, $suffix)?;
                let sc = scale as $S;
                let mut lb = func.builder();
                lb.arg(&xv).arg(&bv);
                match &rv {
                    Some(rv) => lb.arg(rv),
                    None => lb.arg(&0u64), // a null residual
                };
                lb.arg(&out)
                    .arg(&words)
                    .arg(&count)
                    .arg(&d)
                    .arg(&seed)
                    .arg(&t)
                    .arg(&sc)
                    .arg(&pre_i);
                // SAFETY: `x`, `r` (contiguous from their offsets) and `out` hold `n`
                // elements, `b` holds `d` (read at `i % d`; v8: the 8 from a multiple of 8),
                // `words` `ceil(n / 32)` (v8: byte `c` for chunk `c < n / 8`); elementwise_cfg's
                // blocks are 256 threads, whole warps, as the ballot needs.
                launched(unsafe { lb.launch(elementwise_cfg(count as usize)) }.map(|_| ()))?;
            }
            CudaStorage::wrap_cuda_slice(out, dev.clone())
        }};
    }
    let out = per_dtype!(x.dtype(), OP, run);
    let bits = CudaStorage::wrap_cuda_slice(words, dev);
    Ok((out, bits, xl.shape().clone()))
}

/// Its backward: `dx[i] = bit i ? dy[i] * scale : 0`.
pub(crate) fn mask_bits_bwd(
    dy: &CudaStorage,
    dl: &Layout,
    bits: &CudaStorage,
    p: f32,
) -> Result<(CudaStorage, Shape)> {
    const OP: &str = "mask_bits_bwd";
    if !dl.is_contiguous() {
        candle_core::bail!("{OP}: the gradient must be contiguous");
    }
    let n = dl.shape().elem_count();
    let dev = dy.device().clone();
    let words = bits.as_cuda_slice::<u32>()?;
    if words.len() < n.div_ceil(32) {
        candle_core::bail!("{OP}: a mask of {} words for {n} elements", words.len());
    }
    let n_u = n as u64;
    let scale = 1.0 / (1.0 - p as f64);
    macro_rules! run {
        ($T:ty, $S:ty, $suffix:expr) => {{
            let dv = dy.as_cuda_slice::<$T>()?.slice(dl.start_offset()..);
            // SAFETY: the kernel writes all `n` elements.
            let out = unsafe { dev.alloc::<$T>(n.max(1))? };
            if n > 0 {
                let v8 = dy.dtype() != DType::F64 && n % 8 == 0 && dl.start_offset() % 8 == 0;
                let (name, count) = if v8 {
                    ("mask_bits_bwd_v8", n_u / 8)
                } else {
                    (OP, n_u)
                };
                let func = dropout_kernel(&dev, name, $suffix)?;
                let sc = scale as $S;
                let mut lb = func.builder();
                lb.arg(words).arg(&dv).arg(&out).arg(&count).arg(&sc);
                // SAFETY: `dy` and `out` hold `n` elements, `bits` at least `ceil(n / 32)`
                // words (checked); indices below `n` only (v8: chunks below `n / 8`, byte
                // `c` of the mask each).
                launched(unsafe { lb.launch(elementwise_cfg(count as usize)) }.map(|_| ()))?;
            }
            CudaStorage::wrap_cuda_slice(out, dev)
        }};
    }
    let out = per_dtype!(dy.dtype(), OP, run);
    Ok((out, dl.shape().clone()))
}
