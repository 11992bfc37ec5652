//! The max/min path: the argmax forward (`SpmmArgOp`), the gather through it
//! (`GatherArgOp`, whose backward scatters to the winning edges: `ArgScatterOp`,
//! `ArgEdgeGradOp`), as candle `CustomOp`s dispatching to the CPU and CUDA kernels.

use super::*;
/// Winning edge position per output entry of a max/min reduction (u32, `NO_EDGE` if empty).
pub(super) struct SpmmArgOp {
    pub(super) g: DeviceGraph,
    pub(super) reduce: Reduce,
}

fn arg_cpu<T: WithDType>(
    op: &SpmmArgOp,
    s: &CpuStorage,
    l: &Layout,
    v: Option<(&CpuStorage, &Layout)>,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (_, k) = l.shape().dims2()?;
    op.g.record("spmm", "cpu");
    let x = cpu_slice::<T>("spmm_arg", s, l)?;
    let vals = cpu_slice_opt::<T>("spmm_arg", v)?;
    let (_, arg) = cpu::spmm_extreme(op.g.csr(), x, k, vals, op.reduce == Reduce::Max, true);
    Ok((CpuStorage::U32(arg), Shape::from((op.g.n_rows(), k))))
}

impl CustomOp1 for SpmmArgOp {
    fn name(&self) -> &'static str {
        "spmm_arg"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        let (_, arg, shape) = cuda::spmm_fwd(&self.g, s, l, None, self.reduce, true)?;
        arg.map(|a| (a, shape))
            .ok_or_else(|| candle_core::Error::Msg("spmm_arg: max/min only".into()))
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        with_float!("spmm_arg", s, |T| arg_cpu::<T>(self, s, l, None))
    }
}

impl CustomOp2 for SpmmArgOp {
    fn name(&self) -> &'static str {
        "spmm_arg_weighted"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        vs: &CudaStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (_, arg, shape) = cuda::spmm_fwd(&self.g, s, l, Some((vs, vl)), self.reduce, true)?;
        arg.map(|a| (a, shape))
            .ok_or_else(|| candle_core::Error::Msg("spmm_arg: max/min only".into()))
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        with_float!("spmm_arg_weighted", s, |T| arg_cpu::<T>(
            self,
            s,
            l,
            Some((vs, vl))
        ))
    }
}

/// `out[i,t] = a_p x[col_p, t]` at `p = arg[i,t]`: the max/min output rebuilt from its argmax,
/// carrying the backward.
pub(super) struct GatherArgOp {
    pub(super) g: DeviceGraph,
}

fn u32_slice<'a>(s: &'a CpuStorage, l: &Layout) -> candle_core::Result<&'a [u32]> {
    cpu_slice::<u32>("spmm_gather_arg", s, l)
}

fn gather_cpu<T: WithDType>(
    op: &GatherArgOp,
    s: &CpuStorage,
    l: &Layout,
    a: &CpuStorage,
    al: &Layout,
    v: Option<(&CpuStorage, &Layout)>,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (_, k) = l.shape().dims2()?;
    let x = cpu_slice::<T>("spmm_gather_arg", s, l)?;
    let arg = u32_slice(a, al)?;
    let vals = cpu_slice_opt::<T>("spmm_gather_arg", v)?;
    let out = cpu::gather_arg(op.g.csr(), x, k, arg, vals);
    Ok((
        T::to_cpu_storage_owned(out),
        Shape::from((op.g.n_rows(), k)),
    ))
}

impl GatherArgOp {
    fn dx(&self, dy: &Tensor, arg: &Tensor, v: Option<&Tensor>) -> candle_core::Result<Tensor> {
        refuse_atomics_if_deterministic(&self.g, dy)?;
        let op = ArgScatterOp { g: self.g.clone() };
        match v {
            Some(v) => dy.apply_op3_no_bwd(arg, v, &op),
            None => dy.apply_op2_no_bwd(arg, &op),
        }
    }
}

impl CustomOp2 for GatherArgOp {
    fn name(&self) -> &'static str {
        "spmm_gather_arg"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        a: &CudaStorage,
        al: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::gather_arg(&self.g, s, l, a, al, None)
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        a: &CpuStorage,
        al: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        with_float!("spmm_gather_arg", s, |T| gather_cpu::<T>(
            self, s, l, a, al, None
        ))
    }
    fn bwd(
        &self,
        x: &Tensor,
        arg: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let _timer = self.g.backward_timer();
        let dx = if x.track_op() {
            Some(self.dx(&dy.contiguous()?, arg, None)?)
        } else {
            None
        };
        Ok((dx, None))
    }
}

