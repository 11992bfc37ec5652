//! CUDA plumbing shared by the ops: the embedded kernel modules and their loader, the
//! device-resident CSR, launch helpers.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, CudaStream, CudaView, LaunchArgs, LaunchConfig,
    PushKernelArg,
};
use candle_core::cuda_backend::cudarc::nvrtc::Ptx;
use candle_core::cuda_backend::DeviceId;
use candle_core::cuda_backend::{CudaDevice, WrapErr};
use candle_core::{CudaStorage, DType, Layout, Result};
use gnn_graph::Csr;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A kernel module: `cuda/<name>.cu` compiled by `build.rs` to a fatbin holding SASS for the
/// build's `CUDA_COMPUTE_CAP` and PTX for newer GPUs, so the driver loads machine code instead
/// of compiling PTX on a machine's first run (~12 s for these modules before).
pub struct Module {
    name: &'static str,
    image: &'static [u8],
}

/// `cuda/spmm.cu`.
pub const SPMM: Module = Module {
    name: "gnn_spmm",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/spmm.fatbin")),
};
/// `cuda/sddmm.cu`.
pub const SDDMM: Module = Module {
    name: "gnn_sddmm",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/sddmm.fatbin")),
};
/// `cuda/maxk.cu`.
pub const MAXK: Module = Module {
    name: "gnn_maxk",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/maxk.fatbin")),
};
/// `cuda/quant.cu`.
pub const QUANT: Module = Module {
    name: "gnn_quant",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/quant.fatbin")),
};
/// `cuda/dropout.cu`.
pub const DROPOUT: Module = Module {
    name: "gnn_dropout",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/dropout.fatbin")),
};
/// `cuda/edge_softmax.cu`.
pub const EDGE_SOFTMAX: Module = Module {
    name: "gnn_edge_softmax",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/edge_softmax.fatbin")),
};
/// `cuda/gat_attention.cu`.
pub const GAT_ATTENTION: Module = Module {
    name: "gnn_gat_attention",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/gat_attention.fatbin")),
};
/// `cuda/gat_aggregate.cu`.
pub const GAT_AGGREGATE: Module = Module {
    name: "gnn_gat_aggregate",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/gat_aggregate.fatbin")),
};
/// `cuda/layer_norm.cu`.
pub const LAYER_NORM: Module = Module {
    name: "gnn_layer_norm",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/layer_norm.fatbin")),
};
/// `cuda/adam.cu`.
pub const ADAM: Module = Module {
    name: "gnn_adam",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/adam.fatbin")),
};
/// `cuda/column_sum.cu`.
pub const COLUMN_SUM: Module = Module {
    name: "gnn_column_sum",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/column_sum.fatbin")),
};
/// `cuda/cast_pad.cu`.
pub const CAST_PAD: Module = Module {
    name: "gnn_cast_pad",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/cast_pad.fatbin")),
};
/// `cuda/xent.cu`.
pub const XENT: Module = Module {
    name: "gnn_xent",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/xent.fatbin")),
};
/// `cuda/sampled.cu`.
pub const SAMPLED: Module = Module {
    name: "gnn_sampled",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/sampled.fatbin")),
};
/// `cuda/graph.cu`.
pub const GRAPH: Module = Module {
    name: "gnn_graph",
    image: include_bytes!(concat!(env!("OUT_DIR"), "/graph.fatbin")),
};

/// The modules loaded so far, per device (candle's own cache takes PTX text only).
type Loaded = HashMap<(DeviceId, &'static str), Arc<CudaModule>>;
static LOADED: Mutex<Option<Loaded>> = Mutex::new(None);

/// A kernel of a [`Module`] bound to the device's stream.
pub struct Kernel {
    func: CudaFunction,
    stream: Arc<CudaStream>,
}

impl Kernel {
    /// A launch of this kernel on the device's stream.
    pub fn builder(&self) -> LaunchArgs<'_> {
        self.stream.launch_builder(&self.func)
    }

    /// The driver function, for callers that launch it on a stream of their own choosing.
    pub fn into_cuda_function(self) -> CudaFunction {
        self.func
    }
}

/// Kernel `name` of module `m` on `dev`, loading the module on first use.
pub fn kernel(dev: &CudaDevice, name: &str, m: &Module) -> Result<Kernel> {
    let module = {
        let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        let map = loaded.get_or_insert_with(HashMap::new);
        match map.get(&(dev.id(), m.name)) {
            Some(md) => md.clone(),
            None => {
                let md = dev
                    .cuda_stream()
                    .context()
                    .load_module(Ptx::from_binary(m.image.to_vec()))
                    .w()?;
                map.insert((dev.id(), m.name), md.clone());
                md
            }
        }
    };
    Ok(Kernel {
        func: module.load_function(name).w()?,
        stream: dev.cuda_stream(),
    })
}

