// CSR SpMM for GNN aggregation, GE-SpMM style (Huang et al., SC'20).
//
//   out[i, t] = reduce_{p in row i} a_p * x[col_p, t]      (a_p = 1 when unweighted)
//
// Layout: row-major x [n_cols, k] and out [n_rows, k]; CSR rows = targets. No preprocessing.
//
// - One warp per row. Coalesced Row Caching: the warp loads 32 (col, val) pairs of its row
//   at once, one per lane, and broadcasts them with __shfl_sync while every lane walks its
//   feature columns, so sparse data is read once per row and coalesced.
// - Coarse-grained Warp Merging: a warp covers CF chunks of 32*VEC columns (a "tile"); each
//   lane keeps CF*VEC accumulators and reuses each broadcast (col, val) CF times.
// - Vectorised access: VEC contiguous floats per lane (float2/float4 loads when k allows).
// - Block order: node-major (consecutive blocks share rows and differ in column tile, so a
//   row's sparse data is reused from L2 across tiles) or tile-major (all rows of a column
//   tile first, so the gathered columns of x stay in L2); the host picks by size.
// - Optional row schedule (sum/mean only; `items` non-null): a warp takes a work item of
//   crates/kernels/src/schedule.rs instead of a row: rows longer than `chunk` edges are cut
//   into `chunk`-edge groups whose partial sums add atomically into the zeroed output, and
//   the longest items run first, so no block waits on one hub row (HP-SpMM's nnz balance).
// Max/min use the sign trick (min x = -max -x) and keep the first strictly better edge,
// exactly as the CPU reference; empty rows give 0.

#include <math_constants.h>

#include "common.cuh"

#define NO_EDGE 0xffffffffu

// One edge's contribution to one accumulator. MODE 0: sum; 1/2: max of sign * a * x (min via
// sign = -1), keeping the first strictly better edge (position recorded in MODE 2).
template <int MODE>
__device__ __forceinline__ void update(float& acc, uint32_t& am, float v, float xv, float sign, uint32_t pos,
                                       uint32_t start) {
    if (MODE == 0) {
        acc = fmaf(v, xv, acc);
    } else {
        const float cand = sign * (v * xv);
        if (pos == start || cand > acc) {
            acc = cand;
            if (MODE == 2) am = pos;
        }
    }
}

// MODE 0: sum (mean when `mean`), 1: max/min without argmax, 2: max/min with argmax.
template <int VEC, int CF, int MODE, int UNROLL>
__device__ __forceinline__ void spmm_impl(
    const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
    const float* __restrict__ vals, const float* __restrict__ x, float* __restrict__ out,
    uint32_t* __restrict__ arg, int n_rows, int k, int n_tiles, int weighted, int mean, float sign,
    int tile_major, const uint2* __restrict__ items, int n_items, int chunk)
{
    const int lane = threadIdx.x & 31;
    const int warps = blockDim.x >> 5;
    // Node-major: consecutive blocks share rows (sparse data reused across tiles).
    // Tile-major: all rows of one column tile first (the gathered slice of x, n_cols * tile
    // width, can stay in L2 while the tile is processed).
    const int n_work = items ? n_items : n_rows;
    const int row_blocks = (n_work + warps - 1) / warps;
    const int tile = tile_major ? blockIdx.x / row_blocks : blockIdx.x % n_tiles;
    const int w = (tile_major ? blockIdx.x % row_blocks : blockIdx.x / n_tiles) * warps + (threadIdx.x >> 5);
    if (w >= n_work) return;
    uint32_t row, start, end, len;
    bool split = false;
    if (items) {
        const Item it = item_of(indptr, items, w, chunk);
        row = it.row; start = it.start; end = it.end; len = it.deg; split = it.split;
    } else {
        row = w; start = indptr[row]; end = indptr[row + 1]; len = end - start;
    }
    const int col0 = tile * (32 * VEC * CF) + lane * VEC;
    float acc[CF][VEC];
    uint32_t am[CF][VEC];
#pragma unroll
    for (int c = 0; c < CF; ++c)
#pragma unroll
        for (int j = 0; j < VEC; ++j) { acc[c][j] = MODE == 0 ? 0.f : -CUDART_INF_F; am[c][j] = NO_EDGE; }

    for (uint32_t base = start; base < end; base += 32) {
        const uint32_t p = base + lane;
        uint32_t my_c = 0;
        float my_v = 1.f;
        if (p < end) {
            my_c = __ldg(indices + p);
            if (weighted) my_v = __ldg(vals + p);
        }
        const int n = min(32u, end - base);
        int e = 0;
        // UNROLL edges at a time: all their loads are issued before the arithmetic, so each
        // lane keeps UNROLL * CF vector loads in flight instead of one dependent chain.
        for (; e + UNROLL <= n; e += UNROLL) {
            uint32_t c[UNROLL];
            float v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                c[u] = __shfl_sync(FULL, my_c, e + u);
                v[u] = __shfl_sync(FULL, my_v, e + u);
            }
#pragma unroll
            for (int cc = 0; cc < CF; ++cc) {
                const int col = col0 + cc * 32 * VEC;
                if (col < k) {
                    float xv[UNROLL][VEC];
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) load_vec<VEC>(x + (size_t)c[u] * k + col, xv[u]);
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u)
#pragma unroll
                        for (int j = 0; j < VEC; ++j)
                            update<MODE>(acc[cc][j], am[cc][j], v[u], xv[u][j], sign, base + e + u, start);
                }
            }
        }
        for (; e < n; ++e) {
            const uint32_t c = __shfl_sync(FULL, my_c, e);
            const float v = __shfl_sync(FULL, my_v, e);
#pragma unroll
            for (int cc = 0; cc < CF; ++cc) {
                const int col = col0 + cc * 32 * VEC;
                if (col < k) {
                    float xv[VEC];
                    load_vec<VEC>(x + (size_t)c * k + col, xv);
#pragma unroll
                    for (int j = 0; j < VEC; ++j) update<MODE>(acc[cc][j], am[cc][j], v, xv[j], sign, base + e, start);
                }
            }
        }
    }
    const float scale = (MODE == 0 && mean && len > 0) ? 1.f / (float)len : 1.f;
