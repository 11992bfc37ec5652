//! A value computed outside the autograd graph, attached to it as the output of one op whose
//! backward the caller writes: for fused layers assembled from other ops (a product, an
//! epilogue, a partitioned aggregation) that keep only what their backward reads, where a
//! chain of ops would keep every intermediate result as the next op's input.

use crate::error::Result;
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Shape, Tensor};
use std::sync::Mutex;

/// The gradients of an attached op's inputs for an output gradient, one per input.
pub type AttachedGrads = candle_core::Result<Vec<Option<Tensor>>>;

/// An attached op's backward: `(inputs, dy) -> their gradients`, in input order (`None` for
/// an input that does not track, or needs none).
pub type AttachedBackward = dyn Fn(&[&Tensor], &Tensor) -> AttachedGrads + Send + Sync;

/// `out`, computed from `inputs` (one to three tensors) outside the autograd graph (from
/// their detached values), as the output of one op over `inputs` whose backward is
/// `backward`: the graph then keeps the inputs (and whatever `backward` captured) and nothing
/// the computation made on the way. The forward hands `out` over as a copy (a transient
/// second `out` while the op runs). The caller answers for `backward` returning the
/// gradients of the function that made `out`.
pub fn attach_backward(
    out: Tensor,
    inputs: &[&Tensor],
    backward: Box<AttachedBackward>,
) -> Result<Tensor> {
    let op = Attached {
        out: Mutex::new(Some(out)),
        backward,
    };
    Ok(match inputs {
        [a] => a.apply_op1(op)?,
        [a, b] => a.apply_op2(b, op)?,
        [a, b, c] => a.apply_op3(b, c, op)?,
        _ => {
            return Err(crate::Error::shape(
                "attach_backward",
                format!("{} inputs (one to three)", inputs.len()),
            ))
        }
    })
}

struct Attached {
    out: Mutex<Option<Tensor>>,
    backward: Box<AttachedBackward>,
}

impl Attached {
    /// The output's storage, handed over (a copy) by the forward.
    fn cpu(&self) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = self.take()?;
        let (s, l) = out.storage_and_layout();
        match &*s {
            candle_core::Storage::Cpu(s) => Ok((s.try_clone(l)?, l.shape().clone())),
            _ => candle_core::bail!("attached: the output is not on the CPU"),
        }
    }

    #[cfg(feature = "cuda")]
    fn cuda(&self) -> candle_core::Result<(CudaStorage, Shape)> {
        let out = self.take()?;
        let (s, l) = out.storage_and_layout();
        match &*s {
            candle_core::Storage::Cuda(s) => Ok((s.try_clone(l)?, l.shape().clone())),
            _ => candle_core::bail!("attached: the output is not on the GPU"),
        }
    }

    fn take(&self) -> candle_core::Result<Tensor> {
        self.out
            .lock()
            .map_err(|_| candle_core::Error::Msg("attached: lock poisoned".into()))?
            .take()
            .ok_or_else(|| candle_core::Error::Msg("attached: forward ran twice".into()))
    }

    /// The backward's gradients, checked to be one per input.
    fn grads<const N: usize>(
        &self,
        inputs: [&Tensor; N],
        dy: &Tensor,
    ) -> candle_core::Result<[Option<Tensor>; N]> {
        let g = (self.backward)(&inputs, dy)?;
        let got = g.len();
        g.try_into().map_err(|_| {
            candle_core::Error::Msg(format!(
                "attached: the backward returned {got} gradients for {N} inputs"
            ))
        })
    }
}

impl CustomOp1 for Attached {
    fn name(&self) -> &'static str {
        "attached"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        self.cpu()
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, _: &CudaStorage, _: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        self.cuda()
    }

    fn bwd(&self, a: &Tensor, _res: &Tensor, dy: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let [da] = self.grads([a], dy)?;
        Ok(da)
    }
}

impl CustomOp2 for Attached {
    fn name(&self) -> &'static str {
        "attached"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.cpu()
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        _: &CudaStorage,
        _: &Layout,
        _: &CudaStorage,
        _: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        self.cuda()
    }

    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let [da, db] = self.grads([a, b], dy)?;
        Ok((da, db))
    }
}

impl CustomOp3 for Attached {
    fn name(&self) -> &'static str {
        "attached"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.cpu()
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        _: &CudaStorage,
        _: &Layout,
        _: &CudaStorage,
        _: &Layout,
        _: &CudaStorage,
        _: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        self.cuda()
    }

    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let [da, db, dc] = self.grads([a, b, c], dy)?;
        Ok((da, db, dc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn an_attached_product_has_the_composed_values_and_gradients() {
        let dev = Device::Cpu;
        let x = Var::from_tensor(&Tensor::randn(0f32, 1.0, (6, 4), &dev).unwrap()).unwrap();
        let w = Var::from_tensor(&Tensor::randn(0f32, 1.0, (3, 4), &dev).unwrap()).unwrap();
        let b = Var::from_tensor(&Tensor::randn(0f32, 1.0, 3, &dev).unwrap()).unwrap();
        let g = Tensor::randn(0f32, 1.0, (6, 3), &dev).unwrap();
        let composed = x
            .matmul(&w.t().unwrap())
            .unwrap()
            .broadcast_add(&b)
            .unwrap();
        let want = (&composed * &g)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let out = composed.detach();
        let y = attach_backward(
            out.clone(),
            &[&x, &w, &b],
            Box::new(|ins, dy| {
                let (x, w) = (ins[0].detach(), ins[1].detach());
                Ok(vec![
                    Some(dy.matmul(&w)?),
                    Some(dy.t()?.matmul(&x)?),
                    Some(dy.sum(0)?),
                ])
            }),
        )
        .unwrap();
        assert!(y.track_op());
        let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(flat(&y), flat(&out));
        let got = (&y * &g).unwrap().sum_all().unwrap().backward().unwrap();
        for v in [&x, &w, &b] {
            let (a, e) = (flat(got.get(v).unwrap()), flat(want.get(v).unwrap()));
            for (p, q) in a.iter().zip(&e) {
                assert!((p - q).abs() <= 1e-5 * (1.0 + q.abs()), "{p} vs {q}");
            }
        }
        // One and two inputs; a backward of the wrong arity is an error, not a lost gradient.
        let sq = x.sqr().unwrap().detach();
        let y = attach_backward(
            sq,
            &[&x],
            Box::new(|ins, dy| Ok(vec![Some(((dy * ins[0].detach())? * 2.0)?)])),
        )
        .unwrap();
        let got = y.sum_all().unwrap().backward().unwrap();
        let want = (x.as_tensor() * 2.0).unwrap();
        assert_eq!(flat(got.get(&x).unwrap()), flat(&want));
        let y = attach_backward(
            x.detach(),
            &[&x, &w],
            Box::new(|_, dy| Ok(vec![Some(dy.clone())])),
        )
        .unwrap();
        assert!(y.sum_all().unwrap().backward().is_err());
        assert!(attach_backward(x.detach(), &[], Box::new(|_, _| Ok(vec![]))).is_err());
    }
}
