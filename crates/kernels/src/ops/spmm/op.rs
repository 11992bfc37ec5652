//! The SpMM forward op for every reduction (without argmax) and the sum/mean backward: the
//! candle `CustomOp1`/`CustomOp2` implementations that dispatch to the CPU and CUDA kernels.

use super::*;
/// Forward op for every reduction, without argmax; backward for sum/mean.
pub(super) struct SpmmOp {
    pub(super) g: DeviceGraph,
    pub(super) reduce: Reduce,
}

impl SpmmOp {
    fn cpu<T: WithDType>(
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

    /// `dy` scaled for the transpose product: `D^-1 dy` for mean, `dy` for sum.
    pub(super) fn scaled_grad(&self, dy: &Tensor) -> candle_core::Result<Tensor> {
        match self.reduce {
            Reduce::Mean => dy.broadcast_mul(&self.g.inv_degrees(dy.dtype())?),
            Reduce::Sum => Ok(dy.clone()),
            Reduce::Max | Reduce::Min => {
                candle_core::bail!("spmm: max/min backward goes through the argmax path")
            }
        }
    }
}

impl CustomOp1 for SpmmOp {
    fn name(&self) -> &'static str {
        "spmm"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        let (out, _, shape) = cuda::spmm_fwd(&self.g, s, l, None, self.reduce, false)?;
        Ok((out, shape))
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        with_float!("spmm", s, |T| self.cpu::<T>(s, l, None))
    }
    fn bwd(&self, x: &Tensor, _res: &Tensor, dy: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let _timer = self.g.backward_timer();
        if !x.track_op() {
            return Ok(None);
        }
        Ok(Some(transpose_product(
            &self.g,
            dy,
            None,
            self.reduce == Reduce::Mean,
        )?))
    }
}

impl CustomOp2 for SpmmOp {
    fn name(&self) -> &'static str {
        "spmm_weighted"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        vs: &CudaStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (out, _, shape) = cuda::spmm_fwd(&self.g, s, l, Some((vs, vl)), self.reduce, false)?;
        Ok((out, shape))
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        with_float!("spmm_weighted", s, |T| self.cpu::<T>(s, l, Some((vs, vl))))
    }
    fn bwd(
        &self,
        x: &Tensor,
        v: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let _timer = self.g.backward_timer();
        let dy = dy.contiguous()?;
        let mean = self.reduce == Reduce::Mean;
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
        Ok((dx, dv))
    }
}