/// A CSR structure in device memory (uploaded once per [`crate::DeviceGraph`]).
pub struct CudaCsr {
    /// Row pointers, `n_rows + 1`.
    pub indptr: CudaSlice<u32>,
    /// Column indices, `nnz` (at least one slot so empty graphs still have a buffer).
    pub indices: CudaSlice<u32>,
}

impl CudaCsr {
    /// Copies `csr` to `dev`, its row offsets as the kernels' `u32` (narrowed from a host
    /// graph's `u64` ones; refused above [`gnn_graph::MAX_KERNEL_NNZ`] entries).
    pub fn upload(csr: &Csr, dev: &CudaDevice) -> Result<Self> {
        let indptr = csr
            .kernel_indptr("the graph")
            .map_err(candle_core::Error::wrap)?;
        let indptr = dev.clone_htod(&*indptr)?;
        let indices = if csr.nnz() == 0 {
            dev.alloc_zeros::<u32>(1)?
        } else {
            dev.clone_htod(csr.indices())?
        };
        Ok(Self { indptr, indices })
    }
}

impl CudaCsr {
    /// For a square graph with strictly increasing rows and a symmetric pattern: the edge
    /// permutation of its transpose (which is the graph itself; see `cuda/graph.cu`) as a
    /// `u32` tensor of length `nnz`, computed on the device. `None` when the graph is not
    /// square, a row is not strictly increasing, or the pattern is not symmetric.
    pub fn symmetric_perm(
        &self,
        csr: &Csr,
        dev: &CudaDevice,
    ) -> Result<Option<candle_core::Tensor>> {
        let (n, nnz) = (csr.n_rows(), csr.nnz());
        if n != csr.n_cols() || n > u32::MAX as usize {
            return Ok(None);
        }
        // SAFETY: the kernel writes every one of the nnz entries when it reports no failure,
        // and the buffer is dropped unread when it does.
        let perm = unsafe { dev.alloc::<u32>(nnz.max(1))? };
        let bad = dev.alloc_zeros::<u32>(1)?;
        if nnz > 0 {
            let func = crate::cuda::kernel(dev, "symmetric_perm", &crate::cuda::GRAPH)?;
            let n32 = n as u32;
            let mut b = func.builder();
            b.arg(&self.indptr)
                .arg(&self.indices)
                .arg(&n32)
                .arg(&perm)
                .arg(&bad);
            // SAFETY: indptr has n + 1 entries and indices nnz, all < n (checked at load);
            // perm has nnz slots; one warp per row.
            launched(unsafe { b.launch(warp_per_row_cfg(n)) }.map(|_| ()))?;
        }
        if dev.clone_dtoh(&bad)?[0] != 0 {
            return Ok(None);
        }
        let storage = candle_core::Storage::Cuda(CudaStorage::wrap_cuda_slice(perm, dev.clone()));
        let t = candle_core::Tensor::from_storage(
            storage,
            nnz.max(1),
            candle_core::op::BackpropOp::none(),
            false,
        );
        Ok(Some(if nnz == 0 { t.narrow(0, 0, 0)? } else { t }))
    }
}

/// The f32 view of a contiguous CUDA storage from its layout's offset.
pub fn f32_view<'a>(op: &str, s: &'a CudaStorage, l: &Layout) -> Result<CudaView<'a, f32>> {
    if !l.is_contiguous() {
        candle_core::bail!("{op}: CUDA input must be contiguous");
    }
    Ok(s.as_cuda_slice::<f32>()
        .map_err(|_| {
            candle_core::Error::Msg(format!(
                "{op}: the CUDA kernels take f32, got {:?}",
                s.dtype()
            ))
        })?
        .slice(l.start_offset()..))
}

/// [`f32_view`] of optional edge values.
pub fn f32_view_opt<'a>(
    op: &str,
    v: Option<(&'a CudaStorage, &Layout)>,
) -> Result<Option<CudaView<'a, f32>>> {
    v.map(|(s, l)| f32_view(op, s, l)).transpose()
}

