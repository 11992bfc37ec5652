//! `x + b` with `b [D]` broadcast over the rows of `x [N, D]` (an output layer's bias), one
//! kernel forward, and backward the bias gradient as one GEMM row
//! ([`crate::ops::column_sum`]).
//!
//! candle's broadcast add reduces the bias gradient with its dim-0 sum, which runs one block
//! per column: 184 µs for `[233 K, 41]` bf16 on an H100 (GAT's output layer,
//! `bench/records/gat-sparse/h100-2026-11-28-2/row-term/call6-kernels.csv.xz`, kernel 268),
//! against tens of µs for the GEMM row. Its forward, a broadcast kernel that computes every
//! element's source index, took 143 µs for the same output on an H200
//! (`bench/records/gat-sparse/h200-2026-11-28-2/scores-epilogue-h200/call2/ncu-kernels.csv.xz`,
//! kernel 175); this op's kernel keeps a thread on one column over rows. Wide hidden layers keep candle's add inside their fused
//! epilogues.

use crate::error::Result;
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp2, Layout, Shape, Tensor};

/// `x + b` (`x [N, D]`, `b [D]`, one dtype; half precision adds in fp32 and rounds once).
/// Backward: `dx = dy`, `db = dy.sum(0)` as one GEMM row; an untracked input gets no gradient.
pub fn bias_add(x: &Tensor, b: &Tensor) -> Result<Tensor> {
    const OP: &str = "bias_add";
    crate::ops::check_row_bias(OP, "x", x, b)?;
    crate::ops::check_float_or_half(OP, "x", x)?;
    Ok(x.contiguous()?.apply_op2(&b.contiguous()?, BiasAddOp)?)
}

struct BiasAddOp;

impl CustomOp2 for BiasAddOp {
    fn name(&self) -> &'static str {
        "bias_add"
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        b: &CpuStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = dispatch_float!("bias_add", x, cpu_fwd(x, xl, b, bl))?;
        Ok((out, xl.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        b: &CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda_fwd(x, xl, b, bl)
    }

    fn bwd(
        &self,
        x: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let dx = x.track_op().then(|| grad.clone());
        let db = if b.track_op() {
            Some(crate::ops::column_sum(grad)?)
        } else {
            None
        };
        Ok((dx, db))
    }
}

fn cpu_fwd<T: candle_core::WithDType>(
    x: &CpuStorage,
    xl: &Layout,
    b: &CpuStorage,
    bl: &Layout,
) -> candle_core::Result<CpuStorage> {
    let xs = crate::ops::cpu_slice::<T>("bias_add", x, xl)?;
    let bs = crate::ops::cpu_slice::<T>("bias_add", b, bl)?;
    let d = bs.len().max(1);
    Ok(T::to_cpu_storage_owned(
        xs.iter().enumerate().map(|(i, &v)| v + bs[i % d]).collect(),
    ))
}

/// Most row blocks of the kernel (it strides over the rows).
#[cfg(feature = "cuda")]
const MAX_BLOCKS: usize = 4096;

#[cfg(feature = "cuda")]
fn cuda_fwd(
    x: &CudaStorage,
    xl: &Layout,
    b: &CudaStorage,
    bl: &Layout,
) -> candle_core::Result<(CudaStorage, Shape)> {
    use crate::cuda::{launched, row_tiled_cfg, warp_columns};
    use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
    if !xl.is_contiguous() || !bl.is_contiguous() {
        candle_core::bail!("bias_add: operands must be contiguous");
    }
    let (n, d) = xl.shape().dims2()?;
    let dev = x.device().clone();
    let (n64, d32) = (n as i64, d as i32);
    macro_rules! run {
        ($T:ty, $S:ty, $suffix:expr) => {{
            let xv = x.as_cuda_slice::<$T>()?.slice(xl.start_offset()..);
            let bv = b.as_cuda_slice::<$T>()?.slice(bl.start_offset()..);
            // SAFETY: the kernel writes all n * d elements.
            let out = unsafe { dev.alloc::<$T>((n * d).max(1))? };
            if n * d > 0 {
                let func = crate::cuda::kernel(
                    &dev,
                    &format!("bias_add_{}", $suffix),
                    &crate::cuda::DROPOUT,
                )?;
                let mut a = func.builder();
                a.arg(&xv).arg(&bv).arg(&out).arg(&n64).arg(&d32);
                let cfg = row_tiled_cfg(n, d, warp_columns(d), MAX_BLOCKS);
                // SAFETY: x and out hold n * d elements, b holds d; the grid covers the
                // columns below d and strides over the rows below n.
                launched(unsafe { a.launch(cfg) }.map(|_| ()))?;
            }
            CudaStorage::wrap_cuda_slice(out, dev)
        }};
    }
    let out = crate::ops::dropout::cuda::per_dtype!(x.dtype(), "bias_add", run);
    Ok((out, xl.shape().clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device, Var};

    /// Values and both gradients against candle's broadcast add (f64; the bias gradient
    /// summed in another order), with either input untracked, over a one-row and a
    /// one-column shape.
    #[test]
    fn bias_add_equals_the_broadcast_add_both_ways() {
        let dev = Device::Cpu;
        for (n, d) in [(100usize, 37usize), (1, 9), (257, 1)] {
            let x0 = Tensor::randn(0f64, 1.0, (n, d), &dev).unwrap();
            let b0 = Tensor::randn(0f64, 1.0, d, &dev).unwrap();
            let w = Tensor::randn(0f64, 1.0, (n, d), &dev).unwrap();
            for (track_x, track_b) in [(true, true), (true, false), (false, true)] {
                let var = |t: &Tensor, on: bool| {
                    if on {
                        Var::from_tensor(t).unwrap().as_tensor().clone()
                    } else {
                        t.clone()
                    }
                };
                let (xa, ba) = (var(&x0, track_x), var(&b0, track_b));
                let (xb, bb) = (var(&x0, track_x), var(&b0, track_b));
                let ya = bias_add(&xa, &ba).unwrap();
                let yb = xb.broadcast_add(&bb).unwrap();
                assert_eq!(ya.to_vec2::<f64>().unwrap(), yb.to_vec2::<f64>().unwrap());
                let ga = (&ya * &w).unwrap().sum_all().unwrap().backward().unwrap();
                let gb = (&yb * &w).unwrap().sum_all().unwrap().backward().unwrap();
                for (a, b, on) in [(&xa, &xb, track_x), (&ba, &bb, track_b)] {
                    if !on {
                        // candle's add hands an untracked input a gradient too; this op not.
                        assert!(ga.get(a).is_none(), "an untracked input got a gradient");
                        continue;
                    }
                    let flat = |t: Option<&Tensor>| -> Vec<f64> {
                        t.expect("a tracked input's gradient")
                            .flatten_all()
                            .unwrap()
                            .to_vec1()
                            .unwrap()
                    };
                    let (p, q) = (flat(ga.get(a)), flat(gb.get(b)));
                    assert_eq!(p.len(), q.len());
                    for (u, v) in p.iter().zip(&q) {
                        assert!((u - v).abs() <= 1e-12 * (1.0 + v.abs()), "{u} vs {v}");
                    }
                }
            }
        }
        let x = Tensor::ones((4, 3), DType::F32, &dev).unwrap();
        let b = Tensor::ones(3, DType::F32, &dev).unwrap();
        assert!(bias_add(&x, &Tensor::ones(4, DType::F32, &dev).unwrap()).is_err());
        assert!(bias_add(&x, &b.to_dtype(DType::F64).unwrap()).is_err());
        assert!(!bias_add(&x, &b).unwrap().track_op());
    }
}
