//! Edge softmax: `alpha[p] = exp(s[p]) / sum_{q in row(p)} exp(s[q])` over the edges of each
//! CSR row (numerically stable: the row's maximum is subtracted first). The normalisation of
//! attention layers (GAT, graph transformers): rows are destinations, so each node's incoming
//! scores sum to one; on a head-expanded graph (`gnn_graph::Csr::expand_heads`) each (node,
//! head) row is normalised on its own. Empty rows produce nothing.
//!
//! Backward: `ds = alpha ∘ (dalpha - rowsum(alpha ∘ dalpha))`, an op of its own (CPU and CUDA).

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use super::{check_device, check_float, cpu_per_edge, cpu_slice};
use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Shape, Tensor, WithDType};

/// Softmax of the edge scores `s` (`[nnz]`) within each row of `g`.
pub fn edge_softmax(g: &DeviceGraph, s: &Tensor) -> Result<Tensor> {
    const OP: &str = "edge_softmax";
    check_device(OP, g, s)?;
    check_float(OP, "scores", s)?;
    if s.dims() != [g.nnz()] {
        return Err(Error::shape(
            OP,
            format!(
                "scores are {:?}, expected [{}] (one per edge)",
                s.dims(),
                g.nnz()
            ),
        ));
    }
    Ok(s.contiguous()?.apply_op1(EdgeSoftmaxOp { g: g.clone() })?)
}

struct EdgeSoftmaxOp {
    g: DeviceGraph,
}

fn fwd_cpu<T: WithDType>(
    g: &DeviceGraph,
    s: &CpuStorage,
    l: &Layout,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let v = cpu_slice::<T>("edge_softmax", s, l)?;
    Ok((
        T::to_cpu_storage_owned(cpu::forward(g.csr(), v)),
        Shape::from(g.nnz()),
    ))
}

impl CustomOp1 for EdgeSoftmaxOp {
    fn name(&self) -> &'static str {
        "edge_softmax"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!("edge_softmax", s, fwd_cpu(&self.g, s, l))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::forward(&self.g, s, l)
    }
    fn bwd(
        &self,
        _s: &Tensor,
        alpha: &Tensor,
        dalpha: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        let _timer = self.g.backward_timer();
        let op = EdgeSoftmaxBwdOp { g: self.g.clone() };
        Ok(Some(
            alpha
                .detach()
                .apply_op2_no_bwd(&dalpha.contiguous()?, &op)?,
        ))
    }
}

struct EdgeSoftmaxBwdOp {
    g: DeviceGraph,
}

impl CustomOp2 for EdgeSoftmaxBwdOp {
    fn name(&self) -> &'static str {
        "edge_softmax_backward"
    }
    fn cpu_fwd(
        &self,
        a: &CpuStorage,
        al: &Layout,
        d: &CpuStorage,
        dl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        with_float!("edge_softmax backward", a, |T| cpu_per_edge::<T>(
            "edge_softmax backward",
            &self.g,
            (a, al),
            (d, dl),
            |a, d| cpu::backward(self.g.csr(), a, d)
        ))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        a: &CudaStorage,
        al: &Layout,
        d: &CudaStorage,
        dl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::backward(&self.g, (a, al), (d, dl))
    }
}
