//! `x + b` with `b [D]` broadcast over the rows of `x [N, D]` (an output layer's bias), one
//! kernel forward, and backward the bias gradient as one GEMM row
//! ([`crate::column_sum`]).
//!
//! candle's broadcast add reduces the bias gradient with its dim-0 sum, which runs one block
//! per column: 184 µs for `[233 K, 41]` bf16 on an H100 (GAT's output layer,
//! `bench/records/gat-sparse/h100-2026-11-28-2/row-term/call6-kernels.csv.xz`, kernel 268),
//! against tens of µs for the GEMM row. Its forward, a broadcast kernel that computes every
//! element's source index, took 143 µs for the same output on an H200
//! (`bench/records/gat-sparse/h200-2026-11-28-2/scores-epilogue-h200/call2/ncu-kernels.csv.xz`,
//! kernel 175); this op's kernel keeps a thread on one column over rows.
//! [`bias_add_residual`] adds a second term in the same pass (GraphSAGE's root term, in its
//! lean output layer and its MaxK layer). Other hidden layers add their bias inside their
//! fused epilogues.

use crate::error::{Error, Result};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Shape, Tensor};

/// `x + b` (`x [N, D]`, `b [D]`, one dtype; half precision adds in fp32 and rounds once).
/// Backward: `dx = dy`, `db = dy.sum(0)` as one GEMM row; an untracked input gets no gradient.
pub fn bias_add(x: &Tensor, b: &Tensor) -> Result<Tensor> {
    const OP: &str = "bias_add";
    crate::ops::check_row_bias(OP, "x", x, b)?;
    crate::ops::check_float_or_half(OP, "x", x)?;
    crate::ops::check_columns_i32(OP, x.dim(1)?)?;
    Ok(x.contiguous()?.apply_op2(&b.contiguous()?, BiasAddOp)?)
}

/// `x + r + b` (`x` and `r [N, D]`, `b [D]`, one dtype) in one pass: a layer's two terms
/// and its bias (GraphSAGE's aggregated neighbour term and its root term). `r` may be a
/// column range of a wider matrix (rows of any stride, columns adjacent), read in place.
/// Half precision adds in fp32 and rounds once. Backward: `dx = dr = dy`, `db = dy.sum(0)`.
pub fn bias_add_residual(x: &Tensor, r: &Tensor, b: &Tensor) -> Result<Tensor> {
    const OP: &str = "bias_add_residual";
    crate::ops::check_row_bias(OP, "x", x, b)?;
    crate::ops::check_float_or_half(OP, "x", x)?;
    crate::ops::check_device_of(OP, x, r)?;
    if r.dims() != x.dims() {
        return Err(Error::shape(
            OP,
            format!("r is {:?}, x {:?}: one shape", r.dims(), x.dims()),
        ));
    }
    if r.dtype() != x.dtype() {
        return Err(Error::dtype(
            OP,
            format!("r is {:?}, x {:?}", r.dtype(), x.dtype()),
        ));
    }
    crate::ops::check_columns_i32(OP, x.dim(1)?)?;
    // Rows of any stride, columns adjacent: a column range read in place, else a copy.
    let r = if r.stride()[1] == 1 || r.dim(1)? <= 1 {
        r.clone()
    } else {
        r.contiguous()?
    };
    Ok(x.contiguous()?.apply_op3(&r, &b.contiguous()?, BiasAddOp)?)
}

struct BiasAddOp;

/// The gradients of `(x [, r], b)` for `dy`, `None` where an input does not track.
fn grads(ins: &[&Tensor], grad: &Tensor) -> candle_core::Result<Vec<Option<Tensor>>> {
    let (b, terms) = ins.split_last().expect("bias_add has inputs");
    let mut out: Vec<Option<Tensor>> = terms
        .iter()
        .map(|t| t.track_op().then(|| grad.clone()))
        .collect();
    out.push(if b.track_op() {
        Some(crate::ops::column_sum(grad)?)
    } else {
        None
    });
    Ok(out)
}

/// Row stride and start of a `[N, D]` operand whose columns are adjacent.
fn rows_of(l: &Layout) -> candle_core::Result<(usize, usize)> {
    let (_, d) = l.shape().dims2()?;
    let stride = l.stride();
    if d > 1 && stride[1] != 1 {
        candle_core::bail!("bias_add: the residual's columns must be adjacent");
    }
    Ok((stride[0], l.start_offset()))
}

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
        let out = dispatch_float!("bias_add", x, cpu_fwd(x, xl, None, b, bl))?;
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
        cuda_fwd(x, xl, None, b, bl)
    }

    fn bwd(
        &self,
        x: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let mut g = grads(&[x, b], grad)?.into_iter();
        Ok((g.next().flatten(), g.next().flatten()))
    }
}

