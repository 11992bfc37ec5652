// Edge-sampled SpMM for inference (ES-SpMM / AES-SpMM), selecting exactly the CPU reference's
// edges (`Sampling::positions`) in the same order.
//
// One warp per (row, column tile); rows of one block are consecutive and the tiles of a row
// sit in neighbouring blocks, so a row's sparse data is reused from L2 across tiles.
// Cache-first staging: the warp computes CHUNK sample positions at a time (one or two per
// lane), loads their (column, value) pairs with coalesced-as-possible reads and stages them in
// shared memory; then every lane walks the staged edges, UNROLL at a time, gathering VEC
// contiguous floats of x per edge (float2/float4 loads) into its accumulators. The estimator's
// scale (nnz / m for sums, 1 / m for means) is applied once at the end.
// `x` is f32, bf16 or f16 (T); edge values and the accumulation are fp32, and the output is an
// fp32 buffer (the host narrows it to x's type for half precision).
//
// strategy 0: ES Bucket (first s), 1: ES FastRand ((i*577) mod nnz, i < s, when nnz > s),
//          2: AES (min(cnt, s) runs of n = s / runs consecutive edges, run i at
//             (i*1429) mod (nnz - n + 1)).

#include "common.cuh"

#define CHUNK 64
#define MAX_WARPS 8

template <int VEC, int UNROLL, typename T>
__device__ __forceinline__ void sampled_impl(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
                                             const float* __restrict__ vals, const T* __restrict__ x,
                                             float* __restrict__ out, int n_rows, int k, int n_tiles, int weighted,
                                             int mean, int strategy, int s, double b0, double b1, double b2,
                                             double b3) {
    __shared__ uint32_t s_col[MAX_WARPS][CHUNK];
    __shared__ float s_val[MAX_WARPS][CHUNK];
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    const int tile = blockIdx.x % n_tiles;
    const int row = (blockIdx.x / n_tiles) * warps + w;
    if (row >= n_rows) return;  // warp-uniform
    const int col = tile * 32 * VEC + lane * VEC;
    const uint32_t start = indptr[row];
    const uint32_t nnz = indptr[row + 1] - start;

    // Selection: pos(q) for sample q < m.  mode 0: q; 1: (q * 577) mod nnz; 2: runs.
    uint32_t m = nnz, run_len = 1, span = 1;
    int mode = 0;
    if (strategy == 0) {
        m = min(nnz, (uint32_t)s);
    } else if (strategy == 1) {
        if (nnz > (uint32_t)s) { m = s; mode = 1; }
    } else if (nnz > 0) {
        const double r = (double)nnz / (double)s;
        const int runs = min(r <= b0 ? 0 : r <= b1 ? 4 : r <= b2 ? 8 : r <= b3 ? 16 : 32, s);
        if (runs) {
            run_len = s / runs;
            span = nnz - run_len + 1;
            m = runs * run_len;
            mode = 2;
        }
    }

    float acc[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[j] = 0.f;
    uint32_t* cols = s_col[w];
    float* vs = s_val[w];
    for (uint32_t base = 0; base < m; base += CHUNK) {
        const uint32_t cnt = min((uint32_t)CHUNK, m - base);
        for (uint32_t q = lane; q < cnt; q += 32) {
            const uint32_t i = base + q;
            const uint32_t pos = mode == 0 ? i
                               : mode == 1 ? (i * 577u) % nnz
                                           : ((i / run_len) * 1429u) % span + i % run_len;
            const uint32_t p = start + pos;
            cols[q] = __ldg(indices + p);
            vs[q] = weighted ? __ldg(vals + p) : 1.f;
        }
        __syncwarp();
        if (col < k) {
            uint32_t e = 0;
            for (; e + UNROLL <= cnt; e += UNROLL) {
                float xv[UNROLL][VEC];
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) load_vec<VEC>(x + (size_t)cols[e + u] * k + col, xv[u]);
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    const float v = vs[e + u];
#pragma unroll
                    for (int j = 0; j < VEC; ++j) acc[j] = fmaf(v, xv[u][j], acc[j]);
                }
            }
            for (; e < cnt; ++e) {
                float xv[VEC];
                load_vec<VEC>(x + (size_t)cols[e] * k + col, xv);
                const float v = vs[e];
#pragma unroll
                for (int j = 0; j < VEC; ++j) acc[j] = fmaf(v, xv[j], acc[j]);
            }
        }
        __syncwarp();
    }
    if (col < k) {
        const float scale = m == 0 ? 0.f : mean ? 1.f / (float)m : (float)nnz / (float)m;
        float r[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) r[j] = acc[j] * scale;
        store_vec<VEC>(out + (size_t)row * k + col, r);
    }
}

#define SAMPLED_KERNEL(NAME, T, VEC)                                                                           \
    extern "C" __global__ void NAME##_v##VEC(                                                                  \
        const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices, const float* __restrict__ vals, \
        const T* __restrict__ x, float* __restrict__ out, int n_rows, int k, int n_tiles, int weighted,          \
        int mean, int strategy, int s, double b0, double b1, double b2, double b3) {                           \
        sampled_impl<VEC, 8, T>(indptr, indices, vals, x, out, n_rows, k, n_tiles, weighted, mean, strategy, s, \
                                b0, b1, b2, b3);                                                               \
    }
// Named <storage prefix>spmm_sampled_v<VEC> (prefix "", "bf16_", "f16_": FloatView::prefix).
SAMPLED_KERNEL(spmm_sampled, float, 1)
SAMPLED_KERNEL(spmm_sampled, float, 2)
SAMPLED_KERNEL(spmm_sampled, float, 4)
SAMPLED_KERNEL(bf16_spmm_sampled, __nv_bfloat16, 1)
SAMPLED_KERNEL(bf16_spmm_sampled, __nv_bfloat16, 2)
SAMPLED_KERNEL(bf16_spmm_sampled, __nv_bfloat16, 4)
SAMPLED_KERNEL(f16_spmm_sampled, __half, 1)
SAMPLED_KERNEL(f16_spmm_sampled, __half, 2)
SAMPLED_KERNEL(f16_spmm_sampled, __half, 4)
