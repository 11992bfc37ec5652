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

// Coalesced Row Caching: lane `lane` of a warp loads edge `p` of the 32 at `base` (column and
// value; 0 and 1 past the row's end or unweighted), for the warp to broadcast.
__device__ __forceinline__ void lane_edge(const uint32_t* __restrict__ indices, const float* __restrict__ vals,
                                          int weighted, uint32_t p, uint32_t end, uint32_t& c, float& v) {
    c = 0;
    v = 1.f;
    if (p < end) {
        c = __ldg(indices + p);
        if (weighted) v = __ldg(vals + p);
    }
}

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
// T: the storage type of x (float, or __nv_bfloat16 / __half under --precision bf16/f16);
// accumulation and `out` are always fp32.
template <typename T, int VEC, int CF, int MODE, int UNROLL>
__device__ __forceinline__ void spmm_impl(
    const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
    const float* __restrict__ vals, const T* __restrict__ x, float* __restrict__ out,
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
    const Item it = work_of(indptr, items, w, chunk);
    const uint32_t row = it.row, start = it.start, end = it.end, len = it.deg;
    const bool split = it.split;
    const int col0 = tile * (32 * VEC * CF) + lane * VEC;
    float acc[CF][VEC];
    uint32_t am[CF][VEC];
#pragma unroll
    for (int c = 0; c < CF; ++c)
#pragma unroll
        for (int j = 0; j < VEC; ++j) { acc[c][j] = MODE == 0 ? 0.f : -CUDART_INF_F; am[c][j] = NO_EDGE; }

    for (uint32_t base = start; base < end; base += 32) {
        uint32_t my_c;
        float my_v;
        lane_edge(indices, vals, weighted, base + lane, end, my_c, my_v);
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
        spmm_impl<float, VEC, CF, MODE, U>(indptr, indices, vals, x, out, arg, n_rows, k, n_tiles,    \
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

// Half-precision storage (one chunk per warp, eight-edge unroll): x read as bf16 / f16, VEC
// halves per lane (8 = one 16-byte load), fp32 accumulators and fp32 `out` (split rows of the
// schedule meet through fp32 atomics; the host narrows the result). MODE 0: sum/mean; 1, 2:
// max/min without / with argmax (one warp per row, no schedule, as for f32).
#define SPMM_HALF_MODE(TY, NAME, VEC, MODE)                                                     \
    extern "C" __global__ void spmm_##NAME##_v##VEC##_m##MODE(                                  \
        const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,              \
        const float* __restrict__ vals, const TY* __restrict__ x, float* __restrict__ out,      \
        uint32_t* __restrict__ arg, int n_rows, int k, int n_tiles, int weighted, int mean,     \
        float sign, int tile_major, const uint2* __restrict__ items, int n_items, int chunk) {  \
        spmm_impl<TY, VEC, 1, MODE, 8>(indptr, indices, vals, x, out, arg, n_rows, k, n_tiles, \
                                       weighted, mean, sign, tile_major, items, n_items, chunk); \
    }
#define SPMM_HALF(TY, NAME, VEC) \
    SPMM_HALF_MODE(TY, NAME, VEC, 0) SPMM_HALF_MODE(TY, NAME, VEC, 1) SPMM_HALF_MODE(TY, NAME, VEC, 2)
SPMM_HALF(__nv_bfloat16, bf16, 1) SPMM_HALF(__nv_bfloat16, bf16, 2) SPMM_HALF(__nv_bfloat16, bf16, 4)
SPMM_HALF(__nv_bfloat16, bf16, 8)
SPMM_HALF(__half, f16, 1) SPMM_HALF(__half, f16, 2) SPMM_HALF(__half, f16, 4) SPMM_HALF(__half, f16, 8)

// Narrow rows (sum/mean): one warp per work item as above, but x is read through a padded
// row stride `kp` (a multiple of VEC, VEC * sizeof(T) = 16 bytes per lane per load), so a row
// needs only G = kp / VEC lanes. The warp splits into E = 32 / G lane groups that gather E
// edges per load step (U steps in flight per lane), where the row kernel above gathers one edge
// per step and, for k not a multiple of its chunk, spends a second warp on the leftover columns
// (K = 41: two warps per row, 23 lanes idle on the second). The groups' partial sums meet
// through a shuffle tree at the end; lanes of group 0 write columns < k of `out` (row stride k;
// the pad columns of x are read but never written out). G <= 16 (E >= 2) by the host's rule.
template <typename T, int VEC, int U>
__device__ __forceinline__ void spmm_narrow_impl(
    const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
    const float* __restrict__ vals, const T* __restrict__ x, float* __restrict__ out,
    int n_rows, int k, int kp, int weighted, int mean, const uint2* __restrict__ items, int n_items,
    int chunk)
{
    const int lane = threadIdx.x & 31;
    const int w = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int n_work = items ? n_items : n_rows;
    if (w >= n_work) return;
    const Item it = work_of(indptr, items, w, chunk);
    const uint32_t row = it.row, start = it.start, end = it.end, len = it.deg;
    const bool split = it.split;
    const int G = kp / VEC;
    const int E = 32 / G;
    const int g = lane / G;
    const int col = (lane - g * G) * VEC;
    const bool active = g < E;
    float acc[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[j] = 0.f;

    for (uint32_t base = start; base < end; base += 32) {
        uint32_t my_c;
        float my_v;
        lane_edge(indices, vals, weighted, base + lane, end, my_c, my_v);
        const int n = min(32u, end - base);
        for (int e = 0; e < n; e += E * U) {
            uint32_t c[U];
            float v[U];
            bool ok[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int i = e + u * E + g;
                c[u] = __shfl_sync(FULL, my_c, i & 31);
                v[u] = __shfl_sync(FULL, my_v, i & 31);
                ok[u] = active && i < n;
                if (!ok[u]) v[u] = 0.f;
            }
            float xv[U][VEC];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (ok[u]) {
                    load_vec<VEC>(x + (size_t)c[u] * kp + col, xv[u]);
                } else {
#pragma unroll
                    for (int j = 0; j < VEC; ++j) xv[u][j] = 0.f;
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int j = 0; j < VEC; ++j) acc[j] = fmaf(v[u], xv[u][j], acc[j]);
        }
    }
    // Group g ends with the sum over groups [g, E): group 0 holds the row's (item's) total.
    for (int off = 1; off < E; off <<= 1) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
            const float o = __shfl_down_sync(FULL, acc[j], off * G);
            if (g + off < E) acc[j] += o;
        }
    }
    if (g != 0) return;
    const float scale = (mean && len > 0) ? 1.f / (float)len : 1.f;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
        const int t = col + j;
        if (t < k) {
            if (split) atomicAdd(out + (size_t)row * k + t, acc[j] * scale);
            else out[(size_t)row * k + t] = acc[j] * scale;
        }
    }
}

