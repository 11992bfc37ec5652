// MaxK-GNN kernels: MaxK selection into CBSR, CBSR gather/scatter, the forward SpGEMM
// (Algorithm 1: CSR x CBSR -> dense, partial sums in a per-warp shared-memory row, written back
// coalesced) and the backward SSpMM (Algorithm 2: the dense gradient row prefetched to shared
// memory, sampled at the CBSR indices of each neighbour and accumulated atomically).
//
// Index types: uint8_t (D <= 256) or int16_t read as uint16 (D <= 1024).

#include <stdint.h>

#define FULL 0xffffffffu

__device__ __forceinline__ int col_of(uint8_t v) { return v; }
__device__ __forceinline__ int col_of(int16_t v) { return (uint16_t)v; }

// Order-preserving map of an f32's bits to uint32 (IEEE total order, as the CPU's total_cmp).
__device__ __forceinline__ uint32_t fkey(float f) {
    const uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// One warp per row; element e = j * 32 + lane lives in lane `lane`, slot j (j < 32, D <= 1024).
// Radix selection of the k-th largest key T bit by bit with warp-wide counts, then one pass in
// column order keeps keys > T and the lowest-column keys == T until k are kept.
template <typename IDX>
__device__ __forceinline__ void maxk_select_impl(const float* __restrict__ h, IDX* __restrict__ out, int n, int d,
                                                 int k) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n) return;
    const int v = (d + 31) >> 5;
    const float* hr = h + (size_t)row * d;
    uint32_t key[32];
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        const int e = j * 32 + lane;
        key[j] = (j < v && e < d) ? fkey(hr[e]) : 0u;
    }
    uint32_t t = 0;
    int need = k;
    for (int b = 31; b >= 0; --b) {
        const uint32_t want = (t >> b) | 1u;
        int c = 0;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int e = j * 32 + lane;
            c += (j < v && e < d && (key[j] >> b) == want) ? 1 : 0;
        }
        c = __reduce_add_sync(FULL, c);
        if (c >= need) {
            t |= 1u << b;
        } else {
            need -= c;
        }
    }
    const uint32_t lower = (1u << lane) - 1u;
    int taken = 0, ties = 0;
    IDX* o = out + (size_t)row * k;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        if (j < v) {
            const int e = j * 32 + lane;
            const bool valid = e < d;
            const bool eq = valid && key[j] == t;
            const uint32_t eqm = __ballot_sync(FULL, eq);
            const int rank = ties + __popc(eqm & lower);
            ties += __popc(eqm);
            const bool take = valid && (key[j] > t || (eq && rank < need));
            const uint32_t tm = __ballot_sync(FULL, take);
            if (take) o[taken + __popc(tm & lower)] = (IDX)e;
            taken += __popc(tm);
        }
    }
}

template <typename IDX>
__device__ __forceinline__ void gather_impl(const float* __restrict__ h, const IDX* __restrict__ idx,
                                            float* __restrict__ out, uint64_t total, int k, int d) {
    for (uint64_t e = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; e < total; e += (uint64_t)gridDim.x * blockDim.x) {
        out[e] = h[(e / k) * d + col_of(idx[e])];
    }
}

template <typename IDX>
__device__ __forceinline__ void scatter_impl(const float* __restrict__ data, const IDX* __restrict__ idx,
                                             float* __restrict__ out, uint64_t total, int k, int d) {
    for (uint64_t e = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; e < total; e += (uint64_t)gridDim.x * blockDim.x) {
        out[(e / k) * d + col_of(idx[e])] = data[e];
    }
}

// Edge groups: with k <= 32 a warp step covers `per = 32 / k` edges, lane -> (edge lane / k,
// slot lane % k); with k > 32 one edge per step and a slot loop. UNROLL steps issue their loads
// before the shared-memory atomics.
#define UNROLL 4

