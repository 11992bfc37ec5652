//! Host side of the CUDA SDDMM (`cuda/sddmm.cu`): the row-parallel kernel (one warp per row)
//! and HP-SDDMM (nnz-balanced warps, Fan et al., IPDPS'23) with its Dynamic Task Partition
//! (DTP: edges per warp from the device's SM count and the kernel's measured occupancy) and
//! Hierarchical Vectorized Memory Access (HVMA: index tiles and feature rows read 2 or 4 wide
//! where the partition and the layouts guarantee the alignment).

use super::dispatch::{sddmm_choice_for, SddmmChoice};
use crate::cuda::{f32_view_opt, launched, warp_per_row_cfg, zeros, FloatView};
use crate::device_graph::DeviceGraph;
use crate::partition::{dynamic_task_partition, index_vector_width, HpShape, HP_WARPS};
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::sys::CUdevice_attribute;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaView, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::CudaDevice;
use candle_core::{CudaStorage, Layout, Result, Shape};

pub(crate) fn sm_count(dev: &CudaDevice) -> Result<usize> {
    let n = dev
        .cuda_stream()
        .context()
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| candle_core::Error::Msg(format!("sddmm: SM count: {e:?}")))?;
    Ok(n.max(1) as usize)
}

/// DTP for `func` on `dev`: its occupancy at `HP_WARPS` warps per block, the SM count.
fn dtp(
    dev: &CudaDevice,
    func: &candle_core::cuda_backend::cudarc::driver::CudaFunction,
    nnz: usize,
) -> Result<u32> {
    let active = func
        .occupancy_max_active_blocks_per_multiprocessor(32 * HP_WARPS, 0, None)
        .map_err(|e| candle_core::Error::Msg(format!("sddmm: occupancy: {e:?}")))?;
    Ok(dynamic_task_partition(nnz, sm_count(dev)?, active as usize))
}

fn hp_func(
    dev: &CudaDevice,
    prefix: &str,
    shape: HpShape,
) -> Result<candle_core::cuda_backend::cudarc::driver::CudaFunction> {
    let name = format!(
        "hp_sddmm_{prefix}v{}_c{}_u{}",
        shape.v,
        shape.ch,
        shape.unroll()
    );
    Ok(crate::cuda::kernel(dev, &name, &crate::cuda::SDDMM)?.into_cuda_function())
}

/// The edges per warp an automatic HP-SDDMM launch uses for `nnz` edges at width `k` (aligned
/// operands) on `dev`; `None` when K is outside HP's 1..=1024.
pub fn auto_npw(dev: &CudaDevice, nnz: usize, k: usize) -> Result<Option<u32>> {
    HpShape::new(k, 4)
        .map(|shape| dtp(dev, &hp_func(dev, "", shape)?, nnz))
        .transpose()
}

/// `e[p] = <a[i], b[col_p]>` (times `vals[p]` when given). `a` and `b` are f32, bf16 or f16
/// (one dtype); edge values, the accumulation and `e` are fp32 whatever the features are.
pub(crate) fn sddmm(
    g: &DeviceGraph,
    a: &CudaStorage,
    al: &Layout,
    b: &CudaStorage,
    bl: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
) -> Result<(CudaStorage, Shape)> {
    const OP: &str = "sddmm";
    let (av, bv) = (FloatView::of(OP, a, al)?, FloatView::of(OP, b, bl)?);
    if av.dtype() != bv.dtype() {
        candle_core::bail!("{OP}: a is {:?}, b is {:?}", av.dtype(), bv.dtype());
    }
    let vv = f32_view_opt(OP, vals)?;
    let ops = Operands {
        g,
        k: al.shape().dims2()?.1,
        aligned_to: al.start_offset() | bl.start_offset(),
        vals: vv.as_ref(),
    };
    let dev = a.device().clone();
    let e = ops.launch(&dev, &av, &bv)?;
    Ok((CudaStorage::wrap_cuda_slice(e, dev), Shape::from(g.nnz())))
}