#define SPMM_NARROW(TY, NAME, VEC)                                                                 \
    extern "C" __global__ void spmm_narrow_##NAME(                                                 \
        const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,                 \
        const float* __restrict__ vals, const TY* __restrict__ x, float* __restrict__ out,         \
        int n_rows, int k, int kp, int weighted, int mean, const uint2* __restrict__ items,        \
        int n_items, int chunk) {                                                                  \
        spmm_narrow_impl<TY, VEC, 4>(indptr, indices, vals, x, out, n_rows, k, kp, weighted, mean, \
                                     items, n_items, chunk);                                       \
    }
SPMM_NARROW(float, f32, 4) SPMM_NARROW(__nv_bfloat16, bf16, 8) SPMM_NARROW(__half, f16, 8)

// Row groups (sum/mean; graphs of short rows: meshes, products-like): G lanes per row, each
// lane 16 bytes of a row of x per load (VEC = 16 / sizeof(T) columns), 32 / G rows per warp, U
// edges in flight, fp32 accumulators, and the result written once in x's storage type. No
// zero fill, no atomics, no narrowing pass: on such graphs those, not the gather, are what the
// row-scheduled and HP kernels pay (mesh-4M, 20 M nnz, bf16 K = 128: HP-SpMM 6.46 ms against a
// 0.66 ms HBM floor, fd3e7d6:bench/records/dispatch/h100-2026-11-27; row groups 3.27 ms,
// bench/records/dispatch/h100-2026-11-28/h100x4-2026-11-27; 1.62 ms with the benchmark's
// pool keeping freed memory, bench/records/dispatch/h100-2026-11-28). Rows wider than one
// warp's 32 x 16 bytes take column tiles (blockIdx.y). A group walks its row alone, so one hub row stalls its
// warp's other rows: the dispatcher keeps this kernel to graphs of short rows. The host
// guarantees k * sizeof(T) % 16 == 0 and a 16-byte-aligned x; g_lanes is the lanes per row in
// one tile (<= 32).
template <typename T, int U>
__device__ __forceinline__ void spmm_group_impl(const uint32_t* __restrict__ indptr,
                                                const uint32_t* __restrict__ indices,
                                                const float* __restrict__ vals, const T* __restrict__ x,
                                                T* __restrict__ out, int n_rows, int k, int g_lanes,
                                                int weighted, int mean) {
    constexpr int VEC = 16 / sizeof(T);
    const int lane = threadIdx.x & 31;
    const int per_warp = 32 / g_lanes;
    const int sub = lane / g_lanes;
    const int gl = lane - sub * g_lanes;
    const int warp = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int row = warp * per_warp + sub;
    const int col = (blockIdx.y * g_lanes + gl) * VEC;
    if (sub >= per_warp || row >= n_rows || col >= k) return;
    const uint32_t start = __ldg(indptr + row), end = __ldg(indptr + row + 1);
    float acc[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[j] = 0.f;
    for (uint32_t p = start; p < end; p += U) {
        float xv[U][VEC];
        float a[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (p + u < end) {
                const uint32_t c = __ldg(indices + p + u);
                a[u] = weighted ? __ldg(vals + p + u) : 1.f;
                load_vec<VEC>(x + (size_t)c * k + col, xv[u]);
            } else {
                a[u] = 0.f;
#pragma unroll
                for (int j = 0; j < VEC; ++j) xv[u][j] = 0.f;
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int j = 0; j < VEC; ++j) acc[j] = fmaf(a[u], xv[u][j], acc[j]);
    }
    const float scale = (mean && end > start) ? 1.f / (float)(end - start) : 1.f;
    union { uint4 u; T h[VEC]; } o;
#pragma unroll
    for (int j = 0; j < VEC; ++j) o.h[j] = from_f32<T>(acc[j] * scale);
    *reinterpret_cast<uint4*>(out + (size_t)row * k + col) = o.u;
}

#define SPMM_GROUP(TY, NAME)                                                                       \
    extern "C" __global__ void spmm_group_##NAME(                                                  \
        const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,                 \
        const float* __restrict__ vals, const TY* __restrict__ x, TY* __restrict__ out,            \
        int n_rows, int k, int g_lanes, int weighted, int mean) {                                  \
        spmm_group_impl<TY, 4>(indptr, indices, vals, x, out, n_rows, k, g_lanes, weighted, mean); \
    }
SPMM_GROUP(float, f32) SPMM_GROUP(__nv_bfloat16, bf16) SPMM_GROUP(__half, f16)

// dst[r, t] = src[r, t] for t < k, 0 for k <= t < kp: rows of 2- or 4-byte elements copied to
// a 16-byte-aligned row stride for the narrow kernel's vector loads.
template <typename B>
__device__ __forceinline__ void pad_rows_impl(const B* __restrict__ src, B* __restrict__ dst, int n, int k,
                                              int kp) {
    const size_t total = (size_t)n * kp;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / kp;
        const int t = (int)(i - r * kp);
        dst[i] = t < k ? src[r * k + t] : (B)0;
    }
}
extern "C" __global__ void pad_rows_b16(const uint16_t* __restrict__ src, uint16_t* __restrict__ dst, int n,
                                        int k, int kp) {
    pad_rows_impl(src, dst, n, k, kp);
}
extern "C" __global__ void pad_rows_b32(const uint32_t* __restrict__ src, uint32_t* __restrict__ dst, int n,
                                        int k, int kp) {
    pad_rows_impl(src, dst, n, k, kp);
}

