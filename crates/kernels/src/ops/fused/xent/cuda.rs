//! Host side of the fused masked cross-entropy (`cuda/xent.cu`): rows of at most
//! [`TILE_ROW_BYTES`] a thread each over tiles staged in shared memory, wider rows a warp each
//! with `XENT_U` rows in flight; blocks striding the rows over a grid fixed by the row count
//! and the shape.

use super::Pass;
use crate::cuda::{f32_view, launched, u32_view, zeros};
use crate::ops::optional::Cuda;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::{CudaStorage, DType, Layout, Result, Shape};

const WARPS: usize = 8;
/// Rows in flight per warp (`XENT_U` in the kernel).
const U: usize = 4;
/// Rows per tile, one thread each (`XENT_TILE`).
const TILE: usize = 128;
/// The widest row the tile shape takes, in bytes (`XENT_ROW_BYTES`).
const TILE_ROW_BYTES: usize = 256;
/// The most blocks a pass launches (blocks stride the rows beyond): the forward's partial
/// sums, one per block, are this many at most.
const MAX_BLOCKS: usize = 1024;

/// How the kernels walk the rows: a thread per row over shared-memory tiles, or a warp per row
/// with `regs` values per lane in registers (0: the generic loop).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Walk {
    Tile,
    Warp { regs: usize },
}

/// The shape for `c` classes of `elem` bytes.
fn shape_for(c: usize, elem: usize) -> Walk {
    if c >= 1 && c * elem <= TILE_ROW_BYTES {
        Walk::Tile
    } else if c <= 128 {
        Walk::Warp { regs: 4 }
    } else {
        Walk::Warp { regs: 0 }
    }
}

/// Rows a block covers per step and its threads.
fn rows_threads(shape: Walk) -> (usize, u32) {
    match shape {
        Walk::Tile => (TILE, TILE as u32),
        Walk::Warp { .. } => (WARPS * U, 32 * WARPS as u32),
    }
}

/// Blocks for `n` rows: a function of `n` and the shape alone, so that the forward's partial
/// sums (one per block, each over a fixed set of rows in a fixed order) are the same on every
/// device.
fn blocks(n: usize, shape: Walk) -> usize {
    n.div_ceil(rows_threads(shape).0).clamp(1, MAX_BLOCKS)
}

fn cfg(n: usize, shape: Walk) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks(n, shape) as u32, 1, 1),
        block_dim: (rows_threads(shape).1, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn suffix(dt: DType) -> Result<&'static str> {
    Ok(match dt {
        DType::F32 => "f32",
        DType::BF16 => "bf16",
        DType::F16 => "f16",
        o => {
            candle_core::bail!("masked_cross_entropy: CUDA logits must be f32/bf16/f16, got {o:?}")
        }
    })
}

fn dims(xl: &Layout) -> Result<(usize, usize, i32, i32)> {
    if !xl.is_contiguous() {
        candle_core::bail!("masked_cross_entropy: logits must be contiguous");
    }
    let (n, c) = xl.shape().dims2()?;
    let as_i32 = |v: usize| {
        i32::try_from(v)
            .map_err(|_| candle_core::Error::Msg(format!("masked_cross_entropy: {v} exceeds i32")))
    };
    Ok((n, c, as_i32(n)?, as_i32(c)?))
}

/// Partial sums of the row losses `[P]` f32 (`P` = [`blocks`]; their sum is the loss,
/// [`Pass::Loss`]), or `dx [N, C]` in the logits' dtype for row weights `w` already times the
/// upstream gradient ([`Pass::Grad`]).
pub(crate) fn run(
    pass: Pass,
    (x, xl): Cuda<'_>,
    (y, yl): Cuda<'_>,
    (w, wl): Cuda<'_>,
) -> Result<(CudaStorage, Shape)> {
    let (n, c, n_i, c_i) = dims(xl)?;
    let dev = x.device().clone();
    let yv = u32_view("masked_cross_entropy", y, yl)?;
    let wv = f32_view("masked_cross_entropy", w, wl)?;
    let dir = match pass {
        Pass::Loss => "fwd",
        Pass::Grad => "bwd",
    };
    let elem = x.dtype().size_in_bytes();
    let shape = shape_for(c, elem);
    let name = match shape {
        Walk::Tile => format!("xent_{dir}_{}_tile", suffix(x.dtype())?),
        Walk::Warp { regs } => format!("xent_{dir}_{}_r{regs}", suffix(x.dtype())?),
    };
    let func = crate::cuda::kernel(&dev, &name, &crate::cuda::XENT)?;
    // The tile shape copies 16-byte words where x's first element is 16-byte aligned (every
    // tile is then: a tile is a multiple of 16 bytes).
    let vec = ((xl.start_offset() * elem) % 16 == 0) as i32;
    macro_rules! go {
        ($T:ty) => {{
            let xv = x.as_cuda_slice::<$T>()?.slice(xl.start_offset()..);
            match pass {
                Pass::Loss => {
                    let p = blocks(n, shape);
                    let out = zeros::<f32>(&dev, p)?;
                    let mut b = func.builder();
                    b.arg(&xv).arg(&yv).arg(&wv).arg(&out).arg(&n_i).arg(&c_i);
                    if shape == Walk::Tile {
                        b.arg(&vec);
                    }
                    // SAFETY: x holds n * c contiguous elements (16-byte aligned when vec is
                    // 1), y / w hold n, out one per block of cfg(n); labels >= c are caught
                    // in the kernel before indexing; a tile's rows are at most
                    // TILE_ROW_BYTES each (shape_for).
                    if n > 0 {
                        launched(unsafe { b.launch(cfg(n, shape)) }.map(|_| ()))?;
                    }
                    (CudaStorage::wrap_cuda_slice(out, dev), Shape::from(p))
                }
                Pass::Grad => {
                    // SAFETY: the kernel writes every element of every row (zeros for
                    // weight-0 rows).
                    let dx = unsafe { dev.alloc::<$T>((n * c).max(1))? };
                    if n > 0 {
                        let mut b = func.builder();
                        b.arg(&xv).arg(&yv).arg(&wv).arg(&dx).arg(&n_i).arg(&c_i);
                        if shape == Walk::Tile {
                            b.arg(&vec);
                        }
                        // SAFETY: x and dx hold n * c contiguous elements (x 16-byte aligned
                        // when vec is 1, dx fresh), y / w hold n; tile rows as above.
                        launched(unsafe { b.launch(cfg(n, shape)) }.map(|_| ()))?;
                    }
                    (CudaStorage::wrap_cuda_slice(dx, dev), xl.shape().clone())
                }
            }
        }};
    }
    Ok(match x.dtype() {
        DType::F32 => go!(f32),
        DType::BF16 => go!(half::bf16),
        DType::F16 => go!(half::f16),
        _ => unreachable!("checked by suffix"),
    })
}
