//! MaxK-GNN (Peng et al., ASPLOS 2024): the MaxK nonlinearity, the CBSR feature format, the
//! forward SpGEMM over CBSR features and the backward SSpMM.
//!
//! - [`maxk`]: keep the `k` largest entries of each row of `h [N, D]` (IEEE total order; ties go
//!   to the lower column, so exactly `k` are kept). The result is CBSR: `data [N, k]` (the
//!   values, differentiable: the gradient flows to the kept entries only) and `index [N, k]`
//!   (their columns, ascending; `u8` when `D <= 256`, else `i16` holding columns below 1024,
//!   candle having no `u16`).
//! - [`spgemm`]: `out = A · dense(x)` for CBSR `x`, dense `[n_rows, D]` output, sum or mean,
//!   optional edge values. Per edge it reads `k` values and indices instead of `D` values.
//! - Backward of [`spgemm`] with respect to `data`: [`sspmm`], `(Aᵀ · dOut)` sampled at the
//!   CBSR pattern, `[n_cols, k]`: no dense `[n_cols, D]` gradient is formed.
//!
//! Edge values are constants here (GCN normalisation); a tracked value tensor is refused.
//! CUDA kernels take f32; the CPU takes f32 and f64.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use super::{check_device, check_float, cpu_slice, cpu_slice_opt};
use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use crate::ops::spmm::Reduce;
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{
    CpuStorage, CustomOp1, CustomOp2, CustomOp3, DType, Layout, Shape, Tensor, WithDType,
};

/// Largest row width MaxK handles (the GPU selection keeps a row in one warp's registers).
pub const MAX_WIDTH: usize = 1024;

/// Features after MaxK in Compressed Balanced Sparse Row form: `k` entries per row.
///
/// ```text
///  dense row  [0.0, 3.1, 0.0, 0.0, 2.5, 0.9]     (D = 6, k = 2)
///  data  row  [3.1, 2.5]                         kept values, differentiable
///  index row  [  1,   4]                         their columns, strictly ascending, < D
/// ```
///
/// Invariant (private fields): `data` and `index` are `[N, k]`, `index` has the dtype
/// [`index_dtype`]`(dim)`, `k <= dim <= `[`MAX_WIDTH`], and every index row is strictly
/// increasing with entries `< dim`. The GPU kernels index `[N, dim]` buffers with these
/// columns, so a value outside `0..dim` would be an out-of-bounds access: [`maxk`] establishes
/// the invariant by construction and [`Cbsr::new`] checks it for a caller's own arrays.
#[derive(Debug, Clone)]
pub struct Cbsr {
    data: Tensor,
    index: Tensor,
    dim: usize,
}

impl Cbsr {
    /// A CBSR from a caller's own values and columns, after checking the invariant above:
    /// shapes, dtypes, and every column in range and strictly ascending per row (the index is
    /// read back to the host once for this).
    pub fn new(data: Tensor, index: Tensor, dim: usize) -> Result<Cbsr> {
        const OP: &str = "cbsr";
        let bad = |what: String| Err(Error::Shape { op: OP, what });
        check_float(OP, "CBSR data", &data)?;
        let Ok((n, k)) = data.dims2() else {
            return bad(format!("data has shape {:?}, expected [N, k]", data.dims()));
        };
        if k > dim || dim > MAX_WIDTH {
            return bad(format!(
                "need k <= D <= {MAX_WIDTH}, got k = {k}, D = {dim}"
            ));
        }
        if index.dims() != [n, k] || index.dtype() != index_dtype(dim) {
            return bad(format!(
                "index {:?} {:?} must be [{n}, {k}] {:?}",
                index.dims(),
                index.dtype(),
                index_dtype(dim)
            ));
        }
        if !index.device().same_device(data.device()) {
            return Err(Error::Device {
                op: OP,
                tensor: index.device().location(),
                graph: data.device().location(),
            });
        }
        let cols = index
            .to_dtype(DType::I64)?
            .flatten_all()?
            .to_vec1::<i64>()?;
        if k > 0 {
            for (r, row) in cols.chunks_exact(k).enumerate() {
                if let Some(t) = (0..k).find(|&t| {
                    row[t] < 0 || row[t] as usize >= dim || (t > 0 && row[t] <= row[t - 1])
                }) {
                    return bad(format!(
                        "index row {r} slot {t} holds column {} (columns must be strictly \
                         ascending and in 0..{dim})",
                        row[t]
                    ));
                }
            }
        }
        Ok(Cbsr { data, index, dim })
    }

