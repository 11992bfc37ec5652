//! The sums of several f32 tensors, one value each, in one launch: a training step's check
//! (the loss and each parameter's gradient summed; a non-finite value, or a sum past f32's
//! range, makes its sum non-finite) and the gate [`super::adam_step`] reads. One reduction
//! per tensor, then a stack and a concatenation of the scalars, took 13 launches for a
//! two-layer model's four parameters.
//!
//! CUDA: one block per tensor, each thread striding its tensor in f32, then a fixed tree: the
//! same sums on every run. CPU: each tensor summed in f64, rounded to f32 (a sum past f32's
//! range is infinite there too).

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
        use candle_core::cuda_backend::cudarc::driver::{DevicePtr, PushKernelArg};
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
        // The table the kernel reads: m pointers, then m element counts.
        let mut table = vec![0u64; 2 * m];
        let mut syncs = Vec::with_capacity(m);
        for (i, (c, tl)) in parts.iter().enumerate() {
            let n = tl.shape().elem_count();
            let base = c.as_cuda_slice::<f32>()?;
            if tl.start_offset() + n > base.len() {
                candle_core::bail!("sums_f32: tensor {i} runs past its storage");
            }
            let (p, sync) = base.device_ptr(&stream);
            syncs.push(sync);
            table[i] = p + (tl.start_offset() * 4) as u64;
            table[m + i] = n as u64;
        }
        let table = dev.clone_htod(&table)?;
        // SAFETY: the kernel writes all m sums.
        let out = unsafe { dev.alloc::<f32>(m)? };
        let func = crate::cuda::kernel(&dev, "sums_f32", &crate::cuda::ADAM)?;
        let m_u = m as u32;
        let mut b = func.builder();
        b.arg(&table).arg(&m_u).arg(&out);
        let cfg = candle_core::cuda_backend::cudarc::driver::LaunchConfig {
            grid_dim: (m_u, 1, 1),
            block_dim: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: table holds m pointers to f32 buffers of the counts that follow them, each
        // live (read-locked) until the launch is queued behind their writers; out holds m.
        crate::cuda::launched(unsafe { b.launch(cfg) }.map(|_| ()))?;
        drop(syncs);
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
