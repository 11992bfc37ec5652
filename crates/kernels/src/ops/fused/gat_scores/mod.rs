//! GAT's node scores: `s_src[n, h] = <xs[n, h], a_src[h]>` and `s_dst[n, h] = <xs[n, h],
//! a_dst[h]>` for every row and head, accumulated in fp32 (f64 on the CPU) from the features'
//! storage type: one pass over the features each way.
//!
//! The composed form casts the projected features to f32 (a full `[N, H F]` copy under half
//! precision), multiplies them by a block-diagonal `[H F, 2 H]` matrix built from both
//! attention vectors, and copies each half of the product out; backward it runs the GEMM's two
//! products, the block matrix's chain of small kernels, the copies' zero-padded gradients and
//! a cast back: about 0.97 ms of a bf16 GAT 2x64 epoch on one H100 at 233 K nodes
//! (`bench/records/gat-sparse/h100-2026-11-28-2/row-term/call6-kernels.csv.xz`, kernels
//! 216-225 and 238-247 forward, 297-316 and 363-386 backward).
//! Here: one kernel forward (beside the attention vectors' concatenation and the handing over
//! of the `[2, N, H]` result); backward one kernel for `dxs` and one for both attention
//! vectors' gradients (per-block column sums, then one GEMM row over the blocks:
//! deterministic), each skipped where its inputs do not track.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use crate::error::{Error, Result};
use crate::ops::fused::gat_aggregate::{f64s, storage};
use crate::ops::{check_device_of, check_float_or_half};
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp2, DType, Layout, Shape, Tensor};

/// Both node scores of every head of `xs` (`[n, heads * width]`; f32 or f64 on the CPU, f32,
/// bf16 or f16 on a GPU) under the attention vectors `att_src` and `att_dst` (`heads * width`
/// values each, head-major, PyG's `[1, heads, width]`; f32, or f64 on the CPU): `[2, n,
/// heads]` in the attention vectors' dtype, the source scores (side 0) and the destination
/// scores (side 1) of every row, the layout [`crate::gat_aggregate`] takes. Differentiable in
/// all three; the gradient of `xs` comes in its own dtype (fp32 arithmetic, rounded once).
pub fn gat_scores(xs: &Tensor, att_src: &Tensor, att_dst: &Tensor, heads: usize) -> Result<Tensor> {
    const OP: &str = "gat_scores";
    let (_, hf) = xs.dims2().map_err(|_| {
        Error::shape(
            OP,
            format!("xs is {:?}, expected [n, heads * width]", xs.dims()),
        )
    })?;
    if heads == 0 || hf == 0 || hf % heads != 0 {
        return Err(Error::shape(
            OP,
            format!("xs has {hf} columns, not a positive multiple of {heads} heads"),
        ));
    }
    crate::ops::check_columns_i32(OP, hf)?;
    check_float_or_half(OP, "xs", xs)?;
    let cuda = xs.device().is_cuda();
    if cuda && xs.dtype() == DType::F64 {
        return Err(Error::dtype(
            OP,
            "xs is F64: the CUDA kernels take f32, bf16 or f16 features",
        ));
    }
    for (t, what) in [(att_src, "att_src"), (att_dst, "att_dst")] {
        check_device_of(OP, xs, t)?;
        if t.elem_count() != hf {
            return Err(Error::shape(
                OP,
                format!("{what} is {:?}, expected {hf} values", t.dims()),
            ));
        }
        if !crate::ops::is_f32_or_cpu_f64(t) || t.dtype() != att_src.dtype() {
            return Err(Error::dtype(
                OP,
                format!(
                    "{what} is {:?} (att_src {:?}): the attention vectors are f32 (f64 also on \
                     the CPU), both of one dtype",
                    t.dtype(),
                    att_src.dtype()
                ),
            ));
        }
    }
    let width = hf / heads;
    let plan = Plan { heads, width };
    let att = Tensor::cat(
        &[
            att_src.detach().flatten_all()?,
            att_dst.detach().flatten_all()?,
        ],
        0,
    )?;
    let xd = xs.detach().contiguous()?;
    let s = xd.apply_op2_no_bwd(&att, &ScoresOp(plan))?;
    let (src_shape, dst_shape) = (att_src.shape().clone(), att_dst.shape().clone());
    crate::attach_backward(
        s,
        &[xs, att_src, att_dst],
        Box::new(move |ins, ds| {
            let ds = ds.contiguous()?;
            let dxs = ins[0]
                .track_op()
                .then(|| ds.apply_op2_no_bwd(&att, &DxOp(plan, xd.dtype())))
                .transpose()?;
            let (mut da_src, mut da_dst) = (None, None);
            if ins[1].track_op() || ins[2].track_op() {
                let partial = xd.apply_op2_no_bwd(&ds, &DattOp(plan))?;
                let datt = crate::ops::column_sum(&partial)?;
                da_src = Some(datt.narrow(0, 0, hf)?.reshape(&src_shape)?);
                da_dst = Some(datt.narrow(0, hf, hf)?.reshape(&dst_shape)?);
            }
            Ok(vec![dxs, da_src, da_dst])
        }),
    )
}