    /// Kept values `[N, k]` (carries the gradient).
    pub fn data(&self) -> &Tensor {
        &self.data
    }

    /// Their columns `[N, k]`, strictly ascending per row ([`index_dtype`]`(dim)`).
    pub fn index(&self) -> &Tensor {
        &self.index
    }

    /// The dense width `D`.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Entries per row.
    pub fn k(&self) -> usize {
        self.data.dims().get(1).copied().unwrap_or(0)
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.data.dims().first().copied().unwrap_or(0)
    }

    /// The same pattern with other values (e.g. dropout applied to `data`).
    pub fn with_data(&self, data: Tensor) -> Result<Cbsr> {
        if data.dims() != self.data.dims() {
            return Err(Error::Shape {
                op: "cbsr",
                what: format!(
                    "new data {:?} must match {:?}",
                    data.dims(),
                    self.data.dims()
                ),
            });
        }
        check_float("cbsr", "CBSR data", &data)?;
        Ok(Cbsr {
            data,
            index: self.index.clone(),
            dim: self.dim,
        })
    }

    /// Dense `[N, D]` (zeros off the pattern), differentiable in `data`.
    pub fn to_dense(&self) -> Result<Tensor> {
        Ok(self.data.apply_op2(
            &self.index,
            CbsrMoveOp {
                k: self.k(),
                d: self.dim,
                scatter: true,
            },
        )?)
    }
}

/// The index dtype of width `d`.
pub fn index_dtype(d: usize) -> DType {
    if d <= 256 {
        DType::U8
    } else {
        DType::I16
    }
}

/// MaxK of each row of `h [N, D]` as CBSR (see the module docs). `1 <= k <= D <= 1024`.
pub fn maxk(h: &Tensor, k: usize) -> Result<Cbsr> {
    const OP: &str = "maxk";
    check_float(OP, "h", h)?;
    let (_, d) = h.dims2().map_err(|_| Error::Shape {
        op: OP,
        what: format!("h has shape {:?}, expected [N, D]", h.dims()),
    })?;
    if k == 0 || k > d || d > MAX_WIDTH {
        return Err(Error::Shape {
            op: OP,
            what: format!("need 1 <= k <= D <= {MAX_WIDTH}, got k = {k}, D = {d}"),
        });
    }
    let h = h.contiguous()?;
    #[cfg(feature = "cuda")]
    if h.device().is_cuda() && h.dtype() == DType::F32 {
        // One kernel selects and gathers; the index buffer is the op's output slot.
        let (n, _) = h.dims2()?;
        let index = Tensor::zeros((n, k), index_dtype(d), h.device())?;
        let data = h.apply_op1(FusedMaxkOp {
            k,
            d,
            index: index.clone(),
        })?;
        return Ok(Cbsr {
            data,
            index,
            dim: d,
        });
    }
    let index = h.detach().apply_op1_no_bwd(&SelectOp { k })?;
    let data = h.apply_op2(
        &index,
        CbsrMoveOp {
            k,
            d,
            scatter: false,
        },
    )?;
    Ok(Cbsr {
        data,
        index,
        dim: d,
    })
}

fn check_cbsr(op: &'static str, x: &Cbsr, rows: usize) -> Result<()> {
    let k = x.k();
    let bad = |what: String| Err(Error::Shape { op, what });
    if x.data.rank() != 2 || x.data.dim(0)? != rows {
        return bad(format!(
            "CBSR data {:?} must have {rows} rows",
            x.data.dims()
        ));
    }
    if x.index.dims() != x.data.dims() || x.index.dtype() != index_dtype(x.dim) {
        return bad(format!(
            "CBSR index {:?} {:?} must be {:?} {:?}",
            x.index.dims(),
            x.index.dtype(),
            x.data.dims(),
            index_dtype(x.dim)
        ));
    }
    if k > x.dim || x.dim > MAX_WIDTH {
        return bad(format!("k = {k} and D = {} out of range", x.dim));
    }
    Ok(())
}