impl CustomOp3 for BiasAddOp {
    fn name(&self) -> &'static str {
        "bias_add_residual"
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        r: &CpuStorage,
        rl: &Layout,
        b: &CpuStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = dispatch_float!("bias_add_residual", x, cpu_fwd(x, xl, Some((r, rl)), b, bl))?;
        Ok((out, xl.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        r: &CudaStorage,
        rl: &Layout,
        b: &CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda_fwd(x, xl, Some((r, rl)), b, bl)
    }

    fn bwd(
        &self,
        x: &Tensor,
        r: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let mut g = grads(&[x, r, b], grad)?.into_iter();
        Ok((g.next().flatten(), g.next().flatten(), g.next().flatten()))
    }
}

fn cpu_fwd<T: candle_core::WithDType>(
    x: &CpuStorage,
    xl: &Layout,
    r: Option<(&CpuStorage, &Layout)>,
    b: &CpuStorage,
    bl: &Layout,
) -> candle_core::Result<CpuStorage> {
    let xs = crate::ops::cpu_slice::<T>("bias_add", x, xl)?;
    let bs = crate::ops::cpu_slice::<T>("bias_add", b, bl)?;
    let d = bs.len().max(1);
    let out = match r {
        None => xs.iter().enumerate().map(|(i, &v)| v + bs[i % d]).collect(),
        Some((r, rl)) => {
            let (rs, start) = rows_of(rl)?;
            let rv = r.as_slice::<T>()?;
            xs.iter()
                .enumerate()
                .map(|(i, &v)| v + rv[start + (i / d) * rs + i % d] + bs[i % d])
                .collect()
        }
    };
    Ok(T::to_cpu_storage_owned(out))
}

/// Most row blocks of the kernel (it strides over the rows).
#[cfg(feature = "cuda")]
const MAX_BLOCKS: usize = 4096;

#[cfg(feature = "cuda")]
fn cuda_fwd(
    x: &CudaStorage,
    xl: &Layout,
    r: Option<(&CudaStorage, &Layout)>,
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
    let (rs, r_start) = match r {
        Some((_, rl)) => rows_of(rl)?,
        None => (0, 0),
    };
    let (rs64, has_r) = (rs as i64, r.is_some() as i32);
    macro_rules! run {
        ($T:ty, $S:ty, $suffix:expr) => {{
            let xv = x.as_cuda_slice::<$T>()?.slice(xl.start_offset()..);
            let bv = b.as_cuda_slice::<$T>()?.slice(bl.start_offset()..);
            // Without a residual the kernel is handed x there and reads nothing of it.
            let rv = match r {
                Some((r, _)) => r.as_cuda_slice::<$T>()?.slice(r_start..),
                None => x.as_cuda_slice::<$T>()?.slice(xl.start_offset()..),
            };
            // SAFETY: the kernel writes all n * d elements.
            let out = unsafe { dev.alloc::<$T>((n * d).max(1))? };
            if n * d > 0 {
                let func = crate::cuda::kernel(
                    &dev,
                    &format!("bias_add_{}", $suffix),
                    &crate::cuda::DROPOUT,
                )?;
                let mut a = func.builder();
                a.arg(&xv)
                    .arg(&rv)
                    .arg(&rs64)
                    .arg(&has_r)
                    .arg(&bv)
                    .arg(&out)
                    .arg(&n64)
                    .arg(&d32);
                let cfg = row_tiled_cfg(n, d, warp_columns(d), MAX_BLOCKS)?;
                // SAFETY: x and out hold n * d elements, b holds d, the residual (its rows
                // `rs` apart from its start, the layout's) n rows of d; the grid covers the
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

    /// `x + r + b` with `r` a column range of a wider matrix (read in place) and a contiguous
    /// one, against candle's adds in f64: values and the gradients of `x`, the wider matrix
    /// (through the range) and `b`.
    #[test]
    fn bias_add_residual_equals_the_adds_both_ways() {
        let dev = Device::Cpu;
        for (n, d, lead) in [
            (100usize, 41usize, 41usize),
            (7, 3, 0),
            (1, 9, 2),
            (33, 1, 5),
        ] {
            let x0 = Tensor::randn(0f64, 1.0, (n, d), &dev).unwrap();
            let p0 = Tensor::randn(0f64, 1.0, (n, lead + d + 3), &dev).unwrap();
            let b0 = Tensor::randn(0f64, 1.0, d, &dev).unwrap();
            let w = Tensor::randn(0f64, 1.0, (n, d), &dev).unwrap();
            let vars = || [&x0, &p0, &b0].map(|t| Var::from_tensor(t).unwrap());
            let (va, vb) = (vars(), vars());
            let ra = va[1].as_tensor().narrow(1, lead, d).unwrap();
            let ya = bias_add_residual(va[0].as_tensor(), &ra, va[2].as_tensor()).unwrap();
            let rb = vb[1].as_tensor().narrow(1, lead, d).unwrap();
            let yb = (vb[0].as_tensor() + &rb)
                .unwrap()
                .broadcast_add(vb[2].as_tensor())
                .unwrap();
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f64>().unwrap();
            assert_eq!(flat(&ya), flat(&yb));
            let ga = (&ya * &w).unwrap().sum_all().unwrap().backward().unwrap();
            let gb = (&yb * &w).unwrap().sum_all().unwrap().backward().unwrap();
            for i in 0..3 {
                let (p, q) = (
                    flat(ga.get(va[i].as_tensor()).unwrap()),
                    flat(gb.get(vb[i].as_tensor()).unwrap()),
                );
                assert_eq!(p.len(), q.len());
                for (u, v) in p.iter().zip(&q) {
                    assert!((u - v).abs() <= 1e-12 * (1.0 + v.abs()), "{i}: {u} vs {v}");
                }
            }
        }
        let x = Tensor::ones((4, 3), DType::F32, &dev).unwrap();
        let b = Tensor::ones(3, DType::F32, &dev).unwrap();
        assert!(
            bias_add_residual(&x, &Tensor::ones((4, 2), DType::F32, &dev).unwrap(), &b).is_err()
        );
        assert!(bias_add_residual(&x, &x.to_dtype(DType::F64).unwrap(), &b).is_err());
        // A transposed residual (columns not adjacent) is copied, not misread.
        let t = Tensor::arange(0f32, 12.0, &dev)
            .unwrap()
            .reshape((3, 4))
            .unwrap()
            .t()
            .unwrap();
        let y = bias_add_residual(&x, &t, &b).unwrap();
        let want = ((&x + &t.contiguous().unwrap()).unwrap().broadcast_add(&b)).unwrap();
        assert_eq!(y.to_vec2::<f32>().unwrap(), want.to_vec2::<f32>().unwrap());
    }
}
