// SDDMM on a CSR pattern: e[p] = <a[i], b[col_p]> (times vals[p] when vals is not null) for
// every edge p of row i.
// One warp per row; lanes split the feature dimension, a shuffle tree reduces each dot
// product, lane 0 writes it. a's row is re-read per edge from L1.
// T: the storage type of a and b (float, or __nv_bfloat16 / __half under --precision
// bf16/f16). The products, the sums, the edge values and e are fp32 whatever T is.

#include "common.cuh"

template <typename T>
__device__ __forceinline__ void sddmm_rows_impl(const uint32_t* __restrict__ indptr,
                                                const uint32_t* __restrict__ indices, const T* __restrict__ a,
                                                const T* __restrict__ b, const float* __restrict__ vals,
                                                float* __restrict__ e, int n_rows, int k) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n_rows) return;
    const T* __restrict__ ar = a + (size_t)row * k;
    for (uint32_t p = indptr[row]; p < indptr[row + 1]; ++p) {
        const T* __restrict__ br = b + (size_t)__ldg(indices + p) * k;
        float s = 0.f;
        for (int t = lane; t < k; t += 32) s = fmaf(to_f32(ar[t]), to_f32(br[t]), s);
        s = warp_sum(s);  // lane 0's sum is the same tree as a shuffle-down reduction
        if (lane == 0) e[p] = vals ? s * __ldg(vals + p) : s;
    }
}

#define SDDMM_ROWS(TY, PRE)                                                                                  \
    extern "C" __global__ void sddmm_##PRE##rows(const uint32_t* __restrict__ indptr,                      \
                                                  const uint32_t* __restrict__ indices, const TY* __restrict__ a, \
                                                  const TY* __restrict__ b, const float* __restrict__ vals,   \
                                                  float* __restrict__ e, int n_rows, int k) {                 \
        sddmm_rows_impl<TY>(indptr, indices, a, b, vals, e, n_rows, k);                                      \
    }
SDDMM_ROWS(float, ) SDDMM_ROWS(__nv_bfloat16, bf16_) SDDMM_ROWS(__half, f16_)

// HP-SDDMM (Fan, Wang, Chu, IPDPS'23): the nnz-balanced hybrid CSR/COO partition. Warp w takes
// the edges [w * npw, (w + 1) * npw) across row boundaries, so every warp does the same work
// whatever the degree skew (the row kernel above gives a hub row to one warp). The row of an
// edge comes from the CSR itself: a binary search of indptr for the warp's first edge, then a
// walk along indptr as the edges cross rows (no COO row array is stored).
//
// The warp is split into groups of G lanes (G = the smallest power of two covering K / V, at
// most 32), one edge per group at a time, so narrow features keep every lane busy. Each group
// keeps the current row of a in registers (CH vectors of V floats per lane) and reloads it only
// when its row changes (the paper's row-switch reuse); b's row is read once per edge, V-wide.
//
// HVMA: the warp's column indices are staged in shared memory by a cooperative load of
// 32 x VI indices, VI-wide (int2 / int4) when npw makes every tile start aligned (npw >= 64 /
// >= 128); features are read V wide (float2 / float4, or 2 / 4 halves) when K and the tensors'
// offsets allow. T is the storage type of a and b, widened to fp32 on load.
#define HP_WARPS 8

template <int V, int CH, typename T>
__device__ __forceinline__ void hp_load_row(const T* __restrict__ r, int k, int g_lanes, int gl,
                                            float (&reg)[CH][V]) {
#pragma unroll
    for (int c = 0; c < CH; ++c) {
        const int idx = (c * g_lanes + gl) * V;
        if (idx < k) {
            load_vec<V>(r + idx, reg[c]);
        } else {
#pragma unroll
            for (int v = 0; v < V; ++v) reg[c][v] = 0.f;
        }
    }
}

