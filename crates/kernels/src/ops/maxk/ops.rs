//! The MaxK CustomOps and their CPU/CUDA dispatch: selection (`SelectOp`, the fused CUDA
//! `FusedMaxkOp`), dense <-> CBSR moves (`CbsrMoveOp`), and the SpGEMM / SSpMM row kernels
//! (`CbsrRowOp`, with the fused bias).

use super::*;

/// Runs `f` with the CPU index slice typed by the storage's dtype.
macro_rules! with_index {
    ($op:expr, $s:expr, $l:expr, |$ix:ident: $I:ident| $body:expr) => {
        match $s {
            CpuStorage::U8(_) => {
                type $I = u8;
                let $ix = cpu_slice::<u8>($op, $s, $l)?;
                $body
            }
            CpuStorage::I16(_) => {
                type $I = i16;
                let $ix = cpu_slice::<i16>($op, $s, $l)?;
                $body
            }
            o => candle_core::bail!("{}: index dtype {:?} (u8 or i16 expected)", $op, o.dtype()),
        }
    };
}

pub(crate) struct SelectOp {
    pub(crate) k: usize,
}

impl CustomOp1 for SelectOp {
    fn name(&self) -> &'static str {
        "maxk_select"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (n, d) = l.shape().dims2()?;
        let out = with_float!("maxk", s, |T| {
            let h = cpu_slice::<T>("maxk", s, l)?;
            if d <= 256 {
                u8::to_cpu_storage_owned(cpu::select::<T, u8>(h, d, self.k))
            } else {
                i16::to_cpu_storage_owned(cpu::select::<T, i16>(h, d, self.k))
            }
        });
        Ok((out, Shape::from((n, self.k))))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::select(s, l, self.k)
    }
}

/// MaxK of a CUDA f32 tensor in one kernel: the selection writes the columns into `index`
/// (allocated by [`maxk`] for this call alone, and handed out only with the result) and the
/// op's output is the kept values. The backward scatters the gradient to the kept columns.
/// Other devices and dtypes take [`SelectOp`] followed by the gather.
#[cfg(feature = "cuda")]
pub(crate) struct FusedMaxkOp {
    pub(crate) k: usize,
    pub(crate) d: usize,
    pub(crate) index: Tensor,
}

#[cfg(feature = "cuda")]
impl CustomOp1 for FusedMaxkOp {
    fn name(&self) -> &'static str {
        "maxk"
    }
    fn cpu_fwd(&self, _s: &CpuStorage, _l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        candle_core::bail!("maxk: the fused selection is CUDA-only (the CPU runs select + gather)")
    }
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        let (guard, il) = self.index.storage_and_layout();
        let candle_core::Storage::Cuda(is) = &*guard else {
            candle_core::bail!("maxk: the index buffer is not on the GPU");
        };
        cuda::select_fused(s, l, is, il, self.k)
    }
    fn bwd(
        &self,
        _h: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        let back = CbsrMoveOp {
            k: self.k,
            d: self.d,
            scatter: true,
        };
        Ok(Some(
            grad.contiguous()?.apply_op2_no_bwd(&self.index, &back)?,
        ))
    }
}

/// Moves entries between dense `[N, D]` and CBSR `[N, k]` at the pattern `index`: gather
/// (`scatter == false`, dense to CBSR) or scatter (CBSR to a dense array, zeros elsewhere).
/// Each is the other's backward.
pub(crate) struct CbsrMoveOp {
    pub(crate) k: usize,
    pub(crate) d: usize,
    pub(crate) scatter: bool,
}

impl CbsrMoveOp {
    fn label(&self) -> &'static str {
        if self.scatter {
            "cbsr_scatter"
        } else {
            "cbsr_gather"
        }
    }
}