/// Heads and their width.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    heads: usize,
    width: usize,
}

/// The forward: `[2, n, heads]` (the attention vectors' dtype) from xs and `[a_src; a_dst]`.
struct ScoresOp(Plan);

impl CustomOp2 for ScoresOp {
    fn name(&self) -> &'static str {
        "gat_scores"
    }
    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        a: &CpuStorage,
        al: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        const OP: &str = "gat_scores";
        let Plan { heads, width } = self.0;
        let (xs, att) = (f64s(OP, x, xl)?, f64s(OP, a, al)?);
        let n = xl.shape().dims()[0];
        let s = cpu::forward(&xs, &att, heads, width);
        Ok((storage(s, a.dtype()), Shape::from((2, n, heads))))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        a: &CudaStorage,
        al: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::forward((x, xl), (a, al), self.0)
    }
}

/// `dxs` (`[n, heads * width]`, of the given dtype) from `ds [2, n, heads]` and `[a_src;
/// a_dst]`.
struct DxOp(Plan, DType);

impl CustomOp2 for DxOp {
    fn name(&self) -> &'static str {
        "gat_scores_dx"
    }
    fn cpu_fwd(
        &self,
        d: &CpuStorage,
        dl: &Layout,
        a: &CpuStorage,
        al: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        const OP: &str = "gat_scores backward";
        let Plan { heads, width } = self.0;
        let (ds, att) = (f64s(OP, d, dl)?, f64s(OP, a, al)?);
        let n = dl.shape().dims()[1];
        let dxs = cpu::dx(&ds, &att, heads, width);
        Ok((storage(dxs, self.1), Shape::from((n, heads * width))))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        d: &CudaStorage,
        dl: &Layout,
        a: &CudaStorage,
        al: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::dx((d, dl), (a, al), self.0, self.1)
    }
}

/// Both attention vectors' gradients as per-block partial sums `[blocks, 2 heads width]`
/// (the scores' dtype; one block on the CPU) from xs and `ds [2, n, heads]`.
struct DattOp(Plan);