template <typename T, int V, int CH, int U>
__device__ __forceinline__ void hp_sddmm(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
                                         const T* __restrict__ a, const T* __restrict__ b,
                                         const float* __restrict__ vals, float* __restrict__ e, int n_rows,
                                         uint32_t nnz, int k, uint32_t npw, int vi, int g_lanes) {
    __shared__ uint32_t tile[HP_WARPS][128];
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const uint64_t warp = (uint64_t)blockIdx.x * HP_WARPS + w;
    const uint64_t start64 = warp * npw;
    if (start64 >= nnz) return;
    const uint32_t start = (uint32_t)start64;
    const uint32_t end = min(start + npw, nnz);
    const int groups = 32 / g_lanes;
    const int gid = lane / g_lanes;
    const int gl = lane % g_lanes;
    uint32_t* t = tile[w];
    // The row holding `start`: the last row whose first edge is at or before it.
    int lo = 0, hi = n_rows;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (__ldg(indptr + mid) <= start) lo = mid; else hi = mid - 1;
    }
    int row = lo;
    uint32_t row_end = __ldg(indptr + row + 1);
    float ar[CH][V];
    bool loaded = false;
    const int span = 32 * vi;
    for (uint32_t base = start; base < end; base += span) {
        const uint32_t n_tile = min((uint32_t)span, end - base);
        // Cooperative, coalesced load of the tile's column indices.
        if (vi == 4 && n_tile == 128) {
            const uint4 v = __ldg(reinterpret_cast<const uint4*>(indices + base) + lane);
            t[lane * 4] = v.x; t[lane * 4 + 1] = v.y; t[lane * 4 + 2] = v.z; t[lane * 4 + 3] = v.w;
        } else if (vi == 2 && n_tile == 64) {
            const uint2 v = __ldg(reinterpret_cast<const uint2*>(indices + base) + lane);
            t[lane * 2] = v.x; t[lane * 2 + 1] = v.y;
        } else {
            for (uint32_t i = lane; i < n_tile; i += 32) t[i] = __ldg(indices + base + i);
        }
        __syncwarp();
        // Every lane runs the same number of rounds (the shuffles need the whole warp); a
        // group past the tile's end computes nothing and writes nothing. A round gives each
        // group U edges whose b rows are all requested before any is used (ILP for narrow K).
        for (uint32_t j0 = 0; j0 < n_tile; j0 += groups * U) {
            float bv[U][CH][V];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const uint32_t j = j0 + u * groups + gid;
                const T* __restrict__ br = b + (size_t)t[j < n_tile ? j : 0] * k;
#pragma unroll
                for (int c = 0; c < CH; ++c) {
                    const int idx = (c * g_lanes + gl) * V;
                    if (j < n_tile && idx < k) {
                        load_vec<V>(br + idx, bv[u][c]);
                    } else {
#pragma unroll
                        for (int v = 0; v < V; ++v) bv[u][c][v] = 0.f;
                    }
                }
            }
            float s[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const uint32_t j = j0 + u * groups + gid;
                s[u] = 0.f;
                if (j < n_tile) {
                    const uint32_t p = base + j;
                    bool moved = !loaded;
                    while (p >= row_end) {  // row switch (skips empty rows)
                        ++row;
                        row_end = __ldg(indptr + row + 1);
                        moved = true;
                    }
                    if (moved) {
                        hp_load_row<V, CH, T>(a + (size_t)row * k, k, g_lanes, gl, ar);
                        loaded = true;
                    }
#pragma unroll
                    for (int c = 0; c < CH; ++c)
#pragma unroll
                        for (int v = 0; v < V; ++v) s[u] = fmaf(ar[c][v], bv[u][c][v], s[u]);
                }
            }
            for (int o = g_lanes >> 1; o > 0; o >>= 1) {
#pragma unroll
                for (int u = 0; u < U; ++u) s[u] += __shfl_xor_sync(FULL, s[u], o, g_lanes);
            }
            if (gl == 0) {
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const uint32_t j = j0 + u * groups + gid;
                    if (j < n_tile) {
                        const uint32_t p = base + j;
                        e[p] = vals ? s[u] * __ldg(vals + p) : s[u];
                    }
                }
            }
        }
        __syncwarp();
    }
}

#define HP_SDDMM_T(TY, PRE, V, CH, U)                                                                     \
    extern "C" __global__ void __launch_bounds__(32 * HP_WARPS) hp_sddmm_##PRE##v##V##_c##CH##_u##U(       \
        const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices, const TY* __restrict__ a,   \
        const TY* __restrict__ b, const float* __restrict__ vals, float* __restrict__ e, int n_rows,         \
        uint32_t nnz, int k, uint32_t npw, int vi, int g_lanes) {                                            \
        hp_sddmm<TY, V, CH, U>(indptr, indices, a, b, vals, e, n_rows, nnz, k, npw, vi, g_lanes);           \
    }
#define HP_SDDMM(V, CH, U) HP_SDDMM_T(float, , V, CH, U) HP_SDDMM_T(__nv_bfloat16, bf16_, V, CH, U) \
    HP_SDDMM_T(__half, f16_, V, CH, U)
// U = 4 edges per group and round where a lane holds at most 2 feature vectors, else 1.
HP_SDDMM(1, 1, 4) HP_SDDMM(1, 2, 4) HP_SDDMM(1, 4, 1) HP_SDDMM(1, 8, 1) HP_SDDMM(1, 16, 1) HP_SDDMM(1, 32, 1)
HP_SDDMM(2, 1, 4) HP_SDDMM(2, 2, 4) HP_SDDMM(2, 4, 1) HP_SDDMM(2, 8, 1) HP_SDDMM(2, 16, 1)
HP_SDDMM(4, 1, 4) HP_SDDMM(4, 2, 4) HP_SDDMM(4, 4, 1) HP_SDDMM(4, 8, 1)