// out[i, t] = a_p x[col_p, t] at p = arg[i, t] (0 where no edge): the max/min output rebuilt
// from its argmax, which carries the backward. T: x's storage type; `out` is fp32 (the host
// narrows it for half precision).
template <typename T>
__device__ __forceinline__ void gather_arg_impl(const uint32_t* __restrict__ arg, const uint32_t* __restrict__ indices,
                                                const float* __restrict__ vals, const T* __restrict__ x,
                                                float* __restrict__ out, size_t total, int k, int weighted) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const uint32_t p = arg[e];
        float r = 0.f;
        if (p != NO_EDGE) r = (weighted ? vals[p] : 1.f) * to_f32(x[(size_t)indices[p] * k + e % k]);
        out[e] = r;
    }
}

// dx[col_p, t] += a_p dy[i, t] at p = arg[i, t] (atomics: several targets may pick one source),
// into an fp32 dx whatever dy's storage type T.
template <typename T>
__device__ __forceinline__ void scatter_arg_impl(const uint32_t* __restrict__ arg, const uint32_t* __restrict__ indices,
                                                 const float* __restrict__ vals, const T* __restrict__ dy,
                                                 float* __restrict__ dx, size_t total, int k, int weighted) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const uint32_t p = arg[e];
        if (p != NO_EDGE) atomicAdd(dx + (size_t)indices[p] * k + e % k, (weighted ? vals[p] : 1.f) * to_f32(dy[e]));
    }
}