/// What one SDDMM launch needs besides the feature views.
struct Operands<'a> {
    g: &'a DeviceGraph,
    k: usize,
    /// The operands' element offsets OR-ed (their common alignment).
    aligned_to: usize,
    vals: Option<&'a CudaView<'a, f32>>,
}

impl Operands<'_> {
    /// Runs HP-SDDMM (or the row kernel) over `a`, `b` (one storage type, whose kernels are
    /// named with its prefix) into a new fp32 `[nnz]` buffer.
    fn launch(&self, dev: &CudaDevice, av: &FloatView, bv: &FloatView) -> Result<CudaSlice<f32>> {
        let prefix = av.prefix();
        let (g, k) = (self.g, self.k);
        let e = zeros::<f32>(dev, g.nnz())?;
        let (n, nnz) = (g.n_rows(), g.nnz());
        if n == 0 || nnz == 0 || k == 0 {
            return Ok(e);
        }
        let csr = g.cuda_csr()?;
        let aligned_to = 1 << (self.aligned_to | 4).trailing_zeros().min(2);
        let choice = sddmm_choice_for(g, k, aligned_to);
        g.record("sddmm", choice.name());
        let (n_i, k_i) = (n as i32, k as i32);
        // A null pointer for "no values" (the kernels test it).
        let no_vals = 0u64;
        let vals = self.vals;
        // The arguments every SDDMM kernel starts with: the CSR, `a`, `b` and the edge values
        // (or the null pointer).
        macro_rules! push_operands {
            ($bld:ident) => {
                $bld.arg(&csr.indptr).arg(&csr.indices);
                av.push(&mut $bld);
                bv.push(&mut $bld);
                match vals {
                    Some(v) => $bld.arg(v),
                    None => $bld.arg(&no_vals),
                };
            };
        }
        match choice {
            SddmmChoice::Hp { shape, npw } => {
                let func = hp_func(dev, prefix, shape)?;
                let npw = match npw {
                    Some(npw) => npw,
                    None => dtp(dev, &func, nnz)?,
                };
                let warps = nnz.div_ceil(npw as usize);
                let cfg = LaunchConfig {
                    grid_dim: (warps.div_ceil(HP_WARPS as usize) as u32, 1, 1),
                    block_dim: (32 * HP_WARPS, 1, 1),
                    shared_mem_bytes: 0,
                };
                let (nnz_u, vi, lanes) = (nnz as u32, index_vector_width(npw), shape.lanes as i32);
                let stream = dev.cuda_stream();
                let mut bld = stream.launch_builder(&func);
                push_operands!(bld);
                bld.arg(&e)
                    .arg(&n_i)
                    .arg(&nnz_u)
                    .arg(&k_i)
                    .arg(&npw)
                    .arg(&vi)
                    .arg(&lanes);
                // SAFETY: a is [n_rows, k], b is [n_cols, k] of T, vals (if any) and e have
                // nnz f32 elements (checked by `sddmm`); v-wide loads only where `HpShape`
                // found k and both offsets divisible by v; the grid covers nnz edges in warps
                // of npw.
                launched(unsafe { bld.launch(cfg) }.map(|_| ()))?;
            }
            SddmmChoice::Rows => {
                let name = format!("sddmm_{prefix}rows");
                let func = crate::cuda::kernel(dev, &name, &crate::cuda::SDDMM)?;
                let cfg = warp_per_row_cfg(n);
                let mut bld = func.builder();
                push_operands!(bld);
                bld.arg(&e).arg(&n_i).arg(&k_i);
                // SAFETY: a is [n_rows, k], b is [n_cols, k] of T, vals (if any) and e have
                // nnz f32 elements (checked by `sddmm`).
                launched(unsafe { bld.launch(cfg) }.map(|_| ()))?;
            }
        }
        Ok(e)
    }
}
