//! The sums of several f32 tensors, one value each, in one launch: a training step's check
//! (the loss and each parameter's gradient summed; a non-finite value, or a sum past f32's
//! range, makes its sum non-finite) and the gate [`super::adam_step`] reads. One reduction
//! per tensor, then a stack and a concatenation of the scalars, took 13 launches for a
//! two-layer model's four parameters.
//!
//! CUDA: two launches. The first gives each tensor [`BLOCKS`] blocks, each thread striding
//! its share in eight independent f32 accumulators, then a fixed tree into one partial per
//! block; the second sums each tensor's partials in a fixed tree. The partition depends on
//! the element counts alone: the same sums on every run. (One block per tensor had spent
//! 30.9 us of an H200 epoch on a 128 x 602 gradient's dependent loads.) CPU: each tensor
//! summed in f64, rounded to f32 (a sum past f32's range is infinite there too).

use crate::error::{Error, Result};
#[cfg(feature = "cuda")]
use candle_core::{backend::BackendStorage, CudaStorage};
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Shape, Storage, Tensor};

/// `[sum(t_0), sum(t_1), ...]` (f32, on the tensors' device, untracked) for one or more f32
/// tensors of any shape on one device (an empty tensor sums to 0). A fresh tensor: fit to
/// gate [`super::adam_step`].
pub fn sums_f32(ts: &[&Tensor]) -> Result<Tensor> {
    const OP: &str = "sums_f32";
    let Some((first, _)) = ts.split_first() else {
        return Err(Error::shape(OP, "no tensors to sum"));
    };
    for (i, t) in ts.iter().enumerate() {
        super::check_device_of(OP, first, t)?;
        if t.dtype() != DType::F32 {
            return Err(Error::dtype(
                OP,
                format!("tensor {i} is {:?}, expected F32", t.dtype()),
            ));
        }
    }
    let all = ts
        .iter()
        .map(|t| Ok(t.detach().contiguous()?))
        .collect::<Result<Vec<_>>>()?;
    let m = all.len();
    if u32::try_from(m).is_err() {
        return Err(Error::shape(
            OP,
            format!("{m} tensors: more than u32 counts"),
        ));
    }
    Ok(all[0].apply_op1_no_bwd(&Sums(all[1..].to_vec()))?)
}

/// Partial sums per tensor on CUDA (`SUMS_BLOCKS` in adam.cu).
#[cfg(feature = "cuda")]
const BLOCKS: u32 = 64;
/// Threads per block of the partial sums (`SUMS_THREADS`).
#[cfg(feature = "cuda")]
const THREADS: u32 = 256;
/// Tensors per launch of the partial sums: their pointers and counts travel by value
/// (`SUMS_CHUNK`).
#[cfg(feature = "cuda")]
const CHUNK: usize = 32;

/// The partial sums' argument: up to [`CHUNK`] device pointers, then their element counts
/// (`SumsTable` in adam.cu).
#[cfg(feature = "cuda")]
#[repr(C)]
#[derive(Clone, Copy)]
struct Table {
    p: [u64; CHUNK],
    n: [u64; CHUNK],
}

// SAFETY: plain data of the kernel's `SumsTable` layout (32 u64 pointers, then 32 u64 counts).
#[cfg(feature = "cuda")]
unsafe impl candle_core::cuda_backend::cudarc::driver::DeviceRepr for Table {}

/// [`sums_f32`]'s op over its first tensor; the others ride along (read in place).
struct Sums(Vec<Tensor>);