impl CustomOp2 for DattOp {
    fn name(&self) -> &'static str {
        "gat_scores_datt"
    }
    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        d: &CpuStorage,
        dl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        const OP: &str = "gat_scores backward";
        let Plan { heads, width } = self.0;
        let (xs, ds) = (f64s(OP, x, xl)?, f64s(OP, d, dl)?);
        let datt = cpu::datt(&xs, &ds, heads, width);
        Ok((
            storage(datt, d.dtype()),
            Shape::from((1, 2 * heads * width)),
        ))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        d: &CudaStorage,
        dl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::datt((x, xl), (d, dl), self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var, D};

    /// Against the per-head `sum_f xs[n, h, f] att[h, f]` of candle's ops, values and all three
    /// gradients, in f64 and with f32 features under f64 attention vectors; shapes with one
    /// head of 41, eight of 8, three of 5, no rows and one column.
    #[test]
    fn scores_equal_the_per_head_products_both_ways() {
        let dev = Device::Cpu;
        for (n, heads, width, xdt) in [
            (7usize, 3usize, 5usize, DType::F64),
            (50, 1, 41, DType::F64),
            (33, 8, 8, DType::F32),
            (0, 2, 4, DType::F64),
            (9, 1, 1, DType::F64),
        ] {
            let x0 = Tensor::randn(0f64, 1.0, (n, heads * width), &dev)
                .unwrap()
                .to_dtype(xdt)
                .unwrap();
            let a0 = Tensor::randn(0f64, 1.0, (1, heads, width), &dev).unwrap();
            let d0 = Tensor::randn(0f64, 1.0, (1, heads, width), &dev).unwrap();
            let vars = || [&x0, &a0, &d0].map(|t| Var::from_tensor(t).unwrap());
            let (va, vb) = (vars(), vars());
            let s = gat_scores(
                va[0].as_tensor(),
                va[1].as_tensor(),
                va[2].as_tensor(),
                heads,
            )
            .unwrap();
            assert_eq!(s.dims(), [2, n, heads]);
            let (sa, da) = (s.get(0).unwrap(), s.get(1).unwrap());
            let x3 = vb[0]
                .as_tensor()
                .to_dtype(DType::F64)
                .unwrap()
                .reshape((n, heads, width))
                .unwrap();
            let per_head = |att: &Tensor| x3.broadcast_mul(att).unwrap().sum(D::Minus1).unwrap();
            let (sb, db) = (per_head(vb[1].as_tensor()), per_head(vb[2].as_tensor()));
            let flat = |t: &Tensor| {
                t.to_dtype(DType::F64)
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f64>()
                    .unwrap()
            };
            let tol = if xdt == DType::F32 { 1e-6 } else { 1e-12 };
            let close = |a: &Tensor, b: &Tensor, what: &str| {
                let (a, b) = (flat(a), flat(b));
                assert_eq!(a.len(), b.len(), "{what}");
                for (u, v) in a.iter().zip(&b) {
                    assert!(
                        (u - v).abs() <= tol * (1.0 + v.abs()),
                        "{what} {n}x{heads}x{width}: {u} vs {v}"
                    );
                }
            };
            assert_eq!(sa.dims(), [n, heads]);
            assert_eq!(sa.dtype(), DType::F64);
            close(&sa, &sb, "s_src");
            close(&da, &db, "s_dst");
            // Weight the two sides and every score differently, so that a swapped side or
            // head changes the gradients.
            let w = Tensor::randn(0f64, 1.0, (2, n, heads), &dev).unwrap();
            let loss = |both: &Tensor| (both * &w).unwrap().sum_all().unwrap();
            let ga = loss(&s).backward().unwrap();
            let gb = loss(&Tensor::stack(&[&sb, &db], 0).unwrap())
                .backward()
                .unwrap();
            for (i, what) in ["dxs", "datt_src", "datt_dst"].into_iter().enumerate() {
                let u = ga.get(va[i].as_tensor()).unwrap();
                assert_eq!(u.dims(), va[i].as_tensor().dims(), "{what}");
                assert_eq!(u.dtype(), va[i].as_tensor().dtype(), "{what}");
                match gb.get(vb[i].as_tensor()) {
                    Some(v) => close(u, v, what),
                    // candle's ops give no gradient over no rows; ours are zeros.
                    None if n == 0 => assert!(flat(u).iter().all(|&v| v == 0.0), "{what}"),
                    None => panic!("{what}: no reference gradient"),
                }
            }
        }
    }

    #[test]
    fn scores_refuse_bad_shapes_and_dtypes() {
        let dev = Device::Cpu;
        let x = Tensor::ones((4, 6), DType::F32, &dev).unwrap();
        let a = Tensor::ones((1, 2, 3), DType::F32, &dev).unwrap();
        assert!(gat_scores(&x, &a, &a, 2).is_ok());
        assert!(gat_scores(&x, &a, &a, 4).is_err(), "6 columns, 4 heads");
        assert!(gat_scores(&x, &a, &a, 0).is_err());
        let short = Tensor::ones((1, 2, 2), DType::F32, &dev).unwrap();
        assert!(gat_scores(&x, &short, &a, 2).is_err());
        assert!(gat_scores(&x, &a, &a.to_dtype(DType::F64).unwrap(), 2).is_err());
        assert!(gat_scores(&x.flatten_all().unwrap(), &a, &a, 2).is_err());
        let ints = Tensor::ones((4, 6), DType::U32, &dev).unwrap();
        assert!(gat_scores(&ints, &a, &a, 2).is_err());
    }
}