#pragma unroll
    for (int cc = 0; cc < CF; ++cc) {
        const int col = col0 + cc * 32 * VEC;
        if (col < k) {
            float r[VEC];
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
                r[j] = MODE == 0 ? acc[cc][j] * scale : (len == 0 ? 0.f : sign * acc[cc][j]);
            }
            if (MODE == 0 && split) {
#pragma unroll
                for (int j = 0; j < VEC; ++j) atomicAdd(out + (size_t)row * k + col + j, r[j]);
            } else {
                store_vec<VEC>(out + (size_t)row * k + col, r);
            }
            if (MODE == 2) {
#pragma unroll
                for (int j = 0; j < VEC; ++j) arg[(size_t)row * k + col + j] = am[cc][j];
            }
        }
    }
}

#define SPMM_KERNEL_U(VEC, CF, MODE, U, SUFFIX)                                                 \
    extern "C" __global__ void spmm_v##VEC##_c##CF##_m##MODE##SUFFIX(                           \
        const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,              \
        const float* __restrict__ vals, const float* __restrict__ x, float* __restrict__ out,   \
        uint32_t* __restrict__ arg, int n_rows, int k, int n_tiles, int weighted, int mean,     \
        float sign, int tile_major, const uint2* __restrict__ items, int n_items, int chunk) {  \
        spmm_impl<VEC, CF, MODE, U>(indptr, indices, vals, x, out, arg, n_rows, k, n_tiles,    \
                                    weighted, mean, sign, tile_major, items, n_items, chunk);   \
    }
#define SPMM_KERNEL(VEC, CF, MODE) SPMM_KERNEL_U(VEC, CF, MODE, 4, )

#define SPMM_MODES(VEC, CF) SPMM_KERNEL(VEC, CF, 0) SPMM_KERNEL(VEC, CF, 1) SPMM_KERNEL(VEC, CF, 2)
// CF * VEC <= 16 accumulators per lane.
SPMM_MODES(1, 1) SPMM_MODES(1, 2) SPMM_MODES(1, 3) SPMM_MODES(1, 4)
SPMM_MODES(1, 5) SPMM_MODES(1, 6) SPMM_MODES(1, 8)
SPMM_MODES(2, 1) SPMM_MODES(2, 2) SPMM_MODES(2, 3) SPMM_MODES(2, 4)
SPMM_MODES(2, 5) SPMM_MODES(2, 6) SPMM_MODES(2, 8)
SPMM_MODES(4, 1) SPMM_MODES(4, 2) SPMM_MODES(4, 3) SPMM_MODES(4, 4)
// Eight-edge unroll for the one-chunk-per-warp shapes (more loads in flight per lane).
#define SPMM_MODES_U8(VEC) SPMM_KERNEL_U(VEC, 1, 0, 8, _u8) SPMM_KERNEL_U(VEC, 1, 1, 8, _u8) SPMM_KERNEL_U(VEC, 1, 2, 8, _u8)
SPMM_MODES_U8(1) SPMM_MODES_U8(2) SPMM_MODES_U8(4)

// out[i, t] = a_p x[col_p, t] at p = arg[i, t] (0 where no edge): the max/min output rebuilt
// from its argmax, which carries the backward.
extern "C" __global__ void gather_arg(const uint32_t* __restrict__ arg, const uint32_t* __restrict__ indices,
                                      const float* __restrict__ vals, const float* __restrict__ x,
                                      float* __restrict__ out, size_t total, int k, int weighted) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const uint32_t p = arg[e];
        float r = 0.f;
        if (p != NO_EDGE) r = (weighted ? vals[p] : 1.f) * x[(size_t)indices[p] * k + e % k];
        out[e] = r;
    }
}

// dx[col_p, t] += a_p dy[i, t] at p = arg[i, t] (atomics: several targets may pick one source).
extern "C" __global__ void scatter_arg(const uint32_t* __restrict__ arg, const uint32_t* __restrict__ indices,
                                       const float* __restrict__ vals, const float* __restrict__ dy,
                                       float* __restrict__ dx, size_t total, int k, int weighted) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const uint32_t p = arg[e];
        if (p != NO_EDGE) atomicAdd(dx + (size_t)indices[p] * k + e % k, (weighted ? vals[p] : 1.f) * dy[e]);
    }
}

// dv[p] += dy[i, t] x[col_p, t] at p = arg[i, t].
extern "C" __global__ void edge_grad_arg(const uint32_t* __restrict__ arg, const uint32_t* __restrict__ indices,
                                         const float* __restrict__ dy, const float* __restrict__ x,
                                         float* __restrict__ dv, size_t total, int k) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const uint32_t p = arg[e];
        if (p != NO_EDGE) atomicAdd(dv + p, dy[e] * x[(size_t)indices[p] * k + e % k]);
    }
}