fn check_values(op: &'static str, g: &DeviceGraph, v: Option<&Tensor>, dt: DType) -> Result<()> {
    if let Some(v) = v {
        if v.dims() != [g.nnz()] || v.dtype() != dt {
            return Err(Error::Shape {
                op,
                what: format!(
                    "edge values {:?} {:?} must be [{}] {dt:?}",
                    v.dims(),
                    v.dtype(),
                    g.nnz()
                ),
            });
        }
        if v.track_op() {
            return Err(Error::Shape {
                op,
                what: "gradients for edge values are not supported; pass constant values".into(),
            });
        }
    }
    Ok(())
}

fn mean_of(op: &'static str, reduce: Reduce) -> Result<bool> {
    match reduce {
        Reduce::Sum => Ok(false),
        Reduce::Mean => Ok(true),
        other => Err(Error::Shape {
            op,
            what: format!("{other:?} aggregation is not available over CBSR (sum and mean are)"),
        }),
    }
}

/// `out = A · dense(x)` (sum, or mean over each row's entries), `x` a CBSR with `n_cols` rows,
/// `values` optional constant edge values. Differentiable in `x.data` (backward: [`sspmm`]).
pub fn spgemm(
    g: &DeviceGraph,
    x: &Cbsr,
    values: Option<&Tensor>,
    reduce: Reduce,
) -> Result<Tensor> {
    spgemm_bias(g, x, values, reduce, None)
}

/// [`spgemm`] plus a bias `[D]` added to every output row, fused into the kernel's write-back
/// (one pass over the output instead of a broadcast add, and in the backward a column sum
/// instead of candle's broadcast reduction). Differentiable in `x.data` and `bias`.
pub fn spgemm_bias(
    g: &DeviceGraph,
    x: &Cbsr,
    values: Option<&Tensor>,
    reduce: Reduce,
    bias: Option<&Tensor>,
) -> Result<Tensor> {
    const OP: &str = "spgemm";
    let mean = mean_of(OP, reduce)?;
    check_device(OP, g, &x.data)?;
    check_float(OP, "CBSR data", &x.data)?;
    check_cbsr(OP, x, g.n_cols())?;
    check_values(OP, g, values, x.data.dtype())?;
    if let Some(b) = bias {
        check_device(OP, g, b)?;
        if b.dims() != [x.dim] || b.dtype() != x.data.dtype() {
            return Err(Error::Shape {
                op: OP,
                what: format!(
                    "bias {:?} {:?} must be [{}] {:?}",
                    b.dims(),
                    b.dtype(),
                    x.dim,
                    x.data.dtype()
                ),
            });
        }
    }
    let op = CbsrRowOp {
        g: g.clone(),
        k: x.k(),
        d: x.dim,
        mean,
        backward: false,
        values: values.map(Tensor::contiguous).transpose()?,
    };
    let data = x.data.contiguous()?;
    let index = x.index.contiguous()?;
    Ok(match bias {
        Some(b) => data.apply_op3(&index, &b.contiguous()?, op)?,
        None => data.apply_op2(&index, op)?,
    })
}

/// `(Aᵀ · dout)` at the pattern of `x` (`[n_cols, k]`): the gradient of [`spgemm`] with
/// respect to the CBSR data. `dout` is `[n_rows, D]`; only `x`'s index and width are used.
pub fn sspmm(
    g: &DeviceGraph,
    dout: &Tensor,
    x: &Cbsr,
    values: Option<&Tensor>,
    reduce: Reduce,
) -> Result<Tensor> {
    const OP: &str = "sspmm";
    let mean = mean_of(OP, reduce)?;
    check_device(OP, g, dout)?;
    check_device(OP, g, &x.index)?;
    check_float(OP, "dout", dout)?;
    let dim = x.dim;
    if dout.dims() != [g.n_rows(), dim] {
        return Err(Error::Shape {
            op: OP,
            what: format!("dout {:?} must be [{}, {dim}]", dout.dims(), g.n_rows()),
        });
    }
    if x.rows() != g.n_cols() {
        return Err(Error::Shape {
            op: OP,
            what: format!(
                "CBSR pattern has {} rows, the graph {} columns",
                x.rows(),
                g.n_cols()
            ),
        });
    }
    check_values(OP, g, values, dout.dtype())?;
    Ok(sspmm_raw(
        g,
        &dout.contiguous()?,
        &x.index.contiguous()?,
        x.k(),
        dim,
        values,
        mean,
    )?)
}

