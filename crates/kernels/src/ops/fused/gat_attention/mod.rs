//! GAT's attention coefficients in one op: `alpha = edge_softmax(LeakyReLU(s_dst[i] +
//! s_src[j]))` over the edges `j -> i` of each row (DGL's `u_add_v` score, the activation and
//! the normalisation fused). Only `alpha` is stored: on a head-expanded Reddit-sized graph
//! (~920 M edge-heads) the unfused chain keeps the scores, the activation's intermediates and
//! alpha, several GiB each.
//!
//! Backward: `dz = alpha ∘ (dalpha - rowsum(alpha ∘ dalpha)) ∘ LeakyReLU'(z)` in one kernel,
//! which also writes `ds_dst = rowsum(dz)`; `ds_src` is the column sum of `dz`, an SpMM over
//! the cached transpose (no atomics, deterministic).

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use crate::ops::{check_device, check_float, cpu_per_edge, cpu_slice};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Shape, Tensor, WithDType};

/// Attention coefficients `alpha` (`[nnz]`) from the per-node scores `s_dst` (`[n_rows]`, the
/// target side) and `s_src` (`[n_cols]`, the source side), LeakyReLU with `negative_slope`
/// (GAT: 0.2, which must be positive: the backward reads the sign of `z` from it).
pub fn gat_attention(
    g: &DeviceGraph,
    s_dst: &Tensor,
    s_src: &Tensor,
    negative_slope: f64,
) -> Result<Tensor> {
    const OP: &str = "gat_attention";
    for (t, what, n) in [(s_dst, "s_dst", g.n_rows()), (s_src, "s_src", g.n_cols())] {
        check_device(OP, g, t)?;
        check_float(OP, what, t)?;
        if t.dims() != [n] {
            return Err(Error::shape(
                OP,
                format!("{what} is {:?}, expected [{n}]", t.dims()),
            ));
        }
    }
    if s_dst.dtype() != s_src.dtype() {
        return Err(Error::dtype(
            OP,
            format!("s_dst is {:?}, s_src is {:?}", s_dst.dtype(), s_src.dtype()),
        ));
    }
    if !(negative_slope > 0.0 && negative_slope.is_finite()) {
        return Err(Error::invalid(
            OP,
            format!("negative_slope {negative_slope} must be positive and finite"),
        ));
    }
    Ok(s_dst.contiguous()?.apply_op2(
        &s_src.contiguous()?,
        GatAttentionOp {
            g: g.clone(),
            slope: negative_slope,
        },
    )?)
}

struct GatAttentionOp {
    g: DeviceGraph,
    slope: f64,
}

impl CustomOp2 for GatAttentionOp {
    fn name(&self) -> &'static str {
        "gat_attention"
    }
    fn cpu_fwd(
        &self,
        d: &CpuStorage,
        dl: &Layout,
        s: &CpuStorage,
        sl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        with_float!("gat_attention", d, |T| cpu_per_edge::<T>(
            "gat_attention",
            &self.g,
            (d, dl),
            (s, sl),
            |d, s| cpu::forward(self.g.csr(), d, s, self.slope)
        ))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        d: &CudaStorage,
        dl: &Layout,
        s: &CudaStorage,
        sl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::forward(&self.g, (d, dl), (s, sl), self.slope)
    }
    fn bwd(
        &self,
        s_dst: &Tensor,
        s_src: &Tensor,
        alpha: &Tensor,
        dalpha: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let _timer = self.g.backward_timer();
        let n = self.g.n_rows();
        // One buffer in: both score vectors; one buffer out: [ds_dst; dz].
        let scores = Tensor::cat(&[&s_dst.detach(), &s_src.detach()], 0)?;
        let out = scores.apply_op3_no_bwd(
            &alpha.detach(),
            &dalpha.contiguous()?,
            &GatAttentionBwdOp {
                g: self.g.clone(),
                slope: self.slope,
            },
        )?;
        let ds_dst = out.narrow(0, 0, n)?;
        let dz = out.narrow(0, n, self.g.nnz())?;
        let ds_src = if s_src.track_op() {
            let (gt, perm) = self.g.transpose()?;
            let ones = Tensor::ones((n, 1), dz.dtype(), dz.device())?;
            let col_sums = crate::ops::spmm::spmm_weighted(
                &gt,
                &ones,
                &dz.index_select(&perm, 0)?,
                crate::Reduce::Sum,
            )?;
            Some(col_sums.reshape(self.g.n_cols())?)
        } else {
            None
        };
        Ok((s_dst.track_op().then_some(ds_dst), ds_src))
    }
}

struct GatAttentionBwdOp {
    g: DeviceGraph,
    slope: f64,
}

fn bwd_cpu<T: WithDType>(
    op: &GatAttentionBwdOp,
    (s, sl): (&CpuStorage, &Layout),
    (a, al): (&CpuStorage, &Layout),
    (d, dl): (&CpuStorage, &Layout),
) -> candle_core::Result<(CpuStorage, Shape)> {
    const OP: &str = "gat_attention backward";
    let s = cpu_slice::<T>(OP, s, sl)?;
    let a = cpu_slice::<T>(OP, a, al)?;
    let d = cpu_slice::<T>(OP, d, dl)?;
    let n = op.g.n_rows();
    let out = cpu::backward(op.g.csr(), &s[..n], &s[n..], a, d, op.slope);
    Ok((T::to_cpu_storage_owned(out), Shape::from(n + op.g.nnz())))
}

impl CustomOp3 for GatAttentionBwdOp {
    fn name(&self) -> &'static str {
        "gat_attention_backward"
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        sl: &Layout,
        a: &CpuStorage,
        al: &Layout,
        d: &CpuStorage,
        dl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        dispatch_float!(
            "gat_attention backward",
            s,
            bwd_cpu(self, (s, sl), (a, al), (d, dl))
        )
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        sl: &Layout,
        a: &CudaStorage,
        al: &Layout,
        d: &CudaStorage,
        dl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::backward(&self.g, (s, sl), (a, al), (d, dl), self.slope)
    }
}
