//! A value computed outside the autograd graph, attached to it as the output of one op whose
//! backward the caller writes: for fused layers assembled from other ops (a product, an
//! epilogue, a partitioned aggregation) that keep only what their backward reads, where a
//! chain of ops would keep every intermediate result as the next op's input.

use crate::error::Result;
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp3, Layout, Shape, Tensor};
use std::sync::Mutex;

/// The gradients of an attached op's three inputs for an output gradient.
pub type AttachedGrads = candle_core::Result<[Option<Tensor>; 3]>;

/// An attached op's backward: `(inputs, dy) -> their gradients` (`None` for an input that
/// does not track, or needs none).
pub type AttachedBackward = dyn Fn(&[&Tensor; 3], &Tensor) -> AttachedGrads + Send + Sync;

/// `out`, computed from `inputs` outside the autograd graph (from their detached values), as
/// the output of one op over `inputs` whose backward is `backward`: the graph then keeps the
/// inputs (and whatever `backward` captured) and nothing the computation made on the way.
/// The forward hands `out` over as a copy (a transient second `out` while the op runs). The
/// caller answers for `out` being the function whose gradients `backward` returns.
pub fn attach_backward(
    out: Tensor,
    inputs: [&Tensor; 3],
    backward: Box<AttachedBackward>,
) -> Result<Tensor> {
    let [a, b, c] = inputs;
    Ok(a.apply_op3(
        b,
        c,
        Attached {
            out: Mutex::new(Some(out)),
            backward,
        },
    )?)
}

struct Attached {
    out: Mutex<Option<Tensor>>,
    backward: Box<AttachedBackward>,
}

impl Attached {
    fn take(&self) -> candle_core::Result<Tensor> {
        self.out
            .lock()
            .map_err(|_| candle_core::Error::Msg("attached: lock poisoned".into()))?
            .take()
            .ok_or_else(|| candle_core::Error::Msg("attached: forward ran twice".into()))
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
        let out = self.take()?;
        let (s, l) = out.storage_and_layout();
        match &*s {
            candle_core::Storage::Cpu(s) => Ok((s.try_clone(l)?, l.shape().clone())),
            _ => candle_core::bail!("attached: the output is not on the CPU"),
        }
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
        let out = self.take()?;
        let (s, l) = out.storage_and_layout();
        match &*s {
            candle_core::Storage::Cuda(s) => Ok((s.try_clone(l)?, l.shape().clone())),
            _ => candle_core::bail!("attached: the output is not on the GPU"),
        }
    }

    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let [da, db, dc] = (self.backward)(&[a, b, c], dy)?;
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
            [&x, &w, &b],
            Box::new(|[x, w, _], dy| {
                Ok([
                    Some(dy.matmul(&w.detach())?),
                    Some(dy.t()?.matmul(&x.detach())?),
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
    }
}
