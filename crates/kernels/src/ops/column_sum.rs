//! `x.sum(0)` of a `[N, D]` tensor: a bias's gradient, taken in every layer's backward.
//!
//! CUDA (f32, bf16, f16): two launches (`cuda/column_sum.cu`). The first reads the matrix as
//! one flat array in 16-byte chunks (a period of `lcm(D, 8)` bf16 elements holds whole rows,
//! so a thread's chunk always meets the same columns: `D` need not be a multiple of 8), four
//! loads in flight a thread, and writes one fp32 partial per block and column; the second
//! adds each column's partials in a fixed order and rounds once to `x`'s dtype. The
//! partition depends on `N`, `D` and whether `x` starts 16-byte aligned (a view that does not
//! takes the one-element kernel, which adds in another order): the same sums on every run
//! of the same tensor. cuBLAS's GEMV
//! (`ones [1, N] · x`, the path before) took 27 + 4 us for 233 K x 128 bf16 on an H200, about
//! twice what its 60 MB take to read, and 11 + 6 us for 153 K x 41. On the CPU f32 and f64
//! keep that GEMM, which candle runs multithreaded; bf16 and f16 take the op's CPU body, an
//! f64 sum per column rounded once (candle's f16 GEMM there lost about 1 % of a 50 K-row
//! column sum). That body is also the reference the GPU is checked against.

use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Shape, Tensor};

/// `x.sum(0)` of a `[N, D]` tensor, in `x`'s dtype (fp32 accumulation for half storage on
/// CUDA, f64 on the CPU), on `x`'s device; untracked except for f32 and f64 on the CPU (it
/// serves backward passes).
pub fn column_sum(x: &Tensor) -> candle_core::Result<Tensor> {
    let (n, d) = x.dims2()?;
    if n == 0 || d == 0 {
        // cuBLAS refuses an empty product (CUDA_ERROR_INVALID_VALUE).
        return Tensor::zeros(d, x.dtype(), x.device());
    }
    // The kernel on CUDA; on the CPU, half types take the op's f64 sums too: candle's CPU
    // GEMM in f16 lost about 1 % of a 50 K-row column sum.
    let half = matches!(x.dtype(), DType::BF16 | DType::F16);
    if (x.device().is_cuda() && (half || x.dtype() == DType::F32)) || (x.device().is_cpu() && half)
    {
        return x.contiguous()?.apply_op1_no_bwd(&ColumnSum);
    }
    Tensor::ones((1, n), x.dtype(), x.device())?
        .matmul(&x.contiguous()?)?
        .reshape(d)
}

/// The reference: each column summed in f64 over a contiguous `[N, D]` tensor, rounded once
/// to its dtype (any device; the result on the CPU).
pub fn column_sum_reference(x: &Tensor) -> candle_core::Result<Tensor> {
    x.to_device(&candle_core::Device::Cpu)?
        .contiguous()?
        .apply_op1_no_bwd(&ColumnSum)
}

/// [`column_sum`]'s op.
struct ColumnSum;

/// The least common multiple of `a` and `b` (both positive).
#[cfg(feature = "cuda")]
fn lcm(a: usize, b: usize) -> usize {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    a / gcd(a, b) * b
}