// dv[p] += dy[i, t] x[col_p, t] at p = arg[i, t] (fp32 dv).
template <typename T>
__device__ __forceinline__ void edge_grad_arg_impl(const uint32_t* __restrict__ arg, const uint32_t* __restrict__ indices,
                                                   const T* __restrict__ dy, const T* __restrict__ x,
                                                   float* __restrict__ dv, size_t total, int k) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const uint32_t p = arg[e];
        if (p != NO_EDGE) atomicAdd(dv + p, to_f32(dy[e]) * to_f32(x[(size_t)indices[p] * k + e % k]));
    }
}

#define ARG_KERNELS(TY, PRE)                                                                                      \
    extern "C" __global__ void PRE##gather_arg(const uint32_t* __restrict__ arg, const uint32_t* __restrict__ indices, \
                                               const float* __restrict__ vals, const TY* __restrict__ x,            \
                                               float* __restrict__ out, size_t total, int k, int weighted) {        \
        gather_arg_impl<TY>(arg, indices, vals, x, out, total, k, weighted);                                         \
    }                                                                                                                \
    extern "C" __global__ void PRE##scatter_arg(const uint32_t* __restrict__ arg, const uint32_t* __restrict__ indices, \
                                                const float* __restrict__ vals, const TY* __restrict__ dy,            \
                                                float* __restrict__ dx, size_t total, int k, int weighted) {          \
        scatter_arg_impl<TY>(arg, indices, vals, dy, dx, total, k, weighted);                                         \
    }                                                                                                                \
    extern "C" __global__ void PRE##edge_grad_arg(const uint32_t* __restrict__ arg,                                  \
                                                  const uint32_t* __restrict__ indices, const TY* __restrict__ dy,   \
                                                  const TY* __restrict__ x, float* __restrict__ dv, size_t total,   \
                                                  int k) {                                                           \
        edge_grad_arg_impl<TY>(arg, indices, dy, x, dv, total, k);                                                   \
    }
ARG_KERNELS(float, ) ARG_KERNELS(__nv_bfloat16, bf16_) ARG_KERNELS(__half, f16_)

