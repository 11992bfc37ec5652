//! Host side of the CUDA SpMM family (`cuda/spmm.cu`): picks the tile shape from `k`, checks
//! shapes, launches, and wraps the results as candle storages.

use super::Reduce;
use crate::cuda::{elementwise_cfg, f32_view, launched, u32_view, zeros, SPMM_PTX};
use crate::device_graph::DeviceGraph;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::{CudaStorage, Layout, Result, Shape};

const MODULE: &str = "gnn_spmm";
const WARPS_PER_BLOCK: u32 = 8;

/// Coarsening factors compiled for each vector width (`cf * vec <= 16`).
const CFS: [&[usize]; 3] = [
    &[1, 2, 3, 4, 5, 6, 8],
    &[1, 2, 3, 4, 5, 6, 8],
    &[1, 2, 3, 4],
];

/// `(vec, cf, n_tiles)`: floats per lane per load, 32*vec-column chunks per warp, and column
/// tiles per row. Wider loads when `k` and the input offset allow; the fewest tiles that the
/// compiled coarsening factors allow, then the smallest factor covering `k` in that many.
pub(crate) fn tile_shape(k: usize, offset: usize) -> (usize, usize, usize) {
    let vec: usize = if k >= 128 && k.is_multiple_of(4) && offset.is_multiple_of(4) {
        4
    } else if k >= 64 && k.is_multiple_of(2) && offset.is_multiple_of(2) {
        2
    } else {
        1
    };
    let cfs = CFS[vec.trailing_zeros() as usize];
    let max_cf = *cfs.last().expect("non-empty");
    let chunks = k.div_ceil(32 * vec).max(1);
    let n_tiles = chunks.div_ceil(max_cf);
    let need = chunks.div_ceil(n_tiles);
    let cf = *cfs.iter().find(|&&c| c >= need).expect("need <= max_cf");
    (vec, cf, n_tiles)
}

fn i32_arg(what: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| {
        candle_core::Error::Msg(format!(
            "spmm: {what} = {v} exceeds the kernel's 32-bit range"
        ))
    })
}

/// Forward SpMM; with `want_arg` (max/min only) also the argmax positions.
pub(crate) fn spmm_fwd(
    g: &DeviceGraph,
    x: &CudaStorage,
    xl: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
    reduce: Reduce,
    want_arg: bool,
) -> Result<(CudaStorage, Option<CudaStorage>, Shape)> {
    let (_, k) = xl.shape().dims2()?;
    let dev = x.device().clone();
    let csr = g.cuda_csr()?;
    let n = g.n_rows();
    let xv = f32_view("spmm", x, xl)?;
    let vv = match vals {
        Some((s, l)) => Some(f32_view("spmm", s, l)?),
        None => None,
    };
    let out = zeros::<f32>(&dev, n * k)?;
    let extreme = matches!(reduce, Reduce::Max | Reduce::Min);
    let arg = if want_arg && extreme {
        Some(zeros::<u32>(&dev, n * k)?)
    } else {
        None
    };
    if n > 0 && k > 0 {
        let (vec, cf, n_tiles) = tile_shape(k, xl.start_offset());
        let mode = match (extreme, arg.is_some()) {
            (false, _) => 0,
            (true, false) => 1,
            (true, true) => 2,
        };
        let name = format!("spmm_v{vec}_c{cf}_m{mode}");
        let func = dev.get_or_load_custom_func(&name, MODULE, SPMM_PTX)?;
        let row_blocks = n.div_ceil(WARPS_PER_BLOCK as usize);
        let blocks = u32::try_from(row_blocks * n_tiles)
            .map_err(|_| candle_core::Error::Msg("spmm: grid too large".into()))?;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (32 * WARPS_PER_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let (n_i, k_i, t_i) = (
            i32_arg("rows", n)?,
            i32_arg("k", k)?,
            i32_arg("tiles", n_tiles)?,
        );
        let weighted = vv.is_some() as i32;
        let mean = (reduce == Reduce::Mean) as i32;
        let sign: f32 = if reduce == Reduce::Min { -1.0 } else { 1.0 };
        let mut b = func.builder();
        b.arg(&csr.indptr);
        b.arg(&csr.indices);
        match &vv {
            Some(v) => b.arg(v),
            None => b.arg(&xv), // never read when `weighted` is 0
        };
        b.arg(&xv);
        b.arg(&out);
        match &arg {
            Some(a) => b.arg(a),
            None => b.arg(&csr.indptr), // never written unless mode 2
        };
        b.arg(&n_i)
            .arg(&k_i)
            .arg(&t_i)
            .arg(&weighted)
            .arg(&mean)
            .arg(&sign);
        // SAFETY: buffers match the kernel signature; the CSR was validated on upload, x has
        // n_cols * k elements (checked by the public functions), out/arg have n * k.
        launched(unsafe { b.launch(cfg) }.map(|_| ()))?;
    }
    let arg = arg.map(|a| CudaStorage::wrap_cuda_slice(a, dev.clone()));
    Ok((
        CudaStorage::wrap_cuda_slice(out, dev),
        arg,
        Shape::from((n, k)),
    ))
}

/// `out[i,t] = a_p x[col_p,t]` at `p = arg[i,t]`.
pub(crate) fn gather_arg(
    g: &DeviceGraph,
    x: &CudaStorage,
    xl: &Layout,
    arg: &CudaStorage,
    al: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
) -> Result<(CudaStorage, Shape)> {
    let (_, k) = xl.shape().dims2()?;
    let n = g.n_rows();
    let dev = x.device().clone();
    let csr = g.cuda_csr()?;
    let xv = f32_view("spmm_gather_arg", x, xl)?;
    let av = u32_view("spmm_gather_arg", arg, al)?;
    let vv = match vals {
        Some((s, l)) => Some(f32_view("spmm_gather_arg", s, l)?),
        None => None,
    };
    let out = zeros::<f32>(&dev, n * k)?;
    let total = n * k;
    if total > 0 {
        let func = dev.get_or_load_custom_func("gather_arg", MODULE, SPMM_PTX)?;
        let (k_i, w) = (i32_arg("k", k)?, vv.is_some() as i32);
        let mut b = func.builder();
        b.arg(&av).arg(&csr.indices);
        match &vv {
            Some(v) => b.arg(v),
            None => b.arg(&xv),
        };
        b.arg(&xv).arg(&out).arg(&total).arg(&k_i).arg(&w);
        // SAFETY: arg holds positions < nnz or NO_EDGE; buffers sized as above.
        launched(unsafe { b.launch(elementwise_cfg(total)) }.map(|_| ()))?;
    }
    Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from((n, k))))
}