impl CustomOp1 for ColumnSum {
    fn name(&self) -> &'static str {
        "column_sum"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (_, d) = l.shape().dims2()?;
        fn sums<T: candle_core::WithDType>(v: &[T], d: usize) -> Vec<T> {
            let mut acc = vec![0f64; d];
            for row in v.chunks_exact(d) {
                for (a, x) in acc.iter_mut().zip(row) {
                    *a += x.to_f64();
                }
            }
            acc.into_iter().map(T::from_f64).collect()
        }
        let out = match s.dtype() {
            DType::F32 => CpuStorage::F32(sums(super::cpu_slice("column_sum", s, l)?, d)),
            DType::F64 => CpuStorage::F64(sums(super::cpu_slice("column_sum", s, l)?, d)),
            DType::BF16 => CpuStorage::BF16(sums(super::cpu_slice("column_sum", s, l)?, d)),
            DType::F16 => CpuStorage::F16(sums(super::cpu_slice("column_sum", s, l)?, d)),
            other => candle_core::bail!("column_sum: {other:?} (f32, f64, bf16, f16)"),
        };
        Ok((out, Shape::from(d)))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        use crate::cuda::launched;
        use candle_core::cuda_backend::cudarc::driver::{DevicePtr, LaunchConfig, PushKernelArg};
        /// Threads of a partial-sums block (`CS_THREADS`).
        const THREADS: usize = 256;
        /// Blocks of partial sums at most: about four per SM of an H100 or H200 (each thread
        /// keeps four 16-byte loads in flight), few enough that the finishing pass's 32
        /// slots add 16 partials each.
        const MAX_BLOCKS: usize = 512;
        if !l.is_contiguous() {
            candle_core::bail!("column_sum: input must be contiguous");
        }
        let (n, d) = l.shape().dims2()?;
        if n == 0 || d == 0 {
            candle_core::bail!("column_sum: [{n}, {d}] is empty (the caller returns zeros)");
        }
        // The one-element kernel tiles the columns over the grid's y dimension (65,535 at most).
        if d > 65_535 * THREADS {
            candle_core::bail!(
                "column_sum: {d} columns (at most {} on CUDA)",
                65_535 * THREADS
            );
        }
        let dev = s.device().clone();
        macro_rules! run {
            ($T:ty, $suffix:expr) => {{
                let xv = s.as_cuda_slice::<$T>()?.slice(l.start_offset()..);
                // 16-byte chunks of the flat array where it starts aligned to them and a
                // period (lcm(d, v) elements) is at most THREADS chunks; else one element.
                let v = 16 / std::mem::size_of::<$T>();
                let aligned = {
                    let stream = dev.cuda_stream();
                    let (p, _sync) = xv.device_ptr(&stream);
                    p % 16 == 0
                };
                let lanes_v = lcm(d, v) / v;
                let (v, lanes) = if aligned && lanes_v <= THREADS {
                    (v, lanes_v)
                } else {
                    (1, d)
                };
                let tile = lanes.min(THREADS);
                let slots = THREADS / tile;
                let tiles = lanes.div_ceil(tile);
                let total = n * d;
                let periods = total.div_ceil(lanes * v);
                let blocks = periods.div_ceil(slots * 16).clamp(1, MAX_BLOCKS);
                let per_block = periods.div_ceil(blocks);
                let blocks = periods.div_ceil(per_block);
                // SAFETY: the first launch writes every one of the blocks * d partials (a
                // block's tiles cover all d columns), the second all d sums.
                let parts = unsafe { dev.alloc::<f32>(blocks * d)? };
                let out = unsafe { dev.alloc::<$T>(d)? };
                let name = if v > 1 {
                    format!("column_sum_parts_v_{}", $suffix)
                } else {
                    format!("column_sum_parts_{}", $suffix)
                };
                let func = crate::cuda::kernel(&dev, &name, &crate::cuda::COLUMN_SUM)?;
                let (t64, d32, l32, tile32, pb) = (
                    total as u64,
                    d as u32,
                    lanes as u32,
                    tile as u32,
                    per_block as u64,
                );
                let mut a = func.builder();
                a.arg(&xv)
                    .arg(&parts)
                    .arg(&t64)
                    .arg(&d32)
                    .arg(&l32)
                    .arg(&tile32)
                    .arg(&pb);
                let cfg = LaunchConfig {
                    grid_dim: (blocks as u32, tiles as u32, 1),
                    block_dim: (THREADS as u32, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: x holds n * d elements from its offset (16-byte aligned where the
                // vector kernel runs); parts holds blocks * d.
                launched(unsafe { a.launch(cfg) }.map(|_| ()))?;
                let func = crate::cuda::kernel(
                    &dev,
                    &format!("column_sum_finish_{}", $suffix),
                    &crate::cuda::COLUMN_SUM,
                )?;
                let b32 = blocks as u32;
                let mut a = func.builder();
                a.arg(&parts).arg(&out).arg(&b32).arg(&d32);
                let cfg = LaunchConfig {
                    grid_dim: (d.div_ceil(32) as u32, 1, 1),
                    block_dim: (1024, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: parts holds blocks * d partials, out d values.
                launched(unsafe { a.launch(cfg) }.map(|_| ()))?;
                CudaStorage::wrap_cuda_slice(out, dev.clone())
            }};
        }
        let out = match s.dtype() {
            DType::F32 => run!(f32, "f32"),
            DType::BF16 => run!(half::bf16, "bf16"),
            DType::F16 => run!(half::f16, "f16"),
            other => candle_core::bail!("column_sum: {other:?} on CUDA (f32, bf16, f16)"),
        };
        Ok((out, Shape::from(d)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// The reference against the GEMM form the CPU runs, for shapes with one row, one column,
    /// a width not a multiple of 8 and a tall matrix; empty shapes give zeros.
    #[test]
    fn reference_matches_the_product() {
        let dev = Device::Cpu;
        for (n, d) in [(1, 1), (1, 41), (37, 1), (300, 7), (5_000, 48), (2, 602)] {
            let x = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
            let a = column_sum(&x).unwrap().to_vec1::<f32>().unwrap();
            let b = column_sum_reference(&x).unwrap().to_vec1::<f32>().unwrap();
            assert_eq!(a.len(), d);
            for (p, q) in a.iter().zip(&b) {
                assert!(
                    (p - q).abs() <= 1e-4 * (1.0 + q.abs()) * (n as f32).sqrt(),
                    "{n}x{d}: {p} vs {q}"
                );
            }
        }
        let e = column_sum(&Tensor::zeros((0, 5), DType::F32, &dev).unwrap()).unwrap();
        assert_eq!(e.to_vec1::<f32>().unwrap(), [0.0; 5]);
        let x = Tensor::new(&[[1.5f64, -2.0], [4.0, 0.25]], &dev).unwrap();
        assert_eq!(
            column_sum_reference(&x).unwrap().to_vec1::<f64>().unwrap(),
            [5.5, -1.75]
        );
    }
}
