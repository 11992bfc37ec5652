//! One op body for the twins that differ only by an optional last tensor input (edge values,
//! a fused bias): the op implements [`OptionalInput`] once, over `N` fixed inputs and an
//! `Option` for the last, and [`Without`] / [`With`] adapt it to candle's `CustomOp{N}` /
//! `CustomOp{N+1}`.
//!
//! ```text
//! x.apply_op1(Without(op))          // spmm          -> op.cpu([x], None)
//! x.apply_op2(&v, With(op))         // spmm_weighted -> op.cpu([x], Some(v))
//! ```

#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Shape, Tensor};

/// A CPU storage and its layout.
pub(crate) type Cpu<'a> = (&'a CpuStorage, &'a Layout);
/// A CUDA storage and its layout.
#[cfg(feature = "cuda")]
pub(crate) type Cuda<'a> = (&'a CudaStorage, &'a Layout);
/// What a CPU forward returns.
pub(crate) type CpuOut = candle_core::Result<(CpuStorage, Shape)>;
/// What a CUDA forward returns.
#[cfg(feature = "cuda")]
pub(crate) type CudaOut = candle_core::Result<(CudaStorage, Shape)>;
/// The gradients of the `N` inputs and of the optional one.
pub(crate) type Grads<const N: usize> = candle_core::Result<([Option<Tensor>; N], Option<Tensor>)>;

/// An op over `N` tensor inputs plus an optional last one (edge values, a bias).
pub(crate) trait OptionalInput<const N: usize> {
    /// The op's names without and with the optional input.
    const NAMES: [&'static str; 2];

    /// The op's name without (`false`) or with (`true`) the optional input.
    fn name(&self, with: bool) -> &'static str {
        Self::NAMES[usize::from(with)]
    }

    /// The CPU forward.
    fn cpu(&self, ins: [Cpu<'_>; N], last: Option<Cpu<'_>>) -> CpuOut;

    /// The CUDA forward.
    #[cfg(feature = "cuda")]
    fn cuda(&self, ins: [Cuda<'_>; N], last: Option<Cuda<'_>>) -> CudaOut;

    /// Gradients of the `N` inputs and of the optional one, for the output gradient `dy`.
    /// Ops applied without backward keep candle's refusal.
    fn bwd(&self, ins: [&Tensor; N], last: Option<&Tensor>, dy: &Tensor) -> Grads<N> {
        let _ = (ins, dy);
        Err(candle_core::Error::BackwardNotSupported {
            op: self.name(last.is_some()),
        })
    }
}

/// The op applied without its optional last input.
pub(crate) struct Without<O>(pub(crate) O);

/// The op applied with its optional last input.
pub(crate) struct With<O>(pub(crate) O);

impl<O: OptionalInput<1>> CustomOp1 for Without<O> {
    fn name(&self) -> &'static str {
        self.0.name(false)
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> CpuOut {
        self.0.cpu([(s, l)], None)
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> CudaOut {
        self.0.cuda([(s, l)], None)
    }
    fn bwd(&self, x: &Tensor, _res: &Tensor, dy: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let ([dx], _) = self.0.bwd([x], None, dy)?;
        Ok(dx)
    }
}

impl<O: OptionalInput<1>> CustomOp2 for With<O> {
    fn name(&self) -> &'static str {
        self.0.name(true)
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout, vs: &CpuStorage, vl: &Layout) -> CpuOut {
        self.0.cpu([(s, l)], Some((vs, vl)))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout, vs: &CudaStorage, vl: &Layout) -> CudaOut {
        self.0.cuda([(s, l)], Some((vs, vl)))
    }
    fn bwd(
        &self,
        x: &Tensor,
        v: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let ([dx], dv) = self.0.bwd([x], Some(v), dy)?;
        Ok((dx, dv))
    }
}

impl<O: OptionalInput<2>> CustomOp2 for Without<O> {
    fn name(&self) -> &'static str {
        self.0.name(false)
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> CpuOut {
        self.0.cpu([(s1, l1), (s2, l2)], None)
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s1: &CudaStorage, l1: &Layout, s2: &CudaStorage, l2: &Layout) -> CudaOut {
        self.0.cuda([(s1, l1), (s2, l2)], None)
    }
    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let ([da, db], _) = self.0.bwd([a, b], None, dy)?;
        Ok((da, db))
    }
}

impl<O: OptionalInput<2>> CustomOp3 for With<O> {
    fn name(&self) -> &'static str {
        self.0.name(true)
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> CpuOut {
        self.0.cpu([(s1, l1), (s2, l2)], Some((vs, vl)))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
        vs: &CudaStorage,
        vl: &Layout,
    ) -> CudaOut {
        self.0.cuda([(s1, l1), (s2, l2)], Some((vs, vl)))
    }
    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        v: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let ([da, db], dv) = self.0.bwd([a, b], Some(v), dy)?;
        Ok((da, db, dv))
    }
}
