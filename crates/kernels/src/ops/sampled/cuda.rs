//! Host side of the CUDA sampled SpMM (`cuda/sampled.cu`).

use super::Sampling;
use crate::cuda::{f32_view_opt, launched, narrowed, zeros, FloatView};
use crate::device_graph::DeviceGraph;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaView, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::CudaDevice;
use candle_core::{CudaStorage, Layout, Result, Shape};

/// Warps per block (the kernel's shared staging is sized for at most 8).
const WARPS: usize = 8;

/// Floats per lane: float4 loads once a row spans at least 64 columns, float2 above 32,
/// when the width and the operand's offset allow the alignment.
fn vector_width(k: usize, offset: usize) -> usize {
    if k >= 64 && k.is_multiple_of(4) && offset.is_multiple_of(4) {
        4
    } else if k > 32 && k.is_multiple_of(2) && offset.is_multiple_of(2) {
        2
    } else {
        1
    }
}

/// Launches the sampled aggregation; selection identical to [`Sampling::positions`]. `x` is
/// f32, bf16 or f16; edge values are f32 (the kernel multiplies and accumulates in fp32); a
/// half-precision `x` gets its output narrowed to its own type after the fp32 accumulation.
pub(crate) fn spmm_sampled(
    g: &DeviceGraph,
    x: &CudaStorage,
    xl: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
    mean: bool,
    sampling: &Sampling,
) -> Result<(CudaStorage, Shape)> {
    const OP: &str = "spmm_sampled";
    let (_, k) = xl.shape().dims2()?;
    let n = g.n_rows();
    let dev = x.device().clone();
    let vv = f32_view_opt(OP, vals)?;
    let xv = FloatView::of(OP, x, xl)?;
    let out = launch(
        g,
        &dev,
        &xv,
        xl.start_offset(),
        k,
        vv.as_ref(),
        mean,
        sampling,
    )?;
    let shape = Shape::from((n, k));
    Ok((narrowed(out, &dev, &shape, xv.dtype())?, shape))
}

/// Runs `<prefix>spmm_sampled_v<vec>` over `x` (of `k` columns from element `offset`) into a
/// new fp32 `[n_rows, k]` buffer.
#[allow(clippy::too_many_arguments)]
fn launch(
    g: &DeviceGraph,
    dev: &CudaDevice,
    xv: &FloatView,
    offset: usize,
    k: usize,
    vv: Option<&CudaView<'_, f32>>,
    mean: bool,
    sampling: &Sampling,
) -> Result<CudaSlice<f32>> {
    let n = g.n_rows();
    let out = zeros::<f32>(dev, n * k)?;
    if n == 0 || k == 0 {
        return Ok(out);
    }
    let csr = g.cuda_csr()?;
    let (strategy, s, b) = match *sampling {
        Sampling::EsBucket { s } => (0i32, s, [0f64; 4]),
        Sampling::EsFastRand { s } => (1, s, [0f64; 4]),
        Sampling::Aes { w, bands } => (2, w, bands),
    };
    let s = i32::try_from(s)
        .map_err(|_| candle_core::Error::Msg(format!("spmm_sampled: width {s} too large")))?;
    let vec = vector_width(k, offset);
    let n_tiles = k.div_ceil(32 * vec);
    let name = format!("{}spmm_sampled_v{vec}", xv.prefix());
    let func = crate::cuda::kernel(dev, &name, &crate::cuda::SAMPLED)?;
    let blocks = n.div_ceil(WARPS) * n_tiles;
    let blocks = u32::try_from(blocks).map_err(|_| {
        candle_core::Error::Msg(format!("spmm_sampled: {blocks} blocks exceed the grid"))
    })?;
    let cfg = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (32 * WARPS as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let (n_i, k_i, t_i) = (n as i32, k as i32, n_tiles as i32);
    let (w_i, m_i) = (vv.is_some() as i32, mean as i32);
    let mut bld = func.builder();
    bld.arg(&csr.indptr).arg(&csr.indices);
    match vv {
        Some(v) => bld.arg(v),
        None => bld.arg(&csr.indptr), // never read when unweighted
    };
    xv.push(&mut bld);
    bld.arg(&out)
        .arg(&n_i)
        .arg(&k_i)
        .arg(&t_i)
        .arg(&w_i)
        .arg(&m_i)
        .arg(&strategy)
        .arg(&s);
    bld.arg(&b[0]).arg(&b[1]).arg(&b[2]).arg(&b[3]);
    // SAFETY: buffers match the kernel signature (x holds n_cols * k elements of T from its
    // offset, vec-wide loads only where k and the offset are multiples of vec; out n * k
    // floats); sampled positions stay inside each row (checked on the host by
    // `Sampling::positions` tests, same formulas).
    launched(unsafe { bld.launch(cfg) }.map(|_| ()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::vector_width;

    #[test]
    fn vector_width_keeps_alignment() {
        for k in 1..600 {
            for off in [0, 1, 2, 4, 6] {
                let v = vector_width(k, off);
                assert!(
                    k.is_multiple_of(v) && off.is_multiple_of(v),
                    "k {k} off {off}"
                );
            }
        }
        assert_eq!(vector_width(128, 0), 4);
        assert_eq!(vector_width(41, 0), 1);
        assert_eq!(vector_width(34, 0), 2);
        assert_eq!(vector_width(16, 0), 1);
    }
}