impl CustomOp2 for CbsrMoveOp {
    fn name(&self) -> &'static str {
        self.label()
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        is: &CpuStorage,
        il: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (n, _) = l.shape().dims2()?;
        let (op, k, d) = (self.label(), self.k, self.d);
        let out = with_float!(op, s, |T| {
            let src = cpu_slice::<T>(op, s, l)?;
            with_index!(op, is, il, |ix: I| T::to_cpu_storage_owned(
                if self.scatter {
                    cpu::scatter::<T, I>(src, ix, d, k)
                } else {
                    cpu::gather::<T, I>(src, ix, d, k)
                }
            ))
        });
        let width = if self.scatter { d } else { k };
        Ok((out, Shape::from((n, width))))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        is: &CudaStorage,
        il: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::move_entries(s, l, is, il, self.k, self.d, self.scatter)
    }
    fn bwd(
        &self,
        _src: &Tensor,
        index: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let back = CbsrMoveOp {
            scatter: !self.scatter,
            ..*self
        };
        Ok((
            Some(grad.contiguous()?.apply_op2_no_bwd(index, &back)?),
            None,
        ))
    }
}

/// The two row kernels over the forward CSR and a CBSR index: SpGEMM (`backward == false`:
/// CBSR data in, dense `[n_rows, D]` out, differentiable) and SSpMM (`backward == true`: dense
/// `[n_rows, D]` gradient in, CBSR-shaped `[n_cols, k]` out, used inside SpGEMM's backward).
/// The constant edge values ride in the op; as a [`CustomOp3`] the third input is a bias `[D]`
/// fused into the SpGEMM output (and differentiated: its gradient is the column sum of `dOut`).
pub(crate) struct CbsrRowOp {
    pub(crate) g: DeviceGraph,
    pub(crate) k: usize,
    pub(crate) d: usize,
    pub(crate) mean: bool,
    pub(crate) backward: bool,
    pub(crate) values: Option<Tensor>,
}

impl CbsrRowOp {
    fn label(&self) -> &'static str {
        if self.backward {
            "sspmm"
        } else {
            "spgemm"
        }
    }

    pub(crate) fn fwd_cpu(
        &self,
        s: &CpuStorage,
        l: &Layout,
        is: &CpuStorage,
        il: &Layout,
        bias: Option<(&CpuStorage, &Layout)>,
        residual: Option<(&CpuStorage, &Layout)>,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let op = self.label();
        let (k, d, mean) = (self.k, self.d, self.mean);
        let guard = self.values.as_ref().map(|v| v.storage_and_layout());
        let v = match &guard {
            Some((st, vl)) => match &**st {
                candle_core::Storage::Cpu(c) => Some((c, *vl)),
                _ => candle_core::bail!("{op}: edge values are not on the CPU"),
            },
            None => None,
        };
        if !self.backward {
            let out = with_float!(op, s, |T| {
                let data = cpu_slice::<T>(op, s, l)?;
                let vals = cpu_slice_opt::<T>(op, v)?;
                let bias = cpu_slice_opt::<T>(op, bias)?;
                let mut out = with_index!(op, is, il, |ix: I| cpu::spgemm::<T, I>(
                    self.g.csr(),
                    data,
                    ix,
                    k,
                    d,
                    vals,
                    mean
                ));
                if let Some(b) = bias {
                    for row in out.chunks_exact_mut(d.max(1)) {
                        row.iter_mut().zip(b).for_each(|(o, &b)| *o += b);
                    }
                }
                if let Some(r) = cpu_slice_opt::<T>(op, residual)? {
                    out.iter_mut().zip(r).for_each(|(o, &r)| *o += r);
                }
                T::to_cpu_storage_owned(out)
            });
            return Ok((out, Shape::from((self.g.n_rows(), d))));
        }
        let (t, perm) = self
            .g
            .transpose()
            .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        let perm: Vec<u32> = perm.to_vec1()?;
        let out = with_float!(op, s, |T| {
            let dout = cpu_slice::<T>(op, s, l)?;
            let vals = cpu_slice_opt::<T>(op, v)?;
            with_index!(op, is, il, |ix: I| T::to_cpu_storage_owned(cpu::sspmm::<
                T,
                I,
            >(
                self.g.csr(),
                t.csr(),
                &perm,
                dout,
                ix,
                k,
                d,
                vals,
                mean
            )))
        });
        Ok((out, Shape::from((self.g.n_cols(), k))))
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn fwd_cuda(
        &self,
        s: &CudaStorage,
        l: &Layout,
        is: &CudaStorage,
        il: &Layout,
        bias: Option<(&CudaStorage, &Layout)>,
        residual: Option<(&CudaStorage, &Layout)>,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let guard = self.values.as_ref().map(|v| v.storage_and_layout());
        let v = match &guard {
            Some((st, vl)) => match &**st {
                candle_core::Storage::Cuda(c) => Some((c, *vl)),
                _ => candle_core::bail!("{}: edge values are not on the GPU", self.label()),
            },
            None => None,
        };
        cuda::row_kernel(
            &self.g,
            s,
            l,
            is,
            il,
            v,
            bias,
            residual,
            self.k,
            self.d,
            self.mean,
            self.backward,
        )
    }

    /// SpGEMM's gradient with respect to the CBSR data: the SSpMM.
    pub(crate) fn grad(&self, index: &Tensor, grad: &Tensor) -> candle_core::Result<Tensor> {
        if self.backward {
            candle_core::bail!("sspmm has no backward (it is itself a backward pass)");
        }
        let _timer = self.g.backward_timer();
        sspmm_raw(
            &self.g,
            &grad.contiguous()?,
            index,
            self.k,
            self.d,
            self.values.as_ref(),
            self.mean,
        )
    }
}

