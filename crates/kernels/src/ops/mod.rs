//! Operators, one module each: `mod.rs` (API, op structs, backward), `cpu.rs`, `cuda.rs`,
//! `reference.rs`; the fused operators under [`fused`].

/// Evaluates `$body` with `$T` bound to the float element type of a CPU storage (f32 or f64),
/// or fails naming `$op`.
macro_rules! with_float {
    ($op:expr, $s:expr, |$T:ident| $body:expr) => {
        match $s {
            candle_core::CpuStorage::F32(_) => {
                type $T = f32;
                $body
            }
            candle_core::CpuStorage::F64(_) => {
                type $T = f64;
                $body
            }
            o => candle_core::bail!("{}: unsupported dtype {:?}", $op, o.dtype()),
        }
    };
}

/// Runs `$f::<T>(args)` on the storage's float element type (see [`with_float`]).
macro_rules! dispatch_float {
    ($op:expr, $s:expr, $f:ident ( $($arg:expr),* )) => {
        with_float!($op, $s, |T| $f::<T>($($arg),*))
    };
}

pub mod adam;
pub mod cast_pad;
pub mod column_sum;
pub mod dropout;
pub mod edge_softmax;
pub mod fused;
pub mod layer_norm;
pub mod matmul;
pub mod maxk;
mod optional;
pub mod quant;
pub mod sampled;
pub mod scale_rows;
pub mod sddmm;
pub mod spmm;

pub use cast_pad::cast_pad;
pub use column_sum::column_sum;
pub use fused::{gat_attention, xent};

use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use candle_core::{CpuStorage, DType, Layout, Shape, Tensor, WithDType};

/// Checks that `t` is on the graph's device.
pub(crate) fn check_device(op: &'static str, g: &DeviceGraph, t: &Tensor) -> Result<()> {
    if !t.device().same_device(g.device()) {
        return Err(Error::Device {
            op,
            tensor: t.device().location(),
            graph: g.device().location(),
        });
    }
    Ok(())
}

/// Checks that `t` is on the device of `first` (ops without a graph).
pub(crate) fn check_device_of(op: &'static str, first: &Tensor, t: &Tensor) -> Result<()> {
    if !t.device().same_device(first.device()) {
        return Err(Error::shape(
            op,
            format!(
                "inputs on different devices: {:?} and {:?}",
                first.device().location(),
                t.device().location()
            ),
        ));
    }
    Ok(())
}

/// Checks a float dtype the kernels support.
pub(crate) fn check_float(op: &'static str, what: &str, t: &Tensor) -> Result<()> {
    match t.dtype() {
        DType::F32 | DType::F64 => Ok(()),
        other => Err(Error::dtype(
            op,
            format!("{what} has dtype {other:?}; f32 and f64 are supported"),
        )),
    }
}

/// A row bias: `x` (called `what` in the messages) is `[N, D]` and `b` is `[D]` of `x`'s
/// dtype. Shared by the epilogue ops that broadcast a bias over rows.
pub(crate) fn check_row_bias(op: &'static str, what: &str, x: &Tensor, b: &Tensor) -> Result<()> {
    let (xd, bd) = (x.dims(), b.dims());
    if xd.len() != 2 || bd != [xd[1]] {
        return Err(Error::shape(
            op,
            format!("{what} {xd:?} and b {bd:?} must be [N, D] and [D]"),
        ));
    }
    if b.dtype() != x.dtype() {
        return Err(Error::dtype(
            op,
            format!("b is {:?}, {what} {:?}", b.dtype(), x.dtype()),
        ));
    }
    Ok(())
}

/// Checks that `x`'s last dimension fits the 32-bit column indices of the row-broadcast
/// kernels ([`crate::cuda::row_tiled_cfg`]'s users: the bias adds, GAT's scores).
pub(crate) fn check_columns_i32(op: &'static str, cols: usize) -> Result<()> {
    if i32::try_from(cols).is_err() {
        return Err(Error::unsupported(
            op,
            format!(
                "{cols} columns: at most {} (32-bit column indices)",
                i32::MAX
            ),
        ));
    }
    Ok(())
}

/// Whether `t` holds scores or attention vectors a GAT op takes: f32, or f64 on the CPU
/// (the CUDA kernels read f32).
pub(crate) fn is_f32_or_cpu_f64(t: &Tensor) -> bool {
    match t.dtype() {
        DType::F32 => true,
        DType::F64 => !t.device().is_cuda(),
        _ => false,
    }
}

/// [`check_float`], plus bf16 / f16 on a CUDA device (half-precision storage with fp32
/// accumulation; the CPU kernels compute in f32 / f64 only).
pub(crate) fn check_float_or_half(op: &'static str, what: &str, t: &Tensor) -> Result<()> {
    match t.dtype() {
        DType::BF16 | DType::F16 if t.device().is_cuda() => Ok(()),
        DType::BF16 | DType::F16 => Err(Error::unsupported(
            op,
            format!(
                "{what} has dtype {:?}; half precision runs on CUDA only (the CPU kernels \
                 compute in f32 / f64)",
                t.dtype()
            ),
        )),
        _ => check_float(op, what, t),
    }
}

/// The contiguous slice of a CPU storage, or an error naming the op.
pub(crate) fn cpu_slice<'a, T: WithDType>(
    op: &'static str,
    s: &'a CpuStorage,
    l: &Layout,
) -> candle_core::Result<&'a [T]> {
    let data = T::cpu_storage_as_slice(s)?;
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&data[a..b]),
        None => candle_core::bail!("{op}: input must be contiguous"),
    }
}

/// One value per edge of `g` on the CPU from two contiguous inputs of dtype `T`: `f` of their
/// slices.
pub(crate) fn cpu_per_edge<T: WithDType>(
    op: &'static str,
    g: &DeviceGraph,
    (a, al): (&CpuStorage, &Layout),
    (b, bl): (&CpuStorage, &Layout),
    f: impl FnOnce(&[T], &[T]) -> Vec<T>,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (a, b) = (cpu_slice::<T>(op, a, al)?, cpu_slice::<T>(op, b, bl)?);
    Ok((T::to_cpu_storage_owned(f(a, b)), Shape::from(g.nnz())))
}

/// [`cpu_slice`] of optional edge values.
pub(crate) fn cpu_slice_opt<'a, T: WithDType>(
    op: &'static str,
    v: Option<(&'a CpuStorage, &Layout)>,
) -> candle_core::Result<Option<&'a [T]>> {
    v.map(|(s, l)| cpu_slice::<T>(op, s, l)).transpose()
}