impl CustomOp1 for Sums {
    fn name(&self) -> &'static str {
        "sums_f32"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let sum = |s: &CpuStorage, l: &Layout| -> candle_core::Result<f32> {
            let v = super::super::cpu_slice::<f32>("sums_f32", s, l)?;
            Ok(v.iter().map(|x| *x as f64).sum::<f64>() as f32)
        };
        let mut out = vec![sum(s, l)?];
        for t in &self.0 {
            let (st, tl) = t.storage_and_layout();
            let Storage::Cpu(c) = &*st else {
                candle_core::bail!("sums_f32: tensors on different devices");
            };
            out.push(sum(c, tl)?);
        }
        let n = out.len();
        Ok((CpuStorage::F32(out), Shape::from(n)))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        use candle_core::cuda_backend::cudarc::driver::{DevicePtr, LaunchConfig, PushKernelArg};
        let dev = s.device().clone();
        let stream = dev.cuda_stream();
        let held: Vec<_> = self.0.iter().map(Tensor::storage_and_layout).collect();
        let mut parts: Vec<(&CudaStorage, &Layout)> = vec![(s, l)];
        for (st, tl) in &held {
            let Storage::Cuda(c) = &**st else {
                candle_core::bail!("sums_f32: tensors on different devices");
            };
            parts.push((c, *tl));
        }
        let m = parts.len();
        let mut syncs = Vec::with_capacity(m);
        let mut tables = Vec::with_capacity(m.div_ceil(CHUNK));
        for (c, chunk) in parts.chunks(CHUNK).enumerate() {
            let mut t = Table {
                p: [0; CHUNK],
                n: [0; CHUNK],
            };
            for (k, (st, tl)) in chunk.iter().enumerate() {
                let n = tl.shape().elem_count();
                let base = st.as_cuda_slice::<f32>()?;
                if tl.start_offset() + n > base.len() {
                    candle_core::bail!("sums_f32: tensor {} runs past its storage", c * CHUNK + k);
                }
                let (p, sync) = base.device_ptr(&stream);
                syncs.push(sync);
                t.p[k] = p + (tl.start_offset() * 4) as u64;
                t.n[k] = n as u64;
            }
            tables.push((t, chunk.len() as u32));
        }
        // SAFETY: the first launches write every one of the m * BLOCKS partials.
        let mut partials = unsafe { dev.alloc::<f32>(m * BLOCKS as usize)? };
        let sum_parts = crate::cuda::kernel(&dev, "sums_f32_parts", &crate::cuda::ADAM)?;
        for (c, (t, len)) in tables.iter().enumerate() {
            let mut dst = partials.slice_mut(c * CHUNK * BLOCKS as usize..);
            let mut b = sum_parts.builder();
            b.arg(t).arg(&mut dst);
            let cfg = LaunchConfig {
                grid_dim: (BLOCKS, *len, 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the table holds `len` pointers to live (read-locked) f32 buffers of the
            // counts beside them; `dst` holds the chunk's len * BLOCKS partials.
            crate::cuda::launched(unsafe { b.launch(cfg) }.map(|_| ()))?;
        }
        drop(syncs);
        // SAFETY: the finishing launch writes all m sums.
        let out = unsafe { dev.alloc::<f32>(m)? };
        let finish = crate::cuda::kernel(&dev, "sums_f32_finish", &crate::cuda::ADAM)?;
        let m_u = m as u32;
        let mut b = finish.builder();
        b.arg(&partials).arg(&m_u).arg(&out);
        let cfg = LaunchConfig {
            grid_dim: (m_u, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: partials holds m * BLOCKS values, out holds m.
        crate::cuda::launched(unsafe { b.launch(cfg) }.map(|_| ()))?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from(m)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// Each tensor's sum, in order, for shapes from empty to a matrix; a NaN or an infinity
    /// in a tensor makes its sum (and only its) non-finite, as does a sum past f32's range;
    /// no tensors, another dtype and a tracked input's gradient are handled.
    #[test]
    fn sums_are_each_tensors_in_order() {
        let dev = Device::Cpu;
        let a = Tensor::new(&[1.5f32, -2.0, 4.0], &dev).unwrap();
        let b = Tensor::zeros((0, 3), DType::F32, &dev).unwrap();
        let c = Tensor::arange(0f32, 12.0, &dev)
            .unwrap()
            .reshape((3, 4))
            .unwrap();
        let d = Tensor::new(&[f32::NAN, 1.0], &dev).unwrap();
        let e = Tensor::new(&[3e38f32, 3e38], &dev).unwrap();
        let f = Tensor::new(&[f32::INFINITY], &dev).unwrap();
        let v = Var::from_tensor(&a).unwrap();
        let got = sums_f32(&[v.as_tensor(), &b, &c, &d, &e, &f]).unwrap();
        assert!(!got.track_op());
        let got = got.to_vec1::<f32>().unwrap();
        assert_eq!(&got[..3], &[3.5, 0.0, 66.0]);
        assert!(got[3].is_nan());
        assert_eq!(got[4], f32::INFINITY);
        assert_eq!(got[5], f32::INFINITY);
        assert!(sums_f32(&[]).is_err());
        assert!(sums_f32(&[&a.to_dtype(DType::F64).unwrap()]).is_err());
        // A strided view sums its own elements.
        let t = c.t().unwrap();
        assert_eq!(sums_f32(&[&t]).unwrap().to_vec1::<f32>().unwrap(), [66.0]);
    }
}