/// The view of a contiguous CUDA float storage by its dtype: f32, or bf16 / f16 storage that
/// the kernels widen to fp32 on load. Kernels templated on the storage type are compiled once
/// per type, named with [`FloatView::prefix`].
pub enum FloatView<'a> {
    /// f32 storage.
    F32(CudaView<'a, f32>),
    /// bf16 storage.
    Bf16(CudaView<'a, half::bf16>),
    /// f16 storage.
    F16(CudaView<'a, half::f16>),
}

impl<'a> FloatView<'a> {
    /// The view of `s` from its layout's offset; `op` names the caller in errors.
    pub fn of(op: &str, s: &'a CudaStorage, l: &Layout) -> Result<Self> {
        if !l.is_contiguous() {
            candle_core::bail!("{op}: CUDA input must be contiguous");
        }
        let o = l.start_offset();
        Ok(match s.dtype() {
            DType::F32 => Self::F32(s.as_cuda_slice::<f32>()?.slice(o..)),
            DType::BF16 => Self::Bf16(s.as_cuda_slice::<half::bf16>()?.slice(o..)),
            DType::F16 => Self::F16(s.as_cuda_slice::<half::f16>()?.slice(o..)),
            d => candle_core::bail!("{op}: the CUDA kernels take f32, bf16 or f16, got {d:?}"),
        })
    }

    /// The kernel-name prefix of this storage type: "", "bf16_" or "f16_".
    pub fn prefix(&self) -> &'static str {
        match self {
            Self::F32(_) => "",
            Self::Bf16(_) => "bf16_",
            Self::F16(_) => "f16_",
        }
    }

    /// The storage dtype.
    pub fn dtype(&self) -> DType {
        match self {
            Self::F32(_) => DType::F32,
            Self::Bf16(_) => DType::BF16,
            Self::F16(_) => DType::F16,
        }
    }

    /// Pushes the view as the next kernel argument.
    pub fn push<'b>(&'b self, b: &mut LaunchArgs<'b>) {
        match self {
            Self::F32(v) => b.arg(v),
            Self::Bf16(v) => b.arg(v),
            Self::F16(v) => b.arg(v),
        };
    }
}

/// An fp32 result buffer of `shape` as a storage of `dtype`: itself for f32, narrowed (round
/// to nearest) for bf16 / f16 after the kernels' fp32 accumulation.
pub fn narrowed(
    out: CudaSlice<f32>,
    dev: &CudaDevice,
    shape: &candle_core::Shape,
    dtype: DType,
) -> Result<CudaStorage> {
    let out = CudaStorage::wrap_cuda_slice(out, dev.clone());
    if dtype == DType::F32 {
        Ok(out)
    } else {
        out.to_dtype(&Layout::contiguous(shape), dtype)
    }
}

/// The u32 view of a contiguous CUDA storage.
pub fn u32_view<'a>(op: &str, s: &'a CudaStorage, l: &Layout) -> Result<CudaView<'a, u32>> {
    if !l.is_contiguous() {
        candle_core::bail!("{op}: CUDA input must be contiguous");
    }
    Ok(s.as_cuda_slice::<u32>()?.slice(l.start_offset()..))
}

/// Grid-stride configuration for `total` independent elements.
pub fn elementwise_cfg(total: usize) -> LaunchConfig {
    let blocks = total.div_ceil(256).clamp(1, 1 << 16) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A grid over `rows` rows of `width` items (columns, or heads), `x` items per block row:
/// blocks of `x` by `256 / x` rows, at most `max_blocks` of them over the rows (`grid_dim.x`;
/// the kernels stride over the rows by the grid) and as many tiles as cover the width
/// (`grid_dim.y`, at most 65,535: an error past that). For the row-broadcast kernels (a bias
/// row, per-head constants), whose threads keep their column: no 64-bit index division per
/// element.
pub fn row_tiled_cfg(
    rows: usize,
    width: usize,
    x: usize,
    max_blocks: usize,
) -> Result<LaunchConfig> {
    let x = x.clamp(1, 256);
    let ys = 256 / x;
    let tiles = width.div_ceil(x).max(1);
    if tiles > 65_535 {
        candle_core::bail!("{width} columns: more than 65,535 tiles of {x}");
    }
    Ok(LaunchConfig {
        grid_dim: (
            rows.div_ceil(ys).max(1).min(max_blocks.max(1)) as u32,
            tiles as u32,
            1,
        ),
        block_dim: (x as u32, ys as u32, 1),
        shared_mem_bytes: 0,
    })
}

/// The items a block row of [`row_tiled_cfg`] takes of a row `width` wide: whole warps, at
/// most 256.
pub fn warp_columns(width: usize) -> usize {
    width.div_ceil(32).clamp(1, 8) * 32
}

/// One warp per row for `rows` rows, 8 warps (256 threads) per block: the row kernels
/// (edge softmax, GAT attention, the row SDDMM).
pub fn warp_per_row_cfg(rows: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows.div_ceil(8) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Allocates `len` zeroed elements (at least one, so zero-size outputs still have a buffer).
pub fn zeros<
    T: candle_core::cuda_backend::cudarc::driver::DeviceRepr
        + candle_core::cuda_backend::cudarc::driver::ValidAsZeroBits,
>(
    dev: &CudaDevice,
    len: usize,
) -> Result<CudaSlice<T>> {
    dev.alloc_zeros::<T>(len.max(1))
}

/// Maps a driver error into candle's.
pub fn launched(
    r: std::result::Result<(), candle_core::cuda_backend::cudarc::driver::DriverError>,
) -> Result<()> {
    r.w()
}