fn sspmm_raw(
    g: &DeviceGraph,
    dout: &Tensor,
    index: &Tensor,
    k: usize,
    d: usize,
    values: Option<&Tensor>,
    mean: bool,
) -> candle_core::Result<Tensor> {
    if crate::deterministic() && dout.device().is_cuda() {
        // No atomics: the dense transpose product (one warp per output row) sampled at the
        // pattern. Costs a dense `[n_cols, D]` temporary.
        let dense = crate::ops::spmm::transpose_product(g, dout, values, mean)?;
        return dense.apply_op2_no_bwd(
            index,
            &CbsrMoveOp {
                k,
                d,
                scatter: false,
            },
        );
    }
    let op = CbsrRowOp {
        g: g.clone(),
        k,
        d,
        mean,
        backward: true,
        values: values.map(Tensor::contiguous).transpose()?,
    };
    dout.apply_op2_no_bwd(index, &op)
}

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

struct SelectOp {
    k: usize,
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
struct FusedMaxkOp {
    k: usize,
    d: usize,
    index: Tensor,
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
struct CbsrMoveOp {
    k: usize,
    d: usize,
    scatter: bool,
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
struct CbsrRowOp {
    g: DeviceGraph,
    k: usize,
    d: usize,
    mean: bool,
    backward: bool,
    values: Option<Tensor>,
}

impl CbsrRowOp {
    fn label(&self) -> &'static str {
        if self.backward {
            "sspmm"
        } else {
            "spgemm"
        }
    }

    fn cpu(
        &self,
        s: &CpuStorage,
        l: &Layout,
        is: &CpuStorage,
        il: &Layout,
        bias: Option<(&CpuStorage, &Layout)>,
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
    fn cuda(
        &self,
        s: &CudaStorage,
        l: &Layout,
        is: &CudaStorage,
        il: &Layout,
        bias: Option<(&CudaStorage, &Layout)>,
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
            self.k,
            self.d,
            self.mean,
            self.backward,
        )
    }

    /// SpGEMM's gradient with respect to the CBSR data: the SSpMM.
    fn grad(&self, index: &Tensor, grad: &Tensor) -> candle_core::Result<Tensor> {
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

impl CustomOp2 for CbsrRowOp {
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
        self.cpu(s, l, is, il, None)
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        is: &CudaStorage,
        il: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        self.cuda(s, l, is, il, None)
    }
    fn bwd(
        &self,
        _data: &Tensor,
        index: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        Ok((Some(self.grad(index, grad)?), None))
    }
}

/// SpGEMM with a fused bias: `(data, index, bias)`.
impl CustomOp3 for CbsrRowOp {
    fn name(&self) -> &'static str {
        "spgemm_bias"
    }
    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        is: &CpuStorage,
        il: &Layout,
        bs: &CpuStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.cpu(s, l, is, il, Some((bs, bl)))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        is: &CudaStorage,
        il: &Layout,
        bs: &CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        self.cuda(s, l, is, il, Some((bs, bl)))
    }
    fn bwd(
        &self,
        _data: &Tensor,
        index: &Tensor,
        bias: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let dbias = if bias.track_op() {
            Some(column_sum(grad)?)
        } else {
            None
        };
        Ok((Some(self.grad(index, grad)?), None, dbias))
    }
}

/// `x.sum(0)` of a `[N, D]` tensor as one GEMM row (`ones [1, N] · x`): cuBLAS streams `x`
/// once, where candle's dim-0 reduction runs one block per column.
fn column_sum(x: &Tensor) -> candle_core::Result<Tensor> {
    let (n, d) = x.dims2()?;
    Tensor::ones((1, n), x.dtype(), x.device())?
        .matmul(&x.contiguous()?)?
        .reshape(d)
}
