//! The candle custom ops that carry the halo exchange's backward passes: [`ExchangeGrad`]
//! (the rows' exchange: gradients go home to their owners) and [`SymmetricAggregate`] (the
//! fused aggregation: the same exchange and SpMM again on the output gradient).

use super::symmetric::SymmetricOperand;
use super::{Mode, Plan};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, Layout, Shape, Tensor};
use std::sync::Arc;

/// [`super::HaloExchange::aggregate_symmetric`]'s op: its forward hands over the output
/// computed outside candle's graph (held until then, so that the graph keeps only the copy),
/// its backward gathers the output gradient and runs the local SpMM again.
pub(super) struct SymmetricAggregate {
    pub(super) plan: Arc<Plan>,
    pub(super) operand: SymmetricOperand,
    pub(super) mean: bool,
    pub(super) out: std::sync::Mutex<Option<Tensor>>,
}

impl SymmetricAggregate {
    fn take(&self) -> candle_core::Result<Tensor> {
        self.out
            .lock()
            .map_err(|_| candle_core::Error::Msg("halo_aggregate: lock poisoned".into()))?
            .take()
            .ok_or_else(|| candle_core::Error::Msg("halo_aggregate: forward ran twice".into()))
    }
}

impl candle_core::CustomOp1 for SymmetricAggregate {
    fn name(&self) -> &'static str {
        "halo_aggregate"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = self.take()?;
        let (s, l) = out.storage_and_layout();
        match &*s {
            candle_core::Storage::Cpu(s) => copy(s, l),
            _ => candle_core::bail!("halo_aggregate: the output is not on the CPU"),
        }
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        _: &candle_core::CudaStorage,
        _: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let out = self.take()?;
        let (s, l) = out.storage_and_layout();
        match &*s {
            candle_core::Storage::Cuda(s) => copy(s, l),
            _ => candle_core::bail!("halo_aggregate: the output is not on the GPU"),
        }
    }

    fn bwd(&self, x: &Tensor, _res: &Tensor, dy: &Tensor) -> candle_core::Result<Option<Tensor>> {
        if !x.track_op() {
            return Ok(None);
        }
        let dx = transpose_product(&self.plan, &self.operand, self.mean, dy)
            .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        Ok(Some(dx))
    }
}

/// `Âᵀ dy` for this rank's rows of a symmetric operand (`A D⁻¹ dy` for the mean): the
/// exchange of `dy` (the mean: `D⁻¹ dy`, in f32) and the same SpMM as the forward, the
/// exchange timed as the communicator's and the rest as the first slice's backward.
pub(super) fn transpose_product(
    plan: &Arc<Plan>,
    operand: &SymmetricOperand,
    mean: bool,
    dy: &Tensor,
) -> crate::Result<Tensor> {
    let dy = dy.contiguous()?;
    let dy = if mean {
        let inv = operand.inv_degrees()?;
        dy.to_dtype(candle_core::DType::F32)?
            .broadcast_mul(&inv)?
            .to_dtype(dy.dtype())?
    } else {
        dy
    };
    plan.check_rows(&dy)?;
    // The exchange runs inside the timed span (overlapped with the own slices): its time is
    // the communicator's, not the aggregation's.
    let (g, c0) = (operand.first_graph(), plan.comm.time_spent());
    let timer = g.backward_timer();
    let dx = operand.product(&plan.comm, &dy, false)?;
    drop(timer);
    g.deduct_backward_time(plan.comm.time_spent().saturating_sub(c0));
    Ok(dx)
}

/// `(x, received) -> received` whose backward returns the received rows' gradients to their
/// owners and adds what comes back onto `x`: the point-to-point path sends `d halo` home and
/// scatter-adds it onto the sent rows; the all-gather path reduce-scatters the gradient of
/// every block (this rank's own block included).
pub(super) struct ExchangeGrad(pub(super) Arc<Plan>);

fn copy<S: BackendStorage>(s: &S, l: &Layout) -> candle_core::Result<(S, Shape)> {
    if !l.is_contiguous() || l.start_offset() != 0 {
        candle_core::bail!("halo: the received rows must be a fresh contiguous tensor");
    }
    Ok((s.try_clone(l)?, l.shape().clone()))
}

impl CustomOp2 for ExchangeGrad {
    fn name(&self) -> &'static str {
        "halo_exchange"
    }
    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        s: &CpuStorage,
        l: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        copy(s, l)
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        _: &candle_core::CudaStorage,
        _: &Layout,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        copy(s, l)
    }
    fn bwd(
        &self,
        x: &Tensor,
        _received: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let p = &self.0;
        let d = dy.dim(1)?;
        let dy = dy.contiguous()?;
        let dx = match &p.mode {
            Mode::PointToPoint {
                scatter,
                send_counts,
                recv_counts,
                ..
            } => {
                // Split d halo by owner (the halo groups are contiguous, in rank order).
                let mut at = 0;
                let sends = recv_counts
                    .iter()
                    .map(|&c| {
                        let t = dy.narrow(0, at, c)?;
                        at += c;
                        Ok(t)
                    })
                    .collect::<candle_core::Result<Vec<_>>>()?;
                let back = p.comm.exchange(&sends, send_counts)?;
                match scatter {
                    Some(s) => {
                        gnn_kernels::spmm(s, &Tensor::cat(&back, 0)?, gnn_kernels::Reduce::Sum)?
                    }
                    None => Tensor::zeros((p.n_local, d), dy.dtype(), dy.device())?,
                }
            }
            Mode::AllGather { .. } => p
                .comm
                .reduce_scatter_sum(&dy)?
                .narrow(0, 0, p.n_local)?
                .contiguous()?,
        };
        Ok((x.track_op().then_some(dx), None))
    }
}