// HP-SpMM (Fan, Wang, Chu, IPDPS'23): the nnz-balanced hybrid CSR/COO partition of HP-SDDMM
// (cuda/sddmm.cu) applied to the sum/mean SpMM. A worker (a group of G lanes; G = 32 for
// K >= 32 * V, fewer for narrow features so every lane has columns) takes `npw` consecutive
// edges across row boundaries, whatever the degrees; the row of its first edge comes from a
// binary search of indptr and later rows from a walk along it (no COO row array is stored).
// Each lane keeps CH * V accumulators (its columns of the current row, one column tile per
// blockIdx.y) and, when the walk leaves a row, writes them: a plain store when the worker
// held the whole row, an atomic add when the row is shared with a neighbouring worker (the
// output starts zeroed; empty rows stay 0). Edges are taken U at a time, the U gathered rows
// of x all requested before any is used. The column index and edge value of an edge are read
// by every lane of the group from the same address (one broadcast transaction).
// Feature loads are V wide (float2 / float4) where K and the operand offset allow.
template <typename T, int V, int CH, int U>
__device__ __forceinline__ void hp_spmm(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
                                        const float* __restrict__ vals, const T* __restrict__ x,
                                        float* __restrict__ out, int n_rows, uint32_t nnz, int k, uint32_t npw,
                                        int g_lanes, int mean) {
    const int lane = threadIdx.x & 31;
    const int groups = 32 / g_lanes;
    const uint64_t worker =
        ((uint64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * groups + lane / g_lanes;
    const uint64_t start64 = worker * npw;
    if (start64 >= nnz) return;
    const uint32_t start = (uint32_t)start64;
    const uint32_t end = (uint32_t)min((uint64_t)start + npw, (uint64_t)nnz);
    const int gl = lane % g_lanes;
    const int col0 = blockIdx.y * (g_lanes * CH * V);
    int lo = 0, hi = n_rows;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (__ldg(indptr + mid) <= start) lo = mid; else hi = mid - 1;
    }
    uint32_t row = lo;
    uint32_t row_start = __ldg(indptr + row);
    uint32_t row_end = __ldg(indptr + row + 1);
    float acc[CH][V];
#pragma unroll
    for (int c = 0; c < CH; ++c)
#pragma unroll
        for (int v = 0; v < V; ++v) acc[c][v] = 0.f;

    auto flush = [&]() {
        const bool whole = row_start >= start && row_end <= end;
        const float scale = mean ? 1.f / (float)(row_end - row_start) : 1.f;
        float* o = out + (size_t)row * k;
#pragma unroll
        for (int c = 0; c < CH; ++c) {
            const int idx = col0 + (c * g_lanes + gl) * V;
            if (idx < k) {
                float r[V];
#pragma unroll
                for (int v = 0; v < V; ++v) r[v] = acc[c][v] * scale;
                if (whole) {
                    store_vec<V>(o + idx, r);
                } else {
#pragma unroll
                    for (int v = 0; v < V; ++v) atomicAdd(o + idx + v, r[v]);
                }
            }
#pragma unroll
            for (int v = 0; v < V; ++v) acc[c][v] = 0.f;
        }
    };

    for (uint32_t p = start; p < end; p += U) {
        float xv[U][CH][V];
        float w[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const bool live = p + u < end;
            const uint32_t c = live ? __ldg(indices + p + u) : 0u;
            w[u] = live ? (vals ? __ldg(vals + p + u) : 1.f) : 0.f;
            const T* __restrict__ xr = x + (size_t)c * k;
#pragma unroll
            for (int ch = 0; ch < CH; ++ch) {
                const int idx = col0 + (ch * g_lanes + gl) * V;
                if (live && idx < k) {
                    load_vec<V>(xr + idx, xv[u][ch]);
                } else {
#pragma unroll
                    for (int v = 0; v < V; ++v) xv[u][ch][v] = 0.f;
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (p + u < end) {
                if (p + u >= row_end) {  // leave the row: write it, walk to the edge's row
                    flush();
                    do {
                        ++row;
                        row_start = row_end;
                        row_end = __ldg(indptr + row + 1);
                    } while (p + u >= row_end);
                }
#pragma unroll
                for (int ch = 0; ch < CH; ++ch)
#pragma unroll
                    for (int v = 0; v < V; ++v) acc[ch][v] = fmaf(w[u], xv[u][ch][v], acc[ch][v]);
            }
        }
    }
    flush();
}

#define HP_SPMM_T(TY, PRE, V, CH, U)                                                                           \
    extern "C" __global__ void __launch_bounds__(256) hp_spmm_##PRE##v##V##_c##CH##_u##U(                     \
        const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,                            \
        const float* __restrict__ vals, const TY* __restrict__ x, float* __restrict__ out, int n_rows,         \
        uint32_t nnz, int k, uint32_t npw, int g_lanes, int mean) {                                           \
        hp_spmm<TY, V, CH, U>(indptr, indices, vals, x, out, n_rows, nnz, k, npw, g_lanes, mean);             \
    }
// f32 storage: hp_spmm_v*; bf16 / f16 storage (fp32 accumulation and output): hp_spmm_bf16_v*,
// hp_spmm_f16_v*.
#define HP_SPMM(V, CH, U) HP_SPMM_T(float, , V, CH, U) HP_SPMM_T(__nv_bfloat16, bf16_, V, CH, U) \
    HP_SPMM_T(__half, f16_, V, CH, U)
// CH * V <= 8 accumulators per lane; wider K takes more column tiles (blockIdx.y).
HP_SPMM(1, 1, 4) HP_SPMM(1, 2, 4) HP_SPMM(1, 4, 4) HP_SPMM(1, 8, 4)
HP_SPMM(2, 1, 4) HP_SPMM(2, 2, 4) HP_SPMM(2, 4, 4)
HP_SPMM(4, 1, 4) HP_SPMM(4, 2, 4)
