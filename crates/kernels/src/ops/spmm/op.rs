//! The SpMM forward op for every reduction (without argmax) and the sum/mean backward: one
//! [`OptionalInput`] body (edge values optional) dispatching to the CPU and CUDA kernels.

use super::*;
/// Forward op for every reduction, without argmax; backward for sum/mean.
pub(super) struct SpmmOp {
    pub(super) g: DeviceGraph,
    pub(super) reduce: Reduce,
}

impl SpmmOp {
    fn cpu_typed<T: WithDType>(
        &self,
        s: &CpuStorage,
        l: &Layout,
        v: Option<(&CpuStorage, &Layout)>,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (_, k) = l.shape().dims2()?;
        self.g.record("spmm", "cpu");
        let x = cpu_slice::<T>("spmm", s, l)?;
        let vals = cpu_slice_opt::<T>("spmm", v)?;
        let csr = self.g.csr();
        let out = match self.reduce {
            Reduce::Sum => cpu::spmm_sum(csr, x, k, vals, false),
            Reduce::Mean => cpu::spmm_sum(csr, x, k, vals, true),
            Reduce::Max => cpu::spmm_extreme(csr, x, k, vals, true, false).0,
            Reduce::Min => cpu::spmm_extreme(csr, x, k, vals, false, false).0,
        };
        Ok((T::to_cpu_storage_owned(out), Shape::from((csr.n_rows(), k))))
    }

    /// `dy` scaled for the transpose product: `D^-1 dy` for mean ([`crate::scale_rows`]: one
    /// fp32 product per element, rounded once), `dy` for sum.
    pub(super) fn scaled_grad(&self, dy: &Tensor) -> candle_core::Result<Tensor> {
        match self.reduce {
            Reduce::Mean => {
                let inv = self.g.inv_degrees(DType::F32)?.reshape(self.g.n_rows())?;
                crate::scale_rows(dy, &inv).map_err(|e| candle_core::Error::Msg(e.to_string()))
            }
            Reduce::Sum => Ok(dy.clone()),
            Reduce::Max | Reduce::Min => {
                candle_core::bail!("spmm: max/min backward goes through the argmax path")
            }
        }
    }
}

impl OptionalInput<1> for SpmmOp {
    const NAMES: [&'static str; 2] = ["spmm", "spmm_weighted"];
    fn cpu(&self, [(s, l)]: [Cpu<'_>; 1], v: Option<Cpu<'_>>) -> CpuOut {
        with_float!(self.name(v.is_some()), s, |T| self.cpu_typed::<T>(s, l, v))
    }
    #[cfg(feature = "cuda")]
    fn cuda(&self, [(s, l)]: [Cuda<'_>; 1], v: Option<Cuda<'_>>) -> CudaOut {
        let (out, _, shape) = cuda::spmm_fwd(&self.g, s, l, v, self.reduce, false)?;
        Ok((out, shape))
    }
    fn bwd(&self, [x]: [&Tensor; 1], v: Option<&Tensor>, dy: &Tensor) -> Grads<1> {
        let _timer = self.g.backward_timer();
        let mean = self.reduce == Reduce::Mean;
        let Some(v) = v else {
            if !x.track_op() {
                return Ok(([None], None));
            }
            return Ok(([Some(transpose_product(&self.g, dy, None, mean)?)], None));
        };
        let dy = dy.contiguous()?;
        let dx = if x.track_op() {
            Some(transpose_product(&self.g, &dy, Some(v), mean)?)
        } else {
            None
        };
        let dv = if v.track_op() {
            let dy = self.scaled_grad(&dy)?;
            Some(crate::ops::sddmm::sddmm_no_bwd(&self.g, &dy, x)?)
        } else {
            None
        };
        Ok(([dx], dv))
    }
}