/// SpGEMM / SSpMM over `(data, index)`, with the SpGEMM's fused bias `[D]` as the optional
/// third input.
impl OptionalInput<2> for CbsrRowOp {
    const NAMES: [&'static str; 2] = ["spgemm", "spgemm_bias"];
    fn name(&self, bias: bool) -> &'static str {
        if bias {
            "spgemm_bias"
        } else {
            self.label()
        }
    }
    fn cpu(&self, [(s, l), (is, il)]: [Cpu<'_>; 2], bias: Option<Cpu<'_>>) -> CpuOut {
        self.fwd_cpu(s, l, is, il, bias, None)
    }
    #[cfg(feature = "cuda")]
    fn cuda(&self, [(s, l), (is, il)]: [Cuda<'_>; 2], bias: Option<Cuda<'_>>) -> CudaOut {
        self.fwd_cuda(s, l, is, il, bias, None)
    }
    fn bwd(&self, [_, index]: [&Tensor; 2], bias: Option<&Tensor>, grad: &Tensor) -> Grads<2> {
        let dbias = match bias {
            Some(b) => bias_grad(b, grad)?,
            None => None,
        };
        Ok(([Some(self.grad(index, grad)?), None], dbias))
    }
}

/// SpGEMM with a fused bias and residual: `(data, bias, residual)` -> `A · data + bias +
/// residual`, the CBSR index riding in the op. A residual hidden layer's output in one pass:
/// the separate add, and the zero-filled gradient accumulation of its second operand, go.
/// Backward: the SSpMM for `data`, the column sum for `bias`, `dOut` itself for `residual`.
pub(crate) struct SpgemmResidualOp {
    pub(crate) op: CbsrRowOp,
    pub(crate) index: Tensor,
}

impl CustomOp3 for SpgemmResidualOp {
    fn name(&self) -> &'static str {
        "spgemm_bias_residual"
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        bs: &CpuStorage,
        bl: &Layout,
        rs: &CpuStorage,
        rl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (is, il) = self.index.storage_and_layout();
        let candle_core::Storage::Cpu(is) = &*is else {
            candle_core::bail!("spgemm: the CBSR index is not on the CPU");
        };
        self.op
            .fwd_cpu(s, l, is, il, Some((bs, bl)), Some((rs, rl)))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        bs: &CudaStorage,
        bl: &Layout,
        rs: &CudaStorage,
        rl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (is, il) = self.index.storage_and_layout();
        let candle_core::Storage::Cuda(is) = &*is else {
            candle_core::bail!("spgemm: the CBSR index is not on the GPU");
        };
        self.op
            .fwd_cuda(s, l, is, il, Some((bs, bl)), Some((rs, rl)))
    }
    fn bwd(
        &self,
        _data: &Tensor,
        bias: &Tensor,
        residual: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let dbias = bias_grad(bias, grad)?;
        let dres = residual.track_op().then(|| grad.clone());
        Ok((Some(self.op.grad(&self.index, grad)?), dbias, dres))
    }
}

/// The fused bias's gradient, the column sum of `dOut`, when the bias tracks one.
pub(crate) fn bias_grad(bias: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
    bias.track_op()
        .then(|| crate::ops::column_sum(grad))
        .transpose()
}