/// `dx[col_p,t] += a_p dy[i,t]` at `p = arg[i,t]`; `dx` has `n_cols` rows.
pub(crate) fn scatter_arg(
    g: &DeviceGraph,
    dy: &CudaStorage,
    dl: &Layout,
    arg: &CudaStorage,
    al: &Layout,
    vals: Option<(&CudaStorage, &Layout)>,
) -> Result<(CudaStorage, Shape)> {
    let (_, k) = dl.shape().dims2()?;
    let dev = dy.device().clone();
    let csr = g.cuda_csr()?;
    let dv = f32_view("spmm_arg_scatter", dy, dl)?;
    let av = u32_view("spmm_arg_scatter", arg, al)?;
    let vv = match vals {
        Some((s, l)) => Some(f32_view("spmm_arg_scatter", s, l)?),
        None => None,
    };
    let dx = zeros::<f32>(&dev, g.n_cols() * k)?;
    let total = g.n_rows() * k;
    if total > 0 {
        let func = dev.get_or_load_custom_func("scatter_arg", MODULE, SPMM_PTX)?;
        let (k_i, w) = (i32_arg("k", k)?, vv.is_some() as i32);
        let mut b = func.builder();
        b.arg(&av).arg(&csr.indices);
        match &vv {
            Some(v) => b.arg(v),
            None => b.arg(&dv),
        };
        b.arg(&dv).arg(&dx).arg(&total).arg(&k_i).arg(&w);
        // SAFETY: as in gather_arg; dx has n_cols * k elements and columns are < n_cols.
        launched(unsafe { b.launch(elementwise_cfg(total)) }.map(|_| ()))?;
    }
    Ok((
        CudaStorage::wrap_cuda_slice(dx, dev),
        Shape::from((g.n_cols(), k)),
    ))
}

/// `dv[p] += dy[i,t] x[col_p,t]` at `p = arg[i,t]`.
pub(crate) fn edge_grad_arg(
    g: &DeviceGraph,
    dy: &CudaStorage,
    dl: &Layout,
    arg: &CudaStorage,
    al: &Layout,
    x: &CudaStorage,
    xl: &Layout,
) -> Result<(CudaStorage, Shape)> {
    let (_, k) = dl.shape().dims2()?;
    let dev = dy.device().clone();
    let csr = g.cuda_csr()?;
    let dyv = f32_view("spmm_arg_edge_grad", dy, dl)?;
    let av = u32_view("spmm_arg_edge_grad", arg, al)?;
    let xv = f32_view("spmm_arg_edge_grad", x, xl)?;
    let dv = zeros::<f32>(&dev, g.nnz())?;
    let total = g.n_rows() * k;
    if total > 0 {
        let func = dev.get_or_load_custom_func("edge_grad_arg", MODULE, SPMM_PTX)?;
        let k_i = i32_arg("k", k)?;
        let mut b = func.builder();
        b.arg(&av)
            .arg(&csr.indices)
            .arg(&dyv)
            .arg(&xv)
            .arg(&dv)
            .arg(&total)
            .arg(&k_i);
        // SAFETY: positions < nnz; dv has nnz elements.
        launched(unsafe { b.launch(elementwise_cfg(total)) }.map(|_| ()))?;
    }
    Ok((CudaStorage::wrap_cuda_slice(dv, dev), Shape::from(g.nnz())))
}

#[cfg(test)]
mod tests {
    use super::tile_shape;

    #[test]
    fn tile_shapes_cover_k_with_compiled_factors() {
        for k in 1..=1100 {
            for off in [0, 1, 2, 4] {
                let (vec, cf, tiles) = tile_shape(k, off);
                assert!(tiles * cf * 32 * vec >= k, "k {k}");
                assert!(
                    k.is_multiple_of(vec) && off.is_multiple_of(vec),
                    "k {k} vec {vec}"
                );
                assert!(super::CFS[vec.trailing_zeros() as usize].contains(&cf));
            }
        }
        assert_eq!(tile_shape(602, 0), (2, 5, 2));
        assert_eq!(tile_shape(256, 0), (4, 2, 1));
        assert_eq!(tile_shape(41, 0), (1, 2, 1));
    }
}
