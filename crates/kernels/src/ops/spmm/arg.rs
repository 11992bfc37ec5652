//! The max/min path: the argmax forward (`SpmmArgOp`), the gather through it
//! (`GatherArgOp`, whose backward scatters to the winning edges: `ArgScatterOp`,
//! `ArgEdgeGradOp`), each one [`OptionalInput`] body (edge values optional) dispatching to the
//! CPU and CUDA kernels.

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

impl OptionalInput<1> for SpmmArgOp {
    const NAMES: [&'static str; 2] = ["spmm_arg", "spmm_arg_weighted"];
    fn cpu(&self, [(s, l)]: [Cpu<'_>; 1], v: Option<Cpu<'_>>) -> CpuOut {
        with_float!(self.name(v.is_some()), s, |T| arg_cpu::<T>(self, s, l, v))
    }
    #[cfg(feature = "cuda")]
    fn cuda(&self, [(s, l)]: [Cuda<'_>; 1], v: Option<Cuda<'_>>) -> CudaOut {
        let (_, arg, shape) = cuda::spmm_fwd(&self.g, s, l, v, self.reduce, true)?;
        arg.map(|a| (a, shape))
            .ok_or_else(|| candle_core::Error::Msg("spmm_arg: max/min only".into()))
    }
}

/// Rows moved through the argmax: the gather (`SCATTER == false`, [`GatherArgOp`]) and its
/// backward, the scatter (`SCATTER == true`, [`ArgScatterOp`]).
pub(super) struct ArgMoveOp<const SCATTER: bool> {
    pub(super) g: DeviceGraph,
}

/// `out[i,t] = a_p x[col_p, t]` at `p = arg[i,t]`: the max/min output rebuilt from its argmax,
/// carrying the backward.
pub(super) type GatherArgOp = ArgMoveOp<false>;

/// `dx[col_p, t] += a_p dy[i, t]` at `p = arg[i,t]`.
type ArgScatterOp = ArgMoveOp<true>;

fn u32_slice<'a>(s: &'a CpuStorage, l: &Layout) -> candle_core::Result<&'a [u32]> {
    cpu_slice::<u32>("spmm_gather_arg", s, l)
}

/// The CPU side of [`GatherArgOp`] (`scatter == false`: rows of `x` to the output's rows) and
/// [`ArgScatterOp`] (`scatter == true`: rows of `dy` added into `dx`'s `n_cols` rows).
fn move_cpu<T: WithDType>(
    g: &DeviceGraph,
    scatter: bool,
    (s, l): Cpu<'_>,
    (a, al): Cpu<'_>,
    v: Option<Cpu<'_>>,
) -> CpuOut {
    let op = if scatter {
        "spmm_arg_scatter"
    } else {
        "spmm_gather_arg"
    };
    let (_, k) = l.shape().dims2()?;
    let src = cpu_slice::<T>(op, s, l)?;
    let arg = u32_slice(a, al)?;
    let vals = cpu_slice_opt::<T>(op, v)?;
    let (out, rows) = if scatter {
        (cpu::scatter_arg(g.csr(), src, k, arg, vals), g.n_cols())
    } else {
        (cpu::gather_arg(g.csr(), src, k, arg, vals), g.n_rows())
    };
    Ok((T::to_cpu_storage_owned(out), Shape::from((rows, k))))
}

impl<const SCATTER: bool> ArgMoveOp<SCATTER> {
    /// The gather's input gradient: `dy` scattered through the argmax.
    fn dx(&self, dy: &Tensor, arg: &Tensor, v: Option<&Tensor>) -> candle_core::Result<Tensor> {
        refuse_atomics_if_deterministic(&self.g, dy)?;
        let op = ArgScatterOp { g: self.g.clone() };
        match v {
            Some(v) => dy.apply_op3_no_bwd(arg, v, &With(op)),
            None => dy.apply_op2_no_bwd(arg, &Without(op)),
        }
    }
}

impl<const SCATTER: bool> OptionalInput<2> for ArgMoveOp<SCATTER> {
    const NAMES: [&'static str; 2] = if SCATTER {
        ["spmm_arg_scatter", "spmm_arg_scatter_weighted"]
    } else {
        ["spmm_gather_arg", "spmm_gather_arg_weighted"]
    };
    fn cpu(&self, [x, arg]: [Cpu<'_>; 2], v: Option<Cpu<'_>>) -> CpuOut {
        with_float!(self.name(v.is_some()), x.0, |T| move_cpu::<T>(
            &self.g, SCATTER, x, arg, v
        ))
    }
    #[cfg(feature = "cuda")]
    fn cuda(&self, [(s, l), (a, al)]: [Cuda<'_>; 2], v: Option<Cuda<'_>>) -> CudaOut {
        if SCATTER {
            cuda::scatter_arg(&self.g, s, l, a, al, v)
        } else {
            cuda::gather_arg(&self.g, s, l, a, al, v)
        }
    }
    /// The gather's backward; the scatter has none.
    fn bwd(&self, [x, arg]: [&Tensor; 2], v: Option<&Tensor>, dy: &Tensor) -> Grads<2> {
        if SCATTER {
            return Err(candle_core::Error::BackwardNotSupported {
                op: self.name(v.is_some()),
            });
        }
        let _timer = self.g.backward_timer();
        let dy = dy.contiguous()?;
        let dx = if x.track_op() {
            Some(self.dx(&dy, arg, v)?)
        } else {
            None
        };
        let dv = match v {
            Some(v) if v.track_op() => {
                refuse_atomics_if_deterministic(&self.g, &dy)?;
                Some(dy.apply_op3_no_bwd(arg, x, &ArgEdgeGradOp { g: self.g.clone() })?)
            }
            _ => None,
        };
        Ok(([dx, None], dv))
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

/// Edge-value gradient of a weighted max/min: `da[p] = sum_{t : arg[i,t]=p} dy[i,t] x[col_p,t]`.
struct ArgEdgeGradOp {
    g: DeviceGraph,
}

fn edge_grad_cpu<T: WithDType>(
    op: &ArgEdgeGradOp,
    (s, l): Cpu<'_>,
    (a, al): Cpu<'_>,
    (xs, xl): Cpu<'_>,
) -> CpuOut {
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
            edge_grad_cpu(self, (s, l), (a, al), (xs, xl))
        )
    }
}
