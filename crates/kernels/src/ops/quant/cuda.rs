//! Host side of the CUDA dequantisation (`cuda/quant.cu`).

use crate::cuda::{elementwise_cfg, f32_view, launched, zeros};
use crate::ops::optional::Cuda;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
use candle_core::{CudaStorage, Result};

/// `[N, F]` f32 from u8 codes; one thread per four codes when `F` is a multiple of four.
pub(crate) fn dequantize(
    (c, cl): Cuda<'_>,
    (s, sl): Cuda<'_>,
    (m, ml): Cuda<'_>,
) -> Result<(CudaStorage, candle_core::Shape)> {
    let (n, f) = cl.shape().dims2()?;
    if !cl.is_contiguous() {
        candle_core::bail!("dequantize: codes must be contiguous");
    }
    let dev = c.device().clone();
    let codes = c
        .as_cuda_slice::<u8>()
        .map_err(|_| candle_core::Error::Msg("dequantize: codes must be u8".into()))?
        .slice(cl.start_offset()..);
    let sv = f32_view("dequantize", s, sl)?;
    let mv = f32_view("dequantize", m, ml)?;
    let total = n * f;
    let out = zeros::<f32>(&dev, total)?;
    if total > 0 {
        let vec4 = f.is_multiple_of(4) && cl.start_offset().is_multiple_of(4);
        let (name, units) = if vec4 {
            ("dequant_u8x4", total / 4)
        } else {
            ("dequant_u8", total)
        };
        let func = crate::cuda::kernel(&dev, name, &crate::cuda::QUANT)?;
        let (units_u, f_i) = (units as u64, f as i32);
        let mut b = func.builder();
        b.arg(&codes)
            .arg(&sv)
            .arg(&mv)
            .arg(&out)
            .arg(&units_u)
            .arg(&f_i);
        // SAFETY: `codes` and `out` hold `total` elements, `scale`/`min` hold `f`; the kernel
        // reads and writes `units` units of 1 or 4 elements.
        launched(unsafe { b.launch(elementwise_cfg(units)) }.map(|_| ()))?;
    }
    Ok((
        CudaStorage::wrap_cuda_slice(out, dev),
        candle_core::Shape::from((n, f)),
    ))
}