impl CustomOp3 for GatherArgOp {
    fn name(&self) -> &'static str {
        "spmm_gather_arg_weighted"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        a: &CudaStorage,
        al: &Layout,
        vs: &CudaStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::gather_arg(&self.g, s, l, a, al, Some((vs, vl)))
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        a: &CpuStorage,
        al: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        with_float!("spmm_gather_arg_weighted", s, |T| {
            gather_cpu::<T>(self, s, l, a, al, Some((vs, vl)))
        })
    }
    fn bwd(
        &self,
        x: &Tensor,
        arg: &Tensor,
        v: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let _timer = self.g.backward_timer();
        let dy = dy.contiguous()?;
        let dx = if x.track_op() {
            Some(self.dx(&dy, arg, Some(v))?)
        } else {
            None
        };
        let dv = if v.track_op() {
            refuse_atomics_if_deterministic(&self.g, &dy)?;
            Some(dy.apply_op3_no_bwd(arg, x, &ArgEdgeGradOp { g: self.g.clone() })?)
        } else {
            None
        };
        Ok((dx, None, dv))
    }
}

/// The max/min backward scatters with float atomics on the GPU: in deterministic mode it is
/// refused instead of silently breaking the promise.
fn refuse_atomics_if_deterministic(g: &DeviceGraph, dy: &Tensor) -> candle_core::Result<()> {
    if g.policy().deterministic && dy.device().is_cuda() {
        return Err(Error::unsupported(
            "spmm",
            "the max/min aggregation backward on the GPU scatters with float atomics and has \
             no deterministic kernel: aggregate with sum or mean, or run on a graph whose \
             `KernelPolicy::deterministic` is off",
        )
        .into());
    }
    Ok(())
}

/// `dx[col_p, t] += a_p dy[i, t]` at `p = arg[i,t]`.
struct ArgScatterOp {
    g: DeviceGraph,
}

fn scatter_cpu<T: WithDType>(
    op: &ArgScatterOp,
    s: &CpuStorage,
    l: &Layout,
    a: &CpuStorage,
    al: &Layout,
    v: Option<(&CpuStorage, &Layout)>,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (_, k) = l.shape().dims2()?;
    let dy = cpu_slice::<T>("spmm_arg_scatter", s, l)?;
    let arg = u32_slice(a, al)?;
    let vals = cpu_slice_opt::<T>("spmm_arg_scatter", v)?;
    let n_src = op.g.n_cols();
    let dx = cpu::scatter_arg(op.g.csr(), dy, k, arg, vals);
    Ok((T::to_cpu_storage_owned(dx), Shape::from((n_src, k))))
}

impl CustomOp2 for ArgScatterOp {
    fn name(&self) -> &'static str {
        "spmm_arg_scatter"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        a: &CudaStorage,
        al: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::scatter_arg(&self.g, s, l, a, al, None)
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        a: &CpuStorage,
        al: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        with_float!("spmm_arg_scatter", s, |T| scatter_cpu::<T>(
            self, s, l, a, al, None
        ))
    }
}

impl CustomOp3 for ArgScatterOp {
    fn name(&self) -> &'static str {
        "spmm_arg_scatter_weighted"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        a: &CudaStorage,
        al: &Layout,
        vs: &CudaStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::scatter_arg(&self.g, s, l, a, al, Some((vs, vl)))
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        a: &CpuStorage,
        al: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        with_float!("spmm_arg_scatter_weighted", s, |T| {
            scatter_cpu::<T>(self, s, l, a, al, Some((vs, vl)))
        })
    }
}

/// Edge-value gradient of a weighted max/min: `da[p] = sum_{t : arg[i,t]=p} dy[i,t] x[col_p,t]`.
struct ArgEdgeGradOp {
    g: DeviceGraph,
}

fn edge_grad_cpu<T: WithDType>(
    op: &ArgEdgeGradOp,
    s: &CpuStorage,
    l: &Layout,
    a: &CpuStorage,
    al: &Layout,
    xs: &CpuStorage,
    xl: &Layout,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (_, k) = l.shape().dims2()?;
    let dy = cpu_slice::<T>("spmm_arg_edge_grad", s, l)?;
    let arg = u32_slice(a, al)?;
    let x = cpu_slice::<T>("spmm_arg_edge_grad", xs, xl)?;
    let dv = cpu::edge_grad_arg(op.g.csr(), dy, x, k, arg);
    Ok((T::to_cpu_storage_owned(dv), Shape::from(op.g.nnz())))
}

impl CustomOp3 for ArgEdgeGradOp {
    fn name(&self) -> &'static str {
        "spmm_arg_edge_grad"
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        a: &CudaStorage,
        al: &Layout,
        xs: &CudaStorage,
        xl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::edge_grad_arg(&self.g, s, l, a, al, xs, xl)
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        a: &CpuStorage,
        al: &Layout,
        xs: &CpuStorage,
        xl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!(
            "spmm_arg_edge_grad",
            s,
            edge_grad_cpu(self, s, l, a, al, xs, xl)
        )
    }
}