template <typename IDX>
__device__ __forceinline__ void spgemm_impl(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
                                            const float* __restrict__ vals, const float* __restrict__ data,
                                            const IDX* __restrict__ idx, float* __restrict__ out, int n_rows, int d,
                                            int k, int weighted, int mean) {
    extern __shared__ float smem[];
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const int row = blockIdx.x * (blockDim.x >> 5) + w;
    if (row >= n_rows) return;
    float* buf = smem + (size_t)w * d;
    for (int c = lane; c < d; c += 32) buf[c] = 0.f;
    __syncwarp();
    const uint32_t start = indptr[row], end = indptr[row + 1];
    if (k <= 32) {
        const int per = 32 / k;
        const int sub = lane / k, slot = lane % k;
        const bool active = sub < per;
        for (uint32_t base = start; base < end; base += per * UNROLL) {
            float val[UNROLL];
            int col[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const uint32_t p = base + u * per + sub;
                col[u] = -1;
                if (active && p < end) {
                    const uint32_t j = __ldg(indices + p);
                    const float a = weighted ? __ldg(vals + p) : 1.f;
                    const size_t q = (size_t)j * k + slot;
                    val[u] = a * __ldg(data + q);
                    col[u] = col_of(idx[q]);
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (col[u] >= 0) atomicAdd(buf + col[u], val[u]);
        }
    } else {
        for (uint32_t p = start; p < end; ++p) {
            const uint32_t j = __ldg(indices + p);
            const float a = weighted ? __ldg(vals + p) : 1.f;
            for (int s = lane; s < k; s += 32) {
                const size_t q = (size_t)j * k + s;
                atomicAdd(buf + col_of(idx[q]), a * __ldg(data + q));
            }
        }
    }
    __syncwarp();
    const float scale = (mean && end > start) ? 1.f / (float)(end - start) : 1.f;
    float* o = out + (size_t)row * d;
    for (int c = lane; c < d; c += 32) o[c] = buf[c] * scale;
}

template <typename IDX>
__device__ __forceinline__ void sspmm_impl(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
                                           const float* __restrict__ vals, const float* __restrict__ dout,
                                           const IDX* __restrict__ idx, float* __restrict__ dx, int n_rows, int d,
                                           int k, int weighted, int mean) {
    extern __shared__ float smem[];
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const int row = blockIdx.x * (blockDim.x >> 5) + w;
    if (row >= n_rows) return;
    const uint32_t start = indptr[row], end = indptr[row + 1];
    if (start == end) return;
    float* buf = smem + (size_t)w * d;
    const float scale = mean ? 1.f / (float)(end - start) : 1.f;
    const float* g = dout + (size_t)row * d;
    for (int c = lane; c < d; c += 32) buf[c] = __ldg(g + c) * scale;
    __syncwarp();
    if (k <= 32) {
        const int per = 32 / k;
        const int sub = lane / k, slot = lane % k;
        const bool active = sub < per;
        for (uint32_t base = start; base < end; base += per * UNROLL) {
            float val[UNROLL];
            size_t dst[UNROLL];
            bool on[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const uint32_t p = base + u * per + sub;
                on[u] = active && p < end;
                if (on[u]) {
                    const uint32_t j = __ldg(indices + p);
                    const float a = weighted ? __ldg(vals + p) : 1.f;
                    dst[u] = (size_t)j * k + slot;
                    val[u] = a * buf[col_of(idx[dst[u]])];
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (on[u]) atomicAdd(dx + dst[u], val[u]);
        }
    } else {
        for (uint32_t p = start; p < end; ++p) {
            const uint32_t j = __ldg(indices + p);
            const float a = weighted ? __ldg(vals + p) : 1.f;
            for (int s = lane; s < k; s += 32) {
                const size_t q = (size_t)j * k + s;
                atomicAdd(dx + q, a * buf[col_of(idx[q])]);
            }
        }
    }
}

#define MAXK_KERNELS(IDX, SUF)                                                                                         \
    extern "C" __global__ void maxk_select_##SUF(const float* __restrict__ h, IDX* __restrict__ out, int n, int d,    \
                                                 int k) {                                                              \
        maxk_select_impl<IDX>(h, out, n, d, k);                                                                       \
    }                                                                                                                  \
    extern "C" __global__ void cbsr_gather_##SUF(const float* __restrict__ h, const IDX* __restrict__ idx,            \
                                                 float* __restrict__ out, uint64_t total, int k, int d) {             \
        gather_impl<IDX>(h, idx, out, total, k, d);                                                                   \
    }                                                                                                                  \
    extern "C" __global__ void cbsr_scatter_##SUF(const float* __restrict__ data, const IDX* __restrict__ idx,        \
                                                  float* __restrict__ out, uint64_t total, int k, int d) {            \
        scatter_impl<IDX>(data, idx, out, total, k, d);                                                               \
    }                                                                                                                  \
    extern "C" __global__ void spgemm_##SUF(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices, \
                                            const float* __restrict__ vals, const float* __restrict__ data,            \
                                            const IDX* __restrict__ idx, float* __restrict__ out, int n_rows, int d,   \
                                            int k, int weighted, int mean) {                                           \
        spgemm_impl<IDX>(indptr, indices, vals, data, idx, out, n_rows, d, k, weighted, mean);                        \
    }                                                                                                                  \
    extern "C" __global__ void sspmm_##SUF(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,  \
                                           const float* __restrict__ vals, const float* __restrict__ dout,             \
                                           const IDX* __restrict__ idx, float* __restrict__ dx, int n_rows, int d,     \
                                           int k, int weighted, int mean) {                                            \
        sspmm_impl<IDX>(indptr, indices, vals, dout, idx, dx, n_rows, d, k, weighted, mean);                          \
    }

MAXK_KERNELS(uint8_t, u8)
MAXK_KERNELS(int16_t, i16)
